"""flannel for machine tenants, against facts read from its chart at the pinned version.

Facts come from flannel-io/flannel chart/kube-flannel at tag v0.28.9 (values.yaml, and
`helm template` of that chart with the values the program sends, run once by hand);
the chart has no values schema, so a misspelt key would be ignored without a word.
"""

from __future__ import annotations

import json

import pytest

from components.flannel import flannel_values
from components.team_access import TEAM_NAMESPACE
from tests.plan import changed, dev_config, plan, resolve
from tests.test_machines import MOCK_GPU_TENANT, SECRETS

# Key paths of chart/kube-flannel/values.yaml@v0.28.9 that the templates read for the net config.
CHART_VALUE_PATHS = {("podCidr",), ("podCidrv6",), ("flannel", "backend"), ("flannel", "backendPort"),
                     ("flannel", "mtu"), ("flannel", "args"), ("flannel", "cniBinDir"), ("flannel", "cniConfDir")}
# templates/config.yaml@v0.28.9 renders net-conf.json's "Network" from podCidr and
# "Backend.Type" from flannel.backend; the vxlan backend then uses UDP 8472 (its default port).
NET_CONF_SOURCES = {"Network": ("podCidr",), "Backend.Type": ("flannel", "backend")}
BACKENDS = ("vxlan", "host-gw", "wireguard", "udp")
# flannel-io/flannel main.go@v0.28.9: any of these flags decides a node's interface, and then the Node's
# address annotation (pkg/subnet/kube/annotations.go@v0.28.9) is only the address it advertises; without
# them flanneld takes the interface holding that address, or else the default route's.
INTERFACE_FLAGS = ("--iface", "--iface-regex", "--iface-can-reach", "--public-ip")


def leaf_paths(values: dict, above: tuple = ()) -> set[tuple]:
    paths = set()
    for key, value in values.items():
        if isinstance(value, dict):
            paths |= leaf_paths(value, (*above, key))
        else:
            paths.add((*above, key))
    return paths


def lookup(values: dict, path: tuple):
    for key in path:
        values = values[key]
    return values


def test_every_value_sent_is_a_key_the_chart_reads():
    assert leaf_paths(flannel_values("10.250.0.0/16")) <= CHART_VALUE_PATHS


def test_the_net_config_gets_the_tenants_pod_cidr_and_a_backend_flannel_knows():
    values = flannel_values("10.250.0.0/16")
    assert lookup(values, NET_CONF_SOURCES["Network"]) == "10.250.0.0/16"
    assert lookup(values, NET_CONF_SOURCES["Backend.Type"]) in BACKENDS


def machine_lab(preview: bool):
    tenant = {**MOCK_GPU_TENANT, "podCidr": "10.250.0.0/16"}
    return plan(dev_config(tenants=[tenant, {"name": "web"}]), preview=preview,
                secrets={"sshPrivateKeys": SECRETS["sshPrivateKeys"]})


def test_only_machine_tenants_get_flannel_in_a_privileged_namespace_on_their_own_provider():
    lab = machine_lab(preview=False)
    (release,) = [r for r in lab.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "flannel"]
    namespace = flannel_namespace(lab, release)
    (provider,) = [p for p in lab.of_type("pulumi:providers:kubernetes") if p.urn == release.provider_urn]
    assert provider.name.startswith("research")
    # Its pods use the host network and write the node's CNI directories.
    assert namespace.inputs["metadata"]["labels"] == {"pod-security.kubernetes.io/enforce": "privileged"}
    assert release.inputs["namespace"] == namespace.inputs["metadata"]["name"]
    assert release.inputs["repositoryOpts"] == {"repo": "https://flannel-io.github.io/flannel/"}
    assert release.inputs["version"] == "v0.28.9"
    assert release.inputs["name"] == "flannel"  # Helm takes only lower-case DNS labels as release names
    assert resolve(release.inputs["values"])["podCidr"] == "10.250.0.0/16"


def test_container_tenants_keep_kindnet_from_their_image():
    lab = machine_lab(preview=True)
    assert [c.name for c in lab.commands("install-cni.sh")] == ["web-cni"]
    assert json.dumps([r.name for r in lab.of_type("kubernetes:helm.sh/v3:Release")]).count("flannel") == 1


def flannel_release(lab):
    (release,) = [r for r in lab.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "flannel"]
    return release


def join_envs(lab) -> dict[str, dict]:
    return {env["NODE"]: env for env in (resolve(c.inputs["environment"]) for c in lab.commands("join-worker.sh"))}


def interface_flags(values: dict) -> list[str]:
    return [arg for arg in values["flannel"].get("args", []) if arg.split("=", 1)[0] in INTERFACE_FLAGS]


