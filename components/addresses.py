"""Addresses on the lab's docker network: its layout, MetalLB pools and the container workers' fixed addresses."""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass

# Docker hands container addresses out from the bottom of the subnet, so pools
# sit in its upper half: blocks of 51 addresses counted down from a few below the
# broadcast address. Each lab takes the block its name hashes to, so labs on one
# network (every lab on a host shares it) get different blocks; whether a
# block is really free is checked on the host (scripts/check-address-pool.sh).
CARVED_POOL_SIZE = 51
_GAP_BELOW_BROADCAST = 5


@dataclass(frozen=True)
class AddressRange:
    first: ipaddress.IPv4Address
    last: ipaddress.IPv4Address

    @property
    def size(self) -> int:
        return int(self.last) - int(self.first) + 1

    def within(self, network: ipaddress.IPv4Network) -> bool:
        return self.first in network and self.last in network

    def __contains__(self, address: ipaddress.IPv4Address) -> bool:
        return self.first <= address <= self.last

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"


def parse_address_range(text: str) -> AddressRange:
    """Accepts 'a.b.c.d-a.b.c.e' or a CIDR, as MetalLB's IPAddressPool does."""
    if "-" in text:
        first_text, last_text = (part.strip() for part in text.split("-", 1))
        first, last = ipaddress.IPv4Address(first_text), ipaddress.IPv4Address(last_text)
        if last < first:
            raise ValueError(f"{last} comes before {first}")
        return AddressRange(first, last)
    network = ipaddress.IPv4Network(text.strip(), strict=True)
    return AddressRange(network.network_address, network.broadcast_address)


