"""Stack configuration, parsed once into frozen, validated types.

Every problem is reported before any resource is registered, each line naming
the config key path and the offending value. Defaults for the scalar keys live
in ``Pulumi.yaml`` (the CLI merges them into the stack config), so this module
holds no second copy of them.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from components.addresses import CARVED_POOL_SIZE, AddressRange, parse_address_range, pool_for_subnet
from components.gpus import GPU_CATALOGUE, MAX_MOCK_MEMORY_PER_NODE_MIB, GpuSpec, node_gpu_memory_mib

PROJECT = "kamaji-hami-lab"

_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_KUBERNETES_VERSION = re.compile(r"^v\d+\.\d+\.\d+$")
_CHART_VERSION = re.compile(r"^v?\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?$")
# distribution/reference (grammar.go): a tag is [\w][\w.-]{0,127}.
_IMAGE_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_IMAGE_REFERENCE = re.compile(r"^[a-z0-9][a-z0-9._/:@-]*$")
_MAX_LABEL = 63
_RESERVED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
# The management cluster's kubeconfig is written next to the tenants' as management.kubeconfig.
_RESERVED_TENANT_NAMES = ("management",)
_NODE_POD_SUBNET_SIZE = 256
_SMALLEST_SERVICE_PREFIX = 28

# Scalar keys, all declared with type, default and description in Pulumi.yaml.
SCALAR_KEYS = (
    "managementClusterName",
    "kubernetesVersion",
    "nodeImage",
    "certManagerVersion",
    "metallbVersion",
    "kamajiChartVersion",
    "kamajiImageTag",
    "hamiChartVersion",
    "metallbAddressRange",
    "kindSubnet",
    "controlPlaneReplicas",
    "workersPerTenant",
    "gpuSlots",
)
# Pulumi.yaml cannot declare a list of objects, so this one is documented in the README.
TENANTS_KEY = "tenants"

_TENANT_KEYS = {"name", "gpus", "workers", "gpuSlots", "controlPlaneReplicas", "podCidr", "serviceCidr", "quotas"}
_GPU_KEYS = {"model", "count", "memoryMiB"}
_QUOTA_KEYS = {"namespace", "gpumemMiB", "gpucores", "gpus"}


class ConfigError(pulumi.RunError):
    """Raised with every config problem found, one per line."""


@dataclass(frozen=True)
class GpuQuota:
    """A ResourceQuota in one tenant namespace; None leaves that limit unset."""

    namespace: str
    gpumem_mib: int | None
    gpucores: int | None
    gpus: int | None


@dataclass(frozen=True)
class TenantSettings:
    name: str
    workers: int
    gpus: tuple[GpuSpec, ...]
    gpu_slots: int
    control_plane_replicas: int
    pod_cidr: str
    service_cidr: str
    quotas: tuple[GpuQuota, ...]

    @property
    def data_store_schema(self) -> str:
        # Explicit and unique per tenant so its etcd prefix is known; SQL-safe (no dashes).
        return "tenants_" + self.name.replace("-", "_")

    @property
    def dns_service_ip(self) -> str:
        return str(ipaddress.ip_network(self.service_cidr)[10])


@dataclass(frozen=True)
class Versions:
    kubernetes: str
    cert_manager: str
    metallb: str
    kamaji_chart: str
    kamaji_image_tag: str
    """Kamaji controller image tag, e.g. 26.8.2-edge; "" keeps the chart's default (appVersion)."""
    hami_chart: str


@dataclass(frozen=True)
class LabSettings:
    management_cluster_name: str
    versions: Versions
    node_image: str
    metallb_address_range: AddressRange | None
    kind_subnet: ipaddress.IPv4Network | None
    tenants: tuple[TenantSettings, ...]

    def worker_name(self, tenant: TenantSettings, index: int) -> str:
        """Container name, hostname and Kubernetes node name of a tenant's worker (1-based)."""
        return worker_name(self.management_cluster_name, tenant.name, index)


