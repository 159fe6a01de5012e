"""etcdctl against the DataStore with its root credentials: one tenant's prefix read at one revision, page by
page, and written back in batched transactions that touch nothing outside the prefix.

etcdctl's `-w json` prints the gRPC response through Go's encoding/json, so keys and values ([]byte) are base64 and
a kv's lease is its lease ID, 0 for none (etcd-io/etcd etcdctl/ctlv3/command/printer_json.go@v3.5.1: printJSON).
"""

from __future__ import annotations

import base64
import codecs
import json
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from snapshot.archive import Key

PAGE = 1000  # keys per read: a page of Kubernetes objects stays a few MiB
# A transaction may hold at most --max-txn-ops operations (128 by default) and a request at most
# --max-request-bytes (1.5 MiB by default) (etcd-io/etcd server/embed/config.go@v3.5.1); batches stay below both.
TXN_OPS = 128
TXN_BYTES = 1024 * 1024
# Transactions under way at once: each is an etcdctl process, mostly waiting on its TLS handshake and etcd.
IN_FLIGHT = 4
CALL_TIMEOUT = 120.0
# Kubernetes attaches etcd leases to two kinds of keys (kubernetes/kubernetes@v1.36: the events registry stores
# events with a TTL of --event-ttl, 1h by default; the lease endpoint reconciler keeps /masterleases/<ip> with a
# short TTL). Events come back with a fresh lease of the default event TTL, so they expire as they would have; a
# master lease names an API server that may no longer exist, so it is left out and the running API servers
# write their own within seconds. Any other leased key is left out too, and the manifest counts what was.
KEEP_LEASED = {"events": 3600}


class EtcdFailed(Exception):
    """etcdctl failed; the message has its words."""


