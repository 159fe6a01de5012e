"""Reading pods, their GPU slices and what the schedulers said, as the GPU checks do."""

import json
from pathlib import Path

import pytest

from tests.test_validation_host import StepClock
from validation.host import CommandResult
from validation.kube import Kubectl
from validation.pods import VgpuAllocation, describe_pod, vgpu_allocations, wait_for_refusal, wait_until_running
from validation.results import CheckFailed

# HAMi's scheduler refuses a pod too big for every GPU with this reason (Project-HAMi/HAMi
# pkg/device/common/common.go@v2.10.0, CardInsufficientMemory).
TOO_BIG = "CardInsufficientMemory"


class Cluster:
    """Answers `kubectl get pod p -n ns` and `kubectl get events -n ns --field-selector involvedObject.name=p` only."""

    def __init__(self, pods: list[dict], events: list[dict] = ()) -> None:
        self.pods = list(pods)  # one per `get pod`, the last repeated
        self.events = list(events)

    def run(self, argv, stdin=None, timeout=60.0, env=None):
        args = tuple(argv[4:])
        if args[:2] == ("get", "pod") and args[3] == "-n" and args[4] == "ns":
            reply = self.pods.pop(0) if len(self.pods) > 1 else self.pods[0]
        elif args[:6] == ("get", "events", "-n", "ns", "--field-selector", "involvedObject.name=p"):
            reply = {"kind": "EventList", "items": self.events}
        else:
            return CommandResult(tuple(argv), 1, "", f"unmodelled: {args}")
        return CommandResult(tuple(argv), 0, json.dumps(reply), "")


def kubectl(cluster: Cluster) -> Kubectl:
    return Kubectl(cluster, Path("/tmp/k"), "tenant-a")


def pod(phase: str, *container_states: dict, conditions: list[dict] = ()) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "status": {
            "phase": phase,
            "conditions": list(conditions),
            "containerStatuses": [{"name": f"c{i}", "state": s} for i, s in enumerate(container_states)],
        },
    }


def test_hamis_allocation_annotation_gives_uuid_vendor_memory_and_cores():
    # HAMi writes "uuid,type,mem,cores:" per device, ";" per container
    # (Project-HAMi/HAMi pkg/device/devices.go@v2.10.0, EncodeContainerDevices).
    value = "GPU-a1,NVIDIA,4096,25:;GPU-b,X,y,5:;"
    annotated = {"metadata": {"annotations": {"hami.io/vgpu-devices-allocated": value}}}
    assert vgpu_allocations(annotated) == [VgpuAllocation("GPU-a1", "NVIDIA", 4096, 25)]


def test_a_pod_is_described_by_its_phase_and_every_reason_it_is_stuck():
    assert describe_pod(pod("Pending")) == "Pending"
    waiting = {"waiting": {"reason": "ImagePullBackOff", "message": "busybox"}}
    crashed = {"terminated": {"reason": "Error", "message": "exit 1"}}
    assert describe_pod(pod("Failed", waiting, crashed)) == "Failed (ImagePullBackOff: busybox; Error: exit 1)"


def test_a_pod_that_ended_is_reported_at_once_not_after_the_timeout():
    clock = StepClock()
    with pytest.raises(CheckFailed) as failed:
        wait_until_running(clock, kubectl(Cluster([pod("Failed")])), "ns", "p", 120)
    assert str(failed.value) == "pod p ended: Failed"
    assert clock.now() == 0
    with pytest.raises(CheckFailed):
        wait_until_running(clock, kubectl(Cluster([pod("Succeeded")])), "ns", "p", 120)
    assert clock.now() == 0


def test_a_refusal_is_found_in_the_pods_events():
    event = {"reason": "FailedScheduling", "message": f"0/1 nodes are available: 1 {TOO_BIG}"}
    said = wait_for_refusal(StepClock(), kubectl(Cluster([pod("Pending")], [event])), "ns", "p", TOO_BIG, 60)
    assert said == f"FailedScheduling: 0/1 nodes are available: 1 {TOO_BIG}"


def test_a_pod_that_runs_instead_of_being_refused_fails_at_once():
    clock = StepClock()
    with pytest.raises(CheckFailed) as failed:
        wait_for_refusal(clock, kubectl(Cluster([pod("Running")])), "ns", "p", TOO_BIG, 60)
    assert str(failed.value) == "pod p should fit nowhere, yet it is Running"
    assert clock.now() == 0


def test_a_pending_pod_without_the_reason_lists_what_the_schedulers_did_say():
    other = {"reason": "FailedScheduling", "message": "0/1 nodes: Insufficient cpu"}
    clock = StepClock()
    with pytest.raises(CheckFailed) as failed:
        wait_for_refusal(clock, kubectl(Cluster([pod("Pending")], [other, other])), "ns", "p", TOO_BIG, 9)
    assert str(failed.value) == (
        f"pod p is Pending but nothing says {TOO_BIG} after 9s; scheduler messages: "
        "FailedScheduling: 0/1 nodes: Insufficient cpu; FailedScheduling: 0/1 nodes: Insufficient cpu"
    )
    assert clock.now() == 9  # it kept asking until the timeout
    with pytest.raises(CheckFailed) as silent:
        wait_for_refusal(StepClock(), kubectl(Cluster([pod("Pending")])), "ns", "p", TOO_BIG, 9)
    assert str(silent.value).endswith("scheduler messages: none")


def test_a_pod_still_pending_at_the_timeout_says_so():
    with pytest.raises(CheckFailed) as failed:
        wait_until_running(StepClock(), kubectl(Cluster([pod("Pending")])), "ns", "p", 6)
    assert str(failed.value) == "pod p is not Running after 6s: Pending"