def worker_name(cluster: str, tenant: str, index: int) -> str:
    # Prefixed with the management cluster so two labs on one host never collide.
    return f"{cluster}-{tenant}-w{index}"


def load_settings() -> LabSettings:
    """Reads this project's stack config (as the CLI hands it to the program)."""
    from pulumi.runtime.config import CONFIG, get_config_env

    prefix = f"{PROJECT}:"
    raw = {**get_config_env(), **CONFIG.get()}
    return parse_settings({key[len(prefix) :]: value for key, value in raw.items() if key.startswith(prefix)})


def parse_settings(raw: Mapping[str, Any]) -> LabSettings:
    """Validates config values (strings, as Pulumi stores them) into LabSettings."""
    errors: list[str] = []
    reader = _Reader(errors)

    for key in sorted(set(raw) - set(SCALAR_KEYS) - {TENANTS_KEY}):
        errors.append(f"{_key(key)}: unknown config key (known: {', '.join((*SCALAR_KEYS, TENANTS_KEY))})")

    cluster_name = reader.scalar_str(raw, "managementClusterName")
    if cluster_name is not None and not _DNS_1123_LABEL.match(cluster_name):
        errors.append(f"{_key('managementClusterName')}: {cluster_name!r} is not a lower-case DNS label")
        cluster_name = None

    versions = Versions(
        kubernetes=reader.version(
            raw, "kubernetesVersion", _KUBERNETES_VERSION, "v<major>.<minor>.<patch>, e.g. v1.36.4"
        ),
        cert_manager=reader.version(raw, "certManagerVersion", _CHART_VERSION, "a semantic version, e.g. v1.21.2"),
        metallb=reader.version(raw, "metallbVersion", _CHART_VERSION, "a semantic version, e.g. v0.16.1"),
        kamaji_chart=reader.version(raw, "kamajiChartVersion", _CHART_VERSION, "a chart version, e.g. 0.0.0+latest"),
        kamaji_image_tag=reader.scalar_str(raw, "kamajiImageTag") or "",
        hami_chart=reader.version(raw, "hamiChartVersion", _CHART_VERSION, "a chart version, e.g. 2.10.0"),
    )

    if versions.kamaji_image_tag and not _IMAGE_TAG.match(versions.kamaji_image_tag):
        errors.append(f"{_key('kamajiImageTag')}: {versions.kamaji_image_tag!r} is not an image tag, e.g. 26.8.2-edge")

    node_image = reader.scalar_str(raw, "nodeImage") or f"kindest/node:{versions.kubernetes}"
    if not _IMAGE_REFERENCE.match(node_image):
        errors.append(f"{_key('nodeImage')}: {node_image!r} is not an image reference")
    elif versions.kubernetes and (tag := _version_tag(node_image)) and tag != versions.kubernetes:
        # Worker kubelets must match the tenants' API servers (and HAMi's kube-scheduler).
        errors.append(
            f"{_key('nodeImage')}: {node_image!r} runs Kubernetes {tag}, "
            f"but kubernetesVersion is {versions.kubernetes}; change both together"
        )

    kind_subnet = reader.parsed(raw, "kindSubnet", _ipv4_network, "an IPv4 CIDR such as 172.18.0.0/16")
    address_range = reader.parsed(
        raw, "metallbAddressRange", parse_address_range, "an IPv4 range a.b.c.d-a.b.c.e or a CIDR"
    )
    if kind_subnet is not None and address_range is not None and not address_range.within(kind_subnet):
        errors.append(f"{_key('metallbAddressRange')}: {address_range} lies outside the kind network {kind_subnet}")
    if kind_subnet is not None and address_range is None:
        try:
            pool_for_subnet(kind_subnet, cluster_name or "")
        except ValueError as problem:
            errors.append(f"{_key('kindSubnet')}: {problem}")

    defaults = {
        "workers": reader.count(raw, "workersPerTenant"),
        "gpuSlots": reader.count(raw, "gpuSlots"),
        "controlPlaneReplicas": reader.count(raw, "controlPlaneReplicas"),
    }
    tenants = _parse_tenants(raw.get(TENANTS_KEY), defaults, cluster_name, reader)

    if address_range is not None and len(tenants) > address_range.size:
        errors.append(
            f"{_key('metallbAddressRange')}: {address_range} has {address_range.size} addresses "
            f"but {len(tenants)} tenants each need one"
        )
    if address_range is None and len(tenants) > CARVED_POOL_SIZE:
        errors.append(
            f"{_key(TENANTS_KEY)}: {len(tenants)} tenants need more than the {CARVED_POOL_SIZE} addresses "
            f"carved from the kind network by default; set {_key('metallbAddressRange')}"
        )

    if errors:
        raise ConfigError("invalid stack configuration:\n  " + "\n  ".join(errors))
    return LabSettings(
        management_cluster_name=cluster_name,
        versions=versions,
        node_image=node_image,
        metallb_address_range=address_range,
        kind_subnet=kind_subnet,
        tenants=tenants,
    )


