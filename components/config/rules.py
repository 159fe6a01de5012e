"""The rules that join several config values, each a generator of the problems it finds.

The models (``models.py``) call them with the values that passed their own checks and report
every problem at once, one line each; nothing here knows pydantic. A problem is the key path
below the model that broke the rule, and the message.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Sequence
from difflib import get_close_matches
from typing import TYPE_CHECKING, Any

from components.addresses import (
    CARVED_POOL_SIZE,
    DEFAULT_KIND_SUBNET,
    dynamic_range,
    grafana_address,
    home_address,
    pool_for_subnet,
    worker_address,
    worker_address_clashes,
    worker_part,
)
from components.config.values import MAX_LABEL, show
from components.gpus import FULL_GPU_CORES, GPU_CATALOGUE, MAX_MOCK_MEMORY_PER_NODE_MIB, node_gpu_memory_mib
from components.kubeconfig import NoSuchContext, check_kubeconfig
from components.settings import (
    DEDICATED_DATA_STORE_PREFIX,
    KAMAJI_IMAGE_TAG,
    MAX_STATEFULSET_NAME,
    dedicated_data_store_name,
    worker_name,
)

if TYPE_CHECKING:
    from components.config.models import Gpu, Quota, StackConfig, Tenant

_NODE_POD_SUBNET_SIZE = 256
# Each quarter of the lab's docker network keeps at least 4 addresses (components/addresses.py lays it out).
_SMALLEST_KIND_SUBNET = 28
_SMALLEST_SERVICE_PREFIX = 28
SET_KUBECONFIG = "set it with: pulumi config set --secret managementKubeconfig < FILE"
SET_SSH_KEYS = "set it with: pulumi config set --secret --path 'sshPrivateKeys.<name>' < KEY_FILE"
_KIND_RUNS_ONLY_OURS = "the kind cluster this program creates runs nothing it did not install"
# The newest Kubernetes minor Kamaji admits: upgrade.KubeadmVersion "v1.36.0", compared without its
# patch (clastix/kamaji internal/upgrade/kubeadm_version.go and internal/webhook/handlers/tcp_version.go
# @ddbabd8, master, which chart 0.0.0+latest installs by default).
KAMAJI_NEWEST_KUBERNETES = (1, 36)
# The oldest tenant Kubernetes a worker can join: Kamaji writes the tenant's kubeadm-config ConfigMap with
# kubeadm's own upload-config phase (clastix/kamaji internal/kubeadm/uploadconfig.go@ddbabd8, built on
# k8s.io/kubernetes v1.36.3, go.mod), i.e. as kubeadm.k8s.io/v1beta4, which `kubeadm join` reads from
# v1.31 on (kubernetes/kubernetes cmd/kubeadm/app/apis/kubeadm/v1beta4, released with v1.31).
OLDEST_JOINABLE_KUBERNETES = (1, 31)

# A broken rule: the key path below the value that broke it, and what is wrong.
Problem = tuple[tuple[str | int, ...], str]


def repeats(items: Any, key: str, what: str) -> Iterator[Problem]:
    seen: set[str] = set()
    for index, item in enumerate(items if isinstance(items, list | tuple) else ()):
        name = item.get(key) if isinstance(item, dict) else getattr(item, key, None)
        if isinstance(name, str):
            if name in seen:
                yield (index, key), f"duplicate {what} {name!r}"
            seen.add(name)


def gpu_rules(gpu: Gpu) -> Iterator[Problem]:
    if gpu.memory is None:
        known = ", ".join(GPU_CATALOGUE)
        yield ("model",), (f"unknown GPU model {show(gpu.model)}{_closest_models(gpu.model)}; set memoryMiB "
                           f"for it or use one of: {known}")


def _closest_models(model: str) -> str:
    """' (did you mean <the catalogue's closest models>?)', or nothing when none is close; case is ignored.

    Models naming what was written ('A100') come first, then those spelt most alike ('NVIDIA A100 80G').
    """
    by_lower = {name.lower(): name for name in GPU_CATALOGUE}
    typed = model.strip().lower()
    naming = [lower for lower in by_lower if typed and typed in lower]
    alike = get_close_matches(typed, by_lower, n=3)
    close = [by_lower[lower] for lower in dict.fromkeys([*naming, *alike])][:3]
    if not close:
        return ""
    *others, last = map(repr, close)
    return f" (did you mean {', '.join(others) + ' or ' if others else ''}{last}?)"


def quota_rules(quota: Quota) -> Iterator[Problem]:
    if (quota.gpumem_mib, quota.gpucores, quota.gpus) == (None, None, None):
        yield (), "set at least one of gpumemMiB, gpucores, gpus"


def tenant_rules(tenant: Tenant) -> Iterator[Problem]:
    if (total := node_gpu_memory_mib(tenant.gpu_specs)) > MAX_MOCK_MEMORY_PER_NODE_MIB:
        yield ("gpus",), (f"{total} MiB of GPU memory per worker exceeds the mock device plugin's limit of "
                          f"{MAX_MOCK_MEMORY_PER_NODE_MIB} MiB; spread the GPUs over more workers")
    pods, services = ipaddress.ip_network(tenant.pod_cidr), ipaddress.ip_network(tenant.service_cidr)
    if services.prefixlen > _SMALLEST_SERVICE_PREFIX:
        yield ("serviceCidr",), (f"{services} is too small; use a /{_SMALLEST_SERVICE_PREFIX} or larger "
                                 "(the cluster DNS service takes its .10 address)")
    elif pods.overlaps(services):
        yield ("serviceCidr",), f"{services} overlaps podCidr {pods}"
    for (index, key), message in repeats(tenant.quotas, "namespace", "quota namespace"):
        yield ("quotas", index, key), message
    yield from _worker_problems(tenant)
    if tenant.data_store == "dedicated" and len(store := dedicated_data_store_name(tenant.name)) > MAX_STATEFULSET_NAME:
        yield ("dataStore",), (f"'dedicated' needs a tenant name of at most "
                               f"{MAX_STATEFULSET_NAME - len(DEDICATED_DATA_STORE_PREFIX)} characters: its etcd "
                               f"StatefulSet {store!r} would be longer than Kubernetes allows ({MAX_STATEFULSET_NAME})")


def _worker_problems(tenant: Tenant) -> Iterator[Problem]:
    if tenant.machines and tenant.workers is not None:
        yield ("workers",), "unused with machines: each machine is one worker"
    if tenant.machines and tenant.node_image is not None:
        yield ("nodeImage",), "unused with machines: they run their own kubelet, not a node image"
    if tenant.gpu_devices == "real" and not tenant.machines:
        yield ("gpuDevices",), "'real' needs machines: container workers have no GPUs of their own"
    if tenant.gpu_devices == "real" and tenant.gpus:
        yield ("gpus",), "unused with gpuDevices real: HAMi's device plugin counts the machines' GPUs"


def image_runs_another_version(image: str, version: str, wanted_by: str) -> str | None:
    """Why a kindest/node image cannot run `version` (its tag names another), or None."""
    tag = re.search(r":(v\d+\.\d+\.\d+)(@|$)", image)
    if tag and tag.group(1) != version:
        return f"{image!r} runs Kubernetes {tag.group(1)}, but {wanted_by} {version}; change both together"
    return None


def kamaji_refuses(version: str, lab: dict[str, Any]) -> str | None:
    """Why Kamaji's admission webhook would refuse `version`, or its workers could not join, or None.

    The newest is known only for KAMAJI_IMAGE_TAG, the default: another kamajiImageTag or a provided Kamaji may
    admit newer ones.
    """
    major, minor = (int(part) for part in version.lstrip("v").split(".")[:2])
    if (major, minor) < OLDEST_JOINABLE_KUBERNETES:
        oldest = "v{}.{}".format(*OLDEST_JOINABLE_KUBERNETES)
        return (
            f"{version} is older than {oldest}: Kamaji writes the tenant's kubeadm-config as kubeadm.k8s.io/v1beta4, "
            f"which kubeadm reads only from {oldest} on, so no worker could join; choose {oldest} or newer"
        )
    other_kamaji = lab.get("kamaji_image_tag") not in (None, "", KAMAJI_IMAGE_TAG) or lab.get("kamaji") == "provided"
    if other_kamaji or (major, minor) <= KAMAJI_NEWEST_KUBERNETES:
        return None
    newest = "v{}.{}".format(*KAMAJI_NEWEST_KUBERNETES)
    return (
        f"{version} is newer than Kamaji supports ({newest}.x with Kamaji {KAMAJI_IMAGE_TAG}, the default; its webhook "
        f"would refuse the control plane); choose a {newest} release or pin a newer Kamaji with kamajiImageTag"
    )


# Tenants with their place in the list: when some are invalid, the rules check the others where they stand.
Indexed = Sequence[tuple[int, "Tenant"]]


def across_tenants(tenants: Indexed, lab: dict[str, Any]) -> Iterator[Problem]:
    """The rules on tenants that need the lab's keys above them (`lab`: those that are valid)."""
    yield from _tenant_problems(tenants, lab.get("management_cluster_name"), lab.get("workers_per_tenant"))
    yield from _tenant_versions(tenants, lab)
    yield from _machine_keys(tenants, lab.get("ssh_private_keys"))


