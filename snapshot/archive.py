"""The snapshot file: a tar.gz of manifest.json, keys.jsonl and secrets.json, written and verified strictly.

A snapshot is outside input when it is restored (it may be truncated, corrupt, edited or another tenant's), so
the reader accepts only what the writer makes: the gzip header byte for byte, gzip's CRC and length, three USTAR
members in order whose headers re-serialise to the same bytes, zero padding, and contents whose checksums match
the manifest. Anything else is a Refused with a sentence saying why, never another exception.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import gzip
import hashlib
import io
import json
import os
import re
import struct
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from components.config.values import DNS_LABEL, KUBERNETES_VERSION, TENANT_NAME, host_address

# v2 records the tenant's endpoint; v1 snapshots, written before it did, are still read. A reader that knows
# only v1 refuses a v2 snapshot by its format, rather than by a field it does not know.
FORMAT = "kamaji-hami-lab/tenant-snapshot/v2"
FORMAT_WITHOUT_ENDPOINT = "kamaji-hami-lab/tenant-snapshot/v1"
MANIFEST, KEYS, SECRETS = "manifest.json", "keys.jsonl", "secrets.json"
MEMBERS = (MANIFEST, KEYS, SECRETS)
MEMBER_MODE = 0o600
# What the writer's gzip.GzipFile(mtime=0, filename="", compresslevel=COMPRESS_LEVEL) puts first: magic, deflate,
# no flags, mtime 0, XFL 0 (neither fastest nor best), OS 255 (unknown) (RFC 1952, section 2.3).
COMPRESS_LEVEL = 6
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
BLOCK = tarfile.BLOCKSIZE
RECORD = tarfile.RECORDSIZE  # tarfile pads an archive to whole records of zeros
MAX_MANIFEST = 64 * 1024
# The most a USTAR header's 11 octal digits can say: the writer can make no larger member, so none is read.
MAX_MEMBER = 8**11 - 1
MAX_SECRETS = 4 * 1024 * 1024
# One key's value: etcd refuses requests above --max-request-bytes (1.5 MiB by default), so no stored value is larger.
MAX_LINE = 4 * 1024 * 1024
CHUNK = 64 * 1024
# Deflate expands at most about 1,032-fold, so one read of compressed data never inflates past ~16 MiB.
COMPRESSED_CHUNK = 16 * 1024
# The Secrets Kamaji generates once per TenantControlPlane and everything else is issued from: the cluster CA
# (clastix/kamaji internal/resources/ca_certificate.go@26.8.2-edge, name "<tcp>-ca"), the service-account
# signing key pair (sa_certificate.go, "<tcp>-sa-certificate") and the front-proxy CA
# (front_proxy_ca_certificate.go, "<tcp>-front-proxy-ca-certificate"). Kamaji keeps an existing one that is
# still valid, and re-issues the certificates and kubeconfigs signed by them when they no longer verify.
IDENTITY_SECRETS = ("ca", "sa-certificate", "front-proxy-ca-certificate")
# The text a manifest holds is printed and compared: each field must be what the lab writes, as its stack config
# admits it (components/config/values.py), so no control sequence or look-alike ever reaches a terminal.
# dataStoreSchema is "tenants_" and the tenant's name with "_" for "-" (components/settings.py); a '-' is let
# through too, as in a tenant's name: one key-path segment, nothing that acts on a terminal either way.
SCHEMA = r"[a-z0-9_-]{1,80}"
ENDPOINT = re.compile(r"https://(?:\[(?P<ipv6>[0-9a-fA-F:.]+)\]|(?P<host>[A-Za-z0-9.-]+)):(?P<port>[1-9][0-9]{0,4})")
TEXT_FIELDS = {
    "tenant": (TENANT_NAME, "a tenant name"),
    "namespace": (DNS_LABEL, "a namespace name"),
    "schema": (SCHEMA, "a dataStoreSchema (lower-case letters, digits, '_' and '-')"),
    "kubernetes_version": (KUBERNETES_VERSION, "a Kubernetes version v<major>.<minor>.<patch>"),
}


class Refused(Exception):
    """The snapshot cannot be used; the message says why."""


@dataclass(frozen=True)
class Manifest:
    tenant: str
    namespace: str
    schema: str
    kubernetes_version: str
    etcd_revision: int
    key_count: int
    created: str
    skipped_leased: dict[str, int]  # resource -> keys left out because they carried an etcd lease
    members: dict[str, dict[str, Any]]  # keys.jsonl and secrets.json: {"sha256": hex, "size": bytes}
    # The tenant's API server URL when the snapshot was taken; None: a snapshot from before manifests recorded it.
    endpoint: str | None
    checksum: str = ""  # sha256 over everything above, in canonical JSON

    @property
    def prefix(self) -> bytes:
        return f"/{self.schema}/".encode()

    def body(self) -> dict[str, Any]:
        return {
            "format": FORMAT_WITHOUT_ENDPOINT if self.endpoint is None else FORMAT,
            "tenant": self.tenant,
            "namespace": self.namespace,
            "schema": self.schema,
            "kubernetes_version": self.kubernetes_version,
            "etcd_revision": self.etcd_revision,
            "key_count": self.key_count,
            "created": self.created,
            "skipped_leased": self.skipped_leased,
            "members": self.members,
        } | ({} if self.endpoint is None else {"endpoint": self.endpoint})

    def computed_checksum(self) -> str:
        return hashlib.sha256(canonical(self.body())).hexdigest()

    def document(self) -> bytes:
        return json.dumps(self.body() | {"checksum": self.computed_checksum()}, indent=2, sort_keys=True).encode()


def canonical(document: Any) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


# A keys.jsonl line as canonical() writes {"key", "leased", "value"}: the only form the reader accepts.
LINE_START, LINE_LEASED, LINE_VALUE, LINE_END = b'{"key":"', b'","leased":', b',"value":"', b'"}\n'


@dataclass(frozen=True)
class Key:
    """One etcd key and value as stored; leased: it carried a lease that the restore gives it afresh."""

    key: bytes
    value: bytes
    leased: bool = False

    def line(self) -> bytes:
        """The record in canonical JSON (sorted keys, no spaces), formatted directly: base64 needs no JSON escape,
        and this is the hot path of a snapshot (json.dumps took four times as long)."""
        leased = b"true" if self.leased else b"false"
        key, value = base64.b64encode(self.key), base64.b64encode(self.value)
        return b"".join((LINE_START, key, LINE_LEASED, leased, LINE_VALUE, value, LINE_END))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class Digest:
    """sha256 and size of bytes as they pass."""

    hash: Any = field(default_factory=hashlib.sha256)
    size: int = 0

    def update(self, data: bytes) -> None:
        self.hash.update(data)
        self.size += len(data)

    def summary(self) -> dict[str, Any]:
        return {"sha256": self.hash.hexdigest(), "size": self.size}


# --- writing ---------------------------------------------------------------------------------------------------


def private_directory(directory: Path) -> None:
    """The snapshots directory, mode 0700 whatever the umask or an earlier mode."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)


