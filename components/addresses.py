"""MetalLB address pools carved from the kind docker network."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

# Docker hands container addresses out from the bottom of the subnet, so the pool
# sits near the top: 51 addresses ending a few below the broadcast address
# (172.18.255.200-172.18.255.250 for a /16, .200-.250 for a /24).
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


def pool_for_subnet(subnet: ipaddress.IPv4Network) -> AddressRange:
    """The default pool inside the kind network, kept in the subnet's upper half."""
    last = ipaddress.IPv4Address(int(subnet.broadcast_address) - _GAP_BELOW_BROADCAST)
    first = ipaddress.IPv4Address(int(last) - CARVED_POOL_SIZE + 1)
    lower_half_end = int(subnet.network_address) + subnet.num_addresses // 2
    if int(first) <= lower_half_end:
        raise ValueError(f"subnet {subnet} is too small to hold a {CARVED_POOL_SIZE}-address pool in its upper half")
    return AddressRange(first, last)


def metallb_pool(kind_subnet: str, override: AddressRange | None) -> str:
    """The pool MetalLB announces: the configured range, else one carved from the subnet.

    Runs once the kind network exists; a configured range outside it is an error
    rather than a pool whose addresses nothing can reach.
    """
    subnet = ipaddress.IPv4Network(kind_subnet.strip(), strict=True)
    if override is None:
        return str(pool_for_subnet(subnet))
    if not override.within(subnet):
        raise ValueError(f"kamaji-hami-lab:metallbAddressRange: {override} lies outside the kind network {subnet}")
    return str(override)
