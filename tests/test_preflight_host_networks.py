"""The preflight's look at the host's own networks (routes, nameservers) before the lab's docker network exists,
and its reading of what Docker 29 prints for a network without an --ip-range."""

from __future__ import annotations

import ipaddress
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.addresses import DEFAULT_KIND_SUBNET as D
from tests.test_preflight import HOST_NETWORK_FILES, ROUTES_HEADER, preflight, route_line, run_preflight
from tests.test_preflight_modes import LAB_NETWORK, NO_LAB_NETWORK, config_json, with_kind_network

ROUTES = "proc/net/route"
HOME_ROUTES = HOST_NETWORK_FILES[ROUTES]


def on_host(tmp_path, files=None, networks=None, **values):
    """A host without the lab's network yet, whose own files `files` replaces, for a stack with `values`."""
    host, _ = with_kind_network(tmp_path, config_json([{"name": "a"}], **values), NO_LAB_NETWORK, networks, files)
    return host


def suggestions(out: str) -> set[ipaddress.IPv4Network]:
    said = re.findall(r"fix: pulumi config set kamaji-hami-lab:kindSubnet (\S+)", out)
    return {ipaddress.IPv4Network(s) for s in said}


def test_a_planned_subnet_over_the_hosts_lan_is_refused_with_a_free_one(tmp_path, capsys):
    code, out = run_preflight(on_host(tmp_path, kindSubnet="192.168.0.0/16"), capsys, "--stack", "dev")

    assert code == 1
    assert "ERROR   kamaji-hami-lab:kindSubnet is 192.168.0.0/16, which overlaps this host's own network " \
           "(route 192.168.1.0/24 dev wlp2s0)" in out
    (spare,) = suggestions(out)
    assert spare.is_private and not spare.overlaps(ipaddress.IPv4Network("192.168.1.0/24"))


def test_the_default_subnet_over_a_lan_the_host_is_on_is_refused(tmp_path, capsys):
    # A LAN in 172.30/16 (an office's, say): Docker would create the bridge over it and the LAN would be cut off.
    routes = HOME_ROUTES + route_line("eno1", "172.30.8.0/22", metric=100)
    code, out = run_preflight(on_host(tmp_path, {ROUTES: routes}), capsys, "--stack", "dev")

    assert code == 1
    assert f"kamaji-hami-lab:kindSubnet is empty, so the lab plans with its default {D}, which overlaps this " \
           "host's own network (route 172.30.8.0/22 dev eno1)" in out
    assert D not in suggestions(out) and all(not s.overlaps(ipaddress.IPv4Network("172.30.8.0/22"))
                                              for s in suggestions(out))


@pytest.mark.parametrize("path", ["etc/resolv.conf", "run/systemd/resolve/resolv.conf"])
def test_a_planned_subnet_holding_a_nameserver_is_refused(tmp_path, capsys, path):
    server = D.network_address + 53
    code, out = run_preflight(on_host(tmp_path, {path: f"# managed\nnameserver {server}\nsearch lan\n"}),
                              capsys, "--stack", "dev")

    assert code == 1
    assert f"which holds the nameserver {server} of /{path}" in out
    assert all(server not in spare for spare in suggestions(out))


@pytest.mark.parametrize("resolv", ["nameserver fe80::1%eth0\n", "nameserver\n", "nameserver not-an-address\n", ""])
def test_nameservers_that_are_no_ipv4_address_are_no_clash(tmp_path, capsys, resolv):
    host = on_host(tmp_path, {"etc/resolv.conf": resolv, "run/systemd/resolve/resolv.conf": resolv})
    assert run_preflight(host, capsys, "--stack", "dev") == (0, "preflight: all good\n")


@pytest.mark.parametrize(("other", "clashes"), [(str(D.network_address - 256) + "/24", False),
                                                (str(D.broadcast_address + 1) + "/24", False),
                                                (str(D.broadcast_address - 255) + "/24", True),
                                                ("172.16.0.0/12", True)])
def test_an_on_link_route_clashes_exactly_when_it_shares_an_address(tmp_path, capsys, other, clashes):
    routes = HOME_ROUTES + route_line("eno2", other)
    code, out = run_preflight(on_host(tmp_path, {ROUTES: routes}), capsys, "--stack", "dev")

    if clashes:
        assert code == 1 and f"(route {other} dev eno2)" in out
    else:
        assert (code, out) == (0, "preflight: all good\n")


def test_a_route_through_a_gateway_is_a_warning(tmp_path, capsys):
    # A VPN's split tunnel: the lab's bridge, more specific, would take these addresses from it, but the VPN may not
    # use them (Docker's own reasoning for leaving such routes out of its choice).
    routes = HOME_ROUTES + route_line("tun0", "172.16.0.0/12", "10.8.0.1", flags=0x0003)
    code, out = run_preflight(on_host(tmp_path, {ROUTES: routes}), capsys, "--stack", "dev")

    assert code == 0
    assert "WARNING kamaji-hami-lab:kindSubnet is empty, so the lab plans with its default 172.30.0.0/16, which " \
           "overlaps the route 172.16.0.0/12 dev tun0 via 10.8.0.1 of this host" in out
    assert suggestions(out) and all(not s.overlaps(ipaddress.IPv4Network("172.16.0.0/12")) for s in suggestions(out))


