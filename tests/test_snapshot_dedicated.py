"""`python -m snapshot` on a tenant whose TenantControlPlane names a DataStore of its own: the snapshot is read from
and restored into that DataStore's etcd (a second real etcd, tests/datastores.py), and the shared one is not
touched. The rest of the management cluster is tests/test_snapshot_live.py's."""

from __future__ import annotations

import contextlib
import io

import pytest

from tests.datastores import DEDICATED, DEDICATED_MEMBER, DEDICATED_NAMESPACE, everything, on_the_dedicated_store
from tests.snapshot_etcd import etcdctl, put, root
from tests.test_snapshot_live import SCHEMA, ManagementCluster, prefix, run
from validation.exit_codes import EXIT_FAILED


def test_a_tenant_on_its_own_datastore_is_snapshot_and_restored_there_and_the_shared_one_is_untouched(
    stores, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    on_the_dedicated_store(stores, "tenant-a")
    with root(stores.dedicated) as client:
        put(client, f"/{SCHEMA}/configmaps/default/made-in-first-lab".encode(), b"k8s\x00first")
    cluster = ManagementCluster(stores.shared, stores.lab, "first-lab")
    cluster.tcp["spec"]["dataStore"] = cluster.tcp["status"]["storage"]["dataStoreName"] = DEDICATED
    shared = everything(stores.shared)
    assert not any(key.startswith(f"/{SCHEMA}/".encode()) for key in shared)
    (tmp_path / "kubectl.log").unlink()  # the clean-up's forwards

    code, said = run(stores.lab, tmp_path, "take", "tenant-a")

    assert code == 0, said
    saved = prefix(stores.dedicated)
    assert f"{len(saved)} keys" in said
    forwards = (tmp_path / "kubectl.log").read_text()
    assert f"port-forward -n {DEDICATED_NAMESPACE} pod/{DEDICATED_MEMBER} :2379" in forwards
    assert "kamaji-system" not in forwards
    (snapshot,) = (tmp_path / "snapshots").iterdir()

    with root(stores.dedicated) as client:
        etcdctl(client, "del", f"/{SCHEMA}/configmaps/default/made-in-first-lab")
        put(client, f"/{SCHEMA}/configmaps/default/made-later".encode(), b"later")
    code, said = run(stores.lab, tmp_path, "restore", "tenant-a", str(snapshot))

    assert code == 0, said
    assert prefix(stores.dedicated) == saved
    assert everything(stores.shared) == shared


@pytest.mark.parametrize(("spec", "status", "state"), [
    (DEDICATED, "default", "Migrating"),  # Kamaji's Job copies from default
    (DEDICATED, "default", "Ready"),  # the spec names the other one; Kamaji has not started yet
    ("default", "default", "Migrating"),  # an undo Kamaji has not ended yet
], ids=["copying", "not-started", "undo-pending"])  # fmt: skip
def test_take_and_restore_are_refused_while_the_tenant_is_between_datastores(
    stores, tmp_path, monkeypatch, spec, status, state
):
    monkeypatch.chdir(tmp_path)
    cluster = ManagementCluster(stores.shared, stores.lab, "first-lab")
    code, said = run(stores.lab, tmp_path, "take", "tenant-a")
    assert code == 0, said
    (snapshot,) = (tmp_path / "snapshots").iterdir()
    cluster.tcp["spec"]["dataStore"], cluster.tcp["status"]["storage"]["dataStoreName"] = spec, status
    cluster.tcp["status"]["kubernetesResources"]["version"]["status"] = state
    before, replicas = everything(stores.shared), cluster.replicas()
    (tmp_path / "kubectl.log").unlink()

    for command in (["take", "tenant-a"], ["restore", "tenant-a", str(snapshot)]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code, _ = run(stores.lab, tmp_path, *command)
        assert code == EXIT_FAILED
        nothing = "nothing changed" if command[0] == "restore" else "nothing written"
        assert f"snapshot: {command[0]} of tenant-a refused, {nothing}: tenant tenant-a is between two DataStores" \
            in err.getvalue()
        assert "make up" in err.getvalue()

    assert list((tmp_path / "snapshots").iterdir()) == [snapshot]
    assert everything(stores.shared) == before and cluster.replicas() == replicas and cluster.events == []
    assert not (tmp_path / "kubectl.log").exists()  # no DataStore was even opened
