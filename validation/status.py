"""python -m validation.status: every tenant's control plane, nodes, GPU slices and quotas at a glance.

Read-only: it only runs `kubectl get`, with the same stack outputs and kubeconfig handling as the
validation suite.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from validation.checks.tenancy import TCP_RESOURCE, tcp_status
from validation.exit_codes import EXIT_FAILED as EXIT_UNHEALTHY
from validation.exit_codes import EXIT_NO_OUTPUTS, EXIT_USAGE, ArgumentParser
from validation.host import Clock, Runner, SubprocessRunner
from validation.kube import condition, name_of
from validation.lab import Lab
from validation.pods import vgpu_allocations
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import DEFAULT_STACK, OutputsError, Tenant, parse_outputs, read_outputs_document

# Project-HAMi/HAMi pkg/device/devices.go@v2.10.0 (MarshalNodeDevices): a JSON list of devices
# with id, count, devmem (MiB), devcore (percent) and type.
NODE_REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
FULL_CORES = 100
# Pods that ended hold no slice: HAMi's scheduler counts only pods that are not finished.
FINISHED_PHASES = ("Succeeded", "Failed")
BAR_WIDTH = 10


def tenant_status(lab: Lab, tenant: Tenant) -> dict[str, Any]:
    """One tenant's state as plain data; a cluster that cannot be read is reported, not raised."""
    status: dict[str, Any] = {
        "name": tenant.name,
        "endpoint": tenant.endpoint,
        "version": None,
        "reachable": False,
        "error": None,
        "healthy": False,
        "controlPlaneReady": None,
        "nodes": {"ready": 0, "total": 0},
        "gpus": [],
        "quotas": [],
    }
    try:
        tcp = lab.management.get(TCP_RESOURCE, tenant.name, "-n", tenant.namespace)
        status["controlPlaneReady"] = tcp_status(tcp) == "Ready"
    except (CheckFailed, CheckSkipped) as error:
        status["error"] = f"control plane unknown: {error}"
    kubectl = lab.kubectl(tenant)
    try:
        status["version"] = kubectl.get_raw("/version").get("gitVersion")
        # A list answer always has items, and listed objects their metadata and status.
        nodes = kubectl.get("nodes")["items"]
        pods = kubectl.get("pods", "--all-namespaces")["items"]
        quotas = kubectl.get("resourcequotas", "--all-namespaces")["items"]
    except (CheckFailed, CheckSkipped) as error:
        status["error"] = "; ".join(filter(None, (f"unreachable: {error}", status["error"])))
        return status
    status["reachable"] = True
    status["nodes"] = {
        "ready": sum(condition(node, "Ready").get("status") == "True" for node in nodes),
        "total": len(nodes),
    }
    status["gpus"] = gpus(nodes, pods)
    status["quotas"] = [quota_usage(quota) for quota in quotas]
    status["healthy"] = (
        status["controlPlaneReady"] is True
        and status["nodes"]["ready"] == status["nodes"]["total"]
        and status["nodes"]["total"] >= len(tenant.workers)
    )
    return status


