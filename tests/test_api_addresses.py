"""Each tenant's API address is pinned in the lab's MetalLB pool (issue 38: a tenant re-created after
`make down`/`make up` answers at the address its old kubeconfigs name).

The address follows from the tenant's name (or its `apiAddress`), so the same config gives it again; the pool
hands out only addresses asked for by name, so no other Service takes a tenant's first; Grafana has the pool's
last address. With the cluster's own LoadBalancer nothing is pinned.
"""

from __future__ import annotations

import ipaddress
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.addresses import AddressRange, home_address, parse_address_range, tenant_addresses
from components.config import ConfigError, parse_settings
from tests.plan import METALLB_ADDRESS_ANNOTATION, changed, dev_config, plan, resolve, reveal, tenants
from tests.test_config import stack_warnings_of
from tests.test_management_modes import EXISTING_KUBECONFIG, INSTALLED, PROVIDED

CONTROL_PLANE = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
ADDRESS_POOL = "kubernetes:metallb.io/v1beta1:IPAddressPool"
# Two tenant addresses and Grafana's, in the upper half of the default network 172.30.0.0/16.
SMALL_POOL = "172.30.200.1-172.30.200.3"


def asked(control_plane) -> str:
    """The address the tenant's Service asks MetalLB for, as Kamaji copies it from the spec."""
    service = control_plane.inputs["spec"]["controlPlane"]["service"]
    return service["additionalMetadata"]["annotations"][METALLB_ADDRESS_ANNOTATION]


def planned(preview) -> dict[str, str]:
    """Tenant name → the address its control plane asks for."""
    return {c.inputs["metadata"]["name"]: asked(c) for c in preview.of_type(CONTROL_PLANE)}


def addresses(tenant_list: list[dict], **lab: str) -> dict[str, str]:
    """Tenant name → API address, as the config gives them (no plan)."""
    return {t.name: t.api_address for t in parse_settings(dev_config(tenants=tenant_list, **lab)).tenants}


def refusal(**overrides) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(**overrides))
    return str(raised.value)


@pytest.fixture
def eight(shared):
    """The `up` of a lab of eight tenants on the default network."""
    return shared("eight-tenants-up", lambda: plan(dev_config(tenants=tenants(8), observability="true"),
                                                   preview=False))


def test_every_tenant_asks_for_its_own_address_of_the_pool_below_grafanas(eight):
    first, last = (ipaddress.IPv4Address(a) for a in resolve(eight.outputs["metallbAddressRange"]).split("-"))
    pinned = {name: ipaddress.IPv4Address(address) for name, address in planned(eight).items()}
    assert len(pinned) == 8 and len(set(pinned.values())) == 8
    assert all(first <= address < last for address in pinned.values())
    # Grafana asks for the pool's last, and MetalLB gives it that one.
    grafana = eight.named("observability-grafana-address")
    assert grafana.inputs["metadata"]["annotations"] == {METALLB_ADDRESS_ANNOTATION: str(last)}
    assert resolve(eight.outputs["grafanaUrl"]) == f"http://{last}"


def test_kamaji_is_told_the_address_it_issues_certificates_and_kubeconfigs_for(eight):
    # Kamaji records an address from the Service only when it changes the Service, not when MetalLB moves it
    # (clastix/kamaji internal/resources/resource.go@26.8.2-edge, createOrUpdate): the declared one is used.
    for control_plane in eight.of_type(CONTROL_PLANE):
        assert control_plane.inputs["spec"]["networkProfile"]["address"] == asked(control_plane)


def test_each_tenants_kubeconfig_and_endpoint_name_its_pinned_address(eight):
    endpoints = {name: facts["endpoint"] for name, facts in resolve(eight.outputs["tenants"]).items()}
    assert endpoints == {name: f"https://{address}:6443" for name, address in planned(eight).items()}
    for read in eight.commands("tenant-kubeconfig.sh"):
        env = reveal(read.inputs["environment"])
        assert env["API_ADDRESS"] == planned(eight)[env["TENANT"]]


def test_grafanas_address_waits_for_no_tenant(eight):
    # In a lab from before pinning a tenant may wait for the address Grafana still holds: Grafana moves first.
    service = eight.named("observability-grafana-address")
    reads = {read.urn for read in eight.commands("tenant-kubeconfig.sh")}
    assert len(reads) == 8
    assert not reads & eight.upstream(service.urn)


