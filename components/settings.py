"""The settings the components receive: plain frozen values, already validated.

``components.config`` reads and checks the stack config and builds these.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from components.addresses import DEFAULT_KIND_SUBNET, AddressRange, grafana_address, worker_address
from components.gpus import GpuSpec

# What the lab was checked against, by default: the chart stays 0.0.0+latest (Kamaji publishes no other open
# chart), and its controller image is this edge release, the commit the code's Kamaji citations name
# (clastix/kamaji 26.8.2-edge = ddbabd8). docs/configuration.md, "Pinning Kamaji", says how to move it.
KAMAJI_IMAGE_TAG = "26.8.2-edge"
# The Pod Security levels a tenant may enforce in its namespaces (kubernetes/pod-security-admission
# api/constants.go@v0.36.0); privileged enforces nothing.
DEFAULT_POD_SECURITY = "baseline"
POD_SECURITY_LEVELS = (DEFAULT_POD_SECURITY, "restricted", "privileged")

# A dedicated DataStore's name, which also names its namespace, Helm release and etcd StatefulSet (the chart's
# fullname: clastix/kamaji-etcd charts/kamaji-etcd/templates/_helpers.tpl@92f31f0, etcd.fullname). A StatefulSet's
# name stays 11 characters under a label's 63, room for the hash in its pods' controller-revision-hash label.
DEDICATED_DATA_STORE_PREFIX = "etcd-"
MAX_STATEFULSET_NAME = 52


def dedicated_data_store_name(tenant: str) -> str:
    return DEDICATED_DATA_STORE_PREFIX + tenant


@dataclass(frozen=True)
class GpuQuota:
    """A ResourceQuota in one tenant namespace; None leaves that limit unset."""

    namespace: str
    gpumem_mib: int | None
    gpucores: int | None
    gpus: int | None


@dataclass(frozen=True)
class Machine:
    """A worker that is a real machine, reached over SSH; its name is its Kubernetes node name."""

    name: str
    address: str
    port: int
    user: str
    """root, or a user with passwordless sudo."""
    private_key: str = field(repr=False)
    """SSH private key text from secret config; components keep it a Pulumi secret."""
    host_key: str
    """'<type> <base64>' the machine must present; the scripts connect to nothing else."""
    adopt: bool = False
    """A join may reset it although it holds Kubernetes state that is not this lab's."""
    node_ip: str = ""
    """The address its kubelet advertises; empty: the kubelet's choice (its default route's)."""
    flannel_interface: str = ""
    """Interface name or address flannel uses on it; empty: flannel's choice (its default route's)."""
    proxy_jump: str = ""
    """Bastions to reach it through (ssh -J); empty: none, or what the user's ssh_config says."""


@dataclass(frozen=True)
class TenantSettings:
    name: str
    workers: int
    """How many: kindest/node containers, or its machines."""
    gpus: tuple[GpuSpec, ...]
    gpu_slots: int
    control_plane_replicas: int
    pod_cidr: str
    service_cidr: str
    quotas: tuple[GpuQuota, ...]
    data_store: str
    """DataStore its control plane names: the lab's shared one (kamajiDataStore), or its dedicated one."""
    kubernetes_version: str
    """Its control plane, kubelets, kube-proxy and HAMi's kube-scheduler all run this."""
    node_image: str
    """kindest/node image of its container workers; its tag is `kubernetes_version`."""
    machines: tuple[Machine, ...] = ()
    """Non-empty: its workers are these machines instead of `workers` containers."""
    real_gpus: bool = False
    """HAMi's NVIDIA device plugin finds the machines' own GPUs; False: mock GPUs from `gpus`."""
    sleeping: bool = False
    """Its control plane runs no replicas and its workers are stopped (kept, not removed)."""
    api_address: str | None = None
    """The address of the lab's MetalLB pool its API server asks for; None: the cluster's own LoadBalancer picks."""
    pod_security: str = DEFAULT_POD_SECURITY
    """The Pod Security level its API server enforces in every namespace but the lab's own."""
    dedicated_data_store: bool = False
    """Its `data_store` is an etcd of its own (components/dedicated_datastore.py), not the lab's shared one."""

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
    """Empty means KAMAJI_IMAGE_TAG, the tag the lab was checked against."""
    hami_chart: str
    mock_device_plugin: str
    """Image reference of HAMi's mock device plugin, tag included."""


@dataclass(frozen=True)
class ExistingCluster:
    kubeconfig: str
    """Content from secret config; its current context is the configured one."""
    docker_network: str | None
    """Docker network of the docker CLI's daemon for container workers; None: no Docker."""


@dataclass(frozen=True)
class Provided:
    """Platform pieces the management cluster already runs: checked instead of installed."""

    cert_manager: bool
    load_balancer: bool
    kamaji: bool


@dataclass(frozen=True)
class LabSettings:
    management_cluster_name: str
    versions: Versions
    node_image: str
    address_pool: AddressRange | None
    """The pool the lab's MetalLB announces (metallbAddressRange, else carved from the kind network); None: the
    cluster's own LoadBalancer gives the addresses."""
    kind_subnet: ipaddress.IPv4Network | None
    tenants: tuple[TenantSettings, ...]
    existing_cluster: ExistingCluster | None
    """None: the program creates a kind cluster."""
    provided: Provided
    kamaji_data_store: str
    observability: bool = False
    """Prometheus and Grafana in the management cluster, scraping every tenant."""

    @property
    def grafana_address(self) -> str | None:
        """The pool address Grafana's Service asks for; None: the cluster's own LoadBalancer picks one."""
        return str(grafana_address(self.address_pool)) if self.address_pool else None

    def worker_name(self, tenant: TenantSettings, index: int) -> str:
        """Container name, hostname and Kubernetes node name of a tenant's worker (1-based)."""
        return worker_name(self.management_cluster_name, tenant.name, index)

    @property
    def network_subnet(self) -> ipaddress.IPv4Network | None:
        """The IPv4 subnet of the kind network the lab lays out (kindSubnet, else the default); None on an
        existing management cluster, whose Docker network is not the lab's."""
        return None if self.existing_cluster else self.kind_subnet or DEFAULT_KIND_SUBNET

    def worker_address(self, tenant: TenantSettings, index: int) -> str | None:
        """The fixed address of a tenant's container worker on the kind network; None where none is pinned."""
        subnet = self.network_subnet
        return str(worker_address(subnet, self.worker_name(tenant, index))) if subnet else None


def worker_name(cluster: str, tenant: str, index: int) -> str:
    # Prefixed with the management cluster so two labs on one host never collide.
    return f"{cluster}-{tenant}-w{index}"
