"""Malformed snapshots, made by a careful forger (every checksum right): each is refused with the program's
sentence before anything is written, never a traceback; and no text from a snapshot reaches the terminal raw."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from snapshot import archive
from snapshot.archive import Refused
from tests.test_snapshot_archive import KEYS, SECRETS, build, read
from tests.test_snapshot_live import TCP, run
from tests.test_validation import FakeLab, ok, recorded

KEY_LINES = b"".join(key.line() for key in KEYS)
SECRETS_DOCUMENT = archive.secrets_document(SECRETS)
ESCAPE = "\x1b]0;owned\x07\x1b[2J"  # a terminal title, then a cleared screen
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def packed(tar: bytes) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=archive.COMPRESS_LEVEL, mtime=0) as gz:
        gz.write(tar)
    return out.getvalue()


def tar_of(manifest: bytes, keys: bytes, secrets: bytes) -> bytes:
    """The three members laid out as the writer lays them out, whatever they hold."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in zip(archive.MEMBERS, (manifest, keys, secrets), strict=True):
            tar.addfile(archive.member_info(name, len(data)), io.BytesIO(data))
    return out.getvalue()


def summary(data: bytes) -> dict[str, Any]:
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def manifest_of(keys: bytes = KEY_LINES, secrets: bytes = SECRETS_DOCUMENT, **fields: Any) -> bytes:
    """tenant-a's manifest with fields replaced (any JSON), its checksums made right again."""
    body = {
        "format": archive.FORMAT, "tenant": "tenant-a", "namespace": "tenants", "schema": "tenants_tenant-a",
        "kubernetes_version": "v1.36.4", "etcd_revision": 42, "key_count": keys.count(b"\n"),
        "created": "2026-12-04T18:30:05+00:00", "skipped_leased": {"masterleases": 1},
        "members": {archive.KEYS: summary(keys), archive.SECRETS: summary(secrets)},
        "endpoint": "https://172.30.255.2:6443",
    } | fields  # fmt: skip
    checksum = hashlib.sha256(archive.canonical(body)).hexdigest()
    return json.dumps(body | {"checksum": checksum}, indent=2, sort_keys=True).encode()


def forged(manifest: bytes | None = None, keys: bytes = KEY_LINES, secrets: bytes = SECRETS_DOCUMENT) -> bytes:
    return packed(tar_of(manifest_of(keys, secrets) if manifest is None else manifest, keys, secrets))