def private_file(path: Path) -> IO[bytes]:
    """A new file only its owner can read, created so from the start (no window at a wider mode)."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")


def write_keys(keys: Iterator[Key], out: IO[bytes]) -> tuple[Digest, int]:
    """keys.jsonl from keys as they come (never all in memory): its digest and how many keys."""
    digest, count = Digest(), 0
    for key in keys:
        line = key.line()
        out.write(line)
        digest.update(line)
        count += 1
    return digest, count


def secrets_document(secrets: dict[str, dict[str, Any]]) -> bytes:
    return json.dumps(secrets, indent=2, sort_keys=True).encode()


def member_info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime, info.type = size, MEMBER_MODE, 0, tarfile.REGTYPE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_archive(path: Path, manifest: Manifest, keys_file: Path, secrets: bytes) -> None:
    """The snapshot at path (created 0600, never there before): manifest, keys from keys_file, secrets."""
    document = manifest.document()
    with private_file(path) as raw:
        with (
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=COMPRESS_LEVEL, mtime=0) as packed,
            tarfile.open(fileobj=packed, mode="w|", format=tarfile.USTAR_FORMAT) as tar,
            keys_file.open("rb") as keys,
        ):
            tar.addfile(member_info(MANIFEST, len(document)), io.BytesIO(document))
            tar.addfile(member_info(KEYS, keys_file.stat().st_size), keys)
            tar.addfile(member_info(SECRETS, len(secrets)), io.BytesIO(secrets))
        raw.flush()
        os.fsync(raw.fileno())


# --- reading ---------------------------------------------------------------------------------------------------


class Inflated:
    """The tar inside the gzip file, read in order; gzip's header, CRC and length are checked, and nothing may
    follow the one gzip member."""

    def __init__(self, raw: IO[bytes]):
        self.raw = raw
        header = raw.read(len(GZIP_HEADER))
        if header != GZIP_HEADER:
            raise Refused("it is not a snapshot this lab wrote: the gzip header differs (not gzip, or not ours)")
        self.inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        self.buffer = bytearray()
        self.crc, self.size, self.ended = 0, 0, False

    def _fill(self, wanted: int) -> None:
        while len(self.buffer) < wanted and not self.ended:
            compressed = self.raw.read(COMPRESSED_CHUNK)
            try:
                data = self.inflater.decompress(compressed)
            except zlib.error as problem:
                raise Refused(f"the compressed data is corrupt ({problem})") from None
            self.crc, self.size = zlib.crc32(data, self.crc), self.size + len(data)
            self.buffer += data
            if self.inflater.eof:
                self._trailer()
            elif not compressed:
                raise Refused("the file is truncated: the compressed data ends early")

    def _trailer(self) -> None:
        self.ended = True
        trailer = self.inflater.unused_data + self.raw.read(9)
        if len(trailer) < 8:
            raise Refused("the file is truncated: gzip's checksum at its end is missing")
        if len(trailer) > 8:
            raise Refused("there is data after the end of the gzip stream")
        crc, size = struct.unpack("<II", trailer)
        if crc != self.crc or size != self.size & 0xFFFFFFFF:
            raise Refused("gzip's checksum does not match the data: the file is corrupt")

    def read(self, count: int) -> bytes:
        """Exactly count bytes, or Refused."""
        self._fill(count)
        if len(self.buffer) < count:
            raise Refused("the file is truncated: the archive ends early")
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        return data

    def rest(self) -> bytes:
        """Everything after what was read, up to the end of the gzip stream (the tar's end blocks)."""
        self._fill(RECORD * 2 + 1)
        if not self.ended:
            raise Refused("the archive goes on after its last member")
        data = bytes(self.buffer)
        self.buffer.clear()
        return data


def member(stream: Inflated, name: str, limit: int, sink: Callable[[bytes], None]) -> None:
    """One USTAR member exactly as the writer makes it; its data, in chunks, to sink."""
    header = stream.read(BLOCK)
    if not any(header):
        raise Refused(f"the archive ends before {name}")
    try:
        info = tarfile.TarInfo.frombuf(header, "utf-8", "strict")
    except (tarfile.HeaderError, UnicodeError, ValueError) as problem:
        raise Refused(f"a tar header is corrupt ({problem})") from None
    if info.name != name:
        raise Refused(f"the archive holds {info.name!r} where {name} belongs")
    # A base-256 size (GNU's, for sizes octal cannot hold) may be negative or past any limit: bounded first.
    if not 0 <= info.size <= limit:
        raise Refused(f"the tar header of {name} gives a size of {info.size} bytes, not 0 to {limit}")
    if header != member_info(name, info.size).tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict"):
        raise Refused(f"the tar header of {name} is not one this lab writes (size, type, mode or owner differ)")
    left = info.size
    while left:
        data = stream.read(min(CHUNK, left))
        sink(data)
        left -= len(data)
    if any(stream.read(-info.size % BLOCK)):
        raise Refused(f"the padding after {name} is not zeros: the file was altered")


def load_json(data: bytes, name: str) -> Any:
    """A JSON member as the writer makes it (UTF-8); nesting deeper than Python's parser recurses is no JSON
    this lab writes, and is refused like any other."""
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeError):
        raise Refused(f"{name} is not JSON") from None
    except RecursionError:
        raise Refused(f"{name} is nested deeper than any JSON this lab writes") from None


