"""`make wake` ends with the tenant's GPU pods running again (scripts/tenant_sleep.py recover).

A woken container worker is a rebooted node: its kubelet admits the pods it had again before HAMi's device plugin
registers and rejects those asking for a device-plugin resource (kubernetes/kubernetes
pkg/kubelet/cm/devicemanager/manager.go devicesToAllocate; issues #125579, #128043). The pods below are shaped as
the API returns such a pod: phase Failed, reason UnexpectedAdmissionError, and the kubelet's message "Pod was
rejected: Allocate failed due to <device manager error>, which is unexpected" (pkg/kubelet/cm/admission/errors.go,
and as squat/generic-device-plugin#33 shows it after a node reboot); no container ever started, so no
containerStatuses.
"""

from __future__ import annotations

import json

from tests.test_tenant_sleep import STACK_FILE, load_script, stack_dir
from tests.test_validation import FakeClock
from validation.host import CommandResult

tenant_sleep = load_script()

GPU_LIMITS = {"nvidia.com/gpumem": "1024", "nvidia.com/gpucores": "10"}
REJECTED = ("Pod was rejected: Allocate failed due to cannot allocate unregistered device nvidia.com/gpumem, "
            "which is unexpected")
ALLOCATED = "GPU-tenant-b-w1-0,NVIDIA,1024,10:;"  # HAMi's hami.io/vgpu-devices-allocated


def pod(name: str, phase: str, *, owner: str | None = "ReplicaSet/slept-5f8d", limits: dict | None = None,
        reason: str = "", message: str = "", ready: bool | None = None, allocated: str = "",
        deleting: bool = False, namespace: str = "default") -> dict:
    metadata: dict = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if owner:
        kind, owner_name = owner.split("/")
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": owner_name, "uid": "u",
                                        "controller": True, "blockOwnerDeletion": True}]
    if allocated:
        metadata["annotations"] = {"hami.io/vgpu-devices-allocated": allocated, "hami.io/vgpu-node": "tenant-b-w1"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-06T08:00:00Z"
    resources = {"limits": limits, "requests": limits} if limits else {}
    status: dict = {"phase": phase}
    if reason:
        status |= {"reason": reason, "message": message}
    if ready is not None:
        status["containerStatuses"] = [{"name": "busybox", "ready": ready, "restartCount": 0,
                                        "state": {"running": {"startedAt": "2026-12-06T08:00:05Z"}}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"nodeName": "tenant-b-w1", "containers": [{"name": "busybox", "image": "busybox:1.36.1",
                                                                 "resources": resources}]},
            "status": status}


def refused(name: str, **kwargs) -> dict:
    return pod(name, "Failed", limits=GPU_LIMITS, reason="UnexpectedAdmissionError", message=REJECTED, **kwargs)


def running(name: str, **kwargs) -> dict:
    return pod(name, "Running", limits=GPU_LIMITS, ready=True, allocated=ALLOCATED, **kwargs)


class TenantApi:
    """kubectl against the tenant: each `get pods` answers the next listing (the last repeats); deletes succeed."""

    def __init__(self, *listings: list[dict], get_fails: str = ""):
        self.listings, self.get_fails = listings, get_fails
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv, stdin=None, timeout=60, env=None) -> CommandResult:
        argv = tuple(argv)
        self.calls.append(argv)
        if argv[4:6] == ("get", "pods"):
            if self.get_fails:
                return CommandResult(argv, 1, "", self.get_fails)
            listing = self.listings[min(len(self.gets) - 1, len(self.listings) - 1)]
            return CommandResult(argv, 0, json.dumps({"apiVersion": "v1", "kind": "List", "items": listing}), "")
        if argv[4:6] == ("delete", "pod"):
            return CommandResult(argv, 0, f'pod "{argv[6]}" deleted\n', "")
        return CommandResult(argv, 97, "", f"no answer modelled for {argv}")

    @property
    def gets(self) -> list[tuple[str, ...]]:
        return [call for call in self.calls if call[4:6] == ("get", "pods")]

    @property
    def deletes(self) -> list[tuple[str, ...]]:
        return [call[4:] for call in self.calls if call[4:6] == ("delete", "pod")]


