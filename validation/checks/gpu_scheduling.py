"""Checks 8-10: HAMi schedules GPU slices, shares a GPU, and enforces gpumem quotas."""

from __future__ import annotations

from typing import Any

from validation.answers import annotations, mapping
from validation.checks.base import per_tenant
from validation.checks.hami import with_gpus
from validation.host import poll
from validation.kube import name_of, parse_quantity
from validation.lab import Lab
from validation.manifests import gpu_pod, resource_quota
from validation.pods import (
    ALLOCATED_ANNOTATION,
    VgpuAllocation,
    describe_pod,
    phase,
    vgpu_allocations,
    wait_for_refusal,
    wait_until_running,
)
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import Quota, Tenant

# The slice the lab is meant to demonstrate; smaller only when the tenant's GPUs are (slice_mib).
SLICE_MIB, SLICE_CORES = 4096, 25
SHARED_PODS = 3
POD_START_TIMEOUT = 120
# The mock plugin never releases HAMi's node lock, so each further pod on the node is bound
# only once the previous pod's lock has expired (the lab sets 5 s) and kube-scheduler retries it.
SHARING_TIMEOUT = 90
REFUSAL_TIMEOUT = 60
QUOTA_WATCH_DELAY = 3  # HAMi learns about ResourceQuotas from a watch
TOO_BIG_REASON = "CardInsufficientMemory"
QUOTA_REFUSAL = "exceeding resource quota"
# Without these, HAMi's default "spread" policy puts each slice on a different GPU.
BINPACK = {"hami.io/gpu-scheduler-policy": "binpack", "hami.io/node-scheduler-policy": "binpack"}