def test_the_forger_writes_what_the_writer_writes(tmp_path):
    """So each refusal below is of the one change it makes, not of a difference in layout."""
    assert zlib.decompress(forged(), wbits=31) == zlib.decompress(build(tmp_path), wbits=31)
    assert read(forged())[1] == KEYS


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("depth", [30_000, 100_000])
@pytest.mark.parametrize("where", ["manifest", "key line", "secrets"])
def test_json_nested_deeper_than_the_parser_recurses_is_refused(where, depth):
    if where == "manifest":
        # Within the manifest's size limit, so the parser is what meets it.
        data = forged(manifest=nested(min(depth, archive.MAX_MANIFEST // 2)))
    elif where == "key line":
        data = forged(keys=nested(depth) + b"\n")
    else:
        secrets = b'{"ca": {"type": "Opaque", "data": {"x": ' + nested(depth) + b"}}}"
        data = forged(secrets=secrets)
    with pytest.raises(Refused) as refusal:
        read(data)
    assert str(refusal.value)


def with_header_field(tar: bytes, member: int, offset: int, field: bytes) -> bytes:
    """The tar with bytes of one member's header replaced, and that header's own checksum made right again."""
    start = tar_offsets(tar)[member]
    header = bytearray(tar[start : start + archive.BLOCK])
    header[offset : offset + len(field)] = field
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return tar[:start] + bytes(header) + tar[start + archive.BLOCK :]


def tar_offsets(tar: bytes) -> list[int]:
    starts, at = [], 0
    for _ in archive.MEMBERS:
        starts.append(at)
        size = int(tar[at + 124 : at + 135], 8)
        at += archive.BLOCK + -(-size // archive.BLOCK) * archive.BLOCK
    return starts


def base256(value: int) -> bytes:
    """A size field in GNU's base-256: the top bit of the first byte set, the rest a big-endian two's complement."""
    return bytes([0x80 | (value >> 88) & 0x7F]) + (value & (2**88 - 1)).to_bytes(11, "big")


@pytest.mark.parametrize(
    ("member", "size", "words"),
    [
        (0, -1, "size of -1 bytes"),
        (1, -(2**40), "size of -1099511627776 bytes"),
        (1, 8**11, f"size of {8**11} bytes"),  # past what USTAR's octal holds, within a signed 64-bit size
        (1, 2**62, f"size of {2**62} bytes"),
        (2, archive.MAX_SECRETS + 1, "size of"),
    ],
)
def test_a_tar_size_in_base_256_is_refused_however_large_or_negative(member, size, words):
    field = base256(size) if size >= 0 else (size % 2**95 | 2**95).to_bytes(12, "big")
    tar = with_header_field(tar_of(manifest_of(), KEY_LINES, SECRETS_DOCUMENT), member, 124, field)
    with pytest.raises(Refused, match=words):
        read(packed(tar))



@pytest.mark.parametrize(
    ("member", "limit"), [("manifest", archive.MAX_MANIFEST), ("secrets", archive.MAX_SECRETS)]
)
def test_a_member_past_its_limit_is_refused_by_its_size_before_it_is_read(member, limit):
    """Padded with JSON whitespace, with every checksum right: only the size is wrong."""
    if member == "manifest":
        data = forged(manifest=manifest_of().ljust(limit + 1))
    else:
        secrets = SECRETS_DOCUMENT.ljust(limit + 1)
        data = forged(manifest=manifest_of(secrets=secrets), secrets=secrets)
    with pytest.raises(Refused, match=f"gives a size of {limit + 1} bytes, not 0 to {limit}"):
        read(data)

@FUZZ
@given(
    member=st.integers(0, 2),
    offset=st.integers(0, archive.BLOCK - 1).filter(lambda at: not 148 <= at < 156),
    field=st.binary(min_size=1, max_size=16),
)
@example(member=1, offset=124, field=b"\xff" * 12)  # a negative base-256 size
@example(member=0, offset=156, field=b"S")  # a GNU sparse member
@example(member=0, offset=156, field=b"L")  # a GNU long name
def test_any_tar_header_field_changed_with_its_checksum_right_is_refused(member, offset, field):
    tar = tar_of(manifest_of(), KEY_LINES, SECRETS_DOCUMENT)
    changed = with_header_field(tar, member, offset, field[: archive.BLOCK - offset])
    if changed == tar:
        return
    with pytest.raises(Refused):
        read(packed(changed))


@FUZZ
@given(data=st.binary(max_size=2048))
def test_any_bytes_are_refused(data):
    for candidate in (data, archive.GZIP_HEADER + data, packed(data)):
        with pytest.raises(Refused):
            read(candidate)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
FIELDS = ["format", "tenant", "namespace", "schema", "kubernetes_version", "etcd_revision", "key_count", "created",
          "skipped_leased", "members", "endpoint", "extra"]  # fmt: skip


def printable(value: Any) -> bool:
    if isinstance(value, str):
        return value.isprintable()
    if isinstance(value, dict):
        return all(printable(key) and printable(item) for key, item in value.items())
    return all(printable(item) for item in value) if isinstance(value, list) else True


@FUZZ
@given(name=st.sampled_from(FIELDS), value=JSON)
@example(name="tenant", value="tenant-a" + ESCAPE)
@example(name="endpoint", value="https://172.30.255.2:6443" + ESCAPE)
@example(name="created", value="2026-12-04T18:30:05+00:00\x1b[2J")
@example(name="skipped_leased", value={"events": -1})
@example(name="skipped_leased", value={"\x1f": 0})
@example(name="members", value={archive.KEYS: {"sha256": "0", "size": 0}})
def test_any_value_in_any_manifest_field_is_read_only_when_it_is_what_the_lab_writes(name, value):
    try:
        contents, _ = read(forged(manifest=manifest_of(**{name: value})))
    except Refused as refusal:
        assert str(refusal).isprintable()
        return
    assert printable(contents.manifest.body())


@FUZZ
@given(keys=st.binary(max_size=512), secrets=JSON)
def test_any_key_lines_and_any_secrets_are_read_or_refused(keys, secrets):
    try:
        read(forged(keys=keys, secrets=json.dumps(secrets).encode()))
    except Refused as refusal:
        assert str(refusal).isprintable()


@pytest.mark.parametrize(
    "endpoint",
    ["https://172.30.255.2:6443", "https://[fd00::2]:6443", "https://tenant-a.lab.example:443",
     "https://172.30.255.2:65535"],
)  # fmt: skip
def test_an_endpoint_the_lab_writes_is_read(endpoint):
    assert read(forged(manifest=manifest_of(endpoint=endpoint)))[0].manifest.endpoint == endpoint


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://172.30.255.2:6443", "https://172.30.255.2", "https://172.30.255.2:6443/", "https://172.30.255.2:0",
        "https://172.30.255.2:65536", "https://admin@172.30.255.2:6443", "https://172.30.255.2:6443?x",
        "https://010.30.255.2:6443", "https://[fd00::2%eth0]:6443", "https://[172.30.255.2]:6443",
        "https://-a.example:6443", "https://172.30.255.2:6443\n", " https://172.30.255.2:6443", "",
        "https://172.30.255.2:6443" + ESCAPE,
    ],
)  # fmt: skip
def test_an_endpoint_other_than_https_host_port_is_refused_and_quoted_escaped(endpoint):
    with pytest.raises(Refused, match="endpoint .* is not https://<host>:<port>") as refusal:
        read(forged(manifest=manifest_of(endpoint=endpoint)))
    assert str(refusal.value).isprintable()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("tenant", "tenant-a" + ESCAPE), ("tenant", "Tenant-A"), ("tenant", "a" * 64), ("tenant", "1tenant"),
        ("namespace", "tenants\u202e"), ("namespace", ""), ("schema", "tenants/tenant_a"), ("schema", "tenants_a\x00"),
        ("kubernetes_version", "v1.36.4" + ESCAPE), ("kubernetes_version", "latest"), ("kubernetes_version", "1.36.4"),
        ("created", "2026-12-04T18:30:05+02:00"), ("created", "2026-12-04T18:30:05.5+00:00"), ("created", "then"),
    ],
)  # fmt: skip
def test_a_manifest_name_or_version_the_lab_would_not_write_is_refused_and_quoted_escaped(name, value):
    with pytest.raises(Refused, match=f"manifest.json: {name} ") as refusal:
        read(forged(manifest=manifest_of(**{name: value})))
    assert str(refusal.value).isprintable()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("etcd_revision", -1), ("key_count", -3), ("skipped_leased", {"events": -1}),
        ("skipped_leased", {"events": 1.5}), ("members", {archive.KEYS: summary(KEY_LINES)}),
        ("members", {archive.KEYS: summary(KEY_LINES), archive.SECRETS: {"sha256": "zz", "size": 1}}),
    ],
)  # fmt: skip
def test_counts_and_checksums_the_lab_would_not_write_are_refused(name, value):
    with pytest.raises(Refused, match="manifest.json"):
        read(forged(manifest=manifest_of(**{name: value})))


