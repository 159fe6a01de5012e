"""MetalLB pools: a block of the kind network per lab, clear of Docker's own addresses."""

import ipaddress

import pytest

from components.addresses import CARVED_POOL_SIZE, parse_address_range, pool_for_subnet


def pool(subnet, lab):
    return pool_for_subnet(ipaddress.IPv4Network(subnet), lab)


def disjoint(first, second):
    return first.last < second.first or second.last < first.first


@pytest.mark.parametrize("subnet", ["172.18.0.0/16", "10.253.7.0/24", "192.168.64.0/20"])
@pytest.mark.parametrize("lab", ["kamaji", "lab-b", "ci-1234"])
def test_pool_stays_clear_of_the_addresses_docker_hands_out_first(subnet, lab):
    # Docker's IPAM hands out container addresses from the bottom of the subnet (gateway .1 first).
    network = ipaddress.ip_network(subnet)
    carved = pool(subnet, lab)
    assert carved.size == CARVED_POOL_SIZE
    assert carved.within(network)
    assert int(carved.first) > int(network.network_address) + network.num_addresses // 2
    assert carved.last < network.broadcast_address


def test_two_lab_names_on_one_subnet_get_disjoint_pools():
    # Two labs beside each other on the one `kind` network, e.g. a second checkout with another name.
    assert disjoint(pool("172.18.0.0/16", "kamaji"), pool("172.18.0.0/16", "kamaji-2"))
    assert disjoint(pool("172.18.0.0/16", "lab-a"), pool("172.18.0.0/16", "lab-b"))


def test_the_default_lab_stays_off_the_range_kamajis_kind_guide_uses():
    # clastix/kamaji docs/content/getting-started/kamaji-kind.md carves <a.b>.255.200-<a.b>.255.250.
    guide = parse_address_range("172.18.255.200-172.18.255.250")
    assert disjoint(pool("172.18.0.0/16", "kamaji"), guide)


def test_a_subnet_too_small_for_a_pool_is_an_error():
    with pytest.raises(ValueError, match="too small"):
        pool("10.253.7.0/26", "kamaji")