def slice_mib(tenant: Tenant, pods: int = 1) -> int:
    """MiB per pod so that `pods` slices fit together on the tenant's smallest GPU; SLICE_MIB if they can."""
    return max(1, min(SLICE_MIB, tenant.smallest_gpu_mib // pods))


def find_slice(pod: dict[str, Any], memory_mib: int, cores: int) -> VgpuAllocation:
    for allocation in vgpu_allocations(pod):
        if (allocation.memory_mib, allocation.cores) == (memory_mib, cores):
            return allocation
    raw = annotations(pod, f"pod {name_of(pod)}").get(ALLOCATED_ANNOTATION)
    hint = repr(raw) if raw else "missing (hami-scheduler did not place the pod)"
    raise CheckFailed(
        f"pod {name_of(pod)} runs, but {ALLOCATED_ANNOTATION} is {hint}; expected a {memory_mib} MiB / {cores}% slice"
    )


@per_tenant(
    "fractional",
    f"a {SLICE_MIB} MiB (less on small GPUs) / {SLICE_CORES}% pod runs on a GPU slice; an oversized one stays Pending",
)
def fractional(lab: Lab, tenant: Tenant) -> str:
    tenant = with_gpus(lab, tenant)
    kubectl = lab.kubectl(tenant)
    mib = slice_mib(tenant)
    oversized_mib = tenant.largest_gpu_mib + 1
    with lab.scratch_namespace(kubectl, "fractional") as namespace:
        kubectl.must_create(gpu_pod("slice", mib, SLICE_CORES), "-n", namespace)
        pod = wait_until_running(lab.clock, kubectl, namespace, "slice", POD_START_TIMEOUT)
        allocation = find_slice(pod, mib, SLICE_CORES)
        kubectl.must_create(gpu_pod("oversized", oversized_mib, SLICE_CORES), "-n", namespace)
        refusal = wait_for_refusal(lab.clock, kubectl, namespace, "oversized", TOO_BIG_REASON, REFUSAL_TIMEOUT)
    return (
        f"pod slice Running on {pod['spec'].get('nodeName', '?')} with {allocation}; "
        f"{oversized_mib} MiB pod Pending: {refusal}"
    )


@per_tenant("sharing", f"{SHARED_PODS} GPU slices run side by side on one GPU")
def sharing(lab: Lab, tenant: Tenant) -> str:
    tenant = with_gpus(lab, tenant)
    count = min(SHARED_PODS, tenant.gpu_slots)
    if count < 2:
        raise CheckSkipped(f"gpuSlots is {tenant.gpu_slots}: a GPU cannot be shared")
    kubectl = lab.kubectl(tenant)
    mib = slice_mib(tenant, count)  # all of them must fit on one GPU, whichever HAMi picks
    with lab.scratch_namespace(kubectl, "sharing") as namespace:
        for index in range(count):
            pod = gpu_pod(f"share-{index}", mib, SLICE_CORES, annotations=BINPACK)
            kubectl.must_create(pod, "-n", namespace)

        def probe() -> tuple[bool, list[dict[str, Any]]]:
            pods = kubectl.items("pods", "-n", namespace)
            return sum(phase(pod) == "Running" for pod in pods) == count, pods

        all_running, pods = poll(lab.clock, SHARING_TIMEOUT, probe)
    if not all_running:
        waiting = [f"{name_of(pod)} {describe_pod(pod)}" for pod in pods if phase(pod) != "Running"]
        raise CheckFailed(
            f"{count - len(waiting)}/{count} pods Running after {SHARING_TIMEOUT}s: " + "; ".join(waiting)
        )
    devices = {name_of(pod): {a.uuid for a in vgpu_allocations(pod)} for pod in pods}
    common = set.intersection(*devices.values())
    if not common:
        placement = ", ".join(f"{name} on {'/'.join(sorted(uuids)) or 'no GPU'}" for name, uuids in devices.items())
        raise CheckFailed(f"pods run, but not on one GPU: {placement}")
    return f"{count} pods of {mib} MiB / {SLICE_CORES}% Running on {min(common)}"


def quota_mismatches(quota: Quota, objects: list[dict[str, Any]]) -> list[str]:
    """Where the namespace's ResourceQuotas differ from the configured limits."""
    hard: dict[str, str] = {}
    for obj in objects:
        hard.update(mapping(mapping(obj, "spec", name_of(obj)), "hard", f"ResourceQuota {name_of(obj)}"))
    return [
        f"namespace {quota.namespace}: {key} is {hard.get(key) or 'not set'}, expected {want}"
        for key, want in quota.hard.items()
        if parse_quantity(hard.get(key, "")) != want
    ]


@per_tenant("quota", "configured quotas exist; HAMi refuses a pod beyond a gpumem quota")
def quota(lab: Lab, tenant: Tenant) -> str:
    tenant = with_gpus(lab, tenant)
    kubectl = lab.kubectl(tenant)
    problems = []
    for configured in tenant.quotas:
        objects = kubectl.items("resourcequotas", "-n", configured.namespace)
        problems += quota_mismatches(configured, objects)
    if problems:
        raise CheckFailed("; ".join(problems))

    mib = slice_mib(tenant)
    with lab.scratch_namespace(kubectl, "quota") as namespace:
        hard = {"limits.nvidia.com/gpumem": str(mib)}
        kubectl.must_create(resource_quota("gpumem", hard), "-n", namespace)
        lab.clock.sleep(QUOTA_WATCH_DELAY)
        first = kubectl.create(gpu_pod("within-quota", mib, SLICE_CORES), "-n", namespace)
        if not first.ok:
            raise CheckFailed(f"a pod within the {mib} MiB quota was refused: {first.error}")
        # HAMi adds a pod to the namespace's usage only once the pod is scheduled.
        wait_until_running(lab.clock, kubectl, namespace, "within-quota", POD_START_TIMEOUT)
        second = kubectl.create(gpu_pod("beyond-quota", mib, SLICE_CORES), "-n", namespace)
    if second.ok:
        raise CheckFailed(f"a second {mib} MiB pod was admitted beyond the {mib} MiB quota")
    if QUOTA_REFUSAL not in second.stderr:
        raise CheckFailed(f"the second pod was refused, but not by HAMi's quota: {second.error}")
    configured = (
        f"quotas in {', '.join(q.namespace for q in tenant.quotas)} as configured"
        if tenant.quotas
        else "no quotas configured"
    )
    return f"{configured}; a second {mib} MiB pod beyond the {mib} MiB quota was refused: {QUOTA_REFUSAL}"
