"""The frame: the rows drawn for a terminal or a log, fitted to a width."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from typing import TextIO

from validation.status.rows import AsleepRow, Document, TenantRow, internal_error

BAR_WIDTH = 10
WIDTH = 100  # the width when stdout is not a terminal (or its size is unknown); --wide does not try to fit
MIN_WIDTH = 40  # a narrower terminal still gets this layout, its lines wrapped by the terminal
MiB_PER_GiB = 1024


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


def render(doc: Document, style: Style, wide: bool = False, width: int = WIDTH) -> str:
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


def on_store(tenant: TenantRow) -> str:
    """The DataStore its TenantControlPlane says the tenant's data is in, as the header line ends."""
    return f"  datastore {tenant['dataStore']}" if tenant["dataStore"] else ""


def render_asleep(tenant: AsleepRow, say: Callable[..., None], wide: bool) -> None:
    """Asleep: its state as Kamaji reports it and what it holds while it sleeps."""
    health = "asleep" if tenant["healthy"] else "UNHEALTHY, asleep"
    say(f"{tenant['name']}  {tenant['version']}  {health}  {tenant['endpoint']}{on_store(tenant)}", tenant["healthy"])
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


def render_tenant(tenant: TenantRow | AsleepRow, say: Callable[..., None], wide: bool, width: int = WIDTH) -> None:
    if tenant.get("asleep"):
        render_asleep(tenant, say, wide)
        return
    health = "healthy" if tenant["healthy"] else "UNHEALTHY"
    header = f"{tenant['name']}  {tenant['version'] or '-'}  {health}  {tenant['endpoint']}{on_store(tenant)}"
    say(header, tenant["healthy"])
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


def render_gpus(tenant: TenantRow, say: Callable[..., None], wide: bool, width: int = WIDTH) -> None:
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
