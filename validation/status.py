"""python -m validation.status: every tenant's control plane, nodes, GPU slices and quotas at a glance.

Read-only: it only runs `kubectl get`, with the same stack outputs and kubeconfig handling as the
validation suite. The management cluster and every tenant are read side by side, each within
CLUSTER_BOUND, so one slow or unreachable cluster never holds back the others' rows.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO, TypeVar

from validation.answers import MalformedAnswer, mapping, named, objects, text
from validation.checks.hami import registered_devices
from validation.checks.tenancy import SLEEPING, TCP_RESOURCE, host_port, kubernetes_version, tcp_status
from validation.exit_codes import EXIT_FAILED as EXIT_UNHEALTHY
from validation.exit_codes import EXIT_INTERNAL, EXIT_NO_OUTPUTS, EXIT_USAGE, ArgumentParser
from validation.host import Clock, Runner, SubprocessRunner
from validation.kube import Kubectl, condition, explain
from validation.lab import Lab
from validation.pods import vgpu_allocations
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import (
    DEFAULT_STACK,
    MANAGEMENT,
    OutputsError,
    StackOutputs,
    Tenant,
    parse_outputs,
    read_outputs_document,
)

T = TypeVar("T")

# Project-HAMi/HAMi pkg/device/devices.go@v2.10.0 (DeviceInfo, MarshalNodeDevices): a JSON list of
# devices, each with id, index, count (slots), devmem (MiB), devcore, type and health, all omitempty.
# Pods that ended hold no slice: HAMi's scheduler counts only pods that are not finished.
FINISHED_PHASES = ("Succeeded", "Failed")
# Requests that make a pod a GPU pod (HAMi's NVIDIA resource names, charts/hami/values.yaml@v2.10.0).
GPU_RESOURCE_PREFIX = "nvidia.com/"
BAR_WIDTH = 10
WIDTH = 100  # the width when stdout is not a terminal (or its size is unknown); --wide does not try to fit
MIN_WIDTH = 40  # a narrower terminal still gets this layout, its lines wrapped by the terminal
MiB_PER_GiB = 1024
# What one kubectl call may print: a few MiB is a big tenant's pod list; sixteen tenants' worst stays bounded.
STATUS_STDOUT_LIMIT = 16 * 2**20
STATUS_STDERR_LIMIT = 64 * 2**10

# Bounds of one refresh. A call's --request-timeout stays below the call's own limit
# (validation/kube.py, request_timeout_within); a cluster's bound is above one call's limit, so
# a cluster that cannot be reached at all is shown with kubectl's own reason, not just "no answer".
STATUS_REQUEST_TIMEOUT = 5
STATUS_CALL_TIMEOUT = 8
CLUSTER_BOUND = 12
# How much longer than its bound a reader is awaited; its calls end on their own limits.
GRACE = 3


def read_side_by_side(readers: dict[str, Callable[[], T]], wait: float) -> dict[str, T | Exception]:
    """Run every reader in its own thread; what each returned or raised, or TimeoutError past wait.

    A reader still running when wait ends is left behind (a daemon thread): its answer is dropped.
    """
    answers: dict[str, T | Exception] = {}
    finished = {name: threading.Event() for name in readers}

    def run(name: str, reader: Callable[[], T]) -> None:
        try:
            answers[name] = reader()
        except Exception as error:  # shown in that cluster's row, never raised into the others'
            answers[name] = error
        finished[name].set()

    deadline = time.monotonic() + wait  # real time: the threads run in it, whatever clock the readers use
    for name, reader in readers.items():
        threading.Thread(target=run, args=(name, reader), name=f"status-{name}", daemon=True).start()
    for done in finished.values():
        done.wait(max(0.0, deadline - time.monotonic()))
    return {
        name: answers[name] if finished[name].is_set() else TimeoutError(f"no answer within {wait:g}s")
        for name in readers
    }


def bounded(kubectl: Kubectl, clock: Clock) -> Kubectl:
    kubectl.request_timeout, kubectl.call_timeout = STATUS_REQUEST_TIMEOUT, STATUS_CALL_TIMEOUT
    kubectl.deadline = (clock, clock.now() + CLUSTER_BOUND)
    return kubectl


def read_management(kubectl: Kubectl, clock: Clock) -> dict[tuple[str, str], dict[str, Any]]:
    """Every TenantControlPlane by (namespace, name), in one call."""
    tcps = bounded(kubectl, clock).items(TCP_RESOURCE, "--all-namespaces")
    return {named(tcp, f"TenantControlPlane {position}", namespaced=True): tcp for position, tcp in enumerate(tcps)}


def read_tenant(kubectl: Kubectl, clock: Clock) -> dict[str, Any]:
    """The tenant's answers, each a list of objects (their fields are checked where tenant_status reads them)."""
    kubectl = bounded(kubectl, clock)
    return {
        "version": kubernetes_version(kubectl.get_raw("/version"), "/version"),
        "nodes": kubectl.items("nodes"),
        "pods": kubectl.items("pods", "--all-namespaces"),
        "quotas": kubectl.items("resourcequotas", "--all-namespaces"),
    }


