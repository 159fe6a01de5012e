"""Snapshot and restore against the real etcd (tests/real_etcd.py): a byte-identical round trip, neighbours
untouched, leases per kind, an interrupted restore run again, and each refusal leaving etcd as it was."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import gzip
import hashlib
import json
import stat

import pytest

from snapshot import archive
from snapshot.archive import Refused
from snapshot.core import Unfinished, restore, take
from snapshot.etcd import EtcdClient, EtcdFailed, PrefixReader, PrefixWriter, Progress
from tests.snapshot_etcd import NEIGHBOUR, SECRETS, TENANT, WHEN, contents, dump, etcdctl, put


def never_held():
    raise AssertionError("the tenant was held")


@contextlib.contextmanager
def held(log: list[str]):
    log.append("hold")
    yield
    log.append("release")


def test_round_trip_is_byte_identical_and_neighbours_keep_keys_and_revisions(etcd, tmp_path):
    before = contents(etcd, f"/{TENANT.schema}/")
    path, manifest = take(etcd, TENANT, SECRETS, tmp_path / "snapshots", WHEN)
    assert path.name == "tenant-a-20261204T183005Z.tar.gz"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no scratch file left
    assert manifest.key_count == len(before) == 7
    assert archive.verify(path).manifest.endpoint == TENANT.endpoint  # where the tenant was, for the restore to say
    neighbours = dump(etcd, f"/{NEIGHBOUR}/") + dump(etcd, "/tenants_tenant-a0")

    # After the snapshot: one object changed, one deleted, one made.
    put(etcd, f"/{TENANT.schema}/configmaps/default/cm-0".encode(), b"changed")
    etcdctl(etcd, "del", f"/{TENANT.schema}/configmaps/default/cm-1")
    put(etcd, f"/{TENANT.schema}/configmaps/default/made-later".encode(), b"later")
    log: list[str] = []
    secrets: list[dict] = []
    done = restore(etcd, path, TENANT, lambda: held(log), secrets.append)

    assert contents(etcd, f"/{TENANT.schema}/") == before
    assert dump(etcd, f"/{NEIGHBOUR}/") + dump(etcd, "/tenants_tenant-a0") == neighbours
    assert (done.deleted, done.written) == (7, 7)
    assert secrets == [SECRETS] and log == ["hold", "release"]


def test_the_snapshot_reads_one_revision_even_while_the_tenant_writes(etcd, tmp_path):
    class WritingBetweenPages(EtcdClient):
        def range(self, *args):
            pending = super().range(*args)
            pending.result()  # answered before the write
            put(etcd, f"/{TENANT.schema}/configmaps/default/zz-during".encode(), b"written during the snapshot")
            return pending

    revision = json.loads(etcdctl(etcd, "get", "/", "--limit=1", "-w", "json"))["header"]["revision"]
    reader = WritingBetweenPages(etcd.address, etcd.ca, etcd.cert, etcd.key)
    pages = PrefixReader(reader, TENANT.prefix, page=2)
    keys = [key.key for key in pages.read()]
    assert pages.revision == revision
    assert len(keys) == 7 and b"/tenants_tenant-a/configmaps/default/zz-during" not in keys


def test_every_byte_and_every_escape_lookalike_is_written_back_as_it_was(etcd):
    """Keys and values go as raw bytes: what the writer puts must come back byte for byte, whatever looks like
    an escape or a flag."""
    tricky = [bytes(range(256)), b"\\'", b"\\\\'", b"'\\", b'"', b'\\"', b"\\x41", b"\\n", b"", b"-", b"--"]
    keys = [archive.Key(f"/{TENANT.schema}/values/{index:02}".encode(), value) for index, value in enumerate(tricky)]
    keys.append(archive.Key(f"/{TENANT.schema}/keys/\xff \"'\\".encode("latin-1"), b"a key with odd bytes"))
    writer = PrefixWriter(etcd, TENANT.prefix)
    for key in keys:
        writer.put(key)
    writer.flush()
    stored = contents(etcd, f"/{TENANT.schema}/")
    assert {key.key: stored.get(key.key) for key in keys} == {key.key: key.value for key in keys}


@pytest.mark.parametrize("page", [1, 2, 3, 7, 8])
def test_every_page_size_reads_every_key_once(etcd, page):
    reader = PrefixReader(etcd, TENANT.prefix, page=page)
    read = [(key.key, key.value) for key in reader.read()]
    assert read == sorted(contents(etcd, f"/{TENANT.schema}/").items())


def test_events_come_back_with_a_fresh_lease_and_master_leases_are_left_out(etcd, tmp_path):
    lease = f"{json.loads(etcdctl(etcd, 'lease', 'grant', '600', '-w', 'json'))['ID']:x}"
    put(etcd, f"/{TENANT.schema}/events/default/pod.1".encode(), b"an event", f"--lease={lease}")
    put(etcd, f"/{TENANT.schema}/masterleases/10.0.0.1".encode(), b"an endpoint", f"--lease={lease}")
    path, manifest = take(etcd, TENANT, SECRETS, tmp_path, WHEN)
    assert manifest.skipped_leased == {"masterleases": 1}
    assert manifest.key_count == 8

    etcdctl(etcd, "lease", "revoke", lease)  # the old lease is gone, as after a rebuilt lab
    restore(etcd, path, TENANT, contextlib.nullcontext, lambda secrets: None)
    (event,) = dump(etcd, f"/{TENANT.schema}/events/")
    assert base64.b64decode(event["value"]) == b"an event"
    ttl = json.loads(etcdctl(etcd, "lease", "timetolive", f"{int(event['lease']):x}", "-w", "json"))
    assert 0 < ttl["ttl"] <= 3600 and ttl["granted-ttl"] == 3600
    assert dump(etcd, f"/{TENANT.schema}/masterleases/") == []
    assert all(not int(kv.get("lease", 0)) for kv in dump(etcd, f"/{TENANT.schema}/configmaps/"))


def test_an_interrupted_restore_runs_again_to_completion(etcd, tmp_path, monkeypatch):
    before = contents(etcd, f"/{TENANT.schema}/")
    path, _ = take(etcd, TENANT, SECRETS, tmp_path, WHEN)
    put(etcd, f"/{TENANT.schema}/configmaps/default/made-later".encode(), b"later")
    commits = []
    real_commit = PrefixWriter.commit

    def fail_on_second(self, transaction):
        if commits:
            # The first transaction is sent without waiting; it lands before the connection is lost, so the
            # prefix is halfway whatever the machine's load.
            commits[0].result()
            raise EtcdFailed("etcd transaction failed: connection lost")
        commits.append(real_commit(self, transaction))
        return commits[0]

    monkeypatch.setattr("snapshot.etcd.TXN_OPS", 3)
    monkeypatch.setattr(PrefixWriter, "commit", fail_on_second)
    with pytest.raises(Unfinished, match="connection lost"):
        restore(etcd, path, TENANT, contextlib.nullcontext, lambda secrets: None)
    assert 0 < len(contents(etcd, f"/{TENANT.schema}/")) < len(before)  # halfway

    monkeypatch.setattr(PrefixWriter, "commit", real_commit)
    restore(etcd, path, TENANT, contextlib.nullcontext, lambda secrets: None)
    assert contents(etcd, f"/{TENANT.schema}/") == before


def test_a_restore_into_an_emptied_prefix_brings_everything_back(etcd, tmp_path):
    """A re-created tenant starts from an empty (or freshly bootstrapped) prefix."""
    before = contents(etcd, f"/{TENANT.schema}/")
    path, _ = take(etcd, TENANT, SECRETS, tmp_path, WHEN)
    etcdctl(etcd, "del", f"/{TENANT.schema}/", "--prefix")
    put(etcd, f"/{TENANT.schema}/namespaces/default".encode(), b"bootstrapped anew")
    restore(etcd, path, TENANT, contextlib.nullcontext, lambda secrets: None)
    assert contents(etcd, f"/{TENANT.schema}/") == before


def mutate_manifest(path, change) -> None:
    """Rewrite the snapshot with its manifest changed and its checksums made consistent again: what a careful
    forger or another lab's writer would produce."""
    with path.open("rb") as source:
        keys: list[archive.Key] = []
        found = archive.read(source, keys.append)
    manifest = change(found.manifest)
    scratch = path.with_suffix(".keys")
    with scratch.open("wb") as out:
        archive.write_keys(iter(keys), out)
    path.unlink()
    archive.write_archive(path, manifest, scratch, archive.secrets_document(found.secrets))


