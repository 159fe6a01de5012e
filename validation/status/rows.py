"""The rows: each tenant's state, and the management cluster's, as the plain data `--json` prints.

A cluster that could not be read, or answered in a shape its API never has, is reported in its row.
The TypedDicts below declare that document, key for key and in the order it prints them.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any, Literal, TypedDict

from validation.answers import MalformedAnswer, mapping, named, objects, text
from validation.checks.datastore import between_stores, used_store
from validation.checks.hami import registered_devices
from validation.checks.tenancy import SLEEPING, host_port, tcp_status
from validation.kube import condition, explain
from validation.pods import vgpu_allocations
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import Tenant, UnreadableTenant

# Project-HAMi/HAMi pkg/device/devices.go@v2.10.0 (DeviceInfo, MarshalNodeDevices): a JSON list of
# devices, each with id, index, count (slots), devmem (MiB), devcore, type and health, all omitempty.
# Pods that ended hold no slice: HAMi's scheduler counts only pods that are not finished.
FINISHED_PHASES = ("Succeeded", "Failed")
# Requests that make a pod a GPU pod (HAMi's NVIDIA resource names, charts/hami/values.yaml@v2.10.0).
GPU_RESOURCE_PREFIX = "nvidia.com/"


class Slots(TypedDict):
    used: int
    total: int


class Allocated(TypedDict):
    allocated: int
    total: int


class PodSlice(TypedDict):
    """A pod's share of one GPU."""

    namespace: str
    name: str
    memoryMiB: int
    cores: int


class Gpu(TypedDict):
    """A GPU as HAMi registers it, with what the pods on it hold."""

    node: str
    index: int
    uuid: str
    model: str
    healthy: bool
    slots: Slots
    memoryMiB: Allocated
    cores: Allocated
    pods: list[PodSlice]


class Totals(TypedDict):
    """A tenant's GPUs added up."""

    gpus: int
    healthy: int
    slots: Slots
    memoryMiB: Allocated
    cores: Allocated


class Nodes(TypedDict):
    ready: int
    total: int
    missing: list[str]
    """Workers of the outputs without a Node."""
    notReady: list[str]


class GpuGap(TypedDict):
    """A worker that registers fewer GPUs of a model than it is configured with."""

    worker: str
    model: str
    registered: int
    configured: int


class UnhealthyGpu(TypedDict):
    node: str
    index: int
    uuid: str


class GpuHealth(TypedDict):
    missing: list[GpuGap]
    unhealthy: list[UnhealthyGpu]


class PendingPod(TypedDict):
    namespace: str
    name: str
    reason: str


class QuotaAmount(TypedDict):
    used: str
    hard: str


class QuotaUsage(TypedDict):
    namespace: str
    name: str
    resources: dict[str, QuotaAmount]


class ClusterState(TypedDict):
    """The fields of a row read from the tenant's own API server."""

    version: str
    nodes: Nodes
    gpus: list[Gpu]
    gpuHealth: GpuHealth
    totals: Totals
    pending: list[PendingPod]
    quotas: list[QuotaUsage]


class TenantRow(TypedDict):
    """One tenant; every row has these keys, whatever could be read."""

    name: str
    endpoint: str
    version: str | None
    reachable: bool
    error: str | None
    """Why the cluster could not be read, or the internal error that stopped its row."""
    internalError: bool
    healthy: bool
    problems: list[str]
    controlPlaneReady: bool | None
    """None: the management cluster could not tell."""
    dataStore: str | None
    """The DataStore the TenantControlPlane says the tenant's data is in; None: the management cluster could not
    tell."""
    nodes: Nodes
    gpus: list[Gpu]
    gpuHealth: GpuHealth
    totals: Totals
    pending: list[PendingPod]
    quotas: list[QuotaUsage]
    asleep: bool


class Holds(TypedDict):
    """What a sleeping tenant keeps, from the stack outputs."""

    address: str
    workers: list[str]
    gpus: int
    gpuMemoryMiB: int
    gpuDevices: Literal["real", "mock"]


