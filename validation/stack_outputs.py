"""Reading the Pulumi stack outputs and writing their kubeconfigs to private files.

Shared by ``python -m validation`` and ``scripts/write_kubeconfigs.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from validation.exit_codes import EXIT_NO_OUTPUTS, EXIT_USAGE
from validation.host import Runner

MANAGEMENT = "management"
PULUMI_OUTPUTS = ("pulumi", "stack", "output", "--show-secrets", "--json")
# Where the Makefile keeps the lab: local state under ~/.pulumi unless PULUMI_BACKEND_URL
# names another backend, and stack dev (make's STACK).
DEFAULT_BACKEND_URL = "file://~"
DEFAULT_STACK = "dev"
# What `pulumi stack output --json` prints instead of a secret value without --show-secrets.
REDACTED = "[secret]"

# Stack-output quota fields and the ResourceQuota spec.hard keys that enforce them.
QUOTA_KEYS = {
    "gpumemMiB": "limits.nvidia.com/gpumem",
    "gpucores": "limits.nvidia.com/gpucores",
    "gpus": "requests.nvidia.com/gpu",
}

# The secret output holding each tenant's team kubeconfig, not in system:masters (docs/security.md).
TEAM_KUBECONFIGS = "teamKubeconfigs"
# The tenant key podSecurity's levels: Pod Security's own (kubernetes/pod-security-admission api/constants.go@v0.36.2).
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")

# Tenant names become file names, so accept only what Kubernetes accepts as a name.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class OutputsError(ValueError):
    """The stack outputs are missing or do not follow the documented contract."""


@dataclass(frozen=True)
class Gpu:
    model: str
    memory_mib: int
    count: int


@dataclass(frozen=True)
class Quota:
    namespace: str
    hard: dict[str, int]  # ResourceQuota spec.hard key -> expected value


@dataclass(frozen=True)
class Tenant:
    name: str
    endpoint: str
    kubernetes_version: str
    namespace: str
    data_store_schema: str
    workers: tuple[str, ...]
    gpus_per_worker: tuple[Gpu, ...]
    gpu_slots: int
    quotas: tuple[Quota, ...]
    real_gpus: bool = False
    """Its GPUs are the machines' own, found by HAMi's NVIDIA plugin: `gpus_per_worker` is empty in the outputs."""
    sleeping: bool = False
    """Its stack config puts it to sleep: Kamaji runs none of its control plane, its workers are stopped."""
    pod_security: str = "baseline"
    """The Pod Security level its API server enforces; `privileged` is the tenant's declared opt-out."""

    @property
    def has_gpus(self) -> bool:
        return any(gpu.count for gpu in self.gpus_per_worker)

    @property
    def largest_gpu_mib(self) -> int:
        return max((gpu.memory_mib for gpu in self.gpus_per_worker if gpu.count), default=0)

    @property
    def smallest_gpu_mib(self) -> int:
        return min((gpu.memory_mib for gpu in self.gpus_per_worker if gpu.count), default=0)

    def expected_allocatable(self) -> dict[str, int]:
        """What every worker advertises once its mock GPUs are registered."""
        cards = sum(gpu.count for gpu in self.gpus_per_worker)
        return {
            "nvidia.com/gpu": cards * self.gpu_slots,
            "nvidia.com/gpumem": sum(gpu.memory_mib * gpu.count for gpu in self.gpus_per_worker),
            "nvidia.com/gpucores": 100 * cards,
        }


# Config keys of the platform pieces a management cluster may provide (the `platform` output).
PLATFORM_PIECES = ("certManager", "loadBalancer", "kamaji")
# The DataStore of an installed Kamaji (clastix/kamaji charts/kamaji/values.yaml@26.8.2-edge: defaultDatastoreName).
INSTALLED_DATASTORE = "default"


