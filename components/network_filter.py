"""The lab's filter on its docker network: each container worker reaches only what its tenant needs.

What it allows and drops, and why, is in docs/architecture.md ("The network filter"); the rules are in
scripts/network-filter-rules.sh, put on the Docker host by scripts/network-filter.sh.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

import pulumi

from components.commands import script_command
from components.settings import LabSettings
from components.tenant_control_plane import API_PORT, KONNECTIVITY_PORT

# A worker reaches its tenant's API server and Konnectivity server, both behind the tenant's API address.
API_PORTS = f"{API_PORT},{KONNECTIVITY_PORT}"

# Linux names each boot anew (proc(5)); a reboot empties the kernel's rules, and the next `up` then sees a new
# value here and installs the filter again. The Docker host is this one (make preflight refuses a remote daemon).
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def host_boot() -> str:
    """This host's boot ID; empty where there is none (not Linux)."""
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class FilteredTenant:
    """A tenant with container workers on the lab's network, as the filter sees it."""

    name: str
    api_address: str
    pod_cidr: str
    workers: tuple[str, ...]
    """The workers' fixed addresses (components/addresses.py, worker_address)."""


def filtered_tenants(lab: LabSettings) -> tuple[FilteredTenant, ...]:
    """Every tenant with container workers, when the lab lays its own network out (a kind lab, whose MetalLB pool
    gives every tenant its API address); none otherwise: machines are on networks the lab does not own, and an
    existing cluster's Docker network pins no worker address."""
    if lab.network_subnet is None:
        return ()
    return tuple(
        FilteredTenant(
            tenant.name,
            str(tenant.api_address),
            tenant.pod_cidr,
            tuple(str(lab.worker_address(tenant, index)) for index in range(1, tenant.workers + 1)),
        )
        for tenant in lab.tenants
        if not tenant.machines
    )


def tenants_spec(tenants: tuple[FilteredTenant, ...]) -> str:
    """TENANTS as network-filter-rules.sh reads it: a line per tenant, its API address, pod CIDR and workers."""
    return "".join(
        f"{tenant.name} {tenant.api_address} {tenant.pod_cidr} {' '.join(tenant.workers)}\n" for tenant in tenants
    )


@dataclass(frozen=True)
class NetworkFilterArgs:
    lab_identity: pulumi.Input[str]
    """Names the filter's chains and marks its jumps: another lab's are never touched."""
    network: str
    subnet: ipaddress.IPv4Network
    node_image: str
    """The image the filter's short-lived container runs (kindest/node ships iptables)."""
    tenants: tuple[FilteredTenant, ...]
    after: tuple[pulumi.Resource, ...]
    """The lab's network exists and the node image is pulled."""


class NetworkFilter(pulumi.ComponentResource):
    """Installs the filter once the lab's network exists, again whenever a worker, tenant or API address
    changes (the command's environment is the whole plan of it) and after a reboot of the host, and removes
    it on destroy."""

    def __init__(self, name: str, args: NetworkFilterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:NetworkFilter", name, None, opts)
        spec = tenants_spec(args.tenants)
        self.installed = script_command(
            f"{name}-rules",
            "network-filter.sh",
            {
                "LAB_IDENTITY": args.lab_identity,
                "KIND_NETWORK": args.network,
                "SUBNET": str(args.subnet),
                "NODE_IMAGE": args.node_image,
                "API_PORTS": API_PORTS,
                "TENANTS": spec,
                "HOST_BOOT": host_boot(),
            },
            delete="network-filter-down.sh",
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(args.after),
                # The chains' names follow from the identity alone: a replacement's remove, run after its
                # install, would take the new rules away.
                delete_before_replace=True,
            ),
        )
        self.register_outputs({"tenants": spec})
