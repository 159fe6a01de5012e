"""etcd's gRPC API with the DataStore's root client certificate, over one long-lived TLS connection: one tenant's
prefix read at one revision, page by page, and written back in pipelined transactions that touch nothing outside
the prefix.

Why gRPC, and not etcd's JSON gateway or an etcdctl process per call:
- The gateway (on by default: server/embed/config.go@v3.5.1, NewConfig; kamaji-etcd's statefulset leaves it on)
  cannot reach this DataStore: kamaji-etcd runs --client-cert-auth with auth enabled and knows its root user by
  the client certificate's CN (clastix/kamaji-etcd charts/kamaji-etcd/templates/etcd_sts.yaml and
  etcd_job_preinstall_2.yaml@92f31f0), and in that setup etcd answers every /v3/ gateway request from a
  certificate with a CN with 400 "CommonName of client sending a request against gateway will be ignored"
  (etcd-io/etcd server/embed/serve.go@v3.5.1: accessController.ServeHTTP), since the gateway forwards over its
  own connection.
- An etcdctl process per page or transaction pays a process start and a TLS handshake each time (a restore of
  100,000 keys started ~780 of them), and prints values as base64 JSON that is then decoded again.
- grpcio and protobuf already come with the Pulumi SDK (requirements.txt pins them at the versions it gets), so
  this adds no dependency. Keys and values cross the wire as raw bytes: no base64 on the hot path at all, only in
  the archive's own lines. One HTTP/2 connection carries several transactions in flight at once.

etcd's messages are declared below from its .proto files, only the fields used (etcd-io/etcd
api/etcdserverpb/rpc.proto and api/mvccpb/kv.proto@v3.5.1), and built with protobuf's runtime: no generated code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from snapshot.archive import Key

# etcd 3.5.1 counts every key from a page's start to the prefix's end to answer each page (server/mvcc/index.go:
# Revisions visits the whole range for its total), so reading n keys in pages of p costs about n*n/2p visits:
# pages are as large as memory allows. Each holds as many keys as fit in PAGE_BYTES at the largest size the
# previous page saw, so 1 KiB objects come ~7,800 at a time and 256 KiB CRDs 31 at a time, and PAGE at most.
PAGE = 10000
FIRST_PAGE = 16  # the first read, before any value size is known: a prefix may start with large CRDs
PAGE_BYTES = 8 * 1024 * 1024
# No answer is received above this (the channel's max_receive_message_length): a page that grew past it, when
# small objects are followed by large ones, is asked again for fewer keys. etcd sends up to 2 GiB
# (server/etcdserver/api/v3rpc/grpc.go@v3.5.1: maxSendBytes), so without it memory would follow etcd's page.
ANSWER_BYTES = 64 * 1024 * 1024
# A transaction may hold at most --max-txn-ops operations (128 by default) and a request at most
# --max-request-bytes (1.5 MiB by default) (etcd-io/etcd server/embed/config.go@v3.5.1); batches stay below both.
TXN_OPS = 128
TXN_BYTES = 1024 * 1024
PUT_OVERHEAD = 32  # the bytes protobuf adds to a put's key and value, with room to spare
# Transactions in flight on the one connection: etcd commits them together while the next batch is encoded.
IN_FLIGHT = 8
CALL_TIMEOUT = 120.0
# Kubernetes attaches etcd leases to two kinds of keys (kubernetes/kubernetes@v1.36: the events registry stores
# events with a TTL of --event-ttl, 1h by default; the lease endpoint reconciler keeps /masterleases/<ip> with a
# short TTL). Events come back with a fresh lease of the default event TTL, so they expire as they would have; a
# master lease names an API server that may no longer exist, so it is left out and the running API servers
# write their own within seconds. Any other leased key is left out too, and the manifest counts what was.
KEEP_LEASED = {"events": 3600}

# The fields this module uses of each etcd message (a parser skips the others): (name, number, type, message
# type or "", repeated).
_Field = descriptor_pb2.FieldDescriptorProto
_BYTES, _INT64, _BOOL, _STRING, _MESSAGE = (
    _Field.TYPE_BYTES,
    _Field.TYPE_INT64,
    _Field.TYPE_BOOL,
    _Field.TYPE_STRING,
    _Field.TYPE_MESSAGE,
)
MESSAGES: dict[str, list[tuple[str, int, int, str, bool]]] = {
    "ResponseHeader": [("revision", 3, _INT64, "", False)],
    "KeyValue": [("key", 1, _BYTES, "", False), ("value", 5, _BYTES, "", False), ("lease", 6, _INT64, "", False)],
    "RangeRequest": [
        ("key", 1, _BYTES, "", False), ("range_end", 2, _BYTES, "", False),
        ("limit", 3, _INT64, "", False), ("revision", 4, _INT64, "", False),
    ],
    "RangeResponse": [
        ("header", 1, _MESSAGE, "ResponseHeader", False), ("kvs", 2, _MESSAGE, "KeyValue", True),
        ("more", 3, _BOOL, "", False), ("count", 4, _INT64, "", False),
    ],
    "PutRequest": [("key", 1, _BYTES, "", False), ("value", 2, _BYTES, "", False), ("lease", 3, _INT64, "", False)],
    "DeleteRangeRequest": [("key", 1, _BYTES, "", False), ("range_end", 2, _BYTES, "", False)],
    "DeleteRangeResponse": [("deleted", 2, _INT64, "", False)],
    "RequestOp": [("request_put", 2, _MESSAGE, "PutRequest", False)],
    "TxnRequest": [("success", 2, _MESSAGE, "RequestOp", True)],
    "TxnResponse": [("succeeded", 2, _BOOL, "", False)],
    "LeaseGrantRequest": [("TTL", 1, _INT64, "", False)],
    "LeaseGrantResponse": [("ID", 2, _INT64, "", False), ("error", 4, _STRING, "", False)],
    "AuthUserGetRequest": [("name", 1, _STRING, "", False)],
    "AuthUserGetResponse": [("roles", 2, _STRING, "", True)],
    "AuthUserDeleteRequest": [("name", 1, _STRING, "", False)],
    "AuthUserDeleteResponse": [],
    "AuthRoleGetRequest": [("role", 1, _STRING, "", False)],
    "AuthRoleGetResponse": [],
    "AuthRoleDeleteRequest": [("role", 1, _STRING, "", False)],
    "AuthRoleDeleteResponse": [],
}  # fmt: skip
# etcd's answers for a user or role it does not have (etcd-io/etcd api/v3rpc/rpctypes/error.go@v3.5.1:
# ErrGRPCUserNotFound, ErrGRPCRoleNotFound, both FailedPrecondition).
USER_NOT_FOUND, ROLE_NOT_FOUND = "etcdserver: user name not found", "etcdserver: role name not found"


def message_classes(messages: dict[str, list[tuple[str, int, int, str, bool]]], file_name: str) -> dict[str, Any]:
    """A class for each message declared as MESSAGES declares them, in a pool of their own (file_name)."""
    proto = descriptor_pb2.FileDescriptorProto(name=file_name, package="etcdserverpb", syntax="proto3")
    for name, fields in messages.items():
        message = proto.message_type.add(name=name)
        for field_name, number, kind, type_name, repeated in fields:
            message.field.add(
                name=field_name,
                number=number,
                type=kind,
                type_name=f".etcdserverpb.{type_name}" if type_name else None,
                label=_Field.LABEL_REPEATED if repeated else _Field.LABEL_OPTIONAL,
            )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"etcdserverpb.{name}")) for name in messages
    }


PB = message_classes(MESSAGES, "kamaji_hami_lab_etcd.proto")


class EtcdFailed(Exception):
    """etcd could not be reached or refused a call; the message has its words."""


class AnswerTooLarge(EtcdFailed):
    """An answer was larger than ANSWER_BYTES; nothing of it was kept."""


@dataclass
class Pending:
    """A call under way; result() is its answer parsed as message, or EtcdFailed (a malformed answer too)."""

    call: Any  # grpc.Future of the answer's bytes
    message: Any
    what: str
    client: EtcdClient

    def result(self) -> Any:
        try:
            data = self.call.result()
        except grpc.RpcError as error:
            raise self.client.failed(self.what, error) from None
        try:
            return self.message.FromString(data)
        except DecodeError as problem:
            raise EtcdFailed(
                f"etcd at {self.client.address} answered {self.what} with a malformed message ({problem})"
            ) from None


class EtcdClient:
    """One gRPC channel, a single HTTP/2 connection over TLS, to an etcd member, as the client certificate's user.

    The certificate files are read once, here; the channel connects on its first call and reconnects after a
    failure. close() ends it."""

    def __init__(self, address: str, ca: Path, cert: Path, key: Path):
        self.address, self.ca, self.cert, self.key = address, ca, cert, key
        credentials = grpc.ssl_channel_credentials(ca.read_bytes(), key.read_bytes(), cert.read_bytes())
        self.channel = grpc.secure_channel(
            address,
            credentials,
            options=[
                ("grpc.max_receive_message_length", ANSWER_BYTES),
                ("grpc.max_send_message_length", -1),
                # gRPC would send even a loopback port-forward through the user's https_proxy or grpc_proxy.
                ("grpc.enable_http_proxy", 0),
            ],
        )
        self.methods: dict[str, Any] = {}

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> EtcdClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, method: str, request: Any, answer: str, what: str) -> Pending:
        """The call on its way: method is etcd's "Service/Method"; the answer comes back parsed as answer's type."""
        if method not in self.methods:
            self.methods[method] = self.channel.unary_unary(
                f"/etcdserverpb.{method}",
                request_serializer=lambda message: message.SerializeToString(),
                response_deserializer=None,  # bytes: Pending names a malformed answer, gRPC would not
            )
        return Pending(self.methods[method].future(request, timeout=CALL_TIMEOUT), PB[answer], what, self)

    def call(self, method: str, request: Any, answer: str, what: str) -> Any:
        return self.submit(method, request, answer, what).result()

    def failed(self, what: str, error: grpc.RpcError) -> EtcdFailed:
        code, details = error.code(), " ".join((error.details() or "").split())[-400:]
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return EtcdFailed(f"etcd {what} at {self.address} timed out after {CALL_TIMEOUT:g}s")
        # grpcio's own words (1.85.4) when an answer passes max_receive_message_length: "Received message larger
        # than max (<size> vs. <cap>)"; tests/test_snapshot_etcd_client.py meets them.
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details:
            return AnswerTooLarge(f"etcd's answer to {what} is larger than {ANSWER_BYTES} bytes")
        return EtcdFailed(f"etcd {what} at {self.address} failed: {details or code.name} ({code.name})")

    def range(self, start: bytes, end: bytes, limit: int, revision: int) -> Pending:
        request = PB["RangeRequest"](key=start, range_end=end, limit=limit, revision=revision)
        return self.submit("KV/Range", request, "RangeResponse", f"range from {start[:80]!r}")

    def delete_range(self, start: bytes, end: bytes) -> int:
        request = PB["DeleteRangeRequest"](key=start, range_end=end)
        return self.call("KV/DeleteRange", request, "DeleteRangeResponse", f"delete of {start[:80]!r}").deleted

    def lease_grant(self, ttl: int) -> int:
        granted = self.call("Lease/LeaseGrant", PB["LeaseGrantRequest"](TTL=ttl), "LeaseGrantResponse", "lease grant")
        if granted.error or not granted.ID:
            raise EtcdFailed(f"etcd granted no lease of {ttl}s: {granted.error or 'no lease ID in its answer'}")
        return granted.ID

    def auth(self, kind: str, verb: str, name: str) -> Any:
        """etcd's Auth/UserGet, UserDelete, RoleGet or RoleDelete (kind "user" or "role", verb "Get" or "Delete")."""
        message, field = f"Auth{kind.capitalize()}{verb}", "name" if kind == "user" else "role"
        request = PB[f"{message}Request"](**{field: name})
        return self.call(f"Auth/{kind.capitalize()}{verb}", request, f"{message}Response", f"{kind} {verb} of {name}")

    def has(self, kind: str, name: str) -> bool:
        """Whether etcd has the user or role (kind "user" or "role") of that name."""
        try:
            self.auth(kind, "Get", name)
        except EtcdFailed as problem:
            if (USER_NOT_FOUND if kind == "user" else ROLE_NOT_FOUND) in str(problem):
                return False
            raise
        return True

    def delete_auth(self, kind: str, name: str) -> None:
        """Delete the user or role; etcd takes a deleted role from every user that held it (etcd-io/etcd
        server/auth/store.go@v3.5.1: RoleDelete)."""
        self.auth(kind, "Delete", name)

    def txn(self, request: Any) -> Pending:
        """A TxnRequest on its way."""
        return self.submit("KV/Txn", request, "TxnResponse", f"transaction of {len(request.success)} puts")


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


