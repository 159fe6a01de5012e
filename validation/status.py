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

from validation.checks.hami import registered_devices
from validation.checks.tenancy import SLEEPING, TCP_RESOURCE, host_port, tcp_status
from validation.exit_codes import EXIT_FAILED as EXIT_UNHEALTHY
from validation.exit_codes import EXIT_NO_OUTPUTS, EXIT_USAGE, ArgumentParser
from validation.host import Clock, Runner, SubprocessRunner
from validation.kube import Kubectl, condition, explain, name_of
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
WIDTH = 100  # the default layout fits a terminal this wide; --wide does not try
MiB_PER_GiB = 1024

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
    tcps = bounded(kubectl, clock).get(TCP_RESOURCE, "--all-namespaces")["items"]
    return {(tcp["metadata"]["namespace"], tcp["metadata"]["name"]): tcp for tcp in tcps}


def read_tenant(kubectl: Kubectl, clock: Clock) -> dict[str, Any]:
    kubectl = bounded(kubectl, clock)
    return {
        "version": kubectl.get_raw("/version").get("gitVersion"),
        # A list answer always has items, and listed objects their metadata and status.
        "nodes": kubectl.get("nodes")["items"],
        "pods": kubectl.get("pods", "--all-namespaces")["items"],
        "quotas": kubectl.get("resourcequotas", "--all-namespaces")["items"],
    }


def reason(answer: Exception) -> str:
    if isinstance(answer, TimeoutError | CheckFailed | CheckSkipped):
        return str(answer)
    return f"unexpected {type(answer).__name__}: {answer}"


def tenant_status(tenant: Tenant, answer: dict[str, Any] | Exception, tcps: dict | Exception) -> dict[str, Any]:
    """One tenant's state as plain data; a cluster that could not be read is reported, not raised."""
    status: dict[str, Any] = {
        "name": tenant.name,
        "endpoint": tenant.endpoint,
        "version": None,
        "reachable": False,
        "error": None,
        "healthy": False,
        "problems": [],
        "controlPlaneReady": None,
        "nodes": {"ready": 0, "total": 0, "missing": [], "notReady": []},
        "gpus": [],
        "totals": totals([]),
        "pending": [],
        "quotas": [],
        "asleep": False,
    }
    problems = status["problems"]
    if isinstance(tcps, Exception):
        problems.append("control plane unknown (management cluster not read)")
    else:
        tcp = tcps.get((tenant.namespace, tenant.name))
        status["controlPlaneReady"] = tcp is not None and tcp_status(tcp) == "Ready"
        if tcp is None:
            problems.append(f"no TenantControlPlane {tenant.namespace}/{tenant.name}")
        elif not status["controlPlaneReady"]:
            problems.append(f"control plane {tcp_status(tcp) or 'without status'}, not Ready")
    if isinstance(answer, Exception):
        status["error"] = reason(answer)
        problems.append("cluster not read")
        return status
    status["reachable"] = True
    status["version"] = answer["version"]
    nodes, pods = answer["nodes"], answer["pods"]
    names = {name_of(node) for node in nodes}
    missing = [worker for worker in tenant.workers if worker not in names]
    not_ready = [name_of(node) for node in nodes if condition(node, "Ready").get("status") != "True"]
    status["nodes"] = {
        "ready": len(nodes) - len(not_ready),
        "total": len(nodes),
        "missing": missing,
        "notReady": not_ready,
    }
    problems += [f"worker {worker} has no Node" for worker in missing]
    problems += [f"node {name} not Ready" for name in not_ready]
    status["gpus"] = gpus(nodes, pods)
    status["totals"] = totals(status["gpus"])
    status["pending"] = pending_gpu_pods(pods)
    status["quotas"] = [quota_usage(quota) for quota in answer["quotas"]]
    status["healthy"] = not problems
    return status