def _tenant_problems(tenants: Indexed, cluster: str | None, default_workers: int | None) -> Iterator[Problem]:
    yield from _machines_shared(tenants)
    for index, tenant in tenants:
        workers = len(tenant.machines) or tenant.workers or default_workers
        if workers is None:  # workersPerTenant is wrong, and says so itself
            continue
        if not tenant.machines and cluster is not None and \
                len(longest := worker_name(cluster, tenant.name, workers)) > MAX_LABEL:
            yield (index, "name"), (f"{tenant.name!r} is too long: its worker node name {longest!r} would exceed "
                                    f"{MAX_LABEL} characters")
        # The tenant's controller manager hands every node a /24 of the pod CIDR.
        if ipaddress.ip_network(tenant.pod_cidr).num_addresses // _NODE_POD_SUBNET_SIZE < workers:
            yield (index, "podCidr"), f"{tenant.pod_cidr} cannot give each of {workers} workers a /24"


def _tenant_versions(tenants: Indexed, lab: dict[str, Any]) -> Iterator[Problem]:
    """A tenant's own kubernetesVersion and nodeImage against Kamaji and each other."""
    for index, tenant in tenants:
        version = tenant.kubernetes_version or lab.get("kubernetes_version")
        if tenant.kubernetes_version and (problem := kamaji_refuses(version, lab)):
            yield (index, "kubernetesVersion"), problem
        image = tenant.node_image
        if version and image and (problem := image_runs_another_version(image, version, "the tenant runs")):
            yield (index, "nodeImage"), problem