def carved_blocks(subnet: ipaddress.IPv4Network) -> int:
    """How many pool-sized blocks fit in the subnet's upper half."""
    top = int(subnet.broadcast_address) - _GAP_BELOW_BROADCAST
    lower_half_end = int(subnet.network_address) + subnet.num_addresses // 2
    return max(0, (top - lower_half_end) // CARVED_POOL_SIZE)


def pool_for_subnet(subnet: ipaddress.IPv4Network, lab_name: str) -> AddressRange:
    """The default pool of the lab named lab_name: one block of the subnet's upper half."""
    blocks = carved_blocks(subnet)
    if blocks == 0:
        raise ValueError(f"subnet {subnet} is too small to hold a {CARVED_POOL_SIZE}-address pool in its upper half")
    block = int.from_bytes(hashlib.sha256(lab_name.encode()).digest()[:8], "big") % blocks
    last = ipaddress.IPv4Address(int(subnet.broadcast_address) - _GAP_BELOW_BROADCAST - block * CARVED_POOL_SIZE)
    return AddressRange(ipaddress.IPv4Address(int(last) - CARVED_POOL_SIZE + 1), last)


# The annotation by which a Service asks MetalLB for its addresses (go.universe.tf/metallb controller/service.go
# @v0.16.1: AnnotationLoadBalancerIPs; the older metallb.universe.tf/ prefix is read as well).
METALLB_ADDRESS_ANNOTATION = "metallb.io/loadBalancerIPs"


def asking_metallb_for(address: str | None) -> dict[str, str]:
    """The annotations by which a Service asks MetalLB for `address`; none without one."""
    return {METALLB_ADDRESS_ANNOTATION: address} if address else {}

# Every address of the lab's MetalLB pool is asked for by name (the pool does not hand addresses out on its
# own): a tenant's API server gets one that follows from the tenant's name, so a tenant re-created after
# `make down`/`make up` comes back at the address its old kubeconfigs name, and no other Service can take it
# first. Grafana gets the pool's last address, which no tenant is given. Two names may give one address: the
# tenant listed later then takes the next free one, and keeps it for as long as the tenants before it do.


def grafana_address(pool: AddressRange) -> ipaddress.IPv4Address:
    """The address Grafana's LoadBalancer Service asks for: the pool's last, kept from the tenants."""
    return pool.last


def home_address(pool: AddressRange, tenant: str) -> ipaddress.IPv4Address:
    """The API address the name `tenant` gives: one of the pool's addresses below Grafana's."""
    slots = pool.size - 1
    if slots < 1:
        raise ValueError(f"the pool {pool} has no address besides Grafana's")
    return pool.first + int.from_bytes(hashlib.sha256(tenant.encode()).digest()[:8], "big") % slots


def tenant_addresses(pool: AddressRange, tenants: list[str], pinned: dict[str, ipaddress.IPv4Address]) -> dict[
        str, ipaddress.IPv4Address]:
    """Each tenant's API address: its pinned one, else its home address, else (taken by a pinned tenant or one
    listed earlier) the next free one above it, wrapping below Grafana's. Pinned addresses are taken as given
    (checked by the caller); the pool must hold every tenant besides Grafana."""
    if len(tenants) > pool.size - 1:
        raise ValueError(f"the pool {pool} holds {pool.size - 1} tenants besides Grafana, not {len(tenants)}")
    taken = set(pinned.values())
    addresses = {}
    for tenant in tenants:
        if tenant in pinned:
            addresses[tenant] = pinned[tenant]
            continue
        address = home_address(pool, tenant)
        while address in taken:
            address = address + 1 if address + 1 < pool.last else pool.first
        taken.add(address)
        addresses[tenant] = address
    return addresses


# The lab's network as this lab lays it out (scripts/kind-up.sh creates it so): the first quarter
# is Docker's own (--ip-range: the kind nodes and any container without a fixed address), the
# second quarter holds the workers' fixed addresses, and the upper half the MetalLB pools above.
# Docker gives a restarted container a new address unless it has a fixed one
# (kubernetes-sigs/kind#2045), and a fixed one needs a subnet the network was created with
# (moby/moby api/types/network/endpoint.go@v28.5.2, validateEndpointIPAddress). Docker hands
# addresses without a fixed one out of the --ip-range only, while a fixed one may lie anywhere
# in the subnet (libnetwork/ipams/defaultipam/allocator.go@v28.5.2, getAddress).
DEFAULT_KIND_SUBNET = ipaddress.IPv4Network("172.30.0.0/16")
"""The subnet kind-up.sh creates the lab's network with when kindSubnet is empty. Not 172.18.0.0/16, where
Docker usually puts kind's own `kind` network: Docker refuses a subnet another network has. At the top of
Docker's default pools (172.17.0.0/16, docker0's, upwards), far from the low ones it hands out first, and
skipped by Docker once the lab's network uses it; not 172.31.0.0/16, the AWS default VPC's."""


def dynamic_range(subnet: ipaddress.IPv4Network) -> ipaddress.IPv4Network:
    """Where Docker picks addresses for containers without a fixed one: the subnet's first quarter."""
    return next(subnet.subnets(prefixlen_diff=2))


def worker_part(subnet: ipaddress.IPv4Network) -> ipaddress.IPv4Network:
    """Where the container workers' fixed addresses lie: the subnet's second quarter."""
    return list(subnet.subnets(prefixlen_diff=2))[1]


def worker_address(subnet: ipaddress.IPv4Network, worker: str) -> ipaddress.IPv4Address:
    """The fixed address of the worker container named `worker` (its name includes the lab's and
    the tenant's): a function of that name alone, so no other tenant or lab moves it."""
    part = worker_part(subnet)
    slot = int.from_bytes(hashlib.sha256(worker.encode()).digest()[:8], "big") % part.num_addresses
    return part.network_address + slot


def worker_address_clashes(subnet: ipaddress.IPv4Network, workers: list[str]) -> dict[str, str]:
    """{worker: the earlier worker whose address it would get} for every worker that lands on a taken one."""
    taken: dict[ipaddress.IPv4Address, str] = {}
    clashes = {}
    for worker in workers:
        address = worker_address(subnet, worker)
        if address in taken:
            clashes[worker] = taken[address]
        else:
            taken[address] = worker
    return clashes
