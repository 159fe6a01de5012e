"""Config of machine workers and real GPUs: every new key checked, every bad one named, keys never shown."""

from __future__ import annotations

import json

import pytest

from components.config import ConfigError, parse_settings
from components.settings import Machine
from tests.plan import dev_config, fake_kubeconfig
from tests.ssh_keys import made_key

KEY = made_key("ed25519", "lab")
SECRETS = {"sshPrivateKeys", "managementKubeconfig"}
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyOfGpu1"
GPU_1 = {"name": "gpu-1", "address": "10.0.0.11", "hostKey": HOST_KEY}


def tenant(**fields):
    return {"name": "research", "machines": [GPU_1], **fields}


def settings(tenants, **overrides):
    return parse_settings(dev_config(tenants=tenants, **{"sshPrivateKeys": {"default": KEY}, **overrides}),
                          secret_keys=SECRETS)


def error(tenants, secret_keys=SECRETS, **overrides) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(tenants=tenants, **{"sshPrivateKeys": {"default": KEY}, **overrides}),
                       secret_keys=secret_keys)
    assert KEY not in str(raised.value)
    return str(raised.value)


def test_a_machine_gets_ssh_defaults_and_the_key_it_names():
    (machine,) = settings([tenant()]).tenants[0].machines
    assert (machine.address, machine.port, machine.user, machine.private_key, machine.host_key) == (
        "10.0.0.11", 22, "root", KEY, HOST_KEY)
    assert KEY not in repr(machine)


def test_a_machine_may_use_its_own_key():
    machine = {**GPU_1, "sshKey": "gpu-1"}
    lab = settings([tenant(machines=[machine])], sshPrivateKeys={"default": made_key("ed25519", "other"), "gpu-1": KEY})
    (found,) = lab.tenants[0].machines
    assert found.private_key == KEY


def test_every_key_of_a_machine_reaches_its_settings_as_written():
    machine = {**GPU_1, "port": 2222, "user": "ops", "adopt": True, "nodeIp": "10.1.0.11", "flannelInterface": "eth1",
               "proxyJump": "ops@bastion:2222"}
    (found,) = settings([tenant(machines=[machine])]).tenants[0].machines
    assert found == Machine("gpu-1", "10.0.0.11", 2222, "ops", KEY, HOST_KEY, adopt=True, node_ip="10.1.0.11",
                            flannel_interface="eth1", proxy_jump="ops@bastion:2222")


def test_real_gpus_are_a_tenant_choice():
    lab = settings([tenant(gpuDevices="real"), {"name": "web"}])
    assert [t.real_gpus for t in lab.tenants] == [True, False]