REFUSALS = {
    "truncated": (lambda path: path.write_bytes(path.read_bytes()[:-40]), "truncated"),
    "corrupt": (
        lambda path: path.write_bytes(path.read_bytes()[:200] + b"\xff" * 8 + path.read_bytes()[208:]),
        "corrupt",
    ),
    "not gzip": (lambda path: path.write_bytes(b"PK\x03\x04 a zip"), "not a snapshot this lab wrote"),
    "another tenant": (
        lambda path: mutate_manifest(path, lambda m: replace_field(m, tenant="tenant-b")),
        "tenant tenant-b's snapshot, not tenant-a's",
    ),
    "another schema": (
        lambda path: mutate_manifest(path, lambda m: replace_field(m, schema="tenants_tenant-b")),
        "keys.jsonl holds a key outside /tenants_tenant-b/",
    ),
    "two minors older": (
        lambda path: mutate_manifest(path, lambda m: replace_field(m, kubernetes_version="v1.34.2")),
        "a restore needs the same minor or the next one",
    ),
    "newer minor": (
        lambda path: mutate_manifest(path, lambda m: replace_field(m, kubernetes_version="v1.37.0")),
        "a restore needs the same minor or the next one",
    ),
    "another major": (
        lambda path: mutate_manifest(path, lambda m: replace_field(m, kubernetes_version="v2.36.4")),
        "a restore needs the same minor or the next one",
    ),
    "no version": (
        lambda path: mutate_manifest(path, lambda m: replace_field(m, kubernetes_version="latest")),
        "kubernetes_version 'latest' is not a Kubernetes version",  # the lab writes v<major>.<minor>.<patch> only
    ),
    "edited manifest": (lambda path: edit_manifest_only(path), "does not match its own checksum"),
    "edited endpoint": (
        lambda path: edit_manifest_only(path, '"https://172.30.255.2:6443"', '"https://172.30.255.3:6443"'),
        "does not match its own checksum",
    ),
    # A v2 manifest must name the endpoint (only v1 ones, written before it was recorded, have none).
    "endpoint removed": (
        lambda path: edit_manifest_only(path, '"endpoint": "https://172.30.255.2:6443",', ""),
        "missing, extra or mistyped fields \\(endpoint\\)",
    ),
    "endpoint removed and the format said to be v1": (
        lambda path: edit_manifest_only(
            path, '"endpoint": "https://172.30.255.2:6443",', ""
        ) or edit_manifest_only(path, '"kamaji-hami-lab/tenant-snapshot/v2"', '"kamaji-hami-lab/tenant-snapshot/v1"'),
        "does not match its own checksum",
    ),
    "an unknown format": (
        lambda path: edit_manifest_only(path, "tenant-snapshot/v2", "tenant-snapshot/v9"),
        "is not a kamaji-hami-lab/tenant-snapshot/v2 or kamaji-hami-lab/tenant-snapshot/v1 manifest",
    ),
    "endpoint not a string": (
        lambda path: edit_manifest_only(path, '"https://172.30.255.2:6443"', "null"),
        "mistyped fields \\(endpoint\\)",
    ),
}


