"""The snapshot verifier is a parser of outside input: any change to a valid snapshot is refused with a
sentence, never a traceback and never accepted with different content."""

from __future__ import annotations

import gzip
import io
import json
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from snapshot import archive
from snapshot.archive import Key, Manifest, Refused

PREFIX = b"/tenants_tenant-a/"
KEYS = [
    Key(PREFIX + b"configmaps/default/a", b'k8s\x00\n\x02v1\xff"\\'),
    Key(PREFIX + b"configmaps/default/b", b""),
    Key(PREFIX + b"events/default/e.1", b"{}", leased=True),
]
SECRETS = {"sa-certificate": {"type": "Opaque", "data": {"sa.key": "S0VZ", "sa.pub": "UFVC"}}}


def build(tmp: Path) -> bytes:
    keys_file = tmp / "keys"
    with keys_file.open("wb") as out:
        digest, count = archive.write_keys(iter(KEYS), out)
    secrets = archive.secrets_document(SECRETS)
    secrets_digest = archive.Digest()
    secrets_digest.update(secrets)
    manifest = Manifest(
        "tenant-a", "tenants", "tenants_tenant-a", "v1.36.4", 42, count, "2026-12-04T18:30:05+00:00",
        {"masterleases": 1}, {archive.KEYS: digest.summary(), archive.SECRETS: secrets_digest.summary()},
        "https://172.30.255.2:6443",
    )  # fmt: skip
    archive.write_archive(tmp / "snapshot.tar.gz", manifest, keys_file, secrets)
    return (tmp / "snapshot.tar.gz").read_bytes()


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> bytes:
    return build(tmp_path_factory.mktemp("snapshot"))


def read(data: bytes) -> tuple[archive.Contents, list[Key]]:
    keys: list[Key] = []
    return archive.read(io.BytesIO(data), keys.append), keys


def test_a_valid_snapshot_reads_back_every_key_and_secret(valid):
    contents, keys = read(valid)
    assert keys == KEYS
    assert contents.secrets == SECRETS
    assert (contents.manifest.tenant, contents.manifest.etcd_revision, contents.manifest.key_count) == (
        "tenant-a", 42, 3,
    )  # fmt: skip


def inflated(data: bytes) -> bytes | None:
    try:
        return zlib.decompress(data, wbits=31)
    except zlib.error:
        return None


def mutations():
    flip = st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255))
    cut = st.tuples(st.just("cut"), st.integers(0, 10**6), st.just(0))
    insert = st.tuples(st.just("insert"), st.integers(0, 10**6), st.integers(0, 255))
    return st.one_of(flip, cut, insert)


def mutate(data: bytes, mutation) -> bytes:
    kind, where, byte = mutation
    where %= len(data) + (kind == "insert")
    if kind == "flip":
        return data[:where] + bytes([data[where] ^ byte]) + data[where + 1 :]
    if kind == "cut":
        return data[:where]
    return data[:where] + bytes([byte]) + data[where:]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=mutations())
def test_any_change_to_the_compressed_file_is_refused_or_leaves_the_archive_identical(valid, mutation):
    """gzip does not cover every bit of its own file (the unused bits after deflate's last code): such a change
    leaves the archive inside byte-identical, and only then may it be read."""
    changed = mutate(valid, mutation)
    try:
        contents, keys = read(changed)
    except Refused as refusal:
        assert str(refusal)
        return
    assert inflated(changed) == inflated(valid) and keys == KEYS


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=mutations())
@example(mutation=("flip", 950, 3))  # a newline of manifest.json made a tab: the same JSON, not the lab's text
def test_any_change_to_the_archive_inside_is_refused(valid, mutation):
    tar = inflated(valid)
    changed = mutate(tar, mutation)
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, compresslevel=archive.COMPRESS_LEVEL, mtime=0) as out:
        out.write(changed)
    with pytest.raises(Refused):
        read(packed.getvalue())


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda data: data[:-8], "truncated"),
        (lambda data: data + b"\0", "after the end of the gzip stream"),
        (lambda data: b"", "not a snapshot this lab wrote"),
        (lambda data: data[:4] + b"\1" + data[5:], "gzip header differs"),
    ],
)
def test_the_refusals_say_what_is_wrong(valid, damage, words):
    with pytest.raises(Refused, match=words):
        read(damage(valid))


def test_a_rewritten_archive_with_a_key_outside_the_prefix_is_refused(tmp_path):
    """Even with every checksum right: a restore writes nothing outside the manifest's prefix."""
    KEYS.append(Key(b"/tenants_tenant-b/configmaps/default/x", b"theirs"))
    try:
        data = build(tmp_path)
    finally:
        KEYS.pop()
    with pytest.raises(Refused, match="outside /tenants_tenant-a/"):
        read(data)


def test_keys_out_of_etcds_order_are_refused(tmp_path):
    KEYS.reverse()
    try:
        data = build(tmp_path)
    finally:
        KEYS.reverse()
    with pytest.raises(Refused, match="not in etcd's key order"):
        read(data)


@settings(max_examples=300, deadline=None)
@given(key=st.binary(max_size=300), value=st.binary(max_size=3000), leased=st.booleans())
def test_a_key_line_is_canonical_json_of_its_record_and_reads_back_as_the_same_key(key, value, leased):
    """Lines are formatted by hand for speed: each must be the canonical JSON snapshots have always held, so
    snapshots written before read as they did, and the reader gives back exactly the key written."""
    written = Key(b"/s/" + key, value, leased)
    record = {"key": archive.b64(written.key), "value": archive.b64(value), "leased": leased}
    line = written.line()
    assert line == json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    if b"\0" not in key:
        assert archive.parse_line(line[:-1], b"/s/") == written


@pytest.mark.parametrize(
    "line",
    [
        b'{"key": "L3Mv", "leased": false, "value": ""}',  # JSON, but spaced as the writer never does
        b'{"leased":false,"key":"L3Mv","value":""}',  # fields in another order
        b'{"key":"L3Mv","leased":0,"value":""}',
        b'{"key":"L3Mv","leased":false,"value":""} ',
        b'{"key":"L3Mv","leased":false,"value":"a\\"b"}',
        b'{"key":"L3Mv","leased":false,"value":"","extra":1}',
    ],
)
def test_a_key_line_the_writer_would_not_write_is_refused(line):
    assert archive.parse_line(b'{"key":"L3Mv","leased":false,"value":""}', b"/s/") == Key(b"/s/", b"")
    with pytest.raises(Refused, match="not a key record"):
        archive.parse_line(line, b"/s/")