def _machine_keys(tenants: Indexed, keys: dict[str, str] | None) -> Iterator[Problem]:
    for index, tenant in tenants:
        for number, machine in enumerate(tenant.machines):
            if keys is not None and machine.ssh_key not in keys:
                known = ", ".join(map(repr, keys)) or "none"
                yield ((index, "machines", number, "sshKey"),
                       f"{machine.ssh_key!r} is not in sshPrivateKeys (it has: {known}); {SET_SSH_KEYS}")


def _machines_shared(tenants: Indexed) -> Iterator[Problem]:
    """A machine joins one tenant, and names its worker resources: each name, address and host key once in the lab."""
    first: dict[tuple[str, str], str] = {}
    for index, tenant in tenants:
        for number, machine in enumerate(tenant.machines):
            for key, value in (("name", machine.name), ("address", f"{machine.address}:{machine.port}"),
                               ("hostKey", machine.host_key)):
                if (key, value) in first:
                    # The same host key is one machine under two entries (an IP address and a host name?).
                    twice = ": one machine, listed twice, would be joined and reset by both" if key == "hostKey" else ""
                    yield (index, "machines", number, key), f"{value!r} is also the {key} of {first[key, value]}{twice}"
                first.setdefault((key, value), f"tenants[{index}].machines[{number}]")


