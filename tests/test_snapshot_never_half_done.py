"""A restore is never half done, and a snapshot never leaves scratch under snapshots/, against the real etcd.

The restore verifies and writes one private copy of the file, so a file changed after it was verified changes
nothing; a restore stopped at any step after the delete says so (core.Unfinished) and, run again, completes;
a take killed with SIGKILL leaves nothing under the snapshots directory.
"""

from __future__ import annotations

import contextlib
import errno
import multiprocessing
import os
import signal
import stat
import tempfile
import time
from pathlib import Path

import pytest

from snapshot import archive, core
from snapshot.core import Unfinished, private_copy, restore, take
from snapshot.etcd import EtcdClient, PrefixWriter, Progress
from tests.snapshot_etcd import SECRETS, TENANT, WHEN, contents, etcdctl, put

PREFIX = f"/{TENANT.schema}/"
KILL_TIMEOUT = 60.0  # seconds for the child to reach the point where it is killed


@pytest.fixture
def scratch_root(tmp_path, monkeypatch) -> Path:
    """The system's temporary directory, for this test alone: where private copies and scratch go."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def later_snapshot(etcd, tmp_path) -> Path:
    """Another valid snapshot of the tenant, taken after a change: one a swapped-in file could be."""
    put(etcd, f"{PREFIX}configmaps/default/made-later".encode(), b"later")
    path, _ = take(etcd, TENANT, SECRETS, tmp_path / "later", WHEN)
    etcdctl(etcd, "del", f"{PREFIX}configmaps/default/made-later")
    return path


CHANGES = {
    "truncated": lambda path, other: path.write_bytes(path.read_bytes()[:-60]),
    "deleted": lambda path, other: path.unlink(),
    "emptied": lambda path, other: path.write_bytes(b""),
    "swapped for another valid snapshot": lambda path, other: other.replace(path),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_file_changed_after_it_was_verified_changes_nothing_the_restore_writes(
    etcd,
    tmp_path,
    scratch_root,
    change,
):
    before = contents(etcd, PREFIX)
    path, _ = take(etcd, TENANT, SECRETS, tmp_path / "snapshots", WHEN)
    other = later_snapshot(etcd, tmp_path)
    put(etcd, f"{PREFIX}configmaps/default/cm-0".encode(), b"changed after the snapshot")

    @contextlib.contextmanager
    def hold_then_change():
        CHANGES[change](path, other)  # between the verification and the writes
        yield

    done = restore(etcd, path, TENANT, hold_then_change, lambda secrets: None)
    assert contents(etcd, PREFIX) == before
    assert done.written == len(before)


def scratch_entries(root: Path) -> list[tuple[str, int]]:
    """Everything under root, relative, with its permission bits."""
    return sorted((str(p.relative_to(root)), stat.S_IMODE(p.stat().st_mode)) for p in root.rglob("*"))


def test_the_private_copy_is_0600_in_a_0700_directory_outside_snapshots_and_gone_after(etcd, tmp_path, scratch_root):
    path, _ = take(etcd, TENANT, SECRETS, tmp_path / "snapshots", WHEN)
    with private_copy(path) as copy:
        assert copy.read_bytes() == path.read_bytes()
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600
        assert stat.S_IMODE(copy.parent.stat().st_mode) == 0o700
        assert copy.parent.parent == scratch_root  # not beside the snapshot
        path.write_bytes(b"changed")
        assert copy.read_bytes() != path.read_bytes()
    assert scratch_entries(scratch_root) == []


@pytest.mark.parametrize("fails", [False, True])
def test_the_restore_leaves_no_copy_behind_whether_it_completes_or_stops(etcd, tmp_path, scratch_root, fails):
    path, _ = take(etcd, TENANT, SECRETS, tmp_path / "snapshots", WHEN)
    seen: list[list[tuple[str, int]]] = []

    @contextlib.contextmanager
    def hold():
        seen.append(scratch_entries(scratch_root))
        yield

    def restore_secrets(secrets):
        if fails:
            raise OSError("the management cluster went away")

    with pytest.raises(Unfinished) if fails else contextlib.nullcontext():
        restore(etcd, path, TENANT, hold, restore_secrets)
    ((directory, directory_mode), (copy, copy_mode)) = seen[0]
    assert (directory_mode, copy_mode) == (0o700, 0o600) and copy.startswith(directory + "/")
    assert scratch_entries(scratch_root) == []


# --- stopped at each step, then run again ---------------------------------------------------------------------


class Stop(Exception):
    pass


def stop_in_the_delete(monkeypatch):
    def clear(self):
        raise Stop("the delete timed out")

    monkeypatch.setattr(PrefixWriter, "clear", clear)


def stop_after_keys(count: int, interruption: BaseException | None = None):
    """Stops the restore once count keys were written back (0: right after the delete)."""

    def install(monkeypatch):
        real, written = PrefixWriter.put, []

        def put_some(self, key):
            if len(written) == count:
                raise interruption or Stop("etcd went away midway")
            written.append(key)
            real(self, key)

        monkeypatch.setattr(PrefixWriter, "put", put_some)

    return install


STEPS = {
    # step: (how it stops, what the tenant is left with, or None where etcd is unchanged)
    "waiting for the hold": (None, None),
    "in the delete": (stop_in_the_delete, "may have been emptied"),
    "right after the delete": (stop_after_keys(0), "was emptied and is not all written back"),
    "midway through the keys": (stop_after_keys(3), "was emptied and is not all written back"),
    "at ctrl-c midway through the keys": (
        stop_after_keys(3, KeyboardInterrupt()),
        "was emptied and is not all written back",
    ),
    "putting the Secrets back": ("secrets", "is back, its identity Secrets not all"),
    "waking": ("wake", "identity Secrets are back; waking it did not finish"),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_a_restore_stopped_at_any_step_says_what_is_left_and_run_again_completes(etcd, tmp_path, monkeypatch, step):
    before = contents(etcd, PREFIX)
    path, _ = take(etcd, TENANT, SECRETS, tmp_path / "snapshots", WHEN)
    put(etcd, f"{PREFIX}configmaps/default/made-later".encode(), b"later")
    after_the_snapshot = contents(etcd, PREFIX)
    how, left = STEPS[step]
    log: list[str] = []
    restored: list[dict] = []

    @contextlib.contextmanager
    def hold():
        if how is None:
            raise Stop("the API server pods did not go within 180s")
        log.append("held")
        yield
        if how == "wake" and log.count("held") == 1:
            raise Stop("the TenantControlPlane is not Ready after 600s")
        log.append("woken")

    def restore_secrets(secrets):
        if how == "secrets" and not restored:
            restored.append({})
            raise Stop("secrets is forbidden")
        restored.append(secrets)

    if callable(how):
        how(monkeypatch)
    with pytest.raises(Stop if left is None else Unfinished) as stopped:
        restore(etcd, path, TENANT, hold, restore_secrets)
    if left is None:
        assert contents(etcd, PREFIX) == after_the_snapshot  # nothing deleted
    else:
        assert f"Tenant {TENANT.tenant}" in str(stopped.value) and f"{PREFIX} " in str(stopped.value)
        assert left in str(stopped.value)
    assert "woken" not in log

    monkeypatch.undo()
    if how is None:

        @contextlib.contextmanager
        def hold():  # the API server pods are gone now
            log.append("held")
            yield
            log.append("woken")

    done = restore(etcd, path, TENANT, hold, restore_secrets)
    assert contents(etcd, PREFIX) == before
    assert restored[-1] == SECRETS and log[-2:] == ["held", "woken"]
    assert done.written == len(before)


# --- a snapshot killed with SIGKILL ---------------------------------------------------------------------------


def wait_forever(ready: str) -> None:
    Path(ready).touch()
    time.sleep(600)


def take_until_killed(connection: tuple, directory: str, scratch: str, ready: str, where: str) -> None:
    """In a child process, with a client of its own on connection (address, CA, certificate, key): take a snapshot
    and stop, waiting to be killed, where told."""
    tempfile.tempdir = scratch
    client = EtcdClient(*connection)
    progress = Progress()
    if where == "streaming keys":
        progress = Progress(lambda keys, size: wait_forever(ready) if keys >= 3 else None, every=1)
    else:  # the archive is complete in scratch, not yet under its name
        made = archive.write_archive

        def write_then_wait(*args):
            made(*args)
            wait_forever(ready)

        archive.write_archive = write_then_wait
    core.take(client, TENANT, SECRETS, Path(directory), WHEN, progress)


@pytest.mark.parametrize("where", ["streaming keys", "with the archive written"])
def test_a_snapshot_killed_midway_leaves_nothing_under_the_snapshots_directory(etcd, tmp_path, scratch_root, where):
    directory, ready = tmp_path / "snapshots", tmp_path / "ready"
    child = multiprocessing.get_context("spawn").Process(
        target=take_until_killed,
        args=((etcd.address, etcd.ca, etcd.cert, etcd.key), str(directory), str(scratch_root), str(ready), where),
    )
    child.start()
    try:
        deadline = time.monotonic() + KILL_TIMEOUT
        while not ready.exists():
            assert child.is_alive() and time.monotonic() < deadline, "the child never reached the kill point"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
    finally:
        if child.is_alive():
            child.kill()
    assert child.exitcode == -signal.SIGKILL
    assert list(directory.iterdir()) == []
    # What the kill left is in the private scratch directory, 0700, outside snapshots/.
    (left,) = scratch_root.iterdir()
    assert stat.S_IMODE(left.stat().st_mode) == 0o700 and archive.KEYS in {p.name for p in left.iterdir()}


def test_across_file_systems_the_snapshot_is_copied_in_whole_and_no_partial_stays(
    etcd, tmp_path, scratch_root, monkeypatch
):
    def other_file_system(source, destination):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", other_file_system)
    path, manifest = take(etcd, TENANT, SECRETS, tmp_path / "snapshots", WHEN)
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert archive.verify(path).manifest.body() == manifest.body()
    assert scratch_entries(scratch_root) == []


@pytest.mark.parametrize("link", [True, False])
def test_a_snapshot_never_replaces_a_file_that_appeared_under_its_name_meanwhile(
    etcd, tmp_path, scratch_root, monkeypatch, link
):
    directory = tmp_path / "snapshots"
    made = archive.write_archive

    def another_take_wins(path, *args):
        made(path, *args)
        (directory / core.file_name(TENANT.tenant, WHEN)).write_bytes(b"the other take's")

    monkeypatch.setattr(archive, "write_archive", another_take_wins)
    if not link:
        monkeypatch.setattr(os, "link", lambda source, destination: (_ for _ in ()).throw(OSError(errno.EXDEV, "")))
    with pytest.raises(FileExistsError):
        take(etcd, TENANT, SECRETS, directory, WHEN)
    assert [(p.name, p.read_bytes()) for p in directory.iterdir()] == [
        (core.file_name(TENANT.tenant, WHEN), b"the other take's")
    ]
    assert scratch_entries(scratch_root) == []
