"""Container workers' fixed addresses on the kind network (issue 37: a worker wakes with the node address it had).

Each is pinned at the first preview, distinct from every other worker's, clear of MetalLB's pool and of the
range Docker hands out itself, and a function of its own worker alone: adding or removing a tenant moves none.
"""

from __future__ import annotations

import ipaddress

import pytest

from components.addresses import DEFAULT_KIND_SUBNET, worker_part
from components.config import ConfigError, parse_settings
from components.kind_management_cluster import KIND_NETWORK
from tests.plan import dev_config, plan, resolve, tenants
from tests.test_tenant_versions import CONTAINER

# Docker refuses a fixed address outside the subnets a network was created with, and picks addresses for the
# other containers only from its --ip-range (moby/moby api/types/network/endpoint.go@v28.5.2,
# validateEndpointIPAddress; libnetwork/ipams/defaultipam/allocator.go@v28.5.2, getAddress).


def pinned(preview) -> dict[str, ipaddress.IPv4Address]:
    """Container name → its fixed address on the kind network."""
    addresses = {}
    for container in preview.of_type(CONTAINER):
        (network,) = container.inputs["networksAdvanced"]
        assert network["name"] == KIND_NETWORK
        addresses[container.inputs["name"]] = ipaddress.IPv4Address(network["ipv4Address"])
    return addresses


def network_of(preview) -> tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]:
    """(subnet, Docker's own range) the kind network is created with, as the plan hands them to kind-up.sh."""
    (kind,) = preview.commands("kind-up.sh")
    env = kind.inputs["environment"]
    return ipaddress.IPv4Network(env["KIND_SUBNET"]), ipaddress.IPv4Network(env["KIND_IP_RANGE"])


def pool_of(preview) -> tuple[ipaddress.IPv4Address, ipaddress.IPv4Address]:
    first, last = resolve(preview.outputs["metallbAddressRange"]).split("-")
    return ipaddress.IPv4Address(first), ipaddress.IPv4Address(last)


MANY = tenants(10, workers=3)


@pytest.fixture
def many(shared):
    """The first preview of a lab of 10 tenants of 3 workers each."""
    return shared("ten-tenants-preview", lambda: plan(dev_config(tenants=MANY), preview=True))


def test_every_worker_is_pinned_at_the_first_preview_to_its_own_address(many):
    addresses = pinned(many)
    assert len(addresses) == 30
    assert len(set(addresses.values())) == 30


@pytest.mark.parametrize("configured", [{}, {"kindSubnet": "10.89.0.0/16"}, {"kindSubnet": "192.168.64.0/20"}])
def test_worker_addresses_lie_in_the_network_clear_of_dockers_range_and_the_pool(configured, shared):
    # Without a kindSubnet it is the `many` lab's plan: made once.
    key = f"ten-tenants-{configured}" if configured else "ten-tenants-preview"
    preview = shared(key, lambda: plan(dev_config(tenants=MANY, **configured), preview=True))
    subnet, dynamic = network_of(preview)
    first, last = pool_of(preview)
    assert dynamic.subnet_of(subnet)
    for worker, address in pinned(preview).items():
        assert address in subnet, worker
        assert address not in dynamic, f"{worker}: Docker could hand {address} to another container"
        assert not first <= address <= last, f"{worker}: {address} is in the MetalLB pool {first}-{last}"
        assert address not in (subnet.network_address, subnet.broadcast_address, subnet.network_address + 1)


def test_a_worker_keeps_its_address_when_other_tenants_come_and_go(many):
    before = pinned(many)
    # One tenant removed, one added before the others, one given another worker.
    changed = [{"name": "new"}, *(t for t in MANY if t["name"] != "t3")]
    changed[1] = {**changed[1], "workers": 4}
    after = pinned(plan(dev_config(tenants=changed), preview=True))
    kept = before.keys() & after.keys()
    assert len(kept) == 27
    assert {worker: after[worker] for worker in kept} == {worker: before[worker] for worker in kept}
    assert len(set(after.values())) == len(after)


def test_two_labs_on_one_kind_network_pin_the_same_tenant_to_different_addresses(tenants_preview):
    # Two checkouts with other managementClusterNames share the kind network and their tenants' names.
    ours = pinned(tenants_preview(2))
    theirs = pinned(plan(dev_config(tenants=tenants(2), managementClusterName="lab2"), preview=True))
    assert not set(ours.values()) & set(theirs.values())


def test_workers_on_an_existing_clusters_docker_network_are_left_to_docker(existing_plan):
    # That network is the platform team's: the lab does not lay it out, so it pins nothing there.
    preview = existing_plan("installed", True)
    for container in preview.of_type(CONTAINER):
        (network,) = container.inputs["networksAdvanced"]
        assert network == {"name": "lab-net"}


