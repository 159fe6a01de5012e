"""Config of the management cluster and platform modes: nonsense combinations stop before any resource."""

from __future__ import annotations

import pytest
import yaml

from components.config import ConfigError, parse_settings
from components.settings import Provided, dedicated_data_store_name
from tests.plan import ROOT, dev_config, fake_kubeconfig, plan
from tests.render_charts_module import project_defaults, stack_config
from tests.ssh_keys import made_key

KUBECONFIG = fake_kubeconfig("https://10.20.0.1:6443", "platform-admin")
SECRET_MARKER = "secret-key-of-platform-admin"  # the client key inside KUBECONFIG
EXISTING = {
    "managementCluster": "existing",
    "managementKubeconfig": KUBECONFIG,
    "dockerNetwork": "lab-net",
    "metallbAddressRange": "192.168.50.240-192.168.50.250",
}


def error(secret_keys=None, **overrides) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(**overrides), secret_keys=secret_keys)
    return str(raised.value)


def existing(**overrides):
    return {**EXISTING, **overrides}


def test_an_existing_cluster_is_taken_with_its_kubeconfig_and_network():
    lab = parse_settings(dev_config(**EXISTING), secret_keys={"managementKubeconfig"})
    assert yaml.safe_load(lab.existing_cluster.kubeconfig) == yaml.safe_load(KUBECONFIG)
    assert lab.existing_cluster.docker_network == "lab-net"
    assert not any((lab.provided.cert_manager, lab.provided.load_balancer, lab.provided.kamaji))


def test_the_default_lab_is_kind_with_everything_installed():
    lab = parse_settings(dev_config())
    assert lab.existing_cluster is None
    assert not any((lab.provided.cert_manager, lab.provided.load_balancer, lab.provided.kamaji))
    assert all(tenant.data_store == "default" for tenant in lab.tenants), "the installed chart's DataStore"
    assert not any(tenant.dedicated_data_store for tenant in lab.tenants), "dataStore: shared by default"


def test_a_configured_context_becomes_the_current_one_for_every_reader():
    two = yaml.safe_load(KUBECONFIG)
    two["contexts"].append({"name": "platform", "context": {"cluster": "c", "user": "platform-admin"}})
    lab = parse_settings(dev_config(**existing(managementKubeconfig=yaml.safe_dump(two), managementContext="platform")))
    assert yaml.safe_load(lab.existing_cluster.kubeconfig)["current-context"] == "platform"


def test_an_unknown_context_is_refused_naming_the_contexts_there_are():
    message = error(**existing(managementContext="prod"))
    assert "kamaji-hami-lab:managementContext: has no context 'prod' (its contexts: 'ctx')" in message


def without_cluster(kubeconfig: str) -> str:
    config = yaml.safe_load(kubeconfig)
    config["clusters"] = []
    return yaml.safe_dump(config)


def with_contexts(kubeconfig: str, *names: str) -> str:
    config = yaml.safe_load(kubeconfig)
    config["contexts"] = [{"name": name, "context": {"cluster": "c", "user": "platform-admin"}} for name in names]
    config["current-context"] = "gone"
    return yaml.safe_dump(config)


@pytest.mark.parametrize(
    ("kubeconfig", "problem"),
    [
        ("clusters: [", "is not valid YAML (the value is not shown: it is a secret)"),
        ("just text", "is not a kubeconfig (the value is not shown: it is a secret)"),
        (
            KUBECONFIG.replace("current-context: ctx", "current-context: ''"),
            "names no current context (its contexts: 'ctx'); choose one with managementContext",
        ),
        (
            with_contexts(KUBECONFIG, "staging", "prod"),
            "names no current context (its contexts: 'staging', 'prod'); choose one with managementContext",
        ),
        (
            with_contexts(KUBECONFIG),
            "names no current context (its contexts: none); choose one with managementContext",
        ),
        (
            KUBECONFIG.replace("server: https://10.20.0.1:6443", "server: ''"),
            "context 'ctx' names no cluster with a server",
        ),
        (without_cluster(KUBECONFIG), "context 'ctx' names no cluster with a server"),
    ],
)
def test_a_broken_kubeconfig_is_refused_without_showing_it(kubeconfig, problem):
    message = error(**existing(managementKubeconfig=kubeconfig))
    assert f"  kamaji-hami-lab:managementKubeconfig: {problem}" in message.splitlines()
    assert kubeconfig not in message and SECRET_MARKER not in message


def test_a_kubeconfig_stored_in_plain_text_is_refused_without_showing_it():
    message = error(secret_keys=set(), **EXISTING)
    assert "kamaji-hami-lab:managementKubeconfig: must be a secret" in message
    assert "pulumi config set --secret managementKubeconfig" in message
    assert SECRET_MARKER not in message


def test_a_plain_text_kubeconfig_stops_the_program_before_any_resource():
    with pytest.raises(ConfigError, match="must be a secret") as raised:
        plan(dev_config(**EXISTING), preview=True)
    assert raised.value.plan.registrations == []


ONLY_EXISTING = "only used with managementCluster existing; kind's cluster and network are its own"
PROVIDED_NEEDS_EXISTING = (
    "'provided' needs managementCluster existing: the kind cluster this program creates runs nothing it did not install"
)


