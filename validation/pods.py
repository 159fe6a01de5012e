"""Reading pod state: phases, scheduler messages and HAMi's device annotation."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from validation.answers import annotations, mapping, objects, text
from validation.host import Clock, poll
from validation.kube import Kubectl, condition, explain, name_of
from validation.results import CheckFailed

ALLOCATED_ANNOTATION = "hami.io/vgpu-devices-allocated"
_DIGITS = re.compile(r"[0-9]+")  # not str.isdigit, which also takes "²"


@dataclass(frozen=True)
class VgpuAllocation:
    uuid: str
    vendor: str
    memory_mib: int
    cores: int

    def __str__(self) -> str:
        return f"{self.uuid} ({self.memory_mib} MiB, {self.cores}% cores)"


def vgpu_allocations(pod: dict[str, Any]) -> list[VgpuAllocation]:
    """The GPU slices HAMi assigned, from an annotation like "GPU-a1,NVIDIA,4096,25:;"; the one decoder of it.

    Containers are separated by ";", devices within a container by ":"; a device not in that form is left out.
    """
    raw = annotations(pod, f"pod {name_of(pod)}").get(ALLOCATED_ANNOTATION, "")
    allocations = []
    for container in raw.split(";"):
        for device in container.split(":"):
            fields = device.split(",")
            if len(fields) >= 4 and _DIGITS.fullmatch(fields[2]) and _DIGITS.fullmatch(fields[3]):
                allocations.append(VgpuAllocation(fields[0], fields[1], int(fields[2]), int(fields[3])))
    return allocations


def phase(pod: dict[str, Any]) -> str:
    return text(mapping(pod, "status", f"pod {name_of(pod)}"), "phase", f"pod {name_of(pod)}") or "Unknown"


def describe_pod(pod: dict[str, Any]) -> str:
    """The phase plus whatever explains it: container waiting reasons, scheduler message."""
    details = []
    where = f"pod {name_of(pod)}"
    for container in objects(mapping(pod, "status", where), "containerStatuses", where):
        state = mapping(container, "state", where)
        stuck = mapping(state, "waiting", where) or mapping(state, "terminated", where)
        if stuck:
            details.append(explain(stuck))
    scheduled = condition(pod, "PodScheduled")
    if scheduled.get("status") == "False":
        details.append(explain(scheduled))
    return f"{phase(pod)} ({'; '.join(details)})" if details else phase(pod)


def scheduler_messages(kubectl: Kubectl, namespace: str, pod: dict[str, Any]) -> list[str]:
    """What the schedulers said about a pod: its events and its PodScheduled condition."""
    name = name_of(pod)
    events = kubectl.items("events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")
    messages = [explain(event) for event in events]
    scheduled = condition(pod, "PodScheduled")
    if scheduled.get("message"):
        messages.append(explain(scheduled))
    return messages


def wait_until_running(clock: Clock, kubectl: Kubectl, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    def probe() -> tuple[bool, dict[str, Any]]:
        pod = kubectl.get("pod", name, "-n", namespace)
        return phase(pod) in ("Running", "Succeeded", "Failed"), pod

    finished, pod = poll(clock, timeout, probe)
    if phase(pod) != "Running":
        when = "ended" if finished else f"is not Running after {timeout:.0f}s"
        raise CheckFailed(f"pod {name} {when}: {describe_pod(pod)}")
    return pod


def wait_for_refusal(clock: Clock, kubectl: Kubectl, namespace: str, name: str, reason: str, timeout: float) -> str:
    """Wait until a scheduler says the pod cannot fit, naming reason; return what it said."""

    def probe() -> tuple[bool, tuple[dict[str, Any], list[str]]]:
        pod = kubectl.get("pod", name, "-n", namespace)
        if phase(pod) != "Pending":
            return True, (pod, [])
        messages = scheduler_messages(kubectl, namespace, pod)
        return any(reason in message for message in messages), (pod, messages)

    _, (pod, messages) = poll(clock, timeout, probe)
    if phase(pod) != "Pending":
        raise CheckFailed(f"pod {name} should fit nowhere, yet it is {describe_pod(pod)}")
    for message in messages:
        if reason in message:
            return message
    raise CheckFailed(
        f"pod {name} is Pending but nothing says {reason} after {timeout:.0f}s; "
        f"scheduler messages: {'; '.join(messages) or 'none'}"
    )