def test_each_worker_address_is_checked_on_the_host_before_its_container_exists(up_plan):
    # Docker keeps a stopped container's fixed address only as a request: a check on the host, of every container
    # on the network, must run before the worker's container is made.
    addresses = pinned(up_plan)
    checks = {c.inputs["environment"]["WORKER"]: c for c in up_plan.commands("check-worker-address.sh")}
    assert sorted(checks) == sorted(addresses)
    (kind,) = up_plan.commands("kind-up.sh")
    for container in up_plan.of_type(CONTAINER):
        worker = container.inputs["name"]
        env = checks[worker].inputs["environment"]
        assert ipaddress.IPv4Address(env["WORKER_ADDRESS"]) == addresses[worker]
        assert env["KIND_NETWORK"] == KIND_NETWORK
        assert checks[worker].urn in up_plan.upstream(container.urn)
        # On the network kind-up.sh made, and nothing undone on destroy: it only looks.
        assert kind.urn in up_plan.upstream(checks[worker].urn)
        assert checks[worker].inputs.get("delete") is None


def test_workers_docker_places_get_no_address_check(existing_plan):
    # On an existing cluster's network Docker picks the workers' addresses: there is nothing planned to check.
    preview = existing_plan("installed", True)
    assert preview.of_type(CONTAINER)
    assert preview.commands("check-worker-address.sh") == []


def refusal(**overrides) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(**overrides))
    return str(raised.value)


def test_two_workers_that_would_share_an_address_are_refused_before_anything_exists():
    # A /28's second quarter holds 4 addresses: a fifth worker must land on a taken one.
    message = refusal(kindSubnet="10.1.0.0/28", metallbAddressRange="10.1.0.8-10.1.0.14",
                      tenants=[{"name": "a", "workers": 5}])
    assert "kamaji-hami-lab:tenants[0].name" in message
    assert "would get the fixed address 10.1.0." in message and "kamaji-a-w" in message
    # The network is the one kindSubnet gives, named as such (not as the default).
    assert "already has on the lab's docker network 10.1.0.0/28; the address follows from the worker's name" in message
    assert "rename the tenant" in message and "kindSubnet" in message


def test_a_clash_counts_every_worker_from_the_first_to_the_last_and_none_beyond():
    # A /28's second quarter holds 4 addresses; by their names, tenant a's 3 workers take 3 of them,
    # and tenant d's second worker would take its first one's.
    small = {"kindSubnet": "10.1.0.0/28", "metallbAddressRange": "10.1.0.8-10.1.0.14"}
    assert parse_settings(dev_config(**small, tenants=[{"name": "a", "workers": 3}])).tenants[0].workers == 3
    message = refusal(**small, tenants=[{"name": "d", "workers": 2}])
    assert "its worker kamaji-d-w2 would get the fixed address" in message
    assert "which kamaji-d-w1 already has" in message


def test_the_smallest_kind_subnet_the_layout_splits_is_accepted_and_a_smaller_one_refused():
    pool = {"metallbAddressRange": "10.1.0.8-10.1.0.14"}
    lab = parse_settings(dev_config(kindSubnet="10.1.0.0/28", **pool, tenants=[{"name": "a"}]))
    address = ipaddress.IPv4Address(lab.worker_address(lab.tenants[0], 1))
    assert address in ipaddress.IPv4Network("10.1.0.4/30"), "the /28's second quarter"
    message = refusal(kindSubnet="10.1.0.0/29", metallbAddressRange="10.1.0.4-10.1.0.6", tenants=[{"name": "a"}])
    assert "kamaji-hami-lab:kindSubnet: 10.1.0.0/29 is too small" in message


# Without kindSubnet the lab plans with the default subnet; its upper half starts here.
UPPER_HALF = DEFAULT_KIND_SUBNET[DEFAULT_KIND_SUBNET.num_addresses // 2]


@pytest.mark.parametrize("pool", [f"{UPPER_HALF - 56}-{UPPER_HALF + 10}",
                                  f"{DEFAULT_KIND_SUBNET[100]}-{DEFAULT_KIND_SUBNET[150]}",
                                  str(next(worker_part(DEFAULT_KIND_SUBNET).subnets(new_prefix=24)))])
def test_a_configured_pool_in_the_networks_lower_half_is_refused(pool):
    message = refusal(metallbAddressRange=pool)
    assert f"kamaji-hami-lab:metallbAddressRange: {pool.split('/')[0]}" in message
    assert f"lower half of the lab's docker network {DEFAULT_KIND_SUBNET}" in message
    (line,) = [line.strip() for line in message.splitlines() if "kamaji-hami-lab:metallbAddressRange: " in line]
    assert line.endswith("; choose addresses of its upper half")


def test_a_configured_pool_from_the_first_address_of_the_upper_half_is_accepted():
    assert parse_settings(dev_config(metallbAddressRange=f"{UPPER_HALF}-{UPPER_HALF + 50}")).address_pool


def test_without_kind_subnet_a_pool_outside_the_default_network_is_refused_before_anything_exists():
    message = refusal(metallbAddressRange="10.50.255.200-10.50.255.250")
    # One line, on the key that was given, naming the one to set.
    assert (f"kamaji-hami-lab:metallbAddressRange: 10.50.255.200-10.50.255.250 lies outside the lab's docker network "
            f"{DEFAULT_KIND_SUBNET} (the default: kindSubnet is empty); set kamaji-hami-lab:kindSubnet to the subnet "
            "the range belongs to") in [line.strip() for line in message.splitlines()]