@pytest.mark.parametrize(
    ("overrides", "key", "problem"),
    [
        ({"managementCluster": "cloud"}, "managementCluster", "'cloud' is not one of 'kind', 'existing'"),
        ({"kamaji": "maybe"}, "kamaji", "'maybe' is not one of 'install', 'provided'"),
        ({"managementKubeconfig": KUBECONFIG}, "managementKubeconfig", ONLY_EXISTING),
        ({"managementContext": "ctx"}, "managementContext", ONLY_EXISTING),
        ({"dockerNetwork": "lab-net"}, "dockerNetwork", ONLY_EXISTING),
        ({"certManager": "provided"}, "certManager", PROVIDED_NEEDS_EXISTING),
        ({"loadBalancer": "provided"}, "loadBalancer", PROVIDED_NEEDS_EXISTING),
        ({"kamaji": "provided", "certManager": "provided"}, "kamaji", PROVIDED_NEEDS_EXISTING),
        (
            {"kamajiDataStore": "shared"},
            "kamajiDataStore",
            "'shared' with kamaji install: the installed chart creates only 'default'",
        ),
        (
            existing(managementKubeconfig=""),
            "managementKubeconfig",
            "required with managementCluster existing; set it with: pulumi config set --secret managementKubeconfig "
            "< FILE",
        ),
        (
            existing(kindSubnet="172.18.0.0/16"),
            "kindSubnet",
            "describes kind's network; an existing management cluster has none",
        ),
        (
            existing(metallbAddressRange=""),
            "metallbAddressRange",
            "required with managementCluster existing and loadBalancer metallb: there is no lab docker network to "
            "carve a pool from; give free addresses the cluster's nodes can announce",
        ),
        (
            existing(dockerNetwork=""),
            "dockerNetwork",
            "required with managementCluster existing while a tenant has container workers (kindest/node on this "
            "host's Docker); name the docker network from which the cluster's LoadBalancer addresses are reachable, "
            "or give every tenant machines",
        ),
        (
            existing(loadBalancer="provided"),
            "metallbAddressRange",
            "unused with loadBalancer provided (its addresses are the cluster's)",
        ),
        (
            existing(kamaji="provided"),
            "certManager",
            "set it to provided: a provided Kamaji already runs on a cert-manager",
        ),
        (
            existing(kamaji="provided", certManager="provided", kamajiImageTag="26.8.2-edge"),
            "kamajiImageTag",
            "unused with kamaji provided (the program installs no Kamaji); leave it empty",
        ),
    ],
)
def test_nonsense_combinations_are_refused_naming_the_key(overrides, key, problem):
    message = error(**overrides)
    assert f"  kamaji-hami-lab:{key}: {problem}" in message.splitlines()


def test_every_problem_of_an_existing_cluster_is_reported_at_once():
    message = error(managementCluster="existing", loadBalancer="provided", metallbAddressRange="10.0.0.0/30")
    keys = {"managementKubeconfig", "dockerNetwork", "metallbAddressRange"}
    assert all(f"kamaji-hami-lab:{key}:" in message for key in keys), message


def test_a_provided_kamaji_names_its_datastore_in_every_tenant():
    lab = parse_settings(
        dev_config(
            **existing(
                metallbAddressRange="",
                loadBalancer="provided",
                certManager="provided",
                kamaji="provided",
                kamajiDataStore="shared-etcd",
            )
        )
    )
    assert {tenant.data_store for tenant in lab.tenants} == {"shared-etcd"}
    assert lab.kamaji_data_store == "shared-etcd"
    assert lab.provided == Provided(cert_manager=True, load_balancer=True, kamaji=True)


def test_only_a_dedicated_tenant_whose_datastore_would_be_the_shared_one_is_refused():
    provided = existing(metallbAddressRange="", loadBalancer="provided", certManager="provided", kamaji="provided",
                        kamajiDataStore=dedicated_data_store_name("a"))
    dedicated = [{"name": "a", "dataStore": "dedicated"}, {"name": "b", "dataStore": "dedicated"}]
    message = error(**provided, tenants=dedicated)
    assert [line for line in message.splitlines() if "dataStore" in line] == [
        f"  kamaji-hami-lab:tenants[0].dataStore: 'dedicated' would name the tenant's own DataStore "
        f"{dedicated_data_store_name('a')!r}, which is kamajiDataStore, the shared one; rename the tenant or keep it "
        "shared"
    ]
    lab = parse_settings(dev_config(**provided, tenants=[{"name": "a"}]))
    assert lab.tenants[0].data_store == dedicated_data_store_name("a"), "shared: the lab's DataStore, so named"


def test_many_tenants_on_a_provided_load_balancer_need_no_pool():
    many = [{"name": f"t{index}"} for index in range(60)]
    lab = parse_settings(dev_config(**existing(metallbAddressRange="", loadBalancer="provided"), tenants=many))
    assert len(lab.tenants) == 60


def test_the_beyond_one_host_example_is_a_valid_stack_once_its_secrets_are_set():
    example = stack_config("beyond-one-host", root=ROOT / "examples")
    secrets = {"managementKubeconfig": KUBECONFIG, "sshPrivateKeys": {"default": made_key()}}
    assert not set(secrets) & set(example), "an example holds no credential"
    lab = parse_settings({**project_defaults(), **example, **secrets}, secret_keys=set(secrets))
    assert lab.existing_cluster and lab.provided.kamaji
    assert lab.existing_cluster.docker_network is None, "a lab of machines needs no Docker"
    assert any(tenant.real_gpus for tenant in lab.tenants)
    assert all(tenant.machines for tenant in lab.tenants)
