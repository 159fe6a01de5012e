"""Checks 6-7: HAMi's webhook mutates GPU pods, and workers advertise the mock GPUs."""

from __future__ import annotations

from typing import Any

from validation.checks.base import per_tenant
from validation.kube import name_of, parse_quantity
from validation.lab import Lab
from validation.manifests import gpu_pod
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import Tenant

HAMI_SCHEDULER = "hami-scheduler"
REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
# hami-scheduler stamps "Requesting_<time>" here when it takes the node into its cache;
# nothing in the lab writes it, so its presence shows the scheduler has seen the node.
HANDSHAKE_ANNOTATION = "hami.io/node-handshake"
HANDSHAKE_PREFIX = "Requesting_"


def require_gpus(tenant: Tenant) -> None:
    if not tenant.has_gpus:
        raise CheckSkipped("the tenant has no mock GPUs")


@per_tenant("webhook", "HAMi's webhook routes a gpumem pod to hami-scheduler")
def webhook(lab: Lab, tenant: Tenant) -> str:
    require_gpus(tenant)
    kubectl = lab.kubectl(tenant)
    # Not `default`: a ResourceQuota or LimitRange there could refuse even a dry run.
    with lab.scratch_namespace(kubectl, "webhook") as namespace:
        admitted = kubectl.admit(gpu_pod("webhook-probe", 1024, 10), namespace)
    spec = admitted.get("spec", {})
    scheduler = spec.get("schedulerName", "")
    if scheduler != HAMI_SCHEDULER:
        # failurePolicy Ignore: an unreachable webhook admits the pod unchanged, silently.
        raise CheckFailed(
            f"a pod asking for nvidia.com/gpumem got schedulerName {scheduler or '(none)'}, "
            f"not {HAMI_SCHEDULER}: the hami-webhook did not mutate it"
        )
    limits = spec.get("containers", [{}])[0].get("resources", {}).get("limits", {})
    return (
        f"dry-run pod got schedulerName {HAMI_SCHEDULER} and "
        f"nvidia.com/gpu limit {limits.get('nvidia.com/gpu', '(none)')}"
    )


def allocatable_mismatches(node: dict[str, Any], expected: dict[str, int]) -> list[str]:
    allocatable = node.get("status", {}).get("allocatable", {})
    problems = []
    for resource, want in expected.items():
        have = allocatable.get(resource)
        if have is None or parse_quantity(have) != want:
            problems.append(f"{name_of(node)}: {resource} is {have or 'missing'}, expected {want}")
    return problems


@per_tenant("gpu-capacity", "workers advertise the configured mock GPUs; hami-scheduler has seen them")
def gpu_capacity(lab: Lab, tenant: Tenant) -> str:
    require_gpus(tenant)
    expected = tenant.expected_allocatable()
    nodes = {name_of(node): node for node in lab.kubectl(tenant).get("nodes")["items"]}
    problems = []
    for worker in tenant.workers:
        node = nodes.get(worker)
        if node is None:
            problems.append(f"node {worker} not found")
            continue
        problems += allocatable_mismatches(node, expected)
        annotations = node["metadata"].get("annotations") or {}
        if REGISTER_ANNOTATION not in annotations:
            problems.append(f"{worker}: annotation {REGISTER_ANNOTATION} is missing")
        handshake = annotations.get(HANDSHAKE_ANNOTATION)
        if handshake is None:
            problems.append(f"{worker}: annotation {HANDSHAKE_ANNOTATION} is missing (hami-scheduler has not seen it)")
        elif not handshake.startswith(HANDSHAKE_PREFIX):
            problems.append(f"{worker}: {HANDSHAKE_ANNOTATION} is {handshake!r}, expected {HANDSHAKE_PREFIX}<time>")
    if problems:
        raise CheckFailed("; ".join(problems))
    advertised = ", ".join(f"{resource}={value}" for resource, value in expected.items())
    return f"{', '.join(tenant.workers)} allocatable {advertised}; {HANDSHAKE_ANNOTATION} stamped by {HAMI_SCHEDULER}"