def stack_rules(config: StackConfig) -> Iterator[Problem]:
    yield from _mode_problems(config)
    yield from _ssh_key_problems(config)
    inherited = any(tenant.kubernetes_version is None for tenant in config.tenants)
    if inherited and (problem := kamaji_refuses(config.kubernetes_version, dict(config))):
        yield ("kubernetesVersion",), problem
    pool, subnet = config.metallb_address_range, config.kind_subnet
    if pool is not None and subnet is not None and not pool.within(subnet):
        yield ("metallbAddressRange",), f"{pool} lies outside the lab's docker network {subnet}"
    if pool is None and subnet is not None:
        try:
            pool_for_subnet(subnet, config.management_cluster_name)
        except ValueError as problem:
            yield ("kindSubnet",), str(problem)
    if config.management_cluster == "kind":
        yield from _kind_network_problems(config)
    # One address each, and Grafana's (the pool's last).
    if pool is not None and len(config.tenants) + 1 > pool.size:
        yield ("metallbAddressRange",), f"{pool} has {pool.size} addresses but {len(config.tenants)} tenants " \
            "need one each, and the last is kept for Grafana"
    if pool is None and config.carves_a_pool and len(config.tenants) + 1 > CARVED_POOL_SIZE:
        yield ("tenants",), (f"{len(config.tenants)} tenants need more than the {CARVED_POOL_SIZE - 1} addresses "
                             f"carved from the lab's docker network by default (of {CARVED_POOL_SIZE}, the last is "
                             "kept for Grafana); set kamaji-hami-lab:metallbAddressRange")
    yield from _api_address_problems(config)
    for index, tenant in enumerate(config.tenants):
        if tenant.data_store == "dedicated" and dedicated_data_store_name(tenant.name) == config.kamaji_data_store:
            yield ("tenants", index, "dataStore"), (
                f"'dedicated' would name the tenant's own DataStore {config.kamaji_data_store!r}, which is "
                "kamajiDataStore, the shared one; rename the tenant or keep it shared")


def stack_warnings(config: StackConfig) -> Iterator[Problem]:
    """What is valid but likely not what the user meant."""
    yield from _moved_api_addresses(config)
    for index, tenant in enumerate(config.tenants):
        if tenant.gpu_devices == "real":  # the machines' GPUs are known only once they join
            continue
        workers = len(tenant.machines) or tenant.workers or config.workers_per_tenant
        memory = node_gpu_memory_mib(tenant.gpu_specs) * workers
        # HAMi hands out gpucores as a percentage of one card's cores, so a card holds FULL_GPU_CORES.
        gpus = sum(gpu.count for gpu in tenant.gpus) * workers
        for number, quota in enumerate(tenant.quotas):
            if quota.gpumem_mib is not None and quota.gpumem_mib > memory:
                yield (("tenants", index, "quotas", number, "gpumemMiB"),
                       f"{quota.gpumem_mib} MiB is more GPU memory than the tenant's GPUs have ({memory} MiB on "
                       f"{workers} worker(s)); the quota never limits anything")
            if quota.gpucores is not None and quota.gpucores > FULL_GPU_CORES * gpus:
                yield (("tenants", index, "quotas", number, "gpucores"),
                       f"{quota.gpucores} is more GPU cores than the tenant's GPUs have ({FULL_GPU_CORES * gpus}: "
                       f"{gpus} GPU(s) of {FULL_GPU_CORES} on {workers} worker(s)); the quota never limits "
                       "anything")