@pytest.mark.parametrize("route", [
    route_line("tun0", "0.0.0.0/1", "10.8.0.1", flags=0x0003),  # a full tunnel's default route, in halves
    route_line("tun0", "128.0.0.0/1", "10.8.0.1", flags=0x0003),
    route_line("eno1", "0.0.0.0/0", "172.30.0.1", flags=0x0003),  # a default route, whatever its gateway
    route_line("lo", "172.30.0.0/16", flags=0x0201),  # an unreachable route rejects, it reaches nothing
])
def test_default_like_and_rejecting_routes_are_no_clash(tmp_path, capsys, route):
    host = on_host(tmp_path, {ROUTES: HOME_ROUTES + route})
    assert run_preflight(host, capsys, "--stack", "dev") == (0, "preflight: all good\n")


def test_a_docker_networks_own_bridge_route_is_named_once_as_that_network(tmp_path, capsys):
    routes = HOME_ROUTES + route_line("br-5e3a9c1f0d2b", str(D))
    code, out = run_preflight(on_host(tmp_path, {ROUTES: routes}, {"compose_default": str(D)}), capsys,
                              "--stack", "dev")

    assert code == 1
    assert f"overlaps the docker network compose_default ({D})" in out
    assert "br-5e3a9c1f0d2b" not in out and out.count("ERROR") == 1


def test_the_labs_own_bridge_that_appeared_meanwhile_is_no_clash(tmp_path, capsys):
    # Another lab created the network between the preflight's looks: its bridge route is there now.
    routes = HOME_ROUTES + route_line("br-0c1d2e3f4a5b", str(D))
    host = on_host(tmp_path, {ROUTES: routes}, {LAB_NETWORK: str(D)})
    assert run_preflight(host, capsys, "--stack", "dev") == (0, "preflight: all good\n")


@pytest.mark.parametrize("routes", [
    "",  # an empty read
    "Iface\tDestination\n",  # cut short: not the kernel's header
    ROUTES_HEADER + "\n" + route_line("eno1", "192.168.1.0/24").replace("0001A8C0", "0001A8G0"),  # not hex
    ROUTES_HEADER + "\n" + "eno1\t0001A8C0\t00000000\t0001\n",  # a line without its mask
    ROUTES_HEADER + "\n" + route_line("eno1", "192.168.1.0/24").replace("00FFFFFF", "00FF00FF"),  # no netmask
], ids=["empty", "no-header", "not-hex", "short-line", "bad-mask"])
def test_routes_that_cannot_be_read_whole_are_said_to_be_unchecked(tmp_path, capsys, routes):
    code, out = run_preflight(on_host(tmp_path, {ROUTES: routes}), capsys, "--stack", "dev")

    assert code == 0
    assert f"WARNING cannot read this host's routes (/proc/net/route), so {D} was not compared" in out
    assert "all good" not in out


def test_a_host_with_no_routes_at_all_has_nothing_to_clash_with(tmp_path, capsys):
    host = on_host(tmp_path, {ROUTES: ROUTES_HEADER.ljust(127) + "\n"})
    assert run_preflight(host, capsys, "--stack", "dev") == (0, "preflight: all good\n")


def test_without_a_stack_the_host_is_not_compared_with_an_unknown_subnet(tmp_path, capsys):
    routes = HOME_ROUTES + route_line("eno1", str(D))
    assert run_preflight(on_host(tmp_path, {ROUTES: routes}), capsys) == (0, "preflight: all good\n")


def test_an_existing_lab_network_is_not_compared_with_the_host(tmp_path, capsys):
    # Its own bridge route covers its subnet once it exists.
    routes = HOME_ROUTES + route_line("br-0c1d2e3f4a5b", str(D))
    host, _ = with_kind_network(tmp_path, config_json([{"name": "a"}]), (0, f"quarters|{D}={next(D.subnets(2))} \n"),
                                files={ROUTES: routes})
    assert run_preflight(host, capsys, "--stack", "dev") == (0, "preflight: all good\n")


networks = st.builds(lambda address, length: ipaddress.IPv4Network((address, length), strict=False),
                     st.integers(0, 2**32 - 1), st.integers(0, 32))
addresses = st.integers(1, 2**32 - 1).map(ipaddress.IPv4Address)
devices = st.from_regex(r"[a-z][a-z0-9-]{0,14}", fullmatch=True)


