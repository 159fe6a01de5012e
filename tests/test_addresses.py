"""MetalLB pools carved from the kind docker network, whatever its size."""

import ipaddress

import pytest

from components.addresses import metallb_pool, parse_address_range


@pytest.mark.parametrize(
    ("subnet", "pool"),
    [
        ("172.18.0.0/16", "172.18.255.200-172.18.255.250"),
        ("10.253.7.0/24", "10.253.7.200-10.253.7.250"),
        ("192.168.64.0/20", "192.168.79.200-192.168.79.250"),
    ],
)
def test_pool_sits_at_the_top_of_the_kind_subnet(subnet, pool):
    assert metallb_pool(subnet, None) == pool


@pytest.mark.parametrize("subnet", ["172.18.0.0/16", "10.253.7.0/24"])
def test_pool_stays_clear_of_the_addresses_docker_hands_out_first(subnet):
    network = ipaddress.ip_network(subnet)
    carved = parse_address_range(metallb_pool(subnet, None))
    assert carved.within(network)
    assert int(carved.first) > int(network.network_address) + network.num_addresses // 2
    assert carved.last < network.broadcast_address


def test_configured_range_is_used_when_inside_the_subnet():
    assert metallb_pool("172.18.0.0/16 \n", parse_address_range("172.18.10.0/28")) == "172.18.10.0-172.18.10.15"


def test_configured_range_outside_the_real_subnet_is_an_error():
    with pytest.raises(ValueError, match="metallbAddressRange: 10.0.0.1-10.0.0.9 lies outside the kind network"):
        metallb_pool("172.18.0.0/16", parse_address_range("10.0.0.1-10.0.0.9"))