class AsleepRow(TenantRow):
    """A sleeping tenant: an awake tenant's keys, nothing of its cluster read, and these two."""

    controlPlaneState: str | None
    holds: Holds


class Management(TypedDict):
    reachable: bool
    error: str | None
    internalError: bool


class Document(TypedDict):
    """What `--json` prints for one refresh."""

    ok: bool
    refreshed: str
    """UTC, as 2026-09-14T08:32:05Z."""
    management: Management
    tenants: list[TenantRow | AsleepRow]


# (namespace, name) -> TenantControlPlane, as gather reads them from the management cluster.
ControlPlanes = dict[tuple[str, str], dict[str, Any]]


def expected(answer: Exception) -> bool:
    """A cluster that could not be read or answered malformed; anything else a reader raises is a bug."""
    return isinstance(answer, TimeoutError | CheckFailed | CheckSkipped)


def reason(answer: Exception) -> str:
    return str(answer) if expected(answer) else f"internal error: {type(answer).__name__}: {answer}"


def empty_row(tenant: Tenant | UnreadableTenant) -> TenantRow:
    """A tenant's row before anything is known: every key, nothing healthy."""
    return {
        "name": tenant.name,
        "endpoint": tenant.endpoint,
        "version": None,
        "reachable": False,
        "error": None,
        "internalError": False,
        "healthy": False,
        "problems": [],
        "controlPlaneReady": None,
        "dataStore": None,
        "nodes": {"ready": 0, "total": 0, "missing": [], "notReady": []},
        "gpus": [],
        "gpuHealth": {"missing": [], "unhealthy": []},
        "totals": totals([]),
        "pending": [],
        "quotas": [],
        "asleep": False,
    }


def unreadable_status(tenant: UnreadableTenant, tcps: ControlPlanes | Exception) -> TenantRow:
    """A tenant whose entry in the stack outputs cannot be used: nothing of its cluster is read, the row says why."""
    row = empty_row(tenant)
    row.update(error=f"stack outputs: {tenant.reason}", problems=["unreadable in the stack outputs"])
    return row


def tenant_status(tenant: Tenant, answer: dict[str, Any] | Exception, tcps: ControlPlanes | Exception) -> TenantRow:
    """One tenant's state as plain data; a cluster that could not be read, or answered in a shape its
    API never has, is reported in the row (error), not raised."""
    status = empty_row(tenant)
    problems = status["problems"]
    if isinstance(tcps, Exception):
        problems.append("control plane unknown (management cluster not read)")
    else:
        try:
            ready, plane_problems = control_plane(tenant, tcps)
            store, store_problems = data_store(tenant, tcps)
        except MalformedAnswer as error:
            problems.append(f"control plane unknown ({error})")
        else:
            status["controlPlaneReady"], status["dataStore"] = ready, store
            problems += plane_problems + store_problems
    if isinstance(answer, Exception) and not expected(answer):
        return internal_error(status, answer)
    if isinstance(answer, Exception):
        status["error"] = reason(answer)
        problems.append("cluster not read")
        return status
    status["reachable"] = True
    try:
        read, read_problems = cluster_state(tenant, answer)
    except MalformedAnswer as error:  # nothing half-read is shown: the row says what could not be read
        status["error"] = f"malformed answer: {error}"
        problems.append("malformed answer")
    else:
        status.update(read)
        problems += read_problems
    status["healthy"] = not problems
    return status


def control_plane(tenant: Tenant, tcps: ControlPlanes) -> tuple[bool, list[str]]:
    """Whether Kamaji reports the tenant's control plane Ready, and the problem if not."""
    tcp = tcps.get((tenant.namespace, tenant.name))
    if tcp is None:
        return False, [f"no TenantControlPlane {tenant.namespace}/{tenant.name}"]
    phase = tcp_status(tcp)
    ready = phase == "Ready"
    return ready, [] if ready else [f"control plane {phase or 'without status'}, not Ready"]