@dataclass(frozen=True)
class Etcdctl:
    """etcdctl's argv up to its command: binary, endpoints and the client certificate's files."""

    argv: tuple[str, ...]

    def run(self, *args: str | bytes, stdin: bytes | None = None, what: str = "") -> bytes:
        try:
            done = subprocess.run(
                [*self.argv, *args], input=stdin, capture_output=True, timeout=CALL_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            raise EtcdFailed(f"etcdctl {what or args[0]!s} timed out after {CALL_TIMEOUT:.0f}s") from None
        if done.returncode != 0:
            words = " ".join(done.stderr.decode(errors="replace").split())[-400:]
            raise EtcdFailed(f"etcdctl {what or args[0]!s} failed: {words or f'exit code {done.returncode}'}")
        return done.stdout

    def json(self, *args: str | bytes, what: str = "") -> dict[str, Any]:
        out = self.run(*args, "-w", "json", what=what)
        try:
            return json.loads(out)
        except ValueError:
            raise EtcdFailed(f"etcdctl {what or args[0]!s} did not print JSON") from None


def range_end(prefix: bytes) -> bytes:
    """The end of the range of keys starting with prefix: its last byte plus one (etcd's WithPrefix)."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


def resource_of(key: bytes, prefix: bytes) -> str:
    """The Kubernetes resource a key belongs to: the first path segment below the prefix."""
    return key[len(prefix) :].split(b"/", 1)[0].decode(errors="replace")


@dataclass
class Progress:
    """Keys and bytes done; report is called every `every` keys and at the end."""

    report: Callable[[int, int], None] = lambda keys, size: None
    every: int = 10000
    keys: int = 0
    bytes: int = 0

    def add(self, size: int) -> None:
        self.keys += 1
        self.bytes += size
        if self.keys % self.every == 0:
            self.report(self.keys, self.bytes)

    def done(self) -> None:
        self.report(self.keys, self.bytes)


@dataclass
class PrefixReader:
    """Every key under prefix at one revision (the first page's), streamed; leased keys sorted per KEEP_LEASED."""

    etcdctl: Etcdctl
    prefix: bytes
    page: int = PAGE
    revision: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def read(self, progress: Progress | None = None) -> Iterator[Key]:
        progress = progress or Progress()
        start, end, first = self.prefix, range_end(self.prefix), True
        page = max(self.page, 2)  # each later page repeats one key, so a page of one would never move on
        while True:
            pinned = [f"--rev={self.revision}"] if self.revision else []
            answer = self.etcdctl.json("get", start, end, f"--limit={page}", *pinned, what=f"get {self.prefix!r}")
            if not self.revision:
                self.revision = int(answer["header"]["revision"])
            kvs = answer.get("kvs") or []
            # Each page after the first starts at the previous page's last key, which it repeats.
            for kv in kvs if first else kvs[1:]:
                key = self.kept(kv)
                if key:
                    progress.add(len(key.key) + len(key.value))
                    yield key
            if not answer.get("more") or not kvs:
                break
            start, first = _decode(kvs[-1]["key"]), False
        progress.done()

    def kept(self, kv: dict[str, Any]) -> Key | None:
        key, value = _decode(kv["key"]), _decode(kv.get("value", ""))
        if not int(kv.get("lease", 0)):
            return Key(key, value)
        resource = resource_of(key, self.prefix)
        if resource in KEEP_LEASED:
            return Key(key, value, leased=True)
        self.skipped[resource] = self.skipped.get(resource, 0) + 1
        return None


def _decode(text: str) -> bytes:
    return base64.b64decode(text)


def quote(data: bytes) -> str:
    """A Go double-quoted string for etcdctl txn, which unquotes each argument with fmt.Sscanf("%q")
    (etcd-io/etcd etcdctl/ctlv3/command/util.go@v3.5.1: argify).

    Python's escape_encode (in C, so 100,000 values take seconds) writes printable ASCII as is, and \\\\, \\t, \\n, \\r
    and \\xNN, all of which Go reads the same; only its \\' is no Go escape in a double-quoted string, and a " needs
    one. escape_encode writes every backslash of the data as \\\\, so a \\' it writes is always its quote's.
    """
    escaped = codecs.escape_encode(data)[0].decode("ascii")  # type: ignore[attr-defined]
    return '"' + escaped.replace("\\'", "'").replace('"', '\\"') + '"'


@dataclass
class PrefixWriter:
    """Deletes everything under prefix and puts keys back, refusing any key outside it."""

    etcdctl: Etcdctl
    prefix: bytes
    progress: Progress = field(default_factory=Progress)
    leases: dict[str, str] = field(default_factory=dict)  # resource -> lease ID (hex) granted for this restore
    batch: list[str] = field(default_factory=list)
    batch_bytes: int = 0
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(IN_FLIGHT))
    pending: list[Future] = field(default_factory=list)

    def clear(self) -> int:
        """Delete every key under the prefix (only there); how many went."""
        answer = self.etcdctl.json("del", self.prefix, "--prefix", what=f"del {self.prefix!r} --prefix")
        return int(answer.get("deleted", 0))

    def lease_for(self, key: Key) -> str:
        resource = resource_of(key.key, self.prefix)
        if resource not in self.leases:
            granted = self.etcdctl.json("lease", "grant", str(KEEP_LEASED[resource]), what="lease grant")
            self.leases[resource] = f"{int(granted['ID']):x}"
        return self.leases[resource]

    def operation(self, key: Key) -> str:
        if not key.key.startswith(self.prefix):
            raise EtcdFailed(f"refusing to write {key.key[:80]!r}: it is outside {self.prefix!r}")
        lease = f" --lease={self.lease_for(key)}" if key.leased else ""
        # "--" ends put's flags, so a value that starts with "-" stays a value.
        return f"put{lease} -- {quote(key.key)} {quote(key.value)}"

    def put(self, key: Key) -> None:
        """Queue one key; a full batch goes to etcd as one transaction, IN_FLIGHT of them at a time."""
        operation = self.operation(key)
        if self.batch and (len(self.batch) >= TXN_OPS or self.batch_bytes + len(operation) > TXN_BYTES):
            self.send()
        self.batch.append(operation)
        self.batch_bytes += len(operation)
        self.progress.add(len(key.key) + len(key.value))

    def send(self) -> None:
        """The batch to etcd, beside the transactions already under way; the oldest must succeed first if
        IN_FLIGHT are. The keys are distinct, so the order in which batches land does not matter."""
        if self.batch:
            while len(self.pending) >= IN_FLIGHT:
                self.pending.pop(0).result()
            self.pending.append(self.pool.submit(self.commit, self.batch))
        self.batch, self.batch_bytes = [], 0

    def flush(self) -> None:
        """Everything queued is in etcd, or the first failure is raised."""
        self.send()
        while self.pending:
            self.pending.pop(0).result()

    def commit(self, operations: list[str]) -> None:
        # etcdctl txn reads compares, success operations and failure operations, each ended by an empty line
        # (etcd-io/etcd etcdctl/ctlv3/command/txn_command.go@v3.5.1: readCompares, readOps); no compares.
        script = "\n" + "\n".join(operations) + "\n\n\n"
        self.etcdctl.run("txn", "--interactive=false", stdin=script.encode(), what=f"txn ({len(operations)} puts)")