def page_after(largest: int, most: int) -> int:
    """How many keys the next page asks for, given the largest key and value the last page held."""
    return max(1, min(most, PAGE_BYTES // max(largest, 1)))


def checked_page(answer: Any, start: bytes, end: bytes, limit: int) -> Any:
    """The answer, after checking that it holds what etcd's Range promises: at most limit keys, ascending, within
    [start, end); its count is every key in range at the revision, so `more` means count exceeds the keys
    returned, and no `more` means it equals them (etcd-io/etcd server/etcdserver/apply.go: Range,
    server/mvcc/index.go: Revisions@v3.5.1). A page cut short would otherwise look like the end of the prefix."""
    kvs, previous = answer.kvs, start
    consistent = answer.count > len(kvs) > 0 if answer.more else answer.count == len(kvs)
    if len(kvs) > limit or not consistent:
        raise EtcdFailed(
            f"etcd's page from {start[:80]!r} contradicts itself: {len(kvs)} keys of {answer.count}, "
            f"more={answer.more}, asked for {limit}"
        )
    for index, kv in enumerate(kvs):
        if not (previous <= kv.key < end) or (index and kv.key == previous):
            raise EtcdFailed(f"etcd's page from {start[:80]!r} holds {kv.key[:80]!r}, out of order or out of range")
        previous = kv.key
    return answer


@dataclass
class PrefixReader:
    """Every key under prefix at one revision (the first page's), streamed; leased keys sorted per KEEP_LEASED."""

    client: EtcdClient
    prefix: bytes
    page: int = PAGE
    revision: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def read(self, progress: Progress | None = None) -> Iterator[Key]:
        progress = progress or Progress()
        start, end = self.prefix, range_end(self.prefix)
        answer, asked = self.answer(start, min(self.page, FIRST_PAGE), None)
        self.revision = self.revision or answer.header.revision  # the store's revision when the read began
        while True:
            following = None
            if answer.more:
                # The smallest key after the last one: no key is read twice, whatever its size. Each page holds at
                # most twice the keys of the last, so pages grow back gently after large objects. Asked for now,
                # so etcd reads the next page while this one is written.
                largest = max(len(kv.key) + len(kv.value) for kv in answer.kvs)
                start, limit = answer.kvs[-1].key + b"\0", min(page_after(largest, self.page), 2 * asked)
                following = (start, limit, self.client.range(start, end, limit, self.revision))
            for kv in answer.kvs:
                key = self.kept(kv)
                if key:
                    progress.add(len(key.key) + len(key.value))
                    yield key
            if following is None:
                break
            answer, asked = self.answer(*following)
        progress.done()

    def answer(self, start: bytes, limit: int, pending: Pending | None) -> tuple[Any, int]:
        """The page of up to limit keys from start, checked, and how many keys it was asked for; asked again for
        a quarter as many while the answer is larger than an answer may be (objects grew past what the previous
        page's sizes foretold)."""
        end = range_end(self.prefix)
        while True:
            try:
                pending = pending or self.client.range(start, end, limit, self.revision)
                return checked_page(pending.result(), start, end, limit), limit
            except AnswerTooLarge:
                if limit == 1:
                    raise EtcdFailed(
                        f"the key after {start[:80]!r} is larger than {ANSWER_BYTES} bytes, more than any etcd "
                        "value under its default --max-request-bytes"
                    ) from None
                limit, pending = max(1, limit // 4), None

    def kept(self, kv: Any) -> Key | None:
        if not kv.lease:
            return Key(kv.key, kv.value)
        resource = resource_of(kv.key, self.prefix)
        if resource in KEEP_LEASED:
            return Key(kv.key, kv.value, leased=True)
        self.skipped[resource] = self.skipped.get(resource, 0) + 1
        return None


@dataclass
class PrefixWriter:
    """Deletes everything under prefix and puts keys back, refusing any key outside it."""

    client: EtcdClient
    prefix: bytes
    progress: Progress = field(default_factory=Progress)
    leases: dict[str, int] = field(default_factory=dict)  # resource -> lease ID granted for this restore
    # The transaction being filled: puts are added to it in place, which costs a tenth of building each
    # operation as a message of its own and copying it in.
    batch: Any = field(default_factory=lambda: PB["TxnRequest"]())
    batch_bytes: int = 0
    pending: list[Pending] = field(default_factory=list)

    def clear(self) -> int:
        """Delete every key under the prefix (only there); how many went."""
        return self.client.delete_range(self.prefix, range_end(self.prefix))

    def lease_for(self, key: Key) -> int:
        resource = resource_of(key.key, self.prefix)
        if resource not in self.leases:
            self.leases[resource] = self.client.lease_grant(KEEP_LEASED[resource])
        return self.leases[resource]

    def put(self, key: Key) -> None:
        """Queue one key; a full batch goes to etcd as one transaction, IN_FLIGHT of them at a time."""
        if not key.key.startswith(self.prefix):
            raise EtcdFailed(f"refusing to write {key.key[:80]!r}: it is outside {self.prefix!r}")
        lease = self.lease_for(key) if key.leased else 0
        size = len(key.key) + len(key.value) + PUT_OVERHEAD
        if self.batch.success and (len(self.batch.success) >= TXN_OPS or self.batch_bytes + size > TXN_BYTES):
            self.send()
        put = self.batch.success.add().request_put
        put.key, put.value, put.lease = key.key, key.value, lease
        self.batch_bytes += size
        self.progress.add(len(key.key) + len(key.value))

    def send(self) -> None:
        """The batch to etcd, beside the transactions already under way; the oldest must succeed first if
        IN_FLIGHT are. The keys are distinct, so the order in which batches land does not matter."""
        if self.batch.success:
            while len(self.pending) >= IN_FLIGHT:
                self.landed(self.pending.pop(0))
            self.pending.append(self.commit(self.batch))
        self.batch, self.batch_bytes = PB["TxnRequest"](), 0

    def flush(self) -> None:
        """Everything queued is in etcd, or the first failure is raised."""
        self.send()
        while self.pending:
            self.landed(self.pending.pop(0))

    def commit(self, transaction: Any) -> Pending:
        return self.client.txn(transaction)

    @staticmethod
    def landed(pending: Pending) -> None:
        # A transaction without compares always takes its success branch (rpc.proto@v3.5.1: TxnRequest).
        if not pending.result().succeeded:
            raise EtcdFailed(f"etcd did not apply the {pending.what}")
