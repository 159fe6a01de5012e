"""Behaviour that mutation testing (`make mutants`) showed no other test pinned down."""

import ipaddress

import pytest
import yaml

from components.addresses import pool_for_subnet
from tests.mutants import MUTANTS, ROOT
from tests.plan import dev_config, plan
from tests.test_config import config_error, tenants_error

# Pulumi.yaml's `config:` block: the keys a stack file spells, in camelCase.
PULUMI_YAML_KEYS = ("managementClusterName", "kubernetesVersion", "metallbAddressRange", "workersPerTenant", "gpuSlots")


def test_an_unknown_key_lists_the_known_keys_as_the_stack_file_spells_them():
    message = config_error(managementClustrName="x")
    known = message.split("unknown config key; did you mean 'managementClusterName'? (known: ", 1)[1]
    assert all(key in known for key in PULUMI_YAML_KEYS)
    assert "_" not in known.split(")")[0], "Python field names are not config keys"


def test_a_bad_tenant_beside_a_duplicate_keeps_its_own_key_and_value():
    # Both problems at once, each on its own key path, the bad value quoted as written.
    message = tenants_error({"name": "a"}, {"name": "a", "gpus": "many"})
    assert "kamaji-hami-lab:tenants[1].gpus: expected a list of {model, count} objects, got 'many'" in message
    assert "kamaji-hami-lab:tenants[1].name: duplicate tenant name 'a'" in message


def test_a_slash_25_holds_one_pool_in_its_upper_half():
    # docs/configuration.md (metallbAddressRange): 51 addresses of the upper half. A /25's upper half is .64-.127;
    # less its broadcast address that is 63 addresses, room for one block.
    upper_half = ipaddress.ip_network("10.0.0.64/26")
    pools = {pool_for_subnet(ipaddress.IPv4Network("10.0.0.0/25"), f"lab-{n}") for n in range(20)}
    assert len(pools) == 1
    (pool,) = pools
    assert pool.size == 51 and pool.within(upper_half) and pool.last < upper_half.broadcast_address


def test_labs_on_a_slash_24_spread_over_both_blocks_its_upper_half_holds():
    # A /24's upper half less its broadcast address is 127 addresses: two 51-address blocks.
    pools = {pool_for_subnet(ipaddress.IPv4Network("10.0.0.0/24"), f"lab-{n}") for n in range(20)}
    assert len(pools) == 2
    first, second = sorted(pools, key=lambda pool: pool.first)
    assert first.last < second.first and int(first.first) >= 129


@pytest.mark.parametrize("subnet", ["10.0.0.0/26", "10.0.0.0/30"])
def test_a_subnet_whose_upper_half_is_under_51_addresses_is_refused(subnet):
    with pytest.raises(ValueError, match=f"subnet {subnet} is too small to hold a 51-address pool"):
        pool_for_subnet(ipaddress.IPv4Network(subnet), "kamaji")


@pytest.mark.parametrize("subnet", ["10.0.0.0/23", "10.0.0.0/24", "10.0.0.0/25", "172.18.0.0/16"])
def test_no_lab_name_puts_its_pool_in_the_lower_half(subnet):
    # The lower half is Docker's and the workers' (docs/architecture.md, Addresses on the lab's network);
    # enough names to land in every block the subnet's upper half has.
    network = ipaddress.ip_network(subnet)
    upper_half = list(network.subnets())[1]
    for n in range(200):
        pool = pool_for_subnet(network, f"lab-{n}")
        assert pool.within(upper_half) and pool.first > upper_half.network_address, (n, pool)
        assert pool.last < upper_half.broadcast_address, (n, pool)


def kube_proxy_files(plan_):
    (config_map, *_) = [
        r for r in plan_.of_type("kubernetes:core/v1:ConfigMap") if r.inputs["metadata"]["name"] == "kube-proxy"
    ]
    data = config_map.inputs["data"]
    return yaml.safe_load(data["config.conf"]), yaml.safe_load(data["kubeconfig.conf"])


def test_kube_proxy_uses_kinds_settings_and_the_tenants_pod_cidr():
    config, _ = kube_proxy_files(plan(dev_config(tenants=[{"name": "a", "podCidr": "10.32.0.0/16"}]), preview=False))
    # kubernetes-sigs/kind pkg/cluster/internal/kubeadm/config.go@v0.32.0-alpha: iptables (the default
    # mode, pkg/apis/config/v1alpha4/default.go) with minSyncPeriod 1s.
    assert config["mode"] == "iptables"
    assert config["iptables"] == {"minSyncPeriod": "1s"}
    assert config["clusterCIDR"] == "10.32.0.0/16"


def test_kube_proxy_kubeconfig_resolves_its_current_context(up_plan):
    # client-go clientcmd: current-context names a context, whose cluster and user name entries of the file.
    _, kubeconfig = kube_proxy_files(up_plan)
    contexts = {c["name"]: c["context"] for c in kubeconfig["contexts"]}
    context = contexts[kubeconfig["current-context"]]
    assert context["cluster"] in {c["name"] for c in kubeconfig["clusters"]}
    assert context["user"] in {u["name"] for u in kubeconfig["users"]}
    assert (kubeconfig["apiVersion"], kubeconfig["kind"]) == ("v1", "Config")


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda mutant: mutant.description)
def test_every_hand_written_mutant_still_finds_the_code_it_breaks(mutant):
    # `make mutants` is not run in CI; this keeps its table from going stale when the code moves.
    assert (ROOT / mutant.path).read_text(encoding="utf-8").count(mutant.before) == 1
