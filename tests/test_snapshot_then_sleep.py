"""A restore, then `make sleep` and `make wake`: what the restore's hold changed on the TenantControlPlane, the
stack's next apply takes back.

The hold changes replicas with `kubectl patch`, whose field manager (kubectl-patch) then owns them; pulumi-kubernetes
applies server-side without force unless told, and takes over beforehand only kubectl's and its own client-side
managers (pulumi/pulumi-kubernetes provider/pkg/await/await.go@94977969: patchForce, fixCSAFieldManagers), so an
unforced sleep would conflict on the replicas. The stack applies the TenantControlPlane with pulumi.com/patchForce.
"""

from __future__ import annotations

import json
from typing import Any

from tests.snapshot_etcd import put, root
from tests.test_snapshot_hold import PREFIX, run
from tests.test_snapshot_live import ManagementCluster
from tests.test_tenant_versions import TCP, of_tenant
from tests.test_validation import FakeLab


def leaves(document: Any, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The paths of every value in a JSON object (a list or a scalar ends a path)."""
    if isinstance(document, dict) and document:
        return set().union(*(leaves(value, (*path, key)) for key, value in document.items()))
    return {path}


def holds_spec(document: dict[str, Any], path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(document, dict) or key not in document:
            return False
        document = document[key]
    return True


def test_every_apply_of_the_tenant_control_plane_forces_its_fields(containers):
    for plan in containers:  # up awake, sleep preview, up asleep, wake preview
        for tcp in plan.of_type(TCP):
            assert tcp.inputs["metadata"]["annotations"]["pulumi.com/patchForce"] == "true", tcp.urn


def test_a_sleep_after_a_restore_applies_with_force_every_spec_field_the_hold_patched(
    containers, real_etcd, port_forward, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    put(root(real_etcd), f"{PREFIX}configmaps/default/settings".encode(), b"k8s\x00settings")
    cluster = ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
    assert run(lab, tmp_path, "take", "tenant-a")[0] == 0
    (snapshot,) = (tmp_path / "snapshots").iterdir()
    code, said = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 0, said

    patches = [json.loads(call.command.split(" -p ", 1)[1]) for call in lab.calls if call.command.startswith("patch ")]
    patched = set().union(*(leaves(patch.get("spec", {}), ("spec",)) for patch in patches)) - {("spec",)}
    assert patched == {("spec", "controlPlane", "deployment", "replicas")}
    # The annotations the hold set are gone again: nothing of the hold is left for the stack to meet.
    added = set().union(*(patch["metadata"]["annotations"] for patch in patches if "metadata" in patch))
    assert added and not added & set(cluster.tcp["metadata"].get("annotations", {}))

    _, sleep, _, wake = containers
    for preview in (sleep, wake):
        (tcp,) = [r for r in of_tenant(preview, "a") if r.type == TCP]
        assert all(holds_spec(tcp.inputs, path) for path in patched)
        assert tcp.inputs["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