def expected(answer: Exception) -> bool:
    """A cluster that could not be read or answered malformed; anything else a reader raises is a bug."""
    return isinstance(answer, TimeoutError | CheckFailed | CheckSkipped)


def reason(answer: Exception) -> str:
    return str(answer) if expected(answer) else f"internal error: {type(answer).__name__}: {answer}"


def empty_row(tenant: Tenant) -> dict[str, Any]:
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
        "nodes": {"ready": 0, "total": 0, "missing": [], "notReady": []},
        "gpus": [],
        "gpuHealth": {"missing": [], "unhealthy": []},
        "totals": totals([]),
        "pending": [],
        "quotas": [],
        "asleep": False,
    }


def tenant_status(tenant: Tenant, answer: dict[str, Any] | Exception, tcps: dict | Exception) -> dict[str, Any]:
    """One tenant's state as plain data; a cluster that could not be read, or answered in a shape its
    API never has, is reported in the row (error), not raised."""
    status = empty_row(tenant)
    problems = status["problems"]
    if isinstance(tcps, Exception):
        problems.append("control plane unknown (management cluster not read)")
    else:
        try:
            problems += control_plane(status, tenant, tcps)
        except MalformedAnswer as error:
            problems.append(f"control plane unknown ({error})")
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


def control_plane(status: dict[str, Any], tenant: Tenant, tcps: dict[tuple[str, str], Any]) -> list[str]:
    tcp = tcps.get((tenant.namespace, tenant.name))
    phase = tcp_status(tcp) if tcp is not None else ""
    status["controlPlaneReady"] = tcp is not None and phase == "Ready"
    if tcp is None:
        return [f"no TenantControlPlane {tenant.namespace}/{tenant.name}"]
    return [] if status["controlPlaneReady"] else [f"control plane {phase or 'without status'}, not Ready"]