def _parse_tenants(
    value: Any, defaults: dict[str, Any], cluster_name: str | None, reader: _Reader
) -> tuple[TenantSettings, ...]:
    key = _key(TENANTS_KEY)
    if value is None:
        reader.errors.append(f"{key}: required; set at least one tenant (see README, 'Configuration')")
        return ()
    items = reader.json_value(value, key)
    if items is None:  # not JSON; already reported
        return ()
    if items == []:
        reader.errors.append(f"{key}: expected a non-empty list of tenant objects, got []")
        return ()

    tenants = []
    seen: set[str] = set()
    for path, item in reader.objects(items, key, "tenant objects", _TENANT_KEYS, required={"name"}):
        tenant = _parse_tenant(item, path, defaults, cluster_name, reader)
        if tenant is None:
            continue
        if tenant.name in seen:
            reader.errors.append(f"{path}.name: duplicate tenant name {tenant.name!r}")
            continue
        seen.add(tenant.name)
        tenants.append(tenant)
    return tuple(tenants)


def _parse_tenant(
    item: dict, path: str, defaults: dict[str, Any], cluster_name: str | None, reader: _Reader
) -> TenantSettings | None:
    errors_before = len(reader.errors)

    name = reader.field(item, path, "name", str)
    workers = reader.positive(item, path, "workers", defaults["workers"])
    if name is not None:
        _check_tenant_name(path, name, cluster_name, workers, reader)
    pod_cidr = reader.cidr(item, path, "podCidr", "10.244.0.0/16")
    service_cidr = reader.cidr(item, path, "serviceCidr", "10.96.0.0/16")
    _check_networks(path, pod_cidr, service_cidr, workers, reader)

    tenant = TenantSettings(
        name=name,
        workers=workers,
        gpus=_parse_gpus(item.get("gpus", []), f"{path}.gpus", reader),
        gpu_slots=reader.positive(item, path, "gpuSlots", defaults["gpuSlots"]),
        control_plane_replicas=reader.positive(item, path, "controlPlaneReplicas", defaults["controlPlaneReplicas"]),
        pod_cidr=pod_cidr,
        service_cidr=service_cidr,
        quotas=_parse_quotas(item.get("quotas", []), f"{path}.quotas", reader),
    )
    return tenant if len(reader.errors) == errors_before else None


def _check_tenant_name(path: str, name: str, cluster_name: str | None, workers: int | None, reader: _Reader) -> None:
    if not _DNS_1035_LABEL.match(name) or len(name) > _MAX_LABEL:
        reader.errors.append(
            f"{path}.name: {name!r} is not a DNS-1035 label (lower-case letters, digits and '-', "
            f"starting with a letter, at most {_MAX_LABEL} characters)"
        )
    elif name in _RESERVED_TENANT_NAMES:
        reader.errors.append(f"{path}.name: {name!r} is reserved for the management cluster; choose another name")
    elif cluster_name is not None and workers is not None:
        longest = worker_name(cluster_name, name, workers)
        if len(longest) > _MAX_LABEL:
            reader.errors.append(
                f"{path}.name: {name!r} is too long: its worker node name {longest!r} would exceed "
                f"{_MAX_LABEL} characters"
            )