def test_the_pool_hands_out_only_addresses_asked_for_by_name(eight):
    (pool,) = eight.of_type(ADDRESS_POOL)
    assert pool.inputs["spec"]["autoAssign"] is False


def test_addresses_are_known_at_the_first_preview(tenants_preview):
    preview = tenants_preview(8)
    pinned = planned(preview)
    assert len(set(pinned.values())) == 8
    assert pinned == addresses(tenants(8))


def test_a_tenant_keeps_its_address_when_other_tenants_come_and_go():
    alone = addresses([{"name": "keep"}])["keep"]
    for others in (tenants(7), [{"name": "zz"}]):
        assert addresses([*others, {"name": "keep"}])["keep"] == alone or \
            alone in addresses(others).values()  # moved only when an earlier tenant's name gives its address
        assert addresses([{"name": "keep"}, *others])["keep"] == alone


def two_names_sharing_an_address() -> tuple[str, str, str]:
    """Two tenant names that give one address of SMALL_POOL (three names, two addresses: two must share)."""
    alone = {name: addresses([{"name": name}], metallbAddressRange=SMALL_POOL)[name] for name in ("n0", "n1", "n2")}
    first, second = next((a, b) for a, b in itertools.combinations(alone, 2) if alone[a] == alone[b])
    return first, second, alone[first]


def test_of_two_names_giving_one_address_the_later_tenant_takes_the_other_and_is_warned(monkeypatch):
    first, second, shared_address = two_names_sharing_an_address()
    warned: list[str] = []
    monkeypatch.setattr("pulumi.log.warn", lambda message, *args, **kwargs: warned.append(message))

    given = plan(dev_config(tenants=[{"name": first}, {"name": second}], metallbAddressRange=SMALL_POOL),
                 preview=True)

    pinned = planned(given)
    assert pinned[first] == shared_address
    (other,) = {"172.30.200.1", "172.30.200.2"} - {shared_address}
    assert pinned[second] == other
    (warning,) = [w for w in warned if "API address" in w]
    assert warning.startswith("kamaji-hami-lab:tenants[1].name: ")
    assert f"gives the API address {shared_address}" in warning
    assert f"Keep it: pulumi config set --path 'tenants[1].apiAddress' {other}" in warning
    # Listed the other way round, the other tenant keeps the shared address.
    assert addresses([{"name": second}, {"name": first}], metallbAddressRange=SMALL_POOL)[second] == shared_address


def test_a_moved_tenant_of_a_full_pool_is_warned_in_one_line_naming_the_command_that_keeps_it():
    first, second, shared_address = two_names_sharing_an_address()
    (other,) = {"172.30.200.1", "172.30.200.2"} - {shared_address}
    # Two tenants and Grafana's: the pool is full, and still the moved tenant is told.
    assert stack_warnings_of(tenants=[{"name": first}, {"name": second}], metallbAddressRange=SMALL_POOL) == [
        f"kamaji-hami-lab:tenants[1].name: its name gives the API address {shared_address}, which another tenant "
        f"has, so it gets {other}; that one may change when other tenants are removed, reordered or pinned, and a "
        "tenant whose address changes re-joins its workers. Keep it: pulumi config set --path "
        f"'tenants[1].apiAddress' {other}"
    ]


def test_with_the_clusters_own_load_balancer_no_tenant_is_warned_its_address_may_move():
    lab = {**PROVIDED, "managementKubeconfig": EXISTING_KUBECONFIG}
    assert stack_warnings_of(**lab, tenants=tenants(3)) == []


def test_a_pinned_address_is_used_and_not_warned_about(monkeypatch):
    first, second, shared_address = two_names_sharing_an_address()
    (other,) = {"172.30.200.1", "172.30.200.2"} - {shared_address}
    warned: list[str] = []
    monkeypatch.setattr("pulumi.log.warn", lambda message, *args, **kwargs: warned.append(message))

    given = plan(dev_config(tenants=[{"name": first}, {"name": second, "apiAddress": other}],
                            metallbAddressRange=SMALL_POOL), preview=True)

    assert planned(given) == {first: shared_address, second: other}
    assert not [w for w in warned if "API address" in w]


