"""benchmarks/snapshot_restore.py in its small mode, so it can never rot again: it runs against the real etcd and
reports every figure. Timing is the benchmark's business (docs/architecture.md), never a test's."""

from __future__ import annotations

import re

from benchmarks.snapshot_restore import main

NUMBER = r"\s+(\d+\.\d\d)"
ROWS = ("etcdctl snapshot save", "snapshot (take)", "restore")


def test_the_small_benchmark_reports_seconds_and_peak_memory_of_each_step_beside_etcdctl(capsys):
    assert main(["--keys", "500", "--value-bytes", "2048"]) == 0
    out = capsys.readouterr().out
    assert "500 keys of 2048 bytes (1.0 MiB of values)" in out
    figures = {}
    for row in ROWS:
        found = re.search(rf"^{re.escape(row)}[^\n]*?{NUMBER * 4}\s+(\d+){NUMBER}$", out, re.MULTILINE)
        assert found, f"no figures for {row!r} in:\n{out}"
        figures[row] = [float(value) for value in found.groups()]
    seconds, ratio, cpu, etcd_cpu, peak, peak_ratio = figures["etcdctl snapshot save"]
    assert (ratio, peak_ratio) == (1.0, 1.0) and seconds > 0 and peak > 0
    for row in ROWS[1:]:
        seconds, ratio, cpu, etcd_cpu, peak, peak_ratio = figures[row]
        assert cpu > 0 and etcd_cpu >= 0
        # Each ratio is the figure over etcdctl's; all three are printed rounded to two places, so the ratio lies
        # between the quotients of the figures' bounds (wide when etcdctl's seconds are a few hundredths).
        half = 0.005
        etcdctl_seconds = figures[ROWS[0]][0]
        assert (seconds - half) / (etcdctl_seconds + half) - half <= ratio
        assert ratio <= (seconds + half) / max(etcdctl_seconds - half, 1e-9) + half
        assert 0 < peak < 256, f"{row} peaked at {peak} MiB"