def cluster_state(tenant: Tenant, answer: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
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
    read = {
        "version": answer["version"],
        "nodes": {"ready": len(nodes) - len(not_ready), "total": len(nodes), "missing": missing, "notReady": not_ready},
        "gpus": found,
        "gpuHealth": health,
        "totals": totals(found),
        "pending": pending_gpu_pods(pods),
        "quotas": [quota_usage(quota) for quota in answer["quotas"]],
    }
    return read, problems


def gpu_health(tenant: Tenant, found: list[dict[str, Any]], nodes: set[str]) -> dict[str, Any]:
    """GPUs each worker with a Node registers short of its configured ones, per model, and the unhealthy ones.

    A tenant with real GPUs configures none (its machines' plugin finds them), so only their health counts.
    """
    missing = []
    for worker in tenant.workers if not tenant.real_gpus else ():
        if worker not in nodes:
            continue  # reported as a worker without a Node
        for gpu in tenant.gpus_per_worker:
            registered = sum(1 for card in found if card["node"] == worker and card["model"] == gpu.model)
            if registered < gpu.count:
                gap = {"worker": worker, "model": gpu.model, "registered": registered, "configured": gpu.count}
                missing.append(gap)
    unhealthy = [{key: gpu[key] for key in ("node", "index", "uuid")} for gpu in found if not gpu["healthy"]]
    return {"missing": missing, "unhealthy": unhealthy}


def asleep_status(tenant: Tenant, tcps: dict | Exception) -> dict[str, Any]:
    """A sleeping tenant: what it still holds, from the outputs; healthy once Kamaji reports it Sleeping.

    The keys of an awake tenant's row stay, empty: nothing of its nodes, pods or quotas is read.
    """
    status = empty_row(tenant)
    problems = status["problems"]
    state = None
    if isinstance(tcps, Exception):
        problems.append("control plane unknown (management cluster not read)")
    elif (tcp := tcps.get((tenant.namespace, tenant.name))) is None:
        problems.append(f"no TenantControlPlane {tenant.namespace}/{tenant.name}")
    elif (state := tcp_status(tcp)) != SLEEPING:
        problems.append(f"control plane {state or 'without status'}, not {SLEEPING}: run pulumi up")
    cards = sum(gpu.count for gpu in tenant.gpus_per_worker) * len(tenant.workers)
    status.update(
        version=tenant.kubernetes_version,
        healthy=not problems,
        controlPlaneReady=None if isinstance(tcps, Exception) else False,
        asleep=True,
        controlPlaneState=state or None,
        holds={
            "address": host_port(tenant.endpoint)[0],
            "workers": list(tenant.workers),
            "gpus": cards,
            "gpuMemoryMiB": sum(gpu.memory_mib * gpu.count for gpu in tenant.gpus_per_worker) * len(tenant.workers),
            "gpuDevices": "real" if tenant.real_gpus else "mock",
        },
    )
    return status


def gpus(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every registered GPU with the slots, memory and cores that pods hold on it."""
    slices: dict[str, list[dict[str, Any]]] = {}
    for position, pod in enumerate(pods):
        namespace, name = named(pod, f"pod {position}", namespaced=True)
        if text(mapping(pod, "status", f"pod {name}"), "phase", f"pod {name}") in FINISHED_PHASES:
            continue
        # Project-HAMi/HAMi pkg/device/devices.go@v2.10.0 (EncodeContainerDevices):
        # "<uuid>,<type>,<MiB>,<cores>:" per device, containers joined by ";".
        for allocation in vgpu_allocations(pod):
            slices.setdefault(allocation.uuid, []).append(
                {"namespace": namespace, "name": name, "memoryMiB": allocation.memory_mib, "cores": allocation.cores}
            )
    result = []
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


def totals(gpu_list: list[dict[str, Any]]) -> dict[str, Any]:
    def add(key: str, part: str) -> int:
        return sum(gpu[key][part] for gpu in gpu_list)

    return {
        "gpus": len(gpu_list),
        "healthy": sum(gpu["healthy"] for gpu in gpu_list),
        **{
            key: {part: add(key, part) for part in parts}
            for key, parts in (
                ("slots", ("used", "total")),
                ("memoryMiB", ("allocated", "total")),
                ("cores", ("allocated", "total")),
            )
        },
    }


def wants_gpu(pod: dict[str, Any], where: str) -> bool:
    for container in objects(mapping(pod, "spec", where), "containers", where):
        resources = mapping(container, "resources", where)
        for amounts in (mapping(resources, "limits", where), mapping(resources, "requests", where)):
            if any(key.startswith(GPU_RESOURCE_PREFIX) for key in amounts):
                return True
    return False


def pending_gpu_pods(pods: list[dict[str, Any]]) -> list[dict[str, str]]:
    """GPU pods no scheduler could place, with why.

    The reason comes from the pod's PodScheduled condition, not from events: kube-scheduler writes
    the same message to both (kubernetes/kubernetes pkg/scheduler/schedule_one.go,
    handleSchedulingFailure, at 003b446), the condition is already in the pod list (no extra call)
    and holds the latest attempt, while FailedScheduling events are aggregated and expire.
    """
    stuck = []
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


def quota_usage(quota: dict[str, Any]) -> dict[str, Any]:
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


def guarded_status(tenant: Tenant, answer: dict[str, Any] | Exception, tcps: dict | Exception) -> dict[str, Any]:
    """tenant_status (asleep_status for a sleeping tenant), or a row naming the internal error that stopped it:
    a bug shows in one row, not all."""
    try:
        return asleep_status(tenant, tcps) if tenant.sleeping else tenant_status(tenant, answer, tcps)
    except Exception as error:
        return internal_error(empty_row(tenant), error)


def internal_error(row: dict[str, Any], error: Exception) -> dict[str, Any]:
    """Mark a row with an error of this program (exit EXIT_INTERNAL), not of the tenant."""
    row.update(
        error=reason(error),
        internalError=True,
        healthy=False,
        problems=[*row["problems"], "internal error"],
    )
    return row


def exit_status(doc: dict[str, Any]) -> int:
    if doc["management"]["internalError"] or any(row["internalError"] for row in doc["tenants"]):
        return EXIT_INTERNAL
    return 0 if doc["ok"] else EXIT_UNHEALTHY


def refresh(outputs: StackOutputs, names: Sequence[str] | None, runner: Runner, clock: Clock) -> dict[str, Any]:
    """Read the management cluster and the tenants side by side; the fleet as plain data."""
    with tempfile.TemporaryDirectory(prefix="kamaji-hami-lab-status-") as workdir:
        lab = Lab.open(outputs, runner, Path(workdir))
        tenants = [tenant for tenant in lab.tenants if not names or tenant.name in names]
        readers: dict[str, Callable[[], Any]] = {MANAGEMENT: lambda: read_management(lab.management, clock)}
        # A sleeping tenant's API server does not run: only Kamaji is asked about it.
        for tenant in (tenant for tenant in tenants if not tenant.sleeping):
            readers[tenant.name] = lambda tenant=tenant: read_tenant(lab.kubectl(tenant), clock)
        answers = read_side_by_side(readers, CLUSTER_BOUND + GRACE)
    tcps = answers[MANAGEMENT]
    # A sleeping tenant was not asked, so it has no answer; asleep_status reads only Kamaji's.
    rows = [guarded_status(tenant, answers.get(tenant.name, {}), tcps) for tenant in tenants]
    return {
        "ok": all(row["healthy"] for row in rows),
        "refreshed": clock.wall().strftime("%Y-%m-%dT%H:%M:%SZ"),
        "management": {
            "reachable": not isinstance(tcps, Exception),
            "error": reason(tcps) if isinstance(tcps, Exception) else None,
            "internalError": isinstance(tcps, Exception) and not expected(tcps),
        },
        "tenants": rows,
    }


class Style:
    """ANSI colour, or none at all (https://no-color.org)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    @classmethod
    def for_stream(cls, stream: TextIO) -> Style:
        return cls(stream.isatty() and not os.environ.get("NO_COLOR"))

    def paint(self, text: str, good: bool) -> str:
        return f"\033[{32 if good else 31}m{text}\033[0m" if self.enabled else text


def bar(used: int, total: int) -> str:
    filled = min(round(BAR_WIDTH * used / total), BAR_WIDTH) if total else 0
    return "[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]"


def gib(mib: int) -> str:
    return f"{mib / MiB_PER_GiB:.1f}".removesuffix(".0")


def memory(*mib: int, wide: bool) -> str:
    """16384, 81920 -> "16/80 GiB" (--wide: "16384/81920 MiB")."""
    return "/".join(str(value) if wide else gib(value) for value in mib) + (" MiB" if wide else " GiB")


def short_node(node: str, tenant: str) -> str:
    """kamaji-tenant-a-w1 -> w1 (components/settings.py, worker_name); other names stay whole."""
    _, found, rest = node.partition(f"-{tenant}-")
    return rest if found and rest else node


def _table(rows: list[list[str]], indent: str) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def _fit(line: str, wide: bool, width: int) -> list[str]:
    """A line too long for the width wraps between words onto lines indented further; nothing changes with --wide.

    A word longer than a whole line (a UUID, a URL) stays whole. Lines are measured before colour is
    added, so escape codes never count against the width.
    """
    if wide or len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    return textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False) or [
        line
    ]


def render(doc: dict[str, Any], style: Style, wide: bool = False, width: int = WIDTH) -> str:
    """One frame: a header with the refresh time, the management cluster in one line, each tenant.

    Each tenant is rendered in its own guard: one that cannot be is marked an internal error (its row's
    internalError, so the exit status says so) and every other tenant is still shown.
    """
    plain: list[tuple[str, bool | None]] = []  # (text, good/bad colour or None)

    def say(text: str, good: bool | None = None) -> None:
        plain.append((text, good))

    healthy = sum(tenant["healthy"] for tenant in doc["tenants"])
    refreshed = doc["refreshed"].replace("T", " ").replace("Z", " UTC")
    asleep = sum(bool(tenant.get("asleep")) for tenant in doc["tenants"])
    sleeping = f", {asleep} asleep" if asleep else ""
    say(f"refreshed {refreshed}: {healthy}/{len(doc['tenants'])} tenants healthy{sleeping}")
    management = doc["management"]
    if management["reachable"]:
        say("management  reachable")
    else:
        say(f"management  UNREACHABLE: {management['error']}", False)
    for tenant in doc["tenants"]:
        say("")
        part: list[tuple[str, bool | None]] = []
        try:
            render_tenant(tenant, lambda text, good=None, part=part: part.append((text, good)), wide, width)
        except Exception as error:
            internal_error(tenant, error)
            part = [(f"{tenant['name']}  UNHEALTHY", False), (f"  {tenant['error']}", False)]
        plain += part
    say("")
    verdict = "OK: every tenant is healthy" if doc["ok"] else "NOT OK: some tenants are unhealthy or unreachable"
    say(verdict, doc["ok"])
    lines = []
    for words, good in plain:
        lines += [line if good is None else style.paint(line, good) for line in _fit(words, wide, width)]
    return "\n".join(lines) + "\n"


def render_asleep(tenant: dict[str, Any], say: Callable[..., None], wide: bool) -> None:
    """Asleep: its state as Kamaji reports it and what it holds while it sleeps."""
    health = "asleep" if tenant["healthy"] else "UNHEALTHY, asleep"
    say(f"{tenant['name']}  {tenant['version']}  {health}  {tenant['endpoint']}", tenant["healthy"])
    holds = tenant["holds"]
    workers = len(holds["workers"])
    gpus = f"{holds['gpus']} {holds['gpuDevices']} GPUs ({memory(holds['gpuMemoryMiB'], wide=wide)})"
    say(
        f"  control plane {tenant['controlPlaneState'] or 'unknown'}; holds address {holds['address']}, "
        f"{workers} stopped worker{'s' if workers != 1 else ''}, "
        + (gpus if holds["gpus"] else "real GPUs" if holds["gpuDevices"] == "real" else "no GPUs")
    )
    for problem in tenant["problems"]:
        say(f"  {problem}", False)


def render_tenant(tenant: dict[str, Any], say: Callable[..., None], wide: bool, width: int = WIDTH) -> None:
    if tenant.get("asleep"):
        render_asleep(tenant, say, wide)
        return
    health = "healthy" if tenant["healthy"] else "UNHEALTHY"
    say(f"{tenant['name']}  {tenant['version'] or '-'}  {health}  {tenant['endpoint']}", tenant["healthy"])
    if tenant["error"]:
        say(f"  {tenant['error']}", False)
    ready = tenant["controlPlaneReady"]
    plane = "unknown" if ready is None else "Ready" if ready else "not Ready"
    if tenant["error"]:  # nothing of the cluster itself is known
        say(f"  control plane {plane}")
        return
    nodes, sums = tenant["nodes"], tenant["totals"]
    summary = f"  control plane {plane}; nodes {nodes['ready']}/{nodes['total']} Ready"
    if sums["gpus"]:
        slots, mem, cores = sums["slots"], sums["memoryMiB"], sums["cores"]
        summary += (
            f"; GPUs {sums['gpus']}, slots {slots['used']}/{slots['total']}, "
            f"memory {memory(mem['allocated'], mem['total'], wide=wide)}, cores {cores['allocated']}/{cores['total']}"
        )
    say(summary)
    for worker in nodes["missing"]:
        say(f"  worker {worker} has no Node", False)
    for node in nodes["notReady"]:
        say(f"  node {node} not Ready", False)
    name = (lambda node: node) if wide else (lambda node: short_node(node, tenant["name"]))
    for gap in tenant["gpuHealth"]["missing"]:
        count = f"{gap['registered']} of {gap['configured']} {gap['model']}"
        say(f"  GPUs missing: {name(gap['worker'])} registers {count}", False)
    if unhealthy := tenant["gpuHealth"]["unhealthy"]:
        which = ", ".join(gpu["uuid"] if wide else f"{name(gpu['node'])}/{gpu['index']}" for gpu in unhealthy)
        say(f"  GPUs unhealthy (HAMi places no pod on them): {which}", False)
    if tenant["gpus"]:
        render_gpus(tenant, say, wide, width)
    else:
        say("  no GPUs")
    for pod in tenant["pending"]:
        say(f"  Pending {pod['namespace']}/{pod['name']}: {pod['reason']}", False)
    if tenant["quotas"]:
        rows = [["QUOTA", "RESOURCE", "USED/HARD"]]
        for quota in tenant["quotas"]:
            for key, value in quota["resources"].items():
                rows.append([f"{quota['namespace']}/{quota['name']}", key, f"{value['used']}/{value['hard']}"])
        for line in _table(rows, "  "):
            say(line)


def render_gpus(tenant: dict[str, Any], say: Callable[..., None], wide: bool, width: int = WIDTH) -> None:
    # As kubectl -o wide: the narrow table names a GPU by its worker and index, the wide one in full.
    rows = [["NODE", "GPU"] if wide else ["GPU"]]
    rows[0] += ["MODEL", "HEALTH", "SLOTS", "MEMORY", "", "CORES", ""]
    for gpu in tenant["gpus"]:
        mem, cores, slots = gpu["memoryMiB"], gpu["cores"], gpu["slots"]
        names = [gpu["node"], gpu["uuid"]] if wide else [f"{short_node(gpu['node'], tenant['name'])}/{gpu['index']}"]
        rows.append(
            [
                *names,
                gpu["model"],
                "ok" if gpu["healthy"] else "UNHEALTHY",
                f"{slots['used']}/{slots['total']}",
                memory(mem["allocated"], mem["total"], wide=wide),
                bar(mem["allocated"], mem["total"]),
                f"{cores['allocated']}/{cores['total']}",
                bar(cores["allocated"], cores["total"]),
            ]
        )
    table = _table(rows, "  ")
    if not wide and max(map(len, table)) > width:  # the usage bars go first, so each GPU stays on one line
        table = _table([[cell for cell, header in zip(row, rows[0], strict=True) if header] for row in rows], "  ")
    say(table[0])
    for gpu, line in zip(tenant["gpus"], table[1:], strict=True):
        say(line, None if gpu["healthy"] else False)
        users = [
            [f"{pod['namespace']}/{pod['name']}", memory(pod["memoryMiB"], wide=wide), f"{pod['cores']}%"]
            for pod in gpu["pods"]
        ]
        for pod_line in _table(users, "      ") if users else []:
            say(pod_line)  # the pods holding a slice of this GPU, under its row


def terminal_width(stream: TextIO) -> int:
    """The terminal's width (at least MIN_WIDTH); WIDTH when the stream is no terminal or its size unknown."""
    if not stream.isatty():
        return WIDTH
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both of the latter
        return WIDTH
    return max(columns, MIN_WIDTH) if columns else WIDTH


def _positive_seconds(text: str) -> float:
    try:
        if (seconds := float(text)) > 0:
            return seconds
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="python -m validation.status",
        description="Show every tenant's control plane, nodes, GPU slices and quotas (read-only).",
        epilog=f"exit status: 0 every tenant healthy, {EXIT_UNHEALTHY} a tenant unhealthy or unreachable, "
        f"{EXIT_NO_OUTPUTS} the stack outputs could not be read, {EXIT_USAGE} wrong arguments, "
        f"{EXIT_INTERNAL} an internal error (a tenant's row names it). The layout fits the terminal's width, "
        f"{WIDTH} columns when not on a terminal.",
    )
    parser.add_argument(
        "--outputs",
        metavar="FILE|-",
        help="stack outputs JSON; default: run `pulumi stack output --show-secrets --json --stack STACK`",
    )
    parser.add_argument("--stack", default=DEFAULT_STACK, help=f"the stack to read (default: {DEFAULT_STACK})")
    parser.add_argument("--tenant", nargs="+", metavar="NAME", help="show only these tenants")
    parser.add_argument("--json", action="store_true", help="print the same data as JSON")
    parser.add_argument(
        "--wide", action="store_true", help="full node names, GPU UUIDs and MiB, on lines as long as they get"
    )
    parser.add_argument(
        "--watch", type=_positive_seconds, metavar="SECONDS", help="refresh every SECONDS until interrupted"
    )
    return parser.parse_args(argv)


def main(
    argv: Sequence[str] | None = None,
    runner: Runner | None = None,
    stdout: TextIO | None = None,
    stdin: TextIO | None = None,
    clock: Clock | None = None,
) -> int:
    args = parse_args(argv)
    stdout = stdout or sys.stdout
    runner = runner or SubprocessRunner(STATUS_STDOUT_LIMIT, STATUS_STDERR_LIMIT)
    clock = clock or Clock()
    try:
        outputs = parse_outputs(read_outputs_document(args.outputs, runner, stdin, args.stack))
    except OutputsError as error:
        print(f"status: {error}", file=sys.stderr)
        return EXIT_NO_OUTPUTS
    unknown = sorted(set(args.tenant or ()) - set(outputs.tenants))
    if unknown:
        print(f"status: no tenant named {', '.join(unknown)}; tenants: {', '.join(outputs.tenants)}", file=sys.stderr)
        return EXIT_USAGE
    style = Style.for_stream(stdout)
    # Redraw in place only on a terminal; redirected, each refresh appends one frame.
    redraw = bool(args.watch) and not args.json and stdout.isatty()
    while True:
        # A fresh lab each refresh: a cluster unreachable last time is asked again.
        doc = refresh(outputs, args.tenant, runner, clock)
        if args.json:
            stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            if redraw:
                stdout.write("\033[H\033[2J")  # cursor home, erase the screen (ECMA-48 CUP, ED 2)
            stdout.write(render(doc, style, args.wide, terminal_width(stdout)))  # read again: a terminal resizes
        stdout.flush()
        if not args.watch:
            return exit_status(doc)
        clock.sleep(args.watch)


if __name__ == "__main__":
    # SIGTERM, and SIGHUP when the terminal of a --watch closes, become SystemExit, so the temporary
    # kubeconfigs are removed (as in validation/__main__.py).
    for ending in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(ending, lambda signum, frame: sys.exit(128 + signum))
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # the way out of --watch
        raise SystemExit(130) from None
