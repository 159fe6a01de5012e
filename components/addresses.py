"""MetalLB address pools carved from the kind docker network."""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass

# Docker hands container addresses out from the bottom of the subnet, so pools
# sit in its upper half: blocks of 51 addresses counted down from a few below the
# broadcast address. Each lab takes the block its name hashes to, so labs on one
# kind network (every kind cluster shares it) get different blocks; whether a
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
