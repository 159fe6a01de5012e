"""`python -m snapshot` holding a tenant, against hand-made management-cluster answers (tests/fixtures/snapshot/)
and the real etcd: the hold waits until no API server pod is left, terminating ones included; every refusal
before the delete says nothing changed, every stop after it says what is left and how to finish; a tenant held by
an unfinished restore is not snapshotted; a tenant asleep by its config is said to stay asleep."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from snapshot.__main__ import main
from snapshot.etcd import EtcdFailed, PrefixWriter
from snapshot.live import HOLD_ANNOTATION
from tests.snapshot_etcd import contents, put, root
from tests.test_snapshot_live import OUTPUTS, SCHEMA, ManagementCluster, WallClock
from tests.test_validation import FakeLab, ok

PREFIX = f"/{SCHEMA}/"
TERMINATING = json.loads((Path(__file__).parent / "fixtures/snapshot/pods-tenant-a-terminating.json").read_text())
(POD,) = TERMINATING["items"]
SELECTOR = "kamaji.clastix.io/name=tenant-a"  # Kamaji's selector in the recorded Deployment
PODS = r"^get pods -n tenants -l kamaji\.clastix\.io/name=tenant-a -o json"


def run(lab: FakeLab, tmp_path: Path, *args: str, sleeping: bool = False) -> tuple[int, str]:
    """python -m snapshot on the recorded outputs; sleeping: tenant-a's config keeps it asleep."""
    outputs = json.loads(OUTPUTS.read_text())
    outputs["tenants"]["tenant-a"]["sleeping"] = sleeping
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs))
    out = io.StringIO()
    code = main(["--outputs", str(path), *args], runner=lab, clock=WallClock(), stdout=out)
    return code, out.getvalue()


def seeded(real_etcd, tmp_path) -> tuple[Path, ManagementCluster, FakeLab, dict[bytes, bytes]]:
    """A snapshot of tenant-a, then a change to it, and the lab to restore it in."""
    etcd = root(real_etcd)
    for name in ("kube-root-ca.crt", "settings"):
        put(etcd, f"{PREFIX}configmaps/default/{name}".encode(), b"k8s\x00" + name.encode())
    cluster = ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
    code, said = run(lab, tmp_path, "take", "tenant-a")
    assert code == 0, said
    (snapshot,) = (tmp_path / "snapshots").iterdir()
    saved = contents(etcd, PREFIX)
    put(etcd, f"{PREFIX}configmaps/default/made-later".encode(), b"later")
    return snapshot, cluster, lab, saved


