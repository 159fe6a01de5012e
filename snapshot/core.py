"""Take and restore one tenant's snapshot, given an etcd client and the tenant's side (hold, Secrets, restart).

What needs a live lab (kubectl, the port-forward, the TenantControlPlane) is in snapshot/live.py; what is here
runs against any etcd, and the tests run it against the real one.
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
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

    Keys stream into a scratch file (never all in memory), then into the archive, both in a private_scratch
    directory outside `directory`; the archive appears under its name only when complete (publish).
    """
    archive.private_directory(directory)
    path = directory / file_name(target.tenant, when)
    if path.exists():
        raise FileExistsError(f"{path} already exists")
    reader = PrefixReader(etcdctl, target.prefix)
    with private_scratch() as scratch:
        keys, packed = scratch / archive.KEYS, scratch / path.name
        with archive.private_file(keys) as out:
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
        archive.write_archive(packed, manifest, keys, secrets_bytes)
        publish(packed, path)
    return path, manifest


@contextmanager
def private_scratch() -> Iterator[Path]:
    """A new directory only this user can enter (mkdtemp makes it 0700), in the system's temporary directory
    ($TMPDIR), never under snapshots/; removed with all it holds when the block ends. Uncompressed keys and
    unverified copies live here, so a process killed midway leaves nothing under snapshots/."""
    with tempfile.TemporaryDirectory(prefix="kamaji-hami-lab-snapshot-") as name:
        yield Path(name)


@contextmanager
def private_copy(path: Path) -> Iterator[Path]:
    """path copied into a private file (0600, in a private_scratch directory), removed afterwards. A restore
    verifies and writes this one copy, so what it verified is what it writes even if path changes meanwhile;
    a snapshot that has to be decrypted first belongs in the same kind of place."""
    with private_scratch() as scratch:
        copy = scratch / "snapshot.tar.gz"
        try:
            source = path.open("rb")
        except OSError as problem:
            raise Refused(f"cannot read {path}: {problem.strerror or problem}") from None
        with source, archive.private_file(copy) as out:
            shutil.copyfileobj(source, out)
        yield copy


def publish(made: Path, path: Path) -> None:
    """The complete archive made appears at path at once, never in part, and never over an existing file: a hard
    link where made and path share a file system (the usual case), else copied_into_place."""
    try:
        os.link(made, path)
    except FileExistsError:
        raise
    except OSError:  # another file system (a tmpfs /tmp), or one without hard links
        copied_into_place(made, path)


def copied_into_place(made: Path, path: Path) -> None:
    """made copied to path by written_into_place: only a process killed during this copy leaves something (that
    hidden, compressed file) under snapshots/."""
    with made.open("rb") as source:
        written_into_place(path, lambda out: shutil.copyfileobj(source, out))


def written_into_place(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """What write puts into a new private file appears at path only when complete, never over a file already there:
    written under a hidden name beside path, synced, then renamed."""
    partial = path.parent / f".{path.name}.partial"
    try:
        with archive.private_file(partial) as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        if path.exists():
            raise FileExistsError(f"{path} already exists")
        partial.rename(path)
    finally:
        with suppress(FileNotFoundError):
            partial.unlink()


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


class Unfinished(Exception):
    """A restore stopped after it began to change the tenant's prefix: the tenant stays held asleep (so nothing runs
    on what is there) until the restore is run again. state says what the prefix holds; the cause is chained."""

    def __init__(self, state: str, cause: BaseException):
        # KeyboardInterrupt has no words of its own.
        super().__init__(f"{str(cause) or type(cause).__name__}. {state}.")
        self.state = state


def restore(
    etcdctl: EtcdClient,
    path: Path,
    target: Target,
    hold: Callable[[], AbstractContextManager[None]],
    restore_secrets: Callable[[dict[str, dict[str, Any]]], None],
    progress: Progress | None = None,
) -> Restored:
    """Verify a private copy of the file, then restore the tenant from that copy (restore_copy)."""
    with private_copy(path) as copy:
        return restore_copy(etcdctl, copy, check(copy, target), target, hold, restore_secrets, progress)


def restore_copy(
    etcdctl: EtcdClient,
    copy: Path,
    contents: Contents,
    target: Target,
    hold: Callable[[], AbstractContextManager[None]],
    restore_secrets: Callable[[dict[str, dict[str, Any]]], None],
    progress: Progress | None = None,
) -> Restored:
    """With the tenant held: delete its prefix, write the keys of copy back and its identity Secrets.

    copy is a private_copy that check() verified into contents. A failure before the delete leaves etcd as it was
    (and is raised as it is); from the delete on, it is raised as Unfinished. Every step repeats safely, so an
    interrupted restore is run again to completion."""
    writer = PrefixWriter(etcdctl, target.prefix, progress or Progress())
    prefix, tenant = target.prefix.decode(), target.tenant
    state = ""  # what the tenant is left with if this stops now; "" while nothing of etcd changed
    try:
        with hold():
            state = f"Tenant {tenant} is held asleep, and its etcd prefix {prefix} may have been emptied"
            deleted = writer.clear()
            state = f"Tenant {tenant} is held asleep; its etcd prefix {prefix} was emptied and is not all written back"
            with copy.open("rb") as source:
                # Read again, key by key, and verified again as it is read: the copy is private, so it is the
                # file check() verified.
                again = archive.read(source, writer.put)
            writer.flush()
            if again.manifest != contents.manifest:
                raise Refused(f"{copy} changed while it was restored")
            state = f"Tenant {tenant} is held asleep; its etcd prefix {prefix} is back, its identity Secrets not all"
            restore_secrets(contents.secrets)
            state = f"Tenant {tenant}'s etcd prefix {prefix} and identity Secrets are back; waking it did not finish"
    except (Exception, KeyboardInterrupt) as problem:
        if not state:
            raise
        raise Unfinished(state, problem) from problem
    return Restored(contents.manifest, deleted, writer.progress.keys)