# A mixed tenant: one machine names an interface, one only the kubelet's address, one neither.
MIXED = [
    {**MOCK_GPU_TENANT["machines"][0], "flannelInterface": "bond0"},
    {**MOCK_GPU_TENANT["machines"][1], "nodeIp": "10.1.0.12"},
    {"name": "gpu-3", "address": "10.0.0.13", "hostKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyOfGpu3"},
]


def lab_of(machines: list[dict], preview: bool = True, previous=None):
    """The machine tenant `research` beside the container tenant `web`."""
    tenant = {**MOCK_GPU_TENANT, "machines": machines}
    return plan(dev_config(tenants=[tenant, {"name": "web"}]), preview=preview, previous=previous,
                secrets={"sshPrivateKeys": SECRETS["sshPrivateKeys"]})


def test_a_mixed_tenant_gives_each_machine_its_own_interface_and_the_tenant_none():
    lab = lab_of(MIXED)
    values = resolve(flannel_release(lab).inputs["values"])
    # One DaemonSet runs on every node: an interface flag there would apply to every machine.
    assert leaf_paths(values) <= CHART_VALUE_PATHS and interface_flags(values) == []
    joins = join_envs(lab)
    # Each machine that names an interface or an address gets it for its own flanneld...
    assert joins["gpu-1"]["FLANNEL_INTERFACE"] == "bond0"
    assert joins["gpu-2"]["FLANNEL_INTERFACE"] == "10.1.0.12"  # nodeIp, when it names no interface
    assert {joins[m]["FLANNEL_NAMESPACE"] for m in ("gpu-1", "gpu-2")} == {release_namespace(lab)}
    # ...and the one that names neither keeps flannel's choice, its default route's interface.
    assert not {"FLANNEL_INTERFACE", "FLANNEL_NAMESPACE"} & set(joins["gpu-3"])
    # No interface name reaches a machine that did not name it, nor the container tenant's workers.
    for node, env in joins.items():
        if node != "gpu-1":
            assert "bond0" not in [value for value in env.values() if isinstance(value, str)], node
    containers = [env for node, env in joins.items() if node not in ("gpu-1", "gpu-2", "gpu-3")]
    assert containers and not any({"FLANNEL_INTERFACE", "FLANNEL_NAMESPACE"} & set(env) for env in containers)


def flannel_namespace(lab, release):
    """The namespace the program makes for flannel in the release's tenant (beside the team's access namespace)."""
    (namespace,) = [r for r in lab.of_type("kubernetes:core/v1:Namespace")
                    if r.provider_urn == release.provider_urn and r.inputs["metadata"]["name"] != TEAM_NAMESPACE]
    return namespace


def release_namespace(lab) -> str:
    return flannel_namespace(lab, flannel_release(lab)).inputs["metadata"]["name"]


def test_an_all_plain_tenant_keeps_the_charts_arguments_and_joins_without_an_interface():
    lab = lab_of([{key: value for key, value in m.items() if key != "flannelInterface"} for m in MIXED[::2]])
    values = resolve(flannel_release(lab).inputs["values"])
    assert "args" not in values["flannel"]  # the chart's own: --ip-masq --kube-subnet-mgr (values.yaml@v0.28.9)
    assert not any({"FLANNEL_INTERFACE", "FLANNEL_NAMESPACE"} & set(env) for env in join_envs(lab).values())


@pytest.mark.parametrize("key, value", [("flannelInterface", "bond0"), ("flannelInterface", "10.2.0.13"),
                                        ("nodeIp", "10.1.0.13")])
def test_naming_an_interface_on_one_machine_touches_only_that_machines_join(key, value, shared):
    plain = [{k: v for k, v in m.items() if k not in ("flannelInterface", "nodeIp")} for m in MIXED]
    first_up = shared("flannel-plain-machines-up", lambda: lab_of(plain, preview=False))
    named = [*plain[:2], {**plain[2], key: value}]

    later = lab_of(named, previous=first_up)

    changed_names = {later.by_urn[urn].name for urn in changed(later, first_up)}
    # Neither the tenant's flannel nor another machine changes. New join inputs run the join script
    # again (pulumi-command runs create when a Command without `update` changes: pulumi/pulumi-command
    # local.Command docs@v1.2.1), which sets the Node's address; so does upgrading a lab whose tenant
    # flannel had an --iface list.
    assert flannel_release(later).name not in changed_names
    assert not [name for name in changed_names if name.startswith(("gpu-1", "gpu-2"))], changed_names
    (join,) = [c for c in later.commands("join-worker.sh") if c.name in changed_names]
    assert join.name.startswith("gpu-3")
    assert join_envs(later)["gpu-3"]["FLANNEL_INTERFACE"] == value and not join.inputs.get("update")