def _check_networks(
    path: str, pod_cidr: str | None, service_cidr: str | None, workers: int | None, reader: _Reader
) -> None:
    if pod_cidr and workers is not None:
        # The tenant's controller manager hands every node a /24 of the pod CIDR.
        per_node = ipaddress.ip_network(pod_cidr).num_addresses // _NODE_POD_SUBNET_SIZE
        if per_node < workers:
            reader.errors.append(f"{path}.podCidr: {pod_cidr} cannot give each of {workers} workers a /24")
    if service_cidr and ipaddress.ip_network(service_cidr).prefixlen > _SMALLEST_SERVICE_PREFIX:
        reader.errors.append(
            f"{path}.serviceCidr: {service_cidr} is too small; use a /{_SMALLEST_SERVICE_PREFIX} or larger "
            "(the cluster DNS service takes its .10 address)"
        )
    elif pod_cidr and service_cidr and ipaddress.ip_network(pod_cidr).overlaps(ipaddress.ip_network(service_cidr)):
        reader.errors.append(f"{path}.serviceCidr: {service_cidr} overlaps podCidr {pod_cidr}")


def _parse_gpus(value: Any, path: str, reader: _Reader) -> tuple[GpuSpec, ...]:
    gpus = []
    for item_path, item in reader.objects(value, path, "{model, count} objects", _GPU_KEYS, required={"model"}):
        model = reader.field(item, item_path, "model", str)
        count = reader.positive(item, item_path, "count", 1)
        memory = reader.positive(item, item_path, "memoryMiB", GPU_CATALOGUE.get(model))
        if model is not None and memory is None:
            reader.errors.append(
                f"{item_path}.model: unknown GPU model {model!r}; set memoryMiB for it or use one of: "
                + ", ".join(GPU_CATALOGUE)
            )
        if model is not None and count is not None and memory is not None:
            gpus.append(GpuSpec(model=model, count=count, memory_mib=memory))
    total = node_gpu_memory_mib(gpus)
    if total > MAX_MOCK_MEMORY_PER_NODE_MIB:
        reader.errors.append(
            f"{path}: {total} MiB of GPU memory per worker exceeds the mock device plugin's limit of "
            f"{MAX_MOCK_MEMORY_PER_NODE_MIB} MiB; spread the GPUs over more workers"
        )
    return tuple(gpus)


def _parse_quotas(value: Any, path: str, reader: _Reader) -> tuple[GpuQuota, ...]:
    quotas = []
    namespaces: set[str] = set()
    for item_path, item in reader.objects(value, path, "quota objects", _QUOTA_KEYS, required={"namespace"}):
        namespace = reader.field(item, item_path, "namespace", str)
        limits = {key: reader.positive(item, item_path, key, None) for key in ("gpumemMiB", "gpucores", "gpus")}
        if namespace is not None:
            if not _DNS_1123_LABEL.match(namespace) or len(namespace) > _MAX_LABEL:
                reader.errors.append(f"{item_path}.namespace: {namespace!r} is not a DNS label")
            elif namespace in _RESERVED_NAMESPACES:
                reader.errors.append(f"{item_path}.namespace: {namespace!r} is a system namespace; quota it elsewhere")
            elif namespace in namespaces:
                reader.errors.append(f"{item_path}.namespace: duplicate quota namespace {namespace!r}")
            namespaces.add(namespace)
        if all(limit is None for limit in limits.values()):
            reader.errors.append(f"{item_path}: set at least one of gpumemMiB, gpucores, gpus")
        quotas.append(GpuQuota(namespace, limits["gpumemMiB"], limits["gpucores"], limits["gpus"]))
    return tuple(quotas)