@dataclass(frozen=True)
class Platform:
    """What the program installed and what it found provided; a stack without the output installed it all."""

    provided: frozenset[str] = frozenset()  # keys of PLATFORM_PIECES
    data_store: str = INSTALLED_DATASTORE

    def is_provided(self, piece: str) -> bool:
        return piece in self.provided


@dataclass(frozen=True)
class UnreadableTenant:
    """A tenant whose entry in the outputs (or its kubeconfig) cannot be used, and why."""

    name: str
    reason: str
    position: int  # among the tenants of the outputs, so its row keeps its place
    endpoint: str = ""  # unknown: a row shows it where a Tenant's would be


@dataclass(frozen=True)
class StackOutputs:
    tenants: dict[str, Tenant]
    kubeconfigs: dict[str, str]  # MANAGEMENT and each tenant name -> kubeconfig YAML
    platform: Platform = Platform()
    observability: bool = False
    """Prometheus and Grafana run (the stack exports grafanaUrl)."""
    unreadable: dict[str, UnreadableTenant] = field(default_factory=dict)
    """Tenants left out of `tenants`: only parse_fleet leaves any, parse_outputs refuses the document."""
    team_kubeconfigs: dict[str, str] | None = None
    """Each tenant's team credential (the TEAM_KUBECONFIGS output); None for a stack made before it existed."""


def add_outputs_arguments(parser: argparse.ArgumentParser) -> None:
    """--stack and --outputs, as every command that reads the stack outputs takes them."""
    parser.add_argument("--stack", default=DEFAULT_STACK, help=f"the stack to read; default: {DEFAULT_STACK}")
    parser.add_argument("--outputs", metavar="FILE|-", help="stack outputs JSON instead of asking pulumi")


def pulumi_environment() -> dict[str, str]:
    """The backend make uses: PULUMI_BACKEND_URL if set, else local state under ~/.pulumi."""
    return {"PULUMI_BACKEND_URL": os.environ.get("PULUMI_BACKEND_URL") or DEFAULT_BACKEND_URL}


def read_outputs_document(
    source: str | None, runner: Runner, stdin: TextIO | None = None, stack: str = DEFAULT_STACK
) -> dict[str, Any]:
    """Load the outputs JSON from a file, from stdin ("-"), or from pulumi's `stack` (None)."""
    if source is None:
        argv = (*PULUMI_OUTPUTS, "--stack", stack)
        environment = pulumi_environment()
        result = runner.run(argv, timeout=120, env=environment)
        if not result.ok:
            backend = environment["PULUMI_BACKEND_URL"]
            raise OutputsError(f"`{' '.join(argv)}` (backend {backend}) failed: {result.error}")
        text, origin = result.stdout, "pulumi stack output"
    elif source == "-":
        text, origin = (stdin or sys.stdin).read(), "standard input"
    else:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as error:
            raise OutputsError(f"cannot read {source}: {error.strerror}") from None
        origin = source
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise OutputsError(f"{origin} is not valid JSON: {error}") from None
    refuse_redacted(document, origin)
    if not isinstance(document, dict):
        raise OutputsError(f"{origin}: expected a JSON object of stack outputs")
    return document


def refuse_redacted(value: Any, where: str) -> None:
    if value == REDACTED:
        raise OutputsError(
            f"{where} holds {REDACTED!r} instead of kubeconfigs: the outputs were printed without "
            "--show-secrets; use `pulumi stack output --show-secrets --json`"
        )


def kubeconfigs_in(document: Mapping[str, Any]) -> dict[str, str]:
    """Kubeconfigs by cluster name, from all stack outputs or from the `kubeconfigs` output alone."""
    if "kubeconfigs" in document:
        refuse_redacted(document["kubeconfigs"], "outputs.kubeconfigs")
        refuse_redacted(document.get("managementKubeconfig"), "outputs.managementKubeconfig")
        tenants = _field(document, "kubeconfigs", dict, "outputs")
        management = document.get("managementKubeconfig")
    else:
        tenants, management = document, None
    kubeconfigs: dict[str, str] = {}
    for name, text in tenants.items():
        check_tenant_name(name, "kubeconfigs")
        refuse_redacted(text, f"outputs.kubeconfigs.{name}")
        if not isinstance(text, str) or not text.strip():
            raise OutputsError(f"kubeconfigs.{name}: expected kubeconfig YAML")
        kubeconfigs[name] = text
    if isinstance(management, str) and management.strip():
        kubeconfigs[MANAGEMENT] = management
    return kubeconfigs