@pytest.mark.parametrize(
    ("tenants", "overrides", "key", "problem"),
    [
        ([tenant(machines=[{**GPU_1, "port": 70000}])], {}, "tenants[0].machines[0].port", "expected a TCP port"),
        ([tenant(machines=[{**GPU_1, "user": "Root Admin"}])], {}, "tenants[0].machines[0].user",
         "'Root Admin' is not a user name"),
        ([tenant(machines=[{**GPU_1, "address": "-x"}])], {}, "tenants[0].machines[0].address",
         "'-x' is not a host name or IP address"),
        ([tenant(machines=[{**GPU_1, "hostKey": "AAAA"}])], {}, "tenants[0].machines[0].hostKey",
         "'AAAA' is not '<key type> <base64 key>'"),
        ([tenant(machines=[{**GPU_1, "hostKey": ""}])], {}, "tenants[0].machines[0].hostKey",
         "'' is not '<key type> <base64 key>'"),
        ([tenant(machines=[{**GPU_1, "nodeIp": "10.1.0.300"}])], {}, "tenants[0].machines[0].nodeIp",
         "'10.1.0.300' is not an IPv4 address"),
        ([tenant(machines=[{**GPU_1, "flannelInterface": "enp1s0f0-storage"}])], {},
         "tenants[0].machines[0].flannelInterface", "'enp1s0f0-storage' is not an interface name"),
        ([tenant(machines=[{**GPU_1, "adopt": "yes"}])], {}, "tenants[0].machines[0].adopt",
         "input should be a valid boolean"),
        ([tenant(machines=[{**GPU_1, "sshKey": "ops"}])], {}, "tenants[0].machines[0].sshKey",
         "'ops' is not in sshPrivateKeys (it has: 'default')"),
        ([tenant(machines=[{**GPU_1, "ip": "x"}])], {}, "tenants[0].machines[0].ip", "unknown key"),
        ([tenant(workers=2)], {}, "tenants[0].workers", "unused with machines: each machine is one worker"),
        ([tenant(nodeImage="kindest/node:v1.36.4")], {}, "tenants[0].nodeImage",
         "unused with machines: they run their own kubelet, not a node image"),
        ([{"name": "web", "gpuDevices": "real"}], {"sshPrivateKeys": {}}, "tenants[0].gpuDevices",
         "'real' needs machines: container workers have no GPUs of their own"),
        ([tenant(gpuDevices="real", gpus=[{"model": "NVIDIA L4 24GB"}])], {}, "tenants[0].gpus",
         "unused with gpuDevices real: HAMi's device plugin counts the machines' GPUs"),
        ([tenant(gpuDevices="virtual")], {}, "tenants[0].gpuDevices", "'virtual' is not one of 'mock', 'real'"),
        ([tenant(), tenant(name="other")], {}, "tenants[1].machines[0].name",
         "'gpu-1' is also the name of tenants[0].machines[0]"),
        ([tenant(), tenant(name="other", machines=[{**GPU_1, "name": "gpu-9"}])], {},
         "tenants[1].machines[0].address", "'10.0.0.11:22' is also the address of tenants[0].machines[0]"),
        # One machine under its address and under a host name: both entries would join and reset it.
        ([tenant(), tenant(name="other", machines=[{**GPU_1, "name": "gpu-9", "address": "gpu-1.lab.example"}])], {},
         "tenants[1].machines[0].hostKey",
         f"{HOST_KEY!r} is also the hostKey of tenants[0].machines[0]: one machine, listed twice, would be joined and "
         "reset by both"),
        ([tenant(machines=[GPU_1, {**GPU_1, "name": "gpu-9", "address": "10.0.0.12"}])], {},
         "tenants[0].machines[1].hostKey", f"{HOST_KEY!r} is also the hostKey of tenants[0].machines[0]"),
        ([tenant(machines=[{**GPU_1, "proxyJump": "-oProxyCommand=sh"}])], {}, "tenants[0].machines[0].proxyJump",
         "'-oProxyCommand=sh' is not bastions as ssh -J takes them"),
        ([tenant(machines=[{**GPU_1, "proxyJump": "ops@bastion:2222 ,b2"}])], {}, "tenants[0].machines[0].proxyJump",
         "'ops@bastion:2222 ,b2' is not bastions as ssh -J takes them"),
        ([{"name": "web"}], {}, "sshPrivateKeys", "only used by machine workers, and no tenant lists machines"),
        ([tenant()], {"sshPrivateKeys": "not json"}, "sshPrivateKeys", "not valid JSON"),
        ([tenant()], {"sshPrivateKeys": {"default": 1}}, "sshPrivateKeys", "expected an object of name"),
    ],
)
def test_bad_machine_config_is_refused_naming_the_key(tenants, overrides, key, problem):
    message = error(tenants, **overrides)
    problems = [line.split(f"kamaji-hami-lab:{key}: ", 1)[1] for line in message.splitlines() if f":{key}: " in line]
    assert problems and problems[0].startswith(problem), message


def test_a_name_or_address_used_twice_is_refused_in_one_line_without_the_host_keys_warning():
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyOfGpu9"
    twice = [tenant(), tenant(name="other", machines=[{**GPU_1, "hostKey": other}])]
    lines = [line for line in error(twice).splitlines() if "tenants[1].machines[0]" in line]
    assert lines == [
        "  kamaji-hami-lab:tenants[1].machines[0].name: 'gpu-1' is also the name of tenants[0].machines[0]",
        "  kamaji-hami-lab:tenants[1].machines[0].address: '10.0.0.11:22' is also the address of "
        "tenants[0].machines[0]",
    ]


def test_keys_in_plain_text_are_refused_without_showing_them():
    assert "sshPrivateKeys: must be a secret" in error([tenant()], secret_keys={"managementKubeconfig"})