class _Reader:
    """Small typed accessors that record a keyed error instead of raising."""

    def __init__(self, errors: list[str]):
        self.errors = errors

    def scalar_str(self, raw: Mapping[str, Any], key: str) -> str | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.errors.append(f"{_key(key)}: expected a string, got {_show(value)}")
            return None
        return value.strip()

    def version(self, raw: Mapping[str, Any], key: str, pattern: re.Pattern, expected: str) -> str | None:
        value = self.scalar_str(raw, key)
        if value is None:
            self.errors.append(f"{_key(key)}: required; expected {expected}")
        elif not pattern.match(value):
            self.errors.append(f"{_key(key)}: {value!r} is not {expected}")
            return None
        return value

    def count(self, raw: Mapping[str, Any], key: str) -> int | None:
        value = raw.get(key)
        if value is None:
            self.errors.append(f"{_key(key)}: required; expected a positive integer")
            return None
        parsed = _to_int(value)
        if parsed is None or parsed < 1:
            self.errors.append(f"{_key(key)}: expected a positive integer, got {_show(value)}")
            return None
        return parsed

    def parsed(self, raw: Mapping[str, Any], key: str, parse, expected: str):
        value = self.scalar_str(raw, key)
        if not value:
            return None
        try:
            return parse(value)
        except ValueError as problem:
            self.errors.append(f"{_key(key)}: {value!r} is not {expected} ({problem})")
            return None

    def json_value(self, value: Any, key: str) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError as problem:
            self.errors.append(f"{key}: not valid JSON ({problem})")
            return None

    def objects(
        self, value: Any, path: str, what: str, allowed: set[str], required: set[str]
    ) -> Iterator[tuple[str, dict]]:
        """(path, object) for each well-formed object of a list; the rest become errors."""
        if not isinstance(value, list):
            self.errors.append(f"{path}: expected a list of {what}, got {_show(value)}")
            return
        for index, item in enumerate(value):
            item_path = f"{path}[{index}]"
            if self.object(item, item_path, allowed, required):
                yield item_path, item

    def object(self, item: Any, path: str, allowed: set[str], required: set[str]) -> bool:
        if not isinstance(item, dict):
            self.errors.append(f"{path}: expected an object, got {_show(item)}")
            return False
        ok = True
        for unknown in sorted(set(item) - allowed):
            self.errors.append(f"{path}.{unknown}: unknown key (allowed: {', '.join(sorted(allowed))})")
            ok = False
        for missing in sorted(required - set(item)):
            self.errors.append(f"{path}.{missing}: required")
            ok = False
        return ok

    def field(self, item: dict, path: str, key: str, kind: type) -> Any:
        value = item.get(key)
        if not isinstance(value, kind):
            self.errors.append(f"{path}.{key}: expected a {kind.__name__}, got {_show(value)}")
            return None
        return value

    def positive(self, item: dict, path: str, key: str, default: int | None) -> int | None:
        if key not in item:
            return default
        value = item[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self.errors.append(f"{path}.{key}: expected a positive integer, got {_show(value)}")
            return None
        return value

    def cidr(self, item: dict, path: str, key: str, default: str) -> str | None:
        value = item.get(key, default)
        try:
            return str(_ipv4_network(value))
        except (TypeError, ValueError) as problem:
            self.errors.append(f"{path}.{key}: {_show(value)} is not an IPv4 CIDR ({problem})")
            return None


def _ipv4_network(value: str) -> ipaddress.IPv4Network:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    network = ipaddress.ip_network(value, strict=True)
    if not isinstance(network, ipaddress.IPv4Network):
        raise ValueError("IPv6 is not supported")
    return network


def _version_tag(image: str) -> str | None:
    """The vX.Y.Z tag of an image reference such as kindest/node:v1.36.4@sha256:..., if it has one."""
    match = re.search(r":(v\d+\.\d+\.\d+)(@|$)", image)
    return match.group(1) if match else None


def _to_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _key(key: str) -> str:
    return f"{PROJECT}:{key}"


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)