def team_kubeconfigs_in(document: Mapping[str, Any]) -> dict[str, str] | None:
    """The team kubeconfig of each tenant, by tenant name; None when the stack does not export them (older stacks)."""
    if document.get(TEAM_KUBECONFIGS) is None:
        return None
    refuse_redacted(document[TEAM_KUBECONFIGS], f"outputs.{TEAM_KUBECONFIGS}")
    kubeconfigs = {}
    for name, text in _field(document, TEAM_KUBECONFIGS, dict, "outputs").items():
        check_tenant_name(name, TEAM_KUBECONFIGS)
        refuse_redacted(text, f"outputs.{TEAM_KUBECONFIGS}.{name}")
        if not isinstance(text, str) or not text.strip():
            raise OutputsError(f"{TEAM_KUBECONFIGS}.{name}: expected kubeconfig YAML")
        kubeconfigs[name] = text
    return kubeconfigs


TEAM_SUFFIX = "-team"


def team_file_name(tenant: str) -> str:
    """The name a tenant's team kubeconfig is written under: kubeconfigs/<tenant>-team.kubeconfig."""
    return f"{tenant}{TEAM_SUFFIX}"


def files_of(document: Mapping[str, Any]) -> dict[str, str]:
    """Every kubeconfig to write, by file name (without .kubeconfig): the admin ones and the teams'.

    OutputsError when a team's file would take the name of a tenant's (tenant x-team next to tenant x)."""
    files = kubeconfigs_in(document)
    for tenant, text in (team_kubeconfigs_in(document) or {}).items():
        name = team_file_name(tenant)
        if name in files:
            raise OutputsError(
                f"tenant {tenant!r}'s team kubeconfig would be {name}.kubeconfig, the name of tenant {name!r}'s "
                f"admin one; rename one of the tenants"
            )
        files[name] = text
    return files


def check_tenant_name(name: str, where: str) -> None:
    """Tenant names become <name>.kubeconfig next to management.kubeconfig."""
    if name == MANAGEMENT:
        raise OutputsError(
            f"{where}: a tenant is named {MANAGEMENT!r}, which is reserved for the management cluster "
            f"(its kubeconfig is {MANAGEMENT}.kubeconfig); rename the tenant in the stack config and run pulumi up"
        )
    if not _DNS_LABEL.fullmatch(name):
        raise OutputsError(
            f"{where}: {name!r} is not usable as a tenant name (expected a lowercase DNS label, e.g. tenant-a)"
        )


def parse_outputs(document: Mapping[str, Any]) -> StackOutputs:
    tenants_doc = _field(document, "tenants", dict, "outputs")
    for name in tenants_doc:
        check_tenant_name(name, "tenants")
    tenants = {name: _parse_tenant(name, spec) for name, spec in tenants_doc.items()}
    kubeconfigs = kubeconfigs_in(document)
    missing = [name for name in (MANAGEMENT, *tenants) if name not in kubeconfigs]
    if missing:
        raise OutputsError(f"no kubeconfig in the outputs for: {', '.join(missing)}")
    return StackOutputs(tenants=tenants, kubeconfigs=kubeconfigs, platform=_parse_platform(document),
                        observability="grafanaUrl" in document, team_kubeconfigs=team_kubeconfigs_in(document))