def read_manifest(data: bytes) -> Manifest:
    document = load_json(data, MANIFEST)
    formats = (FORMAT, FORMAT_WITHOUT_ENDPOINT)
    if not isinstance(document, dict) or document.get("format") not in formats:
        raise Refused(f"manifest.json is not a {' or '.join(formats)} manifest")
    fields = {
        "tenant": str, "namespace": str, "schema": str, "kubernetes_version": str, "etcd_revision": int,
        "key_count": int, "created": str, "skipped_leased": dict, "members": dict, "checksum": str,
    }  # fmt: skip
    if document["format"] == FORMAT:
        fields["endpoint"] = str
    wrong = [name for name, kind in fields.items() if type(document.get(name)) is not kind]
    if wrong or set(document) != {*fields, "format"}:
        raise Refused(f"manifest.json has missing, extra or mistyped fields ({', '.join(wrong) or 'extra'})")
    manifest = Manifest(**{name: document[name] for name in fields if name != "endpoint"},
                        endpoint=document.get("endpoint"))
    if manifest.checksum != manifest.computed_checksum():
        raise Refused("manifest.json does not match its own checksum: it was edited or corrupted")
    # Its checksum covers the values, not the layout: a tab for a newline would parse the same, yet is not ours.
    if data != manifest.document():
        raise Refused("manifest.json is not laid out as this lab writes it: the file was altered")
    check_manifest_values(manifest)
    return manifest