def data_store(tenant: Tenant, tcps: ControlPlanes) -> tuple[str | None, list[str]]:
    """The DataStore the tenant's TenantControlPlane says its data is in, and the problem while it moves."""
    tcp = tcps.get((tenant.namespace, tenant.name))
    if tcp is None:
        return None, []
    where = f"TenantControlPlane {tenant.namespace}/{tenant.name}"
    text(mapping(tcp, "spec", where), "dataStore", where)  # MalformedAnswer unless each is a string, or absent
    text(mapping(mapping(tcp, "status", where), "storage", where), "dataStoreName", where)
    moving = between_stores(tcp)
    return used_store(tcp) or None, [f"not on one DataStore: {moving}"] if moving else []


def cluster_state(tenant: Tenant, answer: dict[str, Any]) -> tuple[ClusterState, list[str]]:
    """The row's fields read from the tenant's answers, and its problems; MalformedAnswer if one is malformed."""
    nodes, pods = answer["nodes"], answer["pods"]
    names = [named(node, f"node {position}")[1] for position, node in enumerate(nodes)]
    missing = [worker for worker in tenant.workers if worker not in names]
    ready = [condition(node, "Ready").get("status") == "True" for node in nodes]
    not_ready = [name for name, is_ready in zip(names, ready, strict=True) if not is_ready]
    found = gpus(nodes, pods)
    health = gpu_health(tenant, found, set(names))
    problems = [f"worker {worker} has no Node" for worker in missing]
    problems += [f"node {name} not Ready" for name in not_ready]
    problems += [
        f"worker {gap['worker']} registers {gap['registered']} of {gap['configured']} {gap['model']}"
        for gap in health["missing"]
    ]
    problems += [f"GPU {gpu['node']}/{gpu['index']} ({gpu['uuid']}) unhealthy" for gpu in health["unhealthy"]]
    read: ClusterState = {
        "version": answer["version"],
        "nodes": {"ready": len(nodes) - len(not_ready), "total": len(nodes), "missing": missing, "notReady": not_ready},
        "gpus": found,
        "gpuHealth": health,
        "totals": totals(found),
        "pending": pending_gpu_pods(pods),
        "quotas": [quota_usage(quota) for quota in answer["quotas"]],
    }
    return read, problems


def gpu_health(tenant: Tenant, found: list[Gpu], nodes: set[str]) -> GpuHealth:
    """GPUs each worker with a Node registers short of its configured ones, per model, and the unhealthy ones.

    A tenant with real GPUs configures none (its machines' plugin finds them), so only their health counts.
    """
    missing: list[GpuGap] = []
    for worker in tenant.workers if not tenant.real_gpus else ():
        if worker not in nodes:
            continue  # reported as a worker without a Node
        for gpu in tenant.gpus_per_worker:
            registered = sum(1 for card in found if card["node"] == worker and card["model"] == gpu.model)
            if registered < gpu.count:
                gap: GpuGap = {"worker": worker, "model": gpu.model, "registered": registered, "configured": gpu.count}
                missing.append(gap)
    unhealthy: list[UnhealthyGpu] = [
        {"node": gpu["node"], "index": gpu["index"], "uuid": gpu["uuid"]} for gpu in found if not gpu["healthy"]
    ]
    return {"missing": missing, "unhealthy": unhealthy}