def test_the_hold_waits_until_no_pod_matches_the_deployments_selector_terminating_ones_included(
    real_etcd, port_forward, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    snapshot, cluster, lab, saved = seeded(real_etcd, tmp_path)
    unchanged = contents(root(real_etcd), PREFIX)
    seen_while_terminating = []
    answers = iter([TERMINATING, TERMINATING])

    def pods(command: str):
        listing = next(answers, {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": []})
        if listing["items"]:
            seen_while_terminating.append(contents(root(real_etcd), PREFIX))
        return ok(listing)

    lab.on("management", PODS, pods)
    code, said = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 0, said
    # The Deployment said 0 replicas all along; the prefix stayed as it was while the pod was still terminating.
    assert seen_while_terminating == [unchanged, unchanged]
    assert contents(root(real_etcd), PREFIX) == saved
    assert f"waiting until no pod in tenants matches its API server Deployment's selector {SELECTOR}" in said
    assert "terminating ones included" in said


def test_api_server_pods_that_do_not_go_stop_the_restore_before_the_delete_naming_them(
    real_etcd, port_forward, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    snapshot, cluster, lab, _ = seeded(real_etcd, tmp_path)
    unchanged = contents(root(real_etcd), PREFIX)
    lab.on("management", PODS, ok(TERMINATING))
    code, _ = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    err = capsys.readouterr().err
    assert code == 1
    assert "tenant tenant-a is not asleep after 180s: pods still match " in err
    assert f"{SELECTOR}: {POD['metadata']['name']} (terminating)" in err
    assert "etcd was not changed" in err and "make restore TENANT=tenant-a" in err
    assert contents(root(real_etcd), PREFIX) == unchanged
    assert cluster.replicas() == 0 and HOLD_ANNOTATION in cluster.tcp["metadata"]["annotations"]


def test_a_deployment_without_a_selector_stops_the_restore_before_the_delete(
    real_etcd, port_forward, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    snapshot, cluster, lab, _ = seeded(real_etcd, tmp_path)
    unchanged = contents(root(real_etcd), PREFIX)
    lab.on("management", r"^get deployment tenant-a -n tenants -o json", ok({"spec": {"selector": {}}}))
    code, _ = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 1
    assert "deployment tenants/tenant-a has no spec.selector.matchLabels" in capsys.readouterr().err
    assert contents(root(real_etcd), PREFIX) == unchanged


def test_a_refusal_says_nothing_changed_and_a_stop_after_the_delete_says_the_prefix_was_emptied(
    real_etcd, port_forward, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    snapshot, cluster, lab, saved = seeded(real_etcd, tmp_path)
    good = snapshot.read_bytes()
    snapshot.write_bytes(good[:-100])
    code, _ = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 1 and f"{snapshot} refused, nothing changed: the file is truncated" in capsys.readouterr().err

    snapshot.write_bytes(good)
    real_put = PrefixWriter.put

    def lost(self, key):
        raise EtcdFailed("etcdctl txn failed: connection lost")

    monkeypatch.setattr(PrefixWriter, "put", lost)
    code, _ = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    err = capsys.readouterr().err
    assert code == 1
    assert err == (
        "snapshot: restore of tenant-a stopped: etcdctl txn failed: connection lost. Tenant tenant-a is held asleep; "
        f"its etcd prefix {PREFIX} was emptied and is not all written back. To finish, run the restore again: "
        f"`make restore TENANT=tenant-a SNAPSHOT={snapshot}`.\n"
    )
    assert contents(root(real_etcd), PREFIX) == {} and cluster.replicas() == 0

    monkeypatch.setattr(PrefixWriter, "put", real_put)
    code, said = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 0, said
    assert contents(root(real_etcd), PREFIX) == saved and cluster.replicas() == 1


def test_the_command_to_finish_quotes_a_file_name_for_the_shell(real_etcd, port_forward, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    snapshot, cluster, lab, _ = seeded(real_etcd, tmp_path)
    spaced = snapshot.rename(tmp_path / "my snapshot.tar.gz")

    def lost(self, key):
        raise EtcdFailed("etcdctl txn failed: connection lost")

    monkeypatch.setattr(PrefixWriter, "put", lost)
    assert run(lab, tmp_path, "restore", "tenant-a", str(spaced))[0] == 1
    assert f"`make restore TENANT=tenant-a SNAPSHOT='{spaced}'`" in capsys.readouterr().err


def test_a_tenant_held_by_an_unfinished_restore_is_not_snapshotted(
    real_etcd, port_forward, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    put(root(real_etcd), f"{PREFIX}configmaps/default/settings".encode(), b"half restored")
    cluster = ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
    cluster.tcp["metadata"].setdefault("annotations", {})[HOLD_ANNOTATION] = "1"
    cluster.tcp["spec"]["controlPlane"]["deployment"]["replicas"] = 0
    code, said = run(lab, tmp_path, "take", "tenant-a")
    err = capsys.readouterr().err
    assert code == 1, said
    assert err.startswith("snapshot: take of tenant-a refused, nothing written: a restore that did not finish")
    assert HOLD_ANNOTATION in err and "`make restore TENANT=tenant-a SNAPSHOT=" in err
    assert not (tmp_path / "snapshots").exists() or list((tmp_path / "snapshots").iterdir()) == []
    assert not port_forward.exists() or "port-forward" not in port_forward.read_text()  # no root credentials
    assert cluster.events == []


@pytest.mark.parametrize("sleeping", [False, True])
def test_the_restore_says_whether_api_servers_started_or_the_tenant_sleeps_by_its_config(
    real_etcd, port_forward, tmp_path, monkeypatch, sleeping
):
    monkeypatch.chdir(tmp_path)
    snapshot, cluster, lab, saved = seeded(real_etcd, tmp_path)
    if sleeping:  # `make sleep`: the stack asks Kamaji for no replicas
        cluster.tcp["spec"]["controlPlane"]["deployment"]["replicas"] = 0
        cluster.tcp["status"]["kubernetesResources"]["version"]["status"] = "Sleeping"
    code, said = run(lab, tmp_path, "restore", "tenant-a", str(snapshot), sleeping=sleeping)
    assert code == 0, said
    assert contents(root(real_etcd), PREFIX) == saved
    started = "API servers restarted"
    asleep = "no API server started, as it sleeps by its config (sleeping: true): `make wake TENANT=tenant-a`"
    assert (asleep in said, started in said) == (sleeping, not sleeping)
    assert cluster.replicas() == (0 if sleeping else 1)


@pytest.mark.parametrize("when", ["waiting for the pods to go", "writing the keys"])
def test_ctrl_c_says_whether_etcd_changed_and_how_to_finish(
    real_etcd, port_forward, tmp_path, monkeypatch, capsys, when
):
    monkeypatch.chdir(tmp_path)
    snapshot, cluster, lab, saved = seeded(real_etcd, tmp_path)
    unchanged = contents(root(real_etcd), PREFIX)

    def interrupted(*args):
        raise KeyboardInterrupt

    if when == "writing the keys":
        monkeypatch.setattr(PrefixWriter, "put", interrupted)
    else:
        lab.on("management", PODS, interrupted)
    code, _ = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    err = capsys.readouterr().err
    assert code == 1 and f"`make restore TENANT=tenant-a SNAPSHOT={snapshot}`" in err
    if when == "writing the keys":
        assert err.startswith("snapshot: restore of tenant-a stopped: KeyboardInterrupt. Tenant tenant-a is held")
        assert f"prefix {PREFIX} was emptied" in err and contents(root(real_etcd), PREFIX) == {}
    else:
        assert err.startswith("snapshot: restore of tenant-a interrupted. etcd was not changed; if the tenant was")
        assert contents(root(real_etcd), PREFIX) == unchanged
    assert cluster.replicas() == 0