def recover(tmp_path, api: TenantApi, *extra: str, kubeconfig: bool = True, stack: str | None = None) -> int:
    root = stack_dir(tmp_path, *([stack] if stack else []))
    if kubeconfig:
        (root / "kubeconfigs").mkdir()
        (root / "kubeconfigs" / "tenant-b.kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    return tenant_sleep.main(["recover", "--tenant", "tenant-b", *extra], api, root, FakeClock())


def test_wake_deletes_the_gpu_pods_the_kubelet_refused_and_waits_until_their_replacements_run(tmp_path, capsys):
    api = TenantApi(
        [refused("slept-5f8d-a"), pod("web-1", "Running", ready=True), pod("train-1", "Succeeded", limits=GPU_LIMITS,
                                                                            owner="Job/train")],
        [refused("slept-5f8d-a", deleting=True), pod("slept-5f8d-b", "Pending", limits=GPU_LIMITS)],
        [pod("slept-5f8d-b", "Running", limits=GPU_LIMITS, ready=False, allocated=ALLOCATED)],
        [running("slept-5f8d-b")],
    )

    assert recover(tmp_path, api) == 0

    assert api.deletes == [("delete", "pod", "slept-5f8d-a", "-n", "default", "--ignore-not-found", "--wait=false")]
    # Each call against the tenant, with the kubeconfig `make up` wrote.
    assert all(call[:3] == ("kubectl", "--kubeconfig", str(tmp_path / "kubeconfigs" / "tenant-b.kubeconfig"))
               for call in api.calls)
    assert len(api.gets) == 4, "done only once the replacement runs, ready, with its GPU allocated"
    out = capsys.readouterr().out
    assert "deleted pod default/slept-5f8d-a, refused by its kubelet after the wake (Pod was rejected: Allocate " \
        "failed due to cannot allocate unregistered device nvidia.com/gpumem, which is unexpected), for " \
        "ReplicaSet/slept-5f8d to create again" in out
    assert out.rstrip().endswith("tenant-b: every GPU pod runs with its GPU allocated")


def test_a_replacement_refused_again_is_deleted_again(tmp_path):
    # The replacement reached a node whose plugin had not registered yet either.
    api = TenantApi([refused("slept-5f8d-a")], [refused("slept-5f8d-b")], [running("slept-5f8d-c")])

    assert recover(tmp_path, api) == 0

    assert [call[2] for call in api.deletes] == ["slept-5f8d-a", "slept-5f8d-b"]


def test_a_bare_pod_is_left_as_it_is_and_named_as_one_the_wake_cannot_bring_back(tmp_path, capsys):
    api = TenantApi([refused("notebook", owner=None, namespace="team-a"), running("slept-5f8d-a")])

    assert recover(tmp_path, api) == 1

    assert api.deletes == [], "deleting a pod no controller owns would lose it"
    err = capsys.readouterr().err
    assert "tenant-b: pod team-a/notebook (Pod was rejected: Allocate failed due to cannot allocate unregistered " \
        "device nvidia.com/gpumem, which is unexpected) was refused by its kubelet after the wake and has no " \
        "controller to create it again" in err
    assert "kubectl --kubeconfig kubeconfigs/tenant-b.kubeconfig get pod" in err


def test_wake_fails_naming_gpu_pods_that_do_not_run_with_their_gpu_allocated_in_time(tmp_path, capsys):
    api = TenantApi([pod("slept-5f8d-a", "Running", limits=GPU_LIMITS, ready=True),
                     pod("slept-5f8d-b", "Pending", limits=GPU_LIMITS, owner="StatefulSet/db")])

    assert recover(tmp_path, api, "--timeout", "30") == 1

    err = capsys.readouterr().err
    assert "GPU pods not running with their GPU allocated 30s after the wake: default/slept-5f8d-a: Running, " \
        "no GPU allocated; default/slept-5f8d-b: Pending, no GPU allocated" in err
    assert len(api.gets) > 1, "it waited before giving up"


def test_pods_without_gpus_or_failed_for_another_reason_are_left_alone(tmp_path):
    api = TenantApi([
        pod("cpu-only", "Failed", limits={"cpu": "1"}, reason="UnexpectedAdmissionError", message="Pod was rejected: "
            "Allocate failed due to not enough cpus available to satisfy request, which is unexpected"),
        pod("evicted", "Failed", limits=GPU_LIMITS, reason="Evicted", message="The node was low on resource"),
        running("slept-5f8d-a"),
    ])

    assert recover(tmp_path, api) == 0

    assert api.deletes == []


def test_without_the_tenant_s_kubeconfig_nothing_is_asked(tmp_path, capsys):
    api = TenantApi([])

    assert recover(tmp_path, api, kubeconfig=False) == 64

    assert api.calls == []
    assert "tenant-b.kubeconfig; `make up` writes it" in capsys.readouterr().err


def test_an_unreachable_tenant_fails_the_wake_saying_so(tmp_path, capsys):
    api = TenantApi(get_fails="Unable to connect to the server: dial tcp 172.30.255.3:6443: connect: no route to host")

    assert recover(tmp_path, api) == 1

    err = capsys.readouterr().err
    assert "tenant-b: cannot bring its GPU pods back: cannot reach the tenant-b API server: Unable to connect" in err
    assert "every GPU pod runs" not in capsys.readouterr().out


def test_a_tenant_still_asleep_is_not_asked(tmp_path, capsys):
    api = TenantApi([])
    asleep = STACK_FILE.replace("    - name: tenant-b\n", "    - name: tenant-b\n      sleeping: true\n")

    assert recover(tmp_path, api, stack=asleep) == 64

    assert api.calls == []
    assert "tenant tenant-b is asleep in the stack config; wake it first" in capsys.readouterr().err
