"""Address ranges at their edges: half inside a network, reversed, or a CIDR with host bits set."""

import ipaddress

import pytest

from components.addresses import parse_address_range

KIND = ipaddress.IPv4Network("172.18.0.0/16")


def test_a_range_reaching_past_the_network_is_not_within_it():
    assert not parse_address_range("172.18.255.200-172.19.0.10").within(KIND)
    assert not parse_address_range("172.17.255.250-172.18.0.10").within(KIND)


def test_a_reversed_range_names_both_ends():
    with pytest.raises(ValueError) as refused:
        parse_address_range("172.18.255.250-172.18.255.200")
    assert str(refused.value) == "172.18.255.200 comes before 172.18.255.250"


def test_a_cidr_with_host_bits_is_refused_not_widened():
    # An address with host bits set is not a network; widening it to one would hand MetalLB
    # (or the pool carving) addresses nobody asked for.
    with pytest.raises(ValueError):
        parse_address_range("172.18.255.201/29")


def test_a_range_with_a_second_dash_names_the_part_that_is_not_an_address():
    # The first dash splits the range; what follows it must be one address.
    with pytest.raises(ValueError) as refused:
        parse_address_range("172.18.255.200-172.18.255.210-172.18.255.220")
    assert str(refused.value) == "Expected 4 octets in '172.18.255.210-172.18.255.220'"