def asleep_status(tenant: Tenant, tcps: dict | Exception) -> dict[str, Any]:
    """A sleeping tenant: what it still holds, from the outputs; healthy once Kamaji reports it Sleeping.

    The keys of an awake tenant's row stay, empty: nothing of its nodes, pods or quotas is read.
    """
    problems = []
    state = None
    if isinstance(tcps, Exception):
        problems.append("control plane unknown (management cluster not read)")
    elif (tcp := tcps.get((tenant.namespace, tenant.name))) is None:
        problems.append(f"no TenantControlPlane {tenant.namespace}/{tenant.name}")
    elif (state := tcp_status(tcp)) != SLEEPING:
        problems.append(f"control plane {state or 'without status'}, not {SLEEPING}: run pulumi up")
    cards = sum(gpu.count for gpu in tenant.gpus_per_worker) * len(tenant.workers)
    return {
        "name": tenant.name,
        "endpoint": tenant.endpoint,
        "version": tenant.kubernetes_version,
        "reachable": False,
        "error": None,
        "healthy": not problems,
        "problems": problems,
        "controlPlaneReady": None if isinstance(tcps, Exception) else False,
        "nodes": {"ready": 0, "total": 0, "missing": [], "notReady": []},
        "gpus": [],
        "totals": totals([]),
        "pending": [],
        "quotas": [],
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


def gpus(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every registered GPU with the slots, memory and cores that pods hold on it."""
    slices: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        if pod["status"].get("phase") in FINISHED_PHASES:
            continue
        metadata = pod["metadata"]
        # Project-HAMi/HAMi pkg/device/devices.go@v2.10.0 (EncodeContainerDevices):
        # "<uuid>,<type>,<MiB>,<cores>:" per device, containers joined by ";".
        for allocation in vgpu_allocations(pod):
            slices.setdefault(allocation.uuid, []).append(
                {
                    "namespace": metadata["namespace"],
                    "name": metadata["name"],
                    "memoryMiB": allocation.memory_mib,
                    "cores": allocation.cores,
                }
            )
    result = []
    for node in nodes:
        for device in registered_devices(node):
            # All omitempty: an absent field is "", 0 or false, and HAMi's scheduler skips a device
            # whose health is false (CardNotHealth, pkg/device/nvidia/device.go@v2.10.0, Fit).
            uuid = device.get("id", "")
            users = slices.get(uuid, [])
            result.append(
                {
                    "node": name_of(node),
                    "index": device.get("index", 0),
                    "uuid": uuid,
                    "model": device.get("type", ""),
                    "healthy": device.get("health", False) is True,
                    # Each container's device takes a slot; a full card is refused with
                    # CardTimeSlicingExhausted (Fit, AddResourceUsage: Used++).
                    "slots": {"used": len(users), "total": device.get("count", 0)},
                    "memoryMiB": {"allocated": sum(u["memoryMiB"] for u in users), "total": device.get("devmem", 0)},
                    "cores": {"allocated": sum(u["cores"] for u in users), "total": device.get("devcore", 0)},
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


def wants_gpu(pod: dict[str, Any]) -> bool:
    containers = pod.get("spec", {}).get("containers") or []
    for container in containers:
        resources = container.get("resources") or {}
        for amounts in (resources.get("limits") or {}, resources.get("requests") or {}):
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
    for pod in pods:
        if pod["status"].get("phase") != "Pending" or not wants_gpu(pod):
            continue
        scheduled = condition(pod, "PodScheduled")
        if scheduled.get("status") == "True":
            continue  # placed; waiting for its node (image pull, volumes), not for a GPU
        why = explain(scheduled) if scheduled else "no scheduler has tried it yet (is hami-scheduler running?)"
        metadata = pod["metadata"]
        stuck.append({"namespace": metadata["namespace"], "name": metadata["name"], "reason": why})
    return stuck


def quota_usage(quota: dict[str, Any]) -> dict[str, Any]:
    # The quota controller writes status after the quota is created; a resource it has not counted yet is 0.
    state = quota.get("status") or {}
    hard, used = state.get("hard") or {}, state.get("used") or {}
    return {
        "namespace": quota["metadata"]["namespace"],
        "name": name_of(quota),
        "resources": {key: {"used": used.get(key, "0"), "hard": value} for key, value in sorted(hard.items())},
    }


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
    rows = [
        asleep_status(tenant, tcps) if tenant.sleeping else tenant_status(tenant, answers[tenant.name], tcps)
        for tenant in tenants
    ]
    return {
        "ok": all(row["healthy"] for row in rows),
        "refreshed": clock.wall().strftime("%Y-%m-%dT%H:%M:%SZ"),
        "management": {
            "reachable": not isinstance(tcps, Exception),
            "error": reason(tcps) if isinstance(tcps, Exception) else None,
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


def _fit(line: str, wide: bool, wrap: bool) -> list[str]:
    """Messages wrap onto indented lines, table rows are cut; nothing changes with --wide.

    Lines are measured before colour is added, so escape codes never count against the width.
    """
    if wide or len(line) <= WIDTH:
        return [line]
    if wrap:
        indent = " " * (len(line) - len(line.lstrip()) + 4)
        return textwrap.wrap(line, WIDTH, subsequent_indent=indent, break_on_hyphens=False)
    return [line[: WIDTH - 3] + "..."]


def render(doc: dict[str, Any], style: Style, wide: bool = False) -> str:
    """One frame: a header with the refresh time, the management cluster in one line, each tenant."""
    plain: list[tuple[str, bool | None, bool]] = []  # (text, good/bad colour or None, a message that wraps)

    def say(text: str, good: bool | None = None, wrap: bool = False) -> None:
        plain.append((text, good, wrap))

    healthy = sum(tenant["healthy"] for tenant in doc["tenants"])
    refreshed = doc["refreshed"].replace("T", " ").replace("Z", " UTC")
    asleep = sum(bool(tenant.get("asleep")) for tenant in doc["tenants"])
    sleeping = f", {asleep} asleep" if asleep else ""
    say(f"refreshed {refreshed}: {healthy}/{len(doc['tenants'])} tenants healthy{sleeping}")
    management = doc["management"]
    if management["reachable"]:
        say("management  reachable")
    else:
        say(f"management  UNREACHABLE: {management['error']}", False, wrap=True)
    for tenant in doc["tenants"]:
        say("")
        render_tenant(tenant, say, wide)
    say("")
    verdict = "OK: every tenant is healthy" if doc["ok"] else "NOT OK: some tenants are unhealthy or unreachable"
    say(verdict, doc["ok"])
    lines = []
    for text, good, wrap in plain:
        lines += [line if good is None else style.paint(line, good) for line in _fit(text, wide, wrap)]
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
        + (gpus if holds["gpus"] else "real GPUs" if holds["gpuDevices"] == "real" else "no GPUs"),
        wrap=True,
    )
    for problem in tenant["problems"]:
        say(f"  {problem}", False, wrap=True)


def render_tenant(tenant: dict[str, Any], say: Callable[..., None], wide: bool) -> None:
    if tenant.get("asleep"):
        render_asleep(tenant, say, wide)
        return
    health = "healthy" if tenant["healthy"] else "UNHEALTHY"
    say(f"{tenant['name']}  {tenant['version'] or '-'}  {health}  {tenant['endpoint']}", tenant["healthy"])
    if tenant["error"]:
        say(f"  {tenant['error']}", False, wrap=True)
    ready = tenant["controlPlaneReady"]
    plane = "unknown" if ready is None else "Ready" if ready else "not Ready"
    if not tenant["reachable"]:
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
    if tenant["gpus"]:
        render_gpus(tenant, say, wide)
    else:
        say("  no GPUs")
    for pod in tenant["pending"]:
        say(f"  Pending {pod['namespace']}/{pod['name']}: {pod['reason']}", False, wrap=True)
    if tenant["quotas"]:
        rows = [["QUOTA", "RESOURCE", "USED/HARD"]]
        for quota in tenant["quotas"]:
            for key, value in quota["resources"].items():
                rows.append([f"{quota['namespace']}/{quota['name']}", key, f"{value['used']}/{value['hard']}"])
        for line in _table(rows, "  "):
            say(line)


def render_gpus(tenant: dict[str, Any], say: Callable[..., None], wide: bool) -> None:
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
    say(table[0])
    for gpu, line in zip(tenant["gpus"], table[1:], strict=True):
        say(line, None if gpu["healthy"] else False)
        users = [
            [f"{pod['namespace']}/{pod['name']}", memory(pod["memoryMiB"], wide=wide), f"{pod['cores']}%"]
            for pod in gpu["pods"]
        ]
        for pod_line in _table(users, "      ") if users else []:
            say(pod_line)  # the pods holding a slice of this GPU, under its row


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
        f"{EXIT_NO_OUTPUTS} the stack outputs could not be read, {EXIT_USAGE} wrong arguments",
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
        "--wide", action="store_true", help=f"full node names, GPU UUIDs and MiB (wider than {WIDTH} columns)"
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
    runner = runner or SubprocessRunner()
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
            stdout.write(render(doc, style, args.wide))
        stdout.flush()
        if not args.watch:
            return 0 if doc["ok"] else EXIT_UNHEALTHY
        clock.sleep(args.watch)


if __name__ == "__main__":
    # As in validation/__main__.py: SIGTERM becomes SystemExit, so the temporary kubeconfigs are removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # the way out of --watch
        raise SystemExit(130) from None