def replace_field(manifest, **changes):
    return dataclasses.replace(manifest, **changes)


def edit_manifest_only(path, old: str | None = None, new: str | None = None) -> None:
    """Change text of the manifest in place, by default its key count, leaving its checksum as it was; a shorter
    text is padded with spaces (JSON whitespace), so the tar header's size still holds."""
    tar = gzip.decompress(path.read_bytes())
    document = json.loads(tar[512 : 512 + int(tar[124:135], 8)])
    if old is None or new is None:
        old, new = f'"key_count": {document["key_count"]}', f'"key_count": {document["key_count"] + 1}'
    assert len(old) >= len(new) and old.encode() in tar
    tampered = tar.replace(old.encode(), new.ljust(len(old)).encode(), 1)
    # Keep the tar header's own checksum right, so only the manifest's checksum can catch the edit.
    path.unlink()
    with archive.private_file(path) as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
        out.write(tampered)
    raw_bytes = bytearray(path.read_bytes())
    raw_bytes[8] = 0  # the writer's XFL byte for its compression level
    path.write_bytes(bytes(raw_bytes))


@pytest.mark.parametrize("damage", sorted(REFUSALS))
def test_each_refusal_names_the_problem_and_leaves_etcd_as_it_was(etcd, tmp_path, damage):
    path, _ = take(etcd, TENANT, SECRETS, tmp_path, WHEN)
    change, words = REFUSALS[damage]
    change(path)
    before = dump(etcd, "/")
    with pytest.raises(Refused, match=words):
        restore(etcd, path, TENANT, never_held, lambda secrets: pytest.fail("secrets restored"))
    assert dump(etcd, "/") == before