def test_the_cli_prints_no_control_sequence_from_a_snapshot_and_changes_nothing(tmp_path, capfd):
    """The tenant's name in a forged manifest would be echoed in the refusal: it is quoted escaped."""
    snapshot = tmp_path / "tenant-a.tar.gz"
    snapshot.write_bytes(forged(manifest=manifest_of(tenant="tenant-a" + ESCAPE)))
    lab = FakeLab()
    lab.on("management", rf"^get {TCP} -o json", ok(recorded("tcp-tenant-a.json")))
    code, out = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    said = capfd.readouterr().err
    assert code == 1 and "refused, nothing changed" in said and "is not a tenant name" in said
    assert "\x1b" not in said + out and "\\x1b" in said
    assert [call.command.split()[0] for call in lab.calls] == ["get"]


@pytest.mark.parametrize("name", ["snap\x1b[2Jshot.tar.gz", "snap\u202eshot.tar.gz"])
def test_a_refused_file_is_named_escaped(tmp_path, capfd, name):
    snapshot = tmp_path / name
    snapshot.write_bytes(b"not a snapshot")
    lab = FakeLab()
    lab.on("management", rf"^get {TCP} -o json", ok(recorded("tcp-tenant-a.json")))
    code, _ = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    said = capfd.readouterr().err
    assert code == 1 and "refused, nothing changed" in said and said.rstrip("\n").isprintable()
