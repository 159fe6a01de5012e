"""The keys an etcd permission reaches, as etcd itself reads it, and arithmetic on such key ranges.

etcd turns each permission (key, range_end) of a user's roles into an interval of keys
(etcd-io/etcd server/auth/range_perm_cache.go@v3.5.1, getMergedPerms): no range_end is the one key,
a range_end of one zero byte is every key from key onward, anything else is [key, range_end).
Kamaji grants a tenant's role READWRITE on [/<schema>/, /<schema>0): etcd's prefix range of
/<schema>/ (clastix/kamaji internal/datastore/etcd.go@26.8.2-edge: GrantPrivileges, GetPrefixRangeEnd of buildKey).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

OPEN_ENDED = b"\0"  # a range_end of one zero byte: every key from key onward (etcd-io/etcd client/v3 WithFromKey)
# etcd's permission types (etcd-io/etcd api/authpb/auth.pb.go@v3.5.1); etcdctl -w json leaves out a READ (0).
PERMISSION_TYPES = {0: "READ", 1: "WRITE", 2: "READWRITE"}
READS, WRITES = {"READ", "READWRITE"}, {"WRITE", "READWRITE"}


@dataclass(frozen=True)
class Span:
    """The keys k with start <= k < stop; stop None: no end."""

    start: bytes
    stop: bytes | None

    def __contains__(self, key: bytes) -> bool:
        return self.start <= key and (self.stop is None or key < self.stop)

    @property
    def empty(self) -> bool:
        return self.stop is not None and self.stop <= self.start

    def __str__(self) -> str:
        if self.stop == self.start + b"\0":
            return f"key {text(self.start)}"
        return f"[{text(self.start)}, {'<open ended>' if self.stop is None else text(self.stop) + ')'}"


def text(key: bytes) -> str:
    """A key as a report shows it: etcd keys are bytes, so anything unprintable is escaped."""
    decoded = key.decode(errors="backslashreplace")
    return "".join(char if char.isprintable() else f"\\x{ord(char):02x}" for char in decoded)


def reach(key: bytes, range_end: bytes) -> Span:
    """The keys etcd lets one permission reach.

    A range_end at or before key is no interval etcd can hold; its interval tree then still finds the
    permission where key itself is asked for (etcd-io/etcd pkg/adt/interval_tree.go@v3.5.1: Interval.Compare),
    so such a permission counts as the one key.
    """
    if range_end == OPEN_ENDED:
        return Span(key, None)
    if not range_end or range_end <= key:
        return Span(key, key + b"\0")
    return Span(key, range_end)


def prefix_range(prefix: bytes) -> Span:
    """Every key that starts with prefix: etcd's prefix end, the prefix with its last byte below 0xff raised
    (etcd-io/etcd client/v3/op.go@v3.5.1: getPrefix); a prefix of 0xff bytes only reaches to the end."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return Span(prefix, None)
    return Span(prefix, stripped[:-1] + bytes([stripped[-1] + 1]))


def tenant_range(schema: str) -> Span:
    """The range Kamaji grants a tenant's role: [/<schema>/, /<schema>0)."""
    return prefix_range(f"/{schema}/".encode())


def intersection(one: Span, other: Span) -> Span | None:
    start = max(one.start, other.start)
    stops = [stop for stop in (one.stop, other.stop) if stop is not None]
    found = Span(start, min(stops) if stops else None)
    return None if found.empty else found


def union(spans: list[Span]) -> list[Span]:
    """The same keys as spans, as sorted disjoint spans; touching spans are joined."""
    merged: list[Span] = []
    for span in sorted((span for span in spans if not span.empty), key=lambda span: span.start):
        if merged and (merged[-1].stop is None or span.start <= merged[-1].stop):
            last = merged.pop()
            stop = None if last.stop is None or span.stop is None else max(last.stop, span.stop)
            merged.append(Span(last.start, stop))
        else:
            merged.append(span)
    return merged


def minus(spans: list[Span], taken: Span) -> list[Span]:
    """The keys of spans that are not in taken, as sorted disjoint spans."""
    left: list[Span] = []
    for span in union(spans):
        below = Span(span.start, taken.start if span.stop is None else min(span.stop, taken.start))
        if not below.empty:
            left.append(below)
        if taken.stop is not None:
            above = Span(max(span.start, taken.stop), span.stop)
            if not above.empty:
                left.append(above)
    return left


@dataclass(frozen=True)
class Permission:
    """One permission of a role, as etcdctl role get -w json printed it."""

    kind: str  # READ, WRITE or READWRITE
    key: bytes
    range_end: bytes

    @property
    def span(self) -> Span:
        return reach(self.key, self.range_end)

    def __str__(self) -> str:
        return f"{self.kind} on {self.span}"


class UnreadablePermission(ValueError):
    """etcdctl printed a permission this reader does not understand."""


def permissions(document: dict[str, Any]) -> list[Permission]:
    """The permissions of a role get -w json: protobuf structs through encoding/json, so bytes are base64 and a
    zero value (READ, an empty range_end) is left out (etcd-io/etcd etcdctl/ctlv3/command/printer_json.go@v3.5.1)."""
    found = []
    for permission in document.get("perm") or []:
        if not isinstance(permission, dict):
            raise UnreadablePermission(f"a permission that is no object: {permission!r}")
        number = permission.get("permType", 0)
        kind = PERMISSION_TYPES.get(number) if type(number) is int else None
        if kind is None:
            raise UnreadablePermission(f"unknown permission type {permission.get('permType')!r}")
        try:
            key = base64.b64decode(permission.get("key", ""), validate=True)
            range_end = base64.b64decode(permission.get("range_end", ""), validate=True)
        except (binascii.Error, TypeError, ValueError) as error:
            raise UnreadablePermission(f"a key that is not base64: {permission!r} ({error})") from error
        found.append(Permission(kind, key, range_end))
    return found