def check_manifest_values(manifest: Manifest) -> None:
    """Each value as the lab writes it; a refusal quotes the value escaped (repr), never raw."""
    for name, (pattern, expected) in TEXT_FIELDS.items():
        value = getattr(manifest, name)
        if not re.fullmatch(pattern, value):
            raise Refused(f"manifest.json: {name} {value!r} is not {expected}")
    if manifest.endpoint is not None and not is_endpoint(manifest.endpoint):
        raise Refused(f"manifest.json: endpoint {manifest.endpoint!r} is not https://<host>:<port>")
    if not is_created(manifest.created):
        raise Refused(f"manifest.json: created {manifest.created!r} is not a UTC time to the second")
    for resource in manifest.skipped_leased:
        # A resource is the first path segment of an etcd key below the tenant's prefix: never empty, never
        # holding a slash, and printed when the restore reports what the snapshot left out.
        if not resource or "/" in resource or not resource.isprintable():
            raise Refused(f"manifest.json: skipped_leased names {resource!r}, which is not a resource")
    counts = [manifest.etcd_revision, manifest.key_count, *manifest.skipped_leased.values()]
    if any(type(count) is not int or count < 0 for count in counts):
        raise Refused("manifest.json holds a negative or non-integer count (etcd_revision, key_count, skipped_leased)")
    if set(manifest.members) != {KEYS, SECRETS}:
        raise Refused(f"manifest.json must give the checksums of {KEYS} and {SECRETS}, and nothing else")
    for name, summary in manifest.members.items():
        if not (
            isinstance(summary, dict) and set(summary) == {"sha256", "size"}
            and isinstance(summary["sha256"], str) and re.fullmatch(r"[0-9a-f]{64}", summary["sha256"])
            and type(summary["size"]) is int and summary["size"] >= 0
        ):  # fmt: skip
            raise Refused(f"manifest.json has no sha256 and size for {name}")


def is_endpoint(text: str) -> bool:
    """https://<host>:<port> and nothing more: an IPv4 address, a DNS name or a bracketed IPv6 address."""
    found = ENDPOINT.fullmatch(text)
    if not found or int(found["port"]) > 65535:
        return False
    try:
        host_address(found["ipv6"] or found["host"])
    except ValueError:
        return False
    return found["ipv6"] is None or ":" in found["ipv6"]


def is_created(text: str) -> bool:
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        return False
    return when.utcoffset() == datetime.timedelta(0) and when.isoformat(timespec="seconds") == text


def parse_line(line: bytes, prefix: bytes) -> Key:
    """One line exactly as Key.line writes it (base64 holds no quote, so the split cannot be fooled)."""
    try:
        if not (line.startswith(LINE_START) and line.endswith(LINE_END[:-1])):
            raise ValueError("not a key record")
        key_text, rest = line[len(LINE_START) : -len(LINE_END) + 1].split(LINE_LEASED, 1)
        leased, value_text = rest.split(LINE_VALUE, 1)
        if leased not in (b"true", b"false"):
            raise ValueError("leased")
        key = base64.b64decode(key_text, validate=True)
        value = base64.b64decode(value_text, validate=True)
    except (ValueError, binascii.Error):
        raise Refused("keys.jsonl holds a line that is not a key record") from None
    if not key.startswith(prefix) or b"\0" in key:
        raise Refused(f"keys.jsonl holds a key outside {prefix.decode()}: {key[:80]!r}")
    return Key(key, value, leased == b"true")