def parse_fleet(document: Mapping[str, Any]) -> StackOutputs:
    """The outputs as the status view reads them: each tenant on its own, so that one tenant's bad entry
    or kubeconfig puts that tenant in `unreadable`, with why, and the others are still shown.

    OutputsError only for what no tenant can be read without: no `tenants` object, or kubeconfigs
    printed without --show-secrets. A kubeconfig of no listed tenant (a stray or unusable name) is
    left out, never written. The platform is not read: the view does not show it.
    """
    tenants_doc = _field(document, "tenants", dict, "outputs")
    refuse_redacted(document.get("kubeconfigs"), "outputs.kubeconfigs")
    refuse_redacted(document.get("managementKubeconfig"), "outputs.managementKubeconfig")
    tenants: dict[str, Tenant] = {}
    unreadable: dict[str, UnreadableTenant] = {}
    kubeconfigs: dict[str, str] = {}
    for position, (name, spec) in enumerate(tenants_doc.items()):
        try:
            check_tenant_name(name, "tenants")
            tenant = _parse_tenant(name, spec)
            kubeconfigs[name] = _tenant_kubeconfig(document, name)
        except OutputsError as error:
            unreadable[name] = UnreadableTenant(name, str(error), position)
        else:
            tenants[name] = tenant
    management = document.get("managementKubeconfig")
    if isinstance(management, str) and management.strip():
        kubeconfigs[MANAGEMENT] = management
    return StackOutputs(
        tenants=tenants, kubeconfigs=kubeconfigs, observability="grafanaUrl" in document, unreadable=unreadable
    )


def _tenant_kubeconfig(document: Mapping[str, Any], name: str) -> str:
    text = _field(_field(document, "kubeconfigs", dict, "outputs"), name, str, "kubeconfigs")
    refuse_redacted(text, f"outputs.kubeconfigs.{name}")
    if not text.strip():
        raise OutputsError(f"kubeconfigs.{name}: expected kubeconfig YAML, got an empty string")
    return text


def _parse_platform(document: Mapping[str, Any]) -> Platform:
    if document.get("platform") is None:
        return Platform()  # exported since the platform pieces may be provided; older labs installed them all
    spec = _field(document, "platform", dict, "outputs")
    provided = _field(spec, "provided", list, "platform")
    unknown = [piece for piece in provided if piece not in PLATFORM_PIECES]
    if unknown:
        raise OutputsError(f"platform.provided: unknown piece {unknown[0]!r} (expected one of {PLATFORM_PIECES})")
    return Platform(provided=frozenset(provided), data_store=_field(spec, "dataStore", str, "platform"))


