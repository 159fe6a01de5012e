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


def metallb_pool(kind_subnet: str, override: AddressRange | None, lab_name: str) -> str:
    """The pool MetalLB announces: the configured range, else the lab's block of the subnet.

    Runs once the kind network exists; a configured range outside it is an error
    rather than a pool whose addresses nothing can reach.
    """
    subnet = ipaddress.IPv4Network(kind_subnet.strip(), strict=True)
    if override is None:
        return str(pool_for_subnet(subnet, lab_name))
    if not override.within(subnet):
        raise ValueError(f"kamaji-hami-lab:metallbAddressRange: {override} lies outside the kind network {subnet}")
    return str(override)


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