def _mode_problems(config: StackConfig) -> Iterator[Problem]:
    """Combinations of managementCluster and the platform pieces that cannot work."""
    if config.management_cluster == "kind":
        existing_only = {
            "managementKubeconfig": config.management_kubeconfig,
            "managementContext": config.management_context,
            "dockerNetwork": config.docker_network,
        }
        for key in (key for key, value in existing_only.items() if value):
            yield (key,), "only used with managementCluster existing; kind's cluster and network are its own"
        pieces = {"certManager": config.cert_manager, "loadBalancer": config.load_balancer, "kamaji": config.kamaji}
        for key in (key for key, mode in pieces.items() if mode == "provided"):
            yield (key,), f"'provided' needs managementCluster existing: {_KIND_RUNS_ONLY_OURS}"
    else:
        yield from _existing_cluster_problems(config)
    if config.load_balancer == "provided" and config.metallb_address_range is not None:
        yield ("metallbAddressRange",), "unused with loadBalancer provided (its addresses are the cluster's)"
    if config.kamaji == "provided" and config.cert_manager == "install":
        yield ("certManager",), "set it to provided: a provided Kamaji already runs on a cert-manager"
    if config.kamaji == "provided" and config.kamaji_image_tag:
        yield ("kamajiImageTag",), "unused with kamaji provided (the program installs no Kamaji); leave it empty"
    if config.kamaji == "install" and config.kamaji_data_store != "default":
        yield (
            ("kamajiDataStore",),
            f"{config.kamaji_data_store!r} with kamaji install: the installed chart creates only 'default'",
        )


def _existing_cluster_problems(config: StackConfig) -> Iterator[Problem]:
    if not config.management_kubeconfig:
        yield ("managementKubeconfig",), f"required with managementCluster existing; {SET_KUBECONFIG}"
    else:
        try:
            check_kubeconfig(config.management_kubeconfig, config.management_context or None)
        except NoSuchContext as problem:
            yield ("managementContext",), str(problem)
        except ValueError as problem:
            yield ("managementKubeconfig",), str(problem)
    if config.kind_subnet is not None:
        yield ("kindSubnet",), "describes kind's network; an existing management cluster has none"
    if config.load_balancer == "metallb" and config.metallb_address_range is None:
        yield (
            ("metallbAddressRange",),
            "required with managementCluster existing and loadBalancer metallb: there is no lab docker network to "
            "carve a pool from; give free addresses the cluster's nodes can announce",
        )
    if not config.docker_network and config.has_container_workers:
        yield (
            ("dockerNetwork",),
            "required with managementCluster existing while a tenant has container workers (kindest/node on "
            "this host's Docker); name the docker network from which the cluster's LoadBalancer addresses are "
            "reachable, or give every tenant machines",
        )
    if config.docker_network and not config.has_container_workers:
        yield ("dockerNetwork",), "unused: every tenant's workers are machines, so no Docker is used"


def _ssh_key_problems(config: StackConfig) -> Iterator[Problem]:
    if config.ssh_private_keys and not any(tenant.machines for tenant in config.tenants):
        yield ("sshPrivateKeys",), "only used by machine workers, and no tenant lists machines"