def read_secrets(data: bytes) -> dict[str, dict[str, Any]]:
    secrets = load_json(data, SECRETS)
    if not isinstance(secrets, dict) or set(secrets) - set(IDENTITY_SECRETS):
        raise Refused(f"secrets.json must hold only the identity Secrets {', '.join(IDENTITY_SECRETS)}")
    for role, secret in secrets.items():
        data_ok = isinstance(secret, dict) and isinstance(secret.get("data"), dict)
        if not data_ok or set(secret) != {"type", "data"} or not isinstance(secret["type"], str):
            raise Refused(f"secrets.json: the {role} Secret is not a type and data")
        for value in secret["data"].values():
            try:
                base64.b64decode(value, validate=True)
            except (ValueError, TypeError, binascii.Error):
                raise Refused(f"secrets.json: the {role} Secret holds a value that is not base64") from None
    return secrets


@dataclass
class Contents:
    manifest: Manifest
    secrets: dict[str, dict[str, Any]]


def read(source: IO[bytes], on_key: Callable[[Key], None] | None = None) -> Contents:
    """Read and verify a whole snapshot; each key (in order) goes to on_key as it is read. Refused on any flaw."""
    stream = Inflated(source)
    manifest_bytes = bytearray()
    member(stream, MANIFEST, MAX_MANIFEST, manifest_bytes.extend)
    manifest = read_manifest(bytes(manifest_bytes))
    keys = KeyLines(manifest.prefix, on_key)
    member(stream, KEYS, MAX_MEMBER, keys.feed)
    keys.finish()
    secrets_bytes = bytearray()
    member(stream, SECRETS, MAX_SECRETS, secrets_bytes.extend)
    rest = stream.rest()
    if any(rest) or len(rest) < 2 * BLOCK or (stream.size % RECORD):
        raise Refused("the end of the archive is not what this lab writes: the file was altered")
    secrets_digest = Digest()
    secrets_digest.update(bytes(secrets_bytes))
    found = {KEYS: keys.digest.summary(), SECRETS: secrets_digest.summary()}
    for name, summary in found.items():
        if manifest.members[name] != summary:
            raise Refused(f"{name} does not match the manifest's checksum: the snapshot is corrupt or was altered")
    if keys.count != manifest.key_count:
        raise Refused(f"keys.jsonl holds {keys.count} keys, the manifest says {manifest.key_count}")
    return Contents(manifest, read_secrets(bytes(secrets_bytes)))


@dataclass
class KeyLines:
    """keys.jsonl as it streams past: lines parsed, keys strictly ascending (etcd's order, so no repeats)."""

    prefix: bytes
    on_key: Callable[[Key], None] | None
    digest: Digest = field(default_factory=Digest)
    partial: bytearray = field(default_factory=bytearray)
    last: bytes = b""
    count: int = 0

    def feed(self, data: bytes) -> None:
        self.digest.update(data)
        self.partial += data
        *lines, rest = bytes(self.partial).split(b"\n")
        if len(rest) > MAX_LINE:
            raise Refused("keys.jsonl holds a line longer than any etcd value")
        self.partial = bytearray(rest)
        for line in lines:
            key = parse_line(line, self.prefix)
            if key.key <= self.last:
                raise Refused("keys.jsonl is not in etcd's key order (a key repeats or was moved)")
            self.last = key.key
            self.count += 1
            if self.on_key:
                self.on_key(key)

    def finish(self) -> None:
        if self.partial:
            raise Refused("keys.jsonl ends in the middle of a line")


def verify(path: Path) -> Contents:
    """The whole file checked; Refused, naming the file, when it cannot be used."""
    try:
        with path.open("rb") as source:
            return read(source)
    except OSError as problem:
        raise Refused(f"cannot read {path}: {problem.strerror or problem}") from None