def asleep_status(tenant: Tenant, tcps: ControlPlanes | Exception) -> AsleepRow:
    """A sleeping tenant: what it still holds, from the outputs; healthy once Kamaji reports it Sleeping.

    The keys of an awake tenant's row stay, empty: nothing of its nodes, pods or quotas is read.
    """
    problems: list[str] = []
    state = store = None
    if isinstance(tcps, Exception):
        problems.append("control plane unknown (management cluster not read)")
    elif (tcp := tcps.get((tenant.namespace, tenant.name))) is None:
        problems.append(f"no TenantControlPlane {tenant.namespace}/{tenant.name}")
    else:
        try:
            state = tcp_status(tcp)
        except MalformedAnswer as error:  # as for an awake tenant: unhealthy, its state and DataStore unknown
            problems.append(f"control plane unknown ({error})")
        else:
            if state != SLEEPING:
                problems.append(f"control plane {state or 'without status'}, not {SLEEPING}: run pulumi up")
            try:
                store, store_problems = data_store(tenant, tcps)
            except MalformedAnswer as error:
                store_problems = [f"DataStore unknown ({error})"]
            problems += store_problems
    cards = sum(gpu.count for gpu in tenant.gpus_per_worker) * len(tenant.workers)
    # The keys an awake row has keep their places; the two of a sleeping tenant come last.
    return {
        **empty_row(tenant),
        "version": tenant.kubernetes_version,
        "healthy": not problems,
        "problems": problems,
        "controlPlaneReady": None if isinstance(tcps, Exception) else False,
        "dataStore": store,
        "asleep": True,
        "controlPlaneState": state or None,
        "holds": {
            "address": host_port(tenant.endpoint)[0],
            "workers": list(tenant.workers),
            "gpus": cards,
            "gpuMemoryMiB": sum(gpu.memory_mib * gpu.count for gpu in tenant.gpus_per_worker) * len(tenant.workers),
            "gpuDevices": "real" if tenant.real_gpus else "mock",
        },
    }