def test_a_pin_on_another_tenants_name_address_moves_that_tenant_not_the_pin():
    first, second, shared_address = two_names_sharing_an_address()
    pinned = addresses([{"name": first}, {"name": "p", "apiAddress": shared_address}], metallbAddressRange=SMALL_POOL)
    assert pinned["p"] == shared_address and pinned[first] != shared_address


def test_a_pool_of_one_address_per_tenant_and_grafanas_is_enough_and_one_less_is_refused():
    assert sorted(addresses(tenants(2), metallbAddressRange=SMALL_POOL).values()) == ["172.30.200.1", "172.30.200.2"]
    message = refusal(tenants=tenants(3), metallbAddressRange=SMALL_POOL)
    assert "kamaji-hami-lab:metallbAddressRange: 172.30.200.1-172.30.200.3 has 3 addresses but 3 tenants need " \
        "one each, and the last is kept for Grafana" in message


@pytest.mark.parametrize(("address", "problem"), [
    ("172.30.200.4", "172.30.200.4 lies outside the lab's MetalLB pool 172.30.200.1-172.30.200.3"),
    ("172.30.200.0", "172.30.200.0 lies outside the lab's MetalLB pool 172.30.200.1-172.30.200.3"),
    ("172.30.200.3", "172.30.200.3 is the pool's last address, which Grafana gets"),
])
def test_a_pin_outside_the_tenants_part_of_the_pool_is_refused(address, problem):
    message = refusal(tenants=[{"name": "a", "apiAddress": address}], metallbAddressRange=SMALL_POOL)
    assert f"kamaji-hami-lab:tenants[0].apiAddress: {problem}" in message


def test_the_first_and_last_tenant_addresses_of_the_pool_are_accepted_as_pins():
    pins = [{"name": "a", "apiAddress": "172.30.200.1"}, {"name": "b", "apiAddress": "172.30.200.2"}]
    assert addresses(pins, metallbAddressRange=SMALL_POOL) == {"a": "172.30.200.1", "b": "172.30.200.2"}


def test_one_address_pinned_by_two_tenants_is_refused_naming_the_first():
    pins = [{"name": "a", "apiAddress": "172.30.200.1"}, {"name": "b", "apiAddress": "172.30.200.1"}]
    message = refusal(tenants=pins, metallbAddressRange=SMALL_POOL)
    assert "kamaji-hami-lab:tenants[1].apiAddress: 172.30.200.1 is also the apiAddress of tenant 'a'" in message


@pytest.mark.parametrize("address", ["172.30.200.01", "172.30.200", "fd00::1", "172.30.200.1/32"])
def test_an_api_address_that_is_no_ipv4_address_is_refused(address):
    message = refusal(tenants=[{"name": "a", "apiAddress": address}], metallbAddressRange=SMALL_POOL)
    assert "kamaji-hami-lab:tenants[0].apiAddress: " in message and "an IPv4 address" in message


def test_with_the_clusters_own_load_balancer_nothing_is_pinned():
    lab = plan(dev_config(**PROVIDED, tenants=tenants(2), observability="true"), preview=False,
               secrets={"managementKubeconfig": EXISTING_KUBECONFIG})
    for control_plane in lab.of_type(CONTROL_PLANE):
        assert "additionalMetadata" not in control_plane.inputs["spec"]["controlPlane"]["service"]
        assert "address" not in control_plane.inputs["spec"]["networkProfile"]
    assert all(reveal(read.inputs["environment"])["API_ADDRESS"] == "" for read in lab.commands("tenant-kubeconfig.sh"))
    # Grafana asks that LoadBalancer for nothing: `make dashboard` forwards it (test_observability.py).
    assert not [r for r in lab.of_type("kubernetes:core/v1:Service") if "grafana" in r.name]
    assert not lab.of_type(ADDRESS_POOL)


def test_an_api_address_with_the_clusters_own_load_balancer_is_refused():
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(**PROVIDED, managementKubeconfig=EXISTING_KUBECONFIG,
                                  tenants=[{"name": "a", "apiAddress": "10.20.0.9"}]))
    assert "  kamaji-hami-lab:tenants[0].apiAddress: unused with loadBalancer provided: the cluster's own " \
        "LoadBalancer picks the addresses" in str(raised.value).splitlines()