def gpus(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every registered GPU with the slices that pods hold on it."""
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
        raw = node["metadata"].get("annotations", {}).get(NODE_REGISTER_ANNOTATION)
        try:
            devices = json.loads(raw) if raw else []
        except json.JSONDecodeError:
            devices = []
        for device in devices:
            # DeviceInfo's fields are all omitempty: absent means "" or 0 (pkg/device/devices.go@v2.10.0).
            uuid = device.get("id", "")
            users = slices.get(uuid, [])
            result.append(
                {
                    "node": name_of(node),
                    "uuid": uuid,
                    "model": device.get("type", ""),
                    "memoryMiB": {"allocated": sum(u["memoryMiB"] for u in users), "total": device.get("devmem", 0)},
                    "cores": {"allocated": sum(u["cores"] for u in users), "total": FULL_CORES},
                    "pods": users,
                }
            )
    return result


def quota_usage(quota: dict[str, Any]) -> dict[str, Any]:
    # The quota controller writes status after the quota is created; a resource it has not counted yet is 0.
    state = quota.get("status") or {}
    hard, used = state.get("hard") or {}, state.get("used") or {}
    return {
        "namespace": quota["metadata"]["namespace"],
        "name": name_of(quota),
        "resources": {key: {"used": used.get(key, "0"), "hard": value} for key, value in sorted(hard.items())},
    }


def document(tenants: list[dict[str, Any]]) -> dict[str, Any]:
    return {"ok": all(tenant["healthy"] for tenant in tenants), "tenants": tenants}


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
    filled = round(BAR_WIDTH * used / total) if total else 0
    return "[" + "#" * min(filled, BAR_WIDTH) + "." * (BAR_WIDTH - min(filled, BAR_WIDTH)) + "]"


def _table(rows: list[list[str]], indent: str) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def render(doc: dict[str, Any], style: Style) -> str:
    lines = []
    for tenant in doc["tenants"]:
        health = style.paint("healthy" if tenant["healthy"] else "UNHEALTHY", tenant["healthy"])
        lines.append(f"{tenant['name']}  {tenant['endpoint']}  {tenant['version'] or '-'}  {health}")
        ready = tenant["controlPlaneReady"]
        plane = "unknown" if ready is None else "Ready" if ready else "not Ready"
        if tenant["error"]:
            lines.append("  " + style.paint(tenant["error"], False))
        if not tenant["reachable"]:
            lines.append(f"  control plane {plane}")
            lines.append("")
            continue
        nodes = tenant["nodes"]
        lines.append(f"  control plane {plane}; nodes {nodes['ready']}/{nodes['total']} Ready")
        if tenant["gpus"]:
            rows = [["NODE", "GPU", "MODEL", "MEMORY MiB", "", "CORES", "", "PODS"]]
            for gpu in tenant["gpus"]:
                memory, cores = gpu["memoryMiB"], gpu["cores"]
                users = [
                    f"{pod['namespace']}/{pod['name']} ({pod['memoryMiB']} MiB, {pod['cores']}%)" for pod in gpu["pods"]
                ] or ["idle"]
                rows.append(
                    [
                        gpu["node"],
                        gpu["uuid"],
                        gpu["model"],
                        f"{memory['allocated']}/{memory['total']}",
                        bar(memory["allocated"], memory["total"]),
                        f"{cores['allocated']}/{cores['total']}",
                        bar(cores["allocated"], cores["total"]),
                        users[0],
                    ]
                )
                rows.extend([""] * 7 + [user] for user in users[1:])  # one pod per line
            lines.extend(_table(rows, "  "))
        else:
            lines.append("  no GPUs")
        if tenant["quotas"]:
            rows = [["QUOTA", "RESOURCE", "USED/HARD"]]
            for quota in tenant["quotas"]:
                for key, value in quota["resources"].items():
                    rows.append([f"{quota['namespace']}/{quota['name']}", key, f"{value['used']}/{value['hard']}"])
            lines.extend(_table(rows, "  "))
        lines.append("")
    verdict = "OK: every tenant is healthy" if doc["ok"] else "NOT OK: some tenants are unhealthy or unreachable"
    lines.append(style.paint(verdict, doc["ok"]))
    return "\n".join(lines) + "\n"


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
    while True:
        # A fresh lab each refresh: a cluster unreachable last time is asked again.
        with tempfile.TemporaryDirectory(prefix="kamaji-hami-lab-status-") as workdir:
            lab = Lab.open(outputs, runner, Path(workdir))
            tenants = [tenant for tenant in lab.tenants if not args.tenant or tenant.name in args.tenant]
            doc = document([tenant_status(lab, tenant) for tenant in tenants])
        if args.json:
            stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            if args.watch and style.enabled:
                stdout.write("\033[H\033[2J")  # clear the screen between refreshes
            stdout.write(render(doc, style))
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