def write_private_file(path: Path, text: str) -> None:
    """Replace path with text; the file is owner-only (0600) from the moment it exists."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def write_kubeconfig_files(directory: Path, kubeconfigs: Mapping[str, str]) -> dict[str, Path]:
    """Write <directory>/<name>.kubeconfig for each cluster; returns the paths by name.

    The directory is made private (0700) when this user owns it; a shared one such as /tmp (sticky) is left
    as it is. OSError when it cannot be made or written.
    """
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    status = directory.stat()
    if status.st_uid == os.getuid() and not status.st_mode & stat.S_ISVTX:
        directory.chmod(0o700)  # an older run may have left it readable by others
    paths = {}
    for name, text in kubeconfigs.items():
        paths[name] = directory / f"{name}.kubeconfig"
        write_private_file(paths[name], text)
    return paths


def _parse_tenant(name: str, spec: Any) -> Tenant:
    where = f"tenants.{name}"
    if not isinstance(spec, dict):
        raise OutputsError(f"{where}: expected an object")
    gpus = tuple(
        Gpu(
            model=_field(gpu, "model", str, f"{where}.gpusPerWorker[{i}]"),
            memory_mib=_field(gpu, "memoryMiB", int, f"{where}.gpusPerWorker[{i}]"),
            count=_field(gpu, "count", int, f"{where}.gpusPerWorker[{i}]"),
        )
        for i, gpu in enumerate(_field(spec, "gpusPerWorker", list, where))
    )
    quota_list = spec.get("quotas") or []  # outputs written before quotas existed have none
    if not isinstance(quota_list, list):
        raise OutputsError(f"{where}.quotas: expected a list, got {type(quota_list).__name__}")
    quotas = tuple(_parse_quota(quota, f"{where}.quotas[{i}]") for i, quota in enumerate(quota_list))
    workers = _field(spec, "workers", list, where)
    if not all(isinstance(worker, str) and worker for worker in workers):
        raise OutputsError(f"{where}.workers: expected a list of worker names")
    return Tenant(
        name=name,
        endpoint=_field(spec, "endpoint", str, where),
        kubernetes_version=_field(spec, "kubernetesVersion", str, where),
        namespace=_field(spec, "namespace", str, where),
        data_store_schema=_field(spec, "dataStoreSchema", str, where),
        workers=tuple(workers),
        gpus_per_worker=gpus,
        gpu_slots=_field(spec, "gpuSlots", int, where),
        quotas=quotas,
        real_gpus=_gpu_devices(spec, where) == "real",
        sleeping=_sleeping(spec, where),
        pod_security=_pod_security(spec, where),
    )


def _pod_security(spec: dict, where: str) -> str:
    # Outputs written before the podSecurity key have none: the lab's default level is the one expected.
    level = spec.get("podSecurity", "baseline")
    if level not in POD_SECURITY_LEVELS:
        raise OutputsError(f"{where}.podSecurity: expected one of {', '.join(POD_SECURITY_LEVELS)}, got {level!r}")
    return level


def _sleeping(spec: dict, where: str) -> bool:
    # Outputs written before tenants could sleep have no sleeping fact: those tenants were awake.
    sleeping = spec.get("sleeping", False)
    if not isinstance(sleeping, bool):
        raise OutputsError(f"{where}.sleeping: expected true or false, got {sleeping!r}")
    return sleeping


def _gpu_devices(spec: dict, where: str) -> str:
    # Outputs written before machine workers existed have no gpuDevices: their GPUs were mock ones.
    devices = spec.get("gpuDevices", "mock")
    if devices not in ("mock", "real"):
        raise OutputsError(f"{where}.gpuDevices: expected 'mock' or 'real', got {devices!r}")
    return devices


def _parse_quota(quota: Any, where: str) -> Quota:
    hard = {
        key: _field(quota, field, int, where)
        for field, key in QUOTA_KEYS.items()
        if isinstance(quota, dict) and quota.get(field) is not None
    }
    return Quota(namespace=_field(quota, "namespace", str, where), hard=hard)


_JSON_TYPES = {dict: "an object", list: "a list", str: "a string", int: "an integer"}


def _field(doc: Any, key: str, kind: type, where: str) -> Any:
    value = doc.get(key) if isinstance(doc, Mapping) else None
    if value is None:
        raise OutputsError(f"{where}.{key}: missing")
    # bool is an int subclass, but `true` is never a valid count.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        # Name only the type: values may be secrets.
        raise OutputsError(f"{where}.{key}: expected {_JSON_TYPES[kind]}, got {type(value).__name__}")
    return value


class OneTenantUnusable(Exception):
    """A one-tenant command cannot go on with the stack outputs: the message, and the exit code to end with."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def outputs_with_tenant(source: str | None, runner: Runner, stack: str, tenant: str) -> StackOutputs:
    """The stack outputs (from source, or pulumi) of a stack that has `tenant`; OneTenantUnusable otherwise."""
    try:
        outputs = parse_outputs(read_outputs_document(source, runner, None, stack))
    except OutputsError as error:
        raise OneTenantUnusable(str(error), EXIT_NO_OUTPUTS) from None
    if tenant not in outputs.tenants:
        raise OneTenantUnusable(f"no tenant {tenant!r}; the stack has {', '.join(outputs.tenants)}", EXIT_USAGE)
    return outputs