def test_a_pool_reaching_the_networks_broadcast_address_is_refused_and_one_below_it_accepted():
    message = refusal(metallbAddressRange="172.30.255.200-172.30.255.255")
    assert "kamaji-hami-lab:metallbAddressRange: 172.30.255.200-172.30.255.255 reaches the broadcast address of " \
        "the lab's docker network 172.30.0.0/16, which no Service can answer on (the pool's last address is " \
        "Grafana's); end it below" in [line.strip() for line in message.splitlines()]
    assert str(parse_settings(dev_config(metallbAddressRange="172.30.255.200-172.30.255.254")).grafana_address) == \
        "172.30.255.254"


def test_a_pin_on_an_existing_cluster_without_its_required_pool_is_not_called_unused():
    message = refusal(**INSTALLED | {"metallbAddressRange": ""}, managementKubeconfig=EXISTING_KUBECONFIG,
                      tenants=[{"name": "a", "apiAddress": "192.168.50.241"}])
    assert "kamaji-hami-lab:metallbAddressRange: required with managementCluster existing" in message
    assert "apiAddress" not in message


def test_moving_a_tenant_reads_its_kubeconfig_again_and_rejoins_only_its_workers():
    pool = {"metallbAddressRange": "172.30.200.0-172.30.200.50"}
    first_up = plan(dev_config(tenants=[{"name": "a", "apiAddress": "172.30.200.2"}, {"name": "b"}], **pool),
                    preview=False)
    moved = dev_config(tenants=[{"name": "a", "apiAddress": "172.30.200.20"}, {"name": "b"}], **pool)

    # The preview shows the address and the kubeconfig read changing; pulumi-command previews an update with the
    # last run's stdout (pulumi/pulumi-command provider/pkg/provider/local/commandController.go@v1.2.1), so the
    # joins that read it change only in the up. The network filter lets a's workers reach the new address instead.
    previewed = plan(moved, preview=True, previous=first_up)
    assert {previewed.by_urn[urn].name for urn in changed(previewed, first_up)} == {
        "a-control-plane", "a-admin-kubeconfig", "network-filter-rules"}
    later_up = plan(moved, preview=False)
    names = {later_up.by_urn[urn].name for urn in changed(later_up, first_up)}
    assert {"a-control-plane", "a-admin-kubeconfig", "kamaji-a-w1-join"} <= names
    assert not [name for name in names if name.startswith(("b-", "kamaji-b-"))]


# --- the assignment itself, for any names and pins ---------------------------------------------------------------

NAMES = st.lists(st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True), min_size=1, max_size=12, unique=True)


@given(names=NAMES, size=st.integers(min_value=2, max_value=40), data=st.data())
def test_any_names_get_distinct_addresses_of_the_pool_below_grafanas(names, size, data):
    pool = parse_address_range(f"10.9.0.0-10.9.0.{size - 1}")
    if len(names) > size - 1:
        with pytest.raises(ValueError):
            tenant_addresses(pool, names, {})
        return
    slots = [pool.first + offset for offset in range(size - 1)]
    pinned_names = data.draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
    pins = dict(zip(pinned_names, data.draw(st.permutations(slots)), strict=False))

    given_addresses = tenant_addresses(pool, names, pins)

    assert set(given_addresses) == set(names)
    assert len(set(given_addresses.values())) == len(names)
    assert all(pool.first <= address < pool.last for address in given_addresses.values())
    assert all(given_addresses[name] == address for name, address in pins.items())
    # Adding a tenant without a pin at the end moves no tenant before it (a pin may: it is taken as given).
    if len(names) > 1 and names[-1] not in pins:
        before = tenant_addresses(pool, names[:-1], pins)
        assert all(given_addresses[name] == address for name, address in before.items())


@given(name=st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True), size=st.integers(min_value=2, max_value=300))
def test_a_tenant_alone_gets_the_address_its_name_gives(name, size):
    pool = AddressRange(ipaddress.IPv4Address("10.9.0.0"), ipaddress.IPv4Address("10.9.0.0") + size - 1)
    assert tenant_addresses(pool, [name], {}) == {name: home_address(pool, name)}
