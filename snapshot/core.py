"""Take and restore one tenant's snapshot, given an etcd client and the tenant's side (hold, Secrets, restart).

What needs a live lab (kubectl, the port-forward, the TenantControlPlane) is in snapshot/live.py; what is here
runs against any etcd, and the tests run it against the real one.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from snapshot import archive
from snapshot.archive import Contents, Manifest, Refused
from snapshot.etcd import EtcdClient, PrefixReader, PrefixWriter, Progress


@dataclass(frozen=True)
class Target:
    """The tenant a snapshot is taken from or restored into."""

    tenant: str
    namespace: str
    schema: str
    kubernetes_version: str
    endpoint: str  # the https URL of its API server, as the stack outputs give it

    @property
    def prefix(self) -> bytes:
        return f"/{self.schema}/".encode()


def file_name(tenant: str, when: datetime.datetime) -> str:
    return f"{tenant}-{when.astimezone(datetime.UTC):%Y%m%dT%H%M%SZ}.tar.gz"


def take(
    etcdctl: EtcdClient,
    target: Target,
    secrets: dict[str, dict[str, Any]],
    directory: Path,
    when: datetime.datetime,
    progress: Progress | None = None,
) -> tuple[Path, Manifest]:
    """snapshots/<tenant>-<UTC time>.tar.gz: every key under the prefix at one revision, and the identity Secrets.

    Keys stream into a private scratch file (never all in memory), then into the archive; the archive appears
    under its name only when complete.
    """
    archive.private_directory(directory)
    path = directory / file_name(target.tenant, when)
    if path.exists():
        raise FileExistsError(f"{path} already exists")
    scratch, partial = directory / f".{path.name}.keys", directory / f".{path.name}.partial"
    reader = PrefixReader(etcdctl, target.prefix)
    try:
        with archive.private_file(scratch) as out:
            digest, count = archive.write_keys(reader.read(progress), out)
        secrets_bytes = archive.secrets_document(secrets)
        secrets_digest = archive.Digest()
        secrets_digest.update(secrets_bytes)
        manifest = Manifest(
            tenant=target.tenant,
            namespace=target.namespace,
            schema=target.schema,
            kubernetes_version=target.kubernetes_version,
            etcd_revision=reader.revision,
            key_count=count,
            created=when.astimezone(datetime.UTC).isoformat(timespec="seconds"),
            skipped_leased=dict(sorted(reader.skipped.items())),
            members={archive.KEYS: digest.summary(), archive.SECRETS: secrets_digest.summary()},
            endpoint=target.endpoint,
        )
        archive.write_archive(partial, manifest, scratch, secrets_bytes)
        partial.rename(path)
    finally:
        for leftover in (scratch, partial):
            with suppress(FileNotFoundError):
                leftover.unlink()
    return path, manifest


def minor(version: str) -> tuple[int, int] | None:
    found = re.fullmatch(r"v?(\d+)\.(\d+)(\.\d+)?([-+].*)?", version.strip())
    return (int(found[1]), int(found[2])) if found else None


def compatible(snapshot: Manifest, target: Target) -> None:
    """The snapshot belongs to this tenant and its schema, and the tenant's API server can read what it holds:
    the same minor, or one minor newer (Kubernetes upgrades one minor at a time and reads what the previous
    minor stored); an older API server may not know what a newer one stored."""
    if snapshot.tenant != target.tenant:
        raise Refused(f"it is tenant {snapshot.tenant}'s snapshot, not {target.tenant}'s")
    if snapshot.schema != target.schema:
        raise Refused(
            f"it holds schema /{snapshot.schema}/, but tenant {target.tenant} keeps its objects under /{target.schema}/"
        )
    taken, now = minor(snapshot.kubernetes_version), minor(target.kubernetes_version)
    if taken is None or now is None:
        raise Refused(
            f"cannot compare Kubernetes versions {snapshot.kubernetes_version!r} and {target.kubernetes_version!r}"
        )
    if not (taken[0] == now[0] and 0 <= now[1] - taken[1] <= 1):
        raise Refused(
            f"it was taken at Kubernetes {snapshot.kubernetes_version}, and tenant {target.tenant} runs "
            f"{target.kubernetes_version}: a restore needs the same minor or the next one"
        )


def same_address(endpoint: str, other: str) -> bool:
    """Whether two API server URLs name the same host and port, all of each (172.30.255.2 is not 172.30.255.20);
    a URL that names no host or a malformed port matches nothing."""
    try:
        ours, theirs = urlsplit(endpoint), urlsplit(other)
        return bool(ours.hostname) and (ours.hostname, ours.port) == (theirs.hostname, theirs.port)
    except ValueError:
        return False


def check(path: Path, target: Target) -> Contents:
    """The whole file verified and matched to the target; Refused, with the reason, before anything changes."""
    contents = archive.verify(path)
    compatible(contents.manifest, target)
    return contents


@dataclass
class Restored:
    manifest: Manifest
    deleted: int
    written: int


def restore(
    etcdctl: EtcdClient,
    path: Path,
    target: Target,
    hold: Callable[[], AbstractContextManager[None]],
    restore_secrets: Callable[[dict[str, dict[str, Any]]], None],
    progress: Progress | None = None,
) -> Restored:
    """Verify the file, then with the tenant held: delete its prefix, write the snapshot's keys back and its
    identity Secrets. Every step repeats safely, so an interrupted restore is run again to completion."""
    contents = check(path, target)
    writer = PrefixWriter(etcdctl, target.prefix, progress or Progress())
    with hold():
        deleted = writer.clear()
        with path.open("rb") as source:
            # Read again, key by key; the file was verified, and is verified again as it is read.
            again = archive.read(source, writer.put)
        writer.flush()
        if again.manifest != contents.manifest:
            raise Refused(f"{path} changed while it was restored; run the restore again")
        restore_secrets(contents.secrets)
    return Restored(contents.manifest, deleted, writer.progress.keys)