def _kind_network_problems(config: StackConfig) -> Iterator[Problem]:
    """The pool and the workers' fixed addresses on the lab's docker network, laid out by kind-up.sh (its lower
    half is Docker's and the workers'), known before anything exists: kindSubnet, else the default."""
    subnet = config.kind_subnet or DEFAULT_KIND_SUBNET
    if subnet.prefixlen > _SMALLEST_KIND_SUBNET:
        yield ("kindSubnet",), (f"{subnet} is too small to split into Docker's quarter, the workers' quarter "
                                f"and the MetalLB pools' half; give a /{_SMALLEST_KIND_SUBNET} or larger")
        return
    named = f"the lab's docker network {subnet}" + ("" if config.kind_subnet else " (the default: kindSubnet is empty)")
    pool = config.metallb_address_range
    if pool is not None and config.kind_subnet is None and not pool.within(subnet):
        yield ("metallbAddressRange",), f"{pool} lies outside {named}; set kamaji-hami-lab:kindSubnet to the " \
            "subnet the range belongs to"
    elif pool is not None and pool.within(subnet) and subnet.broadcast_address in pool:
        yield ("metallbAddressRange",), (
            f"{pool} reaches the broadcast address of the lab's docker network {subnet}, which no Service can "
            "answer on (the pool's last address is Grafana's); end it below")
    elif pool is not None and pool.within(subnet) and int(pool.first) < int(subnet[subnet.num_addresses // 2]):
        yield ("metallbAddressRange",), (
            f"{pool} reaches into the lower half of the lab's docker network {subnet}, which holds Docker's own "
            f"addresses ({dynamic_range(subnet)}) and the workers' fixed ones ({worker_part(subnet)}); choose "
            "addresses of its upper half")
    containers = [(index, tenant) for index, tenant in enumerate(config.tenants) if not tenant.machines]
    workers = {worker_name(config.management_cluster_name, tenant.name, number): index
               for index, tenant in containers
               for number in range(1, (tenant.workers or config.workers_per_tenant) + 1)}
    for worker, earlier in worker_address_clashes(subnet, list(workers)).items():
        yield ("tenants", workers[worker], "name"), (
            f"its worker {worker} would get the fixed address {worker_address(subnet, worker)}, which {earlier} "
            f"already has on {named}; the address follows from the worker's name: rename the tenant, or give "
            f"kindSubnet a larger subnet (the default /{DEFAULT_KIND_SUBNET.prefixlen} has "
            f"{worker_part(DEFAULT_KIND_SUBNET).num_addresses} worker addresses)")


def _api_address_problems(config: StackConfig) -> Iterator[Problem]:
    """A pinned API address lies in the lab's pool, is not Grafana's, and is no other tenant's pin."""
    try:
        pool = config.address_pool
    except ValueError:
        return  # the lab's docker network is too small to carve a pool from, said above
    pins = [(index, tenant) for index, tenant in enumerate(config.tenants) if tenant.api_address]
    if pool is None:  # the cluster's own LoadBalancer, or a required metallbAddressRange missing (said above)
        if config.load_balancer == "provided":
            for index, _ in pins:
                yield ("tenants", index, "apiAddress"), "unused with loadBalancer provided: the cluster's own " \
                    "LoadBalancer picks the addresses"
        return
    pinned_by: dict[str, str] = {}
    for index, tenant in pins:
        address = ipaddress.IPv4Address(tenant.api_address)
        if address not in pool:
            problem = f"{address} lies outside the lab's MetalLB pool {pool}"
        elif address == grafana_address(pool):
            problem = f"{address} is the pool's last address, which Grafana gets; choose another of {pool}"
        elif tenant.api_address in pinned_by:
            problem = f"{address} is also the apiAddress of tenant {pinned_by[tenant.api_address]!r}"
        else:
            pinned_by[tenant.api_address] = tenant.name
            continue
        yield ("tenants", index, "apiAddress"), problem


def _moved_api_addresses(config: StackConfig) -> Iterator[Problem]:
    """Tenants whose name gives an address another tenant has: theirs may change when the tenants do."""
    pool = config.address_pool
    if pool is None or len(config.tenants) + 1 > pool.size:
        return
    addresses = config.api_addresses
    for index, tenant in enumerate(config.tenants):
        address, home = addresses[tenant.name], home_address(pool, tenant.name)
        if not tenant.api_address and address != home:
            yield ("tenants", index, "name"), (
                f"its name gives the API address {home}, which another tenant has, so it gets {address}; that "
                "one may change when other tenants are removed, reordered or pinned, and a tenant whose address "
                f"changes re-joins its workers. Keep it: pulumi config set --path 'tenants[{index}].apiAddress' "
                f"{address}")