def gpus(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[Gpu]:
    """Every registered GPU with the slots, memory and cores that pods hold on it."""
    slices: dict[str, list[PodSlice]] = {}
    for position, pod in enumerate(pods):
        namespace, name = named(pod, f"pod {position}", namespaced=True)
        where = f"pod {namespace}/{name}"
        if text(mapping(pod, "status", where), "phase", where) in FINISHED_PHASES:
            continue
        # Project-HAMi/HAMi pkg/device/devices.go@v2.10.0 (EncodeContainerDevices):
        # "<uuid>,<type>,<MiB>,<cores>:" per device, containers joined by ";".
        for allocation in vgpu_allocations(pod):
            slices.setdefault(allocation.uuid, []).append(
                {"namespace": namespace, "name": name, "memoryMiB": allocation.memory_mib, "cores": allocation.cores}
            )
    result: list[Gpu] = []
    for position, node in enumerate(nodes):
        _, node_name = named(node, f"node {position}")
        for device in registered_devices(node):
            # HAMi's scheduler skips a device whose health is false (CardNotHealth,
            # pkg/device/nvidia/device.go@v2.10.0, Fit).
            users = slices.get(device.id, [])
            result.append(
                {
                    "node": node_name,
                    "index": device.index,
                    "uuid": device.id,
                    "model": device.type,
                    "healthy": device.health,
                    # Each container's device takes a slot; a full card is refused with
                    # CardTimeSlicingExhausted (Fit, AddResourceUsage: Used++).
                    "slots": {"used": len(users), "total": device.count},
                    "memoryMiB": {"allocated": sum(u["memoryMiB"] for u in users), "total": device.devmem},
                    "cores": {"allocated": sum(u["cores"] for u in users), "total": device.devcore},
                    "pods": users,
                }
            )
    return result


def totals(found: Sequence[Gpu]) -> Totals:
    def add(key: str, part: str) -> int:
        return sum(gpu[key][part] for gpu in found)

    return {
        "gpus": len(found),
        "healthy": sum(gpu["healthy"] for gpu in found),
        "slots": {"used": add("slots", "used"), "total": add("slots", "total")},
        "memoryMiB": {"allocated": add("memoryMiB", "allocated"), "total": add("memoryMiB", "total")},
        "cores": {"allocated": add("cores", "allocated"), "total": add("cores", "total")},
    }


def wants_gpu(pod: dict[str, Any], where: str) -> bool:
    for container in objects(mapping(pod, "spec", where), "containers", where):
        resources = mapping(container, "resources", where)
        for amounts in (mapping(resources, "limits", where), mapping(resources, "requests", where)):
            if any(key.startswith(GPU_RESOURCE_PREFIX) for key in amounts):
                return True
    return False


def pending_gpu_pods(pods: list[dict[str, Any]]) -> list[PendingPod]:
    """GPU pods no scheduler could place, with why.

    The reason comes from the pod's PodScheduled condition, not from events: kube-scheduler writes
    the same message to both (kubernetes/kubernetes pkg/scheduler/schedule_one.go,
    handleSchedulingFailure, at 003b446), the condition is already in the pod list (no extra call)
    and holds the latest attempt, while FailedScheduling events are aggregated and expire.
    """
    stuck: list[PendingPod] = []
    for position, pod in enumerate(pods):
        namespace, name = named(pod, f"pod {position}", namespaced=True)
        where = f"pod {namespace}/{name}"
        if text(mapping(pod, "status", where), "phase", where) != "Pending" or not wants_gpu(pod, where):
            continue
        scheduled = condition(pod, "PodScheduled")
        if scheduled.get("status") == "True":
            continue  # placed; waiting for its node (image pull, volumes), not for a GPU
        why = explain(scheduled) if scheduled else "no scheduler has tried it yet (is hami-scheduler running?)"
        stuck.append({"namespace": namespace, "name": name, "reason": why})
    return stuck


def quota_usage(quota: dict[str, Any]) -> QuotaUsage:
    # The quota controller writes status after the quota is created; a resource it has not counted yet is 0.
    namespace, name = named(quota, "ResourceQuota", namespaced=True)
    where = f"ResourceQuota {namespace}/{name}"
    state = mapping(quota, "status", where)
    hard, used = mapping(state, "hard", where), mapping(state, "used", where)
    return {
        "namespace": namespace,
        "name": name,
        "resources": {
            key: {"used": text(used, key, where) or "0", "hard": text(hard, key, where)} for key in sorted(hard)
        },
    }


def guarded_status(
    tenant: Tenant | UnreadableTenant, answer: dict[str, Any] | Exception, tcps: ControlPlanes | Exception
) -> TenantRow | AsleepRow:
    """tenant_status (asleep_status for a sleeping tenant, unreadable_status for one the outputs do not
    describe), or a row naming the internal error that stopped it: a bug shows in one row, not all."""
    try:
        if isinstance(tenant, UnreadableTenant):
            return unreadable_status(tenant, tcps)
        return asleep_status(tenant, tcps) if tenant.sleeping else tenant_status(tenant, answer, tcps)
    except Exception as error:
        return internal_error(empty_row(tenant), error)


def internal_error(row: TenantRow, error: Exception) -> TenantRow:
    """Mark a row with an error of this program (exit EXIT_INTERNAL), not of the tenant."""
    row.update(
        error=reason(error),
        internalError=True,
        healthy=False,
        problems=[*row["problems"], "internal error"],
    )
    return row


def document(
    tenants: Sequence[Tenant | UnreadableTenant],
    answers: dict[str, Any],
    tcps: ControlPlanes | Exception,
    refreshed: datetime.datetime,
) -> Document:
    """The fleet from the clusters' answers (by tenant name; a sleeping tenant has none) and the management's."""
    # A sleeping tenant was not asked, so it has no answer; asleep_status reads only Kamaji's.
    rows = [guarded_status(tenant, answers.get(tenant.name, {}), tcps) for tenant in tenants]
    return {
        "ok": all(row["healthy"] for row in rows),
        "refreshed": refreshed.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "management": {
            "reachable": not isinstance(tcps, Exception),
            "error": reason(tcps) if isinstance(tcps, Exception) else None,
            "internalError": isinstance(tcps, Exception) and not expected(tcps),
        },
        "tenants": rows,
    }