def test_a_compatible_newer_minor_is_accepted(etcd, tmp_path):
    path, _ = take(etcd, TENANT, SECRETS, tmp_path, WHEN)
    mutate_manifest(path, lambda m: replace_field(m, kubernetes_version="v1.35.9"))
    restore(etcd, path, TENANT, contextlib.nullcontext, lambda secrets: None)


# What manifest.json held before it recorded the tenant's endpoint: snapshots taken then are still restored.
BEFORE_ENDPOINT = {
    "format", "tenant", "namespace", "schema", "kubernetes_version", "etcd_revision", "key_count", "created",
    "skipped_leased", "members", "checksum",
}  # fmt: skip


def test_a_snapshot_from_before_the_endpoint_was_recorded_is_restored_with_the_endpoint_unknown(etcd, tmp_path):
    before = contents(etcd, f"/{TENANT.schema}/")
    path, _ = take(etcd, TENANT, SECRETS, tmp_path, WHEN)
    mutate_manifest(path, lambda m: replace_field(m, endpoint=None))
    tar = gzip.decompress(path.read_bytes())
    document = json.loads(tar[512 : 512 + int(tar[124:135], 8)])
    assert set(document) == BEFORE_ENDPOINT
    # The checksum over the other fields, in canonical JSON: what the writer then made.
    others = json.dumps({k: v for k, v in document.items() if k != "checksum"}, sort_keys=True, separators=(",", ":"))
    assert document["checksum"] == hashlib.sha256(others.encode()).hexdigest()

    put(etcd, f"/{TENANT.schema}/configmaps/default/made-later".encode(), b"later")
    done = restore(etcd, path, TENANT, contextlib.nullcontext, lambda secrets: None)
    assert contents(etcd, f"/{TENANT.schema}/") == before
    assert done.manifest.endpoint is None


def test_a_missing_file_is_refused_with_its_name(tmp_path):
    with pytest.raises(Refused, match=f"cannot read {tmp_path}/nothing.tar.gz"):
        restore(None, tmp_path / "nothing.tar.gz", TENANT, never_held, lambda s: None)  # refused before any client


def test_progress_reports_keys_and_bytes(etcd, tmp_path):
    reports = []
    take(etcd, TENANT, SECRETS, tmp_path, WHEN, Progress(lambda keys, size: reports.append((keys, size)), every=3))
    assert [keys for keys, _ in reports] == [3, 6, 7]
    assert reports[-1][1] == sum(len(k) + len(v) for k, v in contents(etcd, f"/{TENANT.schema}/").items())


def test_a_key_outside_the_prefix_is_never_written(etcd):
    writer = PrefixWriter(etcd, TENANT.prefix)
    with pytest.raises(EtcdFailed, match="outside"):
        writer.put(archive.Key(b"/tenants_tenant-b/configmaps/default/x", b"v"))