@given(st.lists(st.tuples(devices, networks, st.one_of(st.none(), addresses), st.booleans()), max_size=8))
def test_every_route_the_kernel_lists_is_read_back_as_it_is(routes):
    text = ROUTES_HEADER.ljust(127) + "\n" + "".join(
        route_line(device, str(network), str(gateway or "0.0.0.0"), (0x0003 if gateway else 0x0001)
                   | (0x0200 if rejects else 0))
        for device, network, gateway, rejects in routes)
    read = preflight.host_routes(_reading(text))
    assert read == [preflight.Route(network, device, gateway)
                    for device, network, gateway, rejects in routes if not rejects]


@given(st.text())
def test_any_routes_text_is_read_whole_or_not_at_all(text):
    read = preflight.host_routes(_reading(text))
    assert read is None or all(isinstance(route, preflight.Route) for route in read)


def _reading(text: str):
    """A host whose ROUTES_FILE reads as `text`."""

    class Reading(preflight.Host):
        def read(self, path):
            return text if path == preflight.ROUTES_FILE else None

    return Reading()


# Docker 29 prints a network's empty --ip-range as a netip.Prefix's zero value, "invalid Prefix" (moby/moby
# api/types/network/ipam.go@docker-v29.7.2, IPAMConfig.IPRange).
def test_a_network_docker_29_shows_without_a_range_is_refused_as_one_without(tmp_path, capsys):
    answer = (0, f"|{D}=invalid Prefix fc00:f853:ccd:e793::/64=invalid Prefix \n")
    host, _ = with_kind_network(tmp_path, config_json([{"name": "a"}]), answer)

    code, out = run_preflight(host, capsys, "--stack", "dev")

    assert code == 1
    assert f"ERROR   the docker network {LAB_NETWORK} (not created by kamaji-hami-lab) lets Docker give any address " \
           f"of {D} to containers" in out


def test_the_labs_network_with_docker_29s_empty_ipv6_range_passes(tmp_path, capsys):
    answer = (0, f"quarters|{D}={next(D.subnets(2))} fc00:f853:ccd:e793::/64=invalid Prefix \n")
    host, _ = with_kind_network(tmp_path, config_json([{"name": "a"}]), answer)
    assert run_preflight(host, capsys, "--stack", "dev") == (0, "preflight: all good\n")


@pytest.mark.parametrize(("route", "warned"), [("10.0.0.0/8", True), ("10.0.0.0/7", False)])
def test_a_gateway_route_counts_from_a_slash_8(tmp_path, capsys, route, warned):
    # Wider than a /8 through a gateway is a default route in parts; a corporate VPN's 10/8 is a network.
    routes = HOME_ROUTES + route_line("tun0", route, "10.8.0.1", flags=0x0003)
    code, out = run_preflight(on_host(tmp_path, {ROUTES: routes}, kindSubnet="10.89.0.0/16"), capsys, "--stack", "dev")

    assert code == 0
    assert (f"overlaps the route {route} dev tun0 via 10.8.0.1" in out) == warned
    assert ("all good" in out) != warned


def test_the_planned_subnet_kind_up_asks_about_is_silent_when_clear_and_named_when_not(tmp_path, capsys):
    host = on_host(tmp_path)

    assert preflight.main(["--planned-subnet", str(D)], host) == 0
    assert capsys.readouterr().out == ""
    assert preflight.main(["--planned-subnet", "192.168.1.128/25"], host) == 1
    out = capsys.readouterr().out
    assert "ERROR   the lab's subnet is 192.168.1.128/25 (kamaji-hami-lab:kindSubnet, or its default when empty), " \
           "which overlaps this host's own network (route 192.168.1.0/24 dev wlp2s0)" in out
    assert "nameserver" not in out, "the router's 192.168.1.1 lies below the /25"


@pytest.mark.parametrize("subnet", ["172.30.0.1/16", "172.30.0.0/33", "fc00::/64", "kamaji"])
def test_a_planned_subnet_that_is_no_ipv4_subnet_is_refused_by_name(tmp_path, capsys, subnet):
    with pytest.raises(SystemExit) as exited:
        preflight.main(["--planned-subnet", subnet], on_host(tmp_path))

    assert exited.value.code == 2
    assert f"argument --planned-subnet: not an IPv4 subnet: {subnet}" in capsys.readouterr().err


@given(st.lists(st.one_of(st.text(alphabet=st.characters(blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")),
                          addresses.map(lambda address: f"nameserver {address}")), max_size=8))
def test_every_ipv4_nameserver_line_and_nothing_else_is_read(lines):
    text = "\n".join(lines)

    class Resolving(preflight.Host):
        def read(self, path):
            return text if path == "/etc/resolv.conf" else None

    read = preflight.host_nameservers(Resolving())
    written = [fields[1] for fields in map(str.split, lines) if len(fields) >= 2 and fields[0] == "nameserver"]
    assert [str(address) for address, _ in read] == [w for w in written if _is_ipv4(w)]
    assert all(path == "/etc/resolv.conf" for _, path in read)


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True