def test_an_existing_cluster_needs_docker_only_for_container_workers():
    existing = {"managementCluster": "existing", "metallbAddressRange": "192.168.50.240-192.168.50.250",
                "managementKubeconfig": fake_kubeconfig("https://10.20.0.1:6443", "admin")}
    assert settings([tenant()], **existing).existing_cluster.docker_network is None
    assert "dockerNetwork: required with managementCluster existing while a tenant has container workers" in error(
        [tenant(), {"name": "web"}], **existing)
    unused = "  kamaji-hami-lab:dockerNetwork: unused: every tenant's workers are machines, so no Docker is used"
    assert unused in error([tenant()], **existing, dockerNetwork="lab-net").splitlines()


def test_a_machine_tenants_pod_cidr_must_fit_its_machines():
    machines = [{"name": f"m{i}", "address": f"10.0.0.{i}", "hostKey": f"{HOST_KEY}{i}"} for i in range(1, 4)]
    assert "cannot give each of 3 workers a /24" in error([tenant(machines=machines, podCidr="10.244.0.0/23")])


@pytest.mark.parametrize(
    ("keys", "listed"),
    [({}, "none"), ({"ops": KEY, "lab": KEY}, "'ops', 'lab'")],
    ids=["no-keys", "two-keys"],
)
def test_a_machine_naming_a_missing_key_is_told_which_keys_there_are(keys, listed):
    message = error([tenant()], sshPrivateKeys=keys)
    assert (
        f"  kamaji-hami-lab:tenants[0].machines[0].sshKey: 'default' is not in sshPrivateKeys (it has: {listed}); "
        "set it with: pulumi config set --secret --path 'sshPrivateKeys.<name>' < KEY_FILE"
    ) in message.splitlines()


@pytest.mark.parametrize(("port", "accepted"), [(1, True), (65535, True), (0, False), (65536, False), (True, False)])
def test_ssh_ports_are_those_tcp_has(port, accepted):
    machines = [{**GPU_1, "port": port}]
    if accepted:
        assert settings([tenant(machines=machines)]).tenants[0].machines[0].port == port
    else:
        assert f"tenants[0].machines[0].port: expected a TCP port (1-65535), got {json.dumps(port)}" in error(
            [tenant(machines=machines)])


def test_a_management_kubeconfig_of_the_wrong_type_is_refused_without_showing_it():
    message = error([tenant()], managementCluster="existing", managementKubeconfig=["secret-material"])
    assert "  kamaji-hami-lab:managementKubeconfig: expected a string (not shown: the value is a secret)" in (
        message.splitlines())
    assert "secret-material" not in message


@pytest.mark.parametrize(("port", "written"), [(22, {}), (2222, {"port": 2222})], ids=["default-port", "own-port"])
def test_a_machine_without_a_pinned_host_key_is_told_how_to_get_and_check_one(port, written):
    machine = {"name": "gpu-1", "address": "10.0.0.11", **written}
    message = error([tenant(machines=[machine])])
    (line,) = [line for line in message.splitlines() if "machines[0].hostKey: " in line]
    scan = f"ssh-keyscan -t ed25519 -p {port} 10.0.0.11"
    assert line.startswith(f"  kamaji-hami-lab:tenants[0].machines[0].hostKey: required; pin the key the machine "
                           f"presents: `{scan}` prints")
    assert f"`{scan} | ssh-keygen -lf -`" in line and "out of band" in line


def test_flannel_uses_the_kubelets_address_unless_given_its_own_interface():
    machines = [
        {**GPU_1, "nodeIp": "10.1.0.11"},
        {**GPU_1, "name": "gpu-2", "address": "10.0.0.12", "nodeIp": "10.1.0.12", "flannelInterface": "bond0",
         "hostKey": f"{HOST_KEY}2"},
        {**GPU_1, "name": "gpu-3", "address": "h3", "hostKey": f"{HOST_KEY}3"},
    ]
    found = settings([tenant(machines=machines)]).tenants[0].machines
    assert [(m.node_ip, m.flannel_interface) for m in found] == [("10.1.0.11", "10.1.0.11"), ("10.1.0.12", "bond0"),
                                                                ("", "")]
