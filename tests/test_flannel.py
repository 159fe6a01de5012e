"""flannel for machine tenants, against facts read from its chart at the pinned version.

Facts come from flannel-io/flannel chart/kube-flannel at tag v0.28.9 (values.yaml, and
`helm template` of that chart with the values the program sends, run once by hand);
the chart has no values schema, so a misspelt key would be ignored without a word.
"""

from __future__ import annotations

import json

from components.flannel import flannel_values
from tests.plan import dev_config, plan, resolve
from tests.test_machines import MOCK_GPU_TENANT, SECRETS

# Key paths of chart/kube-flannel/values.yaml@v0.28.9 that the templates read for the net config.
CHART_VALUE_PATHS = {("podCidr",), ("podCidrv6",), ("flannel", "backend"), ("flannel", "backendPort"),
                     ("flannel", "mtu"), ("flannel", "args"), ("flannel", "cniBinDir"), ("flannel", "cniConfDir")}
# templates/config.yaml@v0.28.9 renders net-conf.json's "Network" from podCidr and
# "Backend.Type" from flannel.backend; the vxlan backend then uses UDP 8472 (its default port).
NET_CONF_SOURCES = {"Network": ("podCidr",), "Backend.Type": ("flannel", "backend")}
BACKENDS = ("vxlan", "host-gw", "wireguard", "udp")
# values.yaml@v0.28.9 flannel.args, which the DaemonSet passes to flanneld as they are; main.go@v0.28.9:
# --iface (a name or an IP) may be given several times, and flanneld takes the first the node has.
CHART_DEFAULT_ARGS = ["--ip-masq", "--kube-subnet-mgr"]


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
    (namespace,) = [r for r in lab.of_type("kubernetes:core/v1:Namespace") if r.provider_urn == release.provider_urn]
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


def test_without_interfaces_flannel_keeps_the_charts_arguments():
    assert "args" not in flannel_values("10.250.0.0/16")["flannel"]


def test_machines_interfaces_are_tried_in_order_beside_the_charts_own_arguments():
    tenant = {**MOCK_GPU_TENANT, "machines": [
        {**MOCK_GPU_TENANT["machines"][0], "nodeIp": "10.1.0.11"},
        {**MOCK_GPU_TENANT["machines"][1], "nodeIp": "10.1.0.12", "flannelInterface": "bond0"},
    ]}
    lab = plan(dev_config(tenants=[tenant]), preview=True, secrets={"sshPrivateKeys": SECRETS["sshPrivateKeys"]})
    (release,) = [r for r in lab.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "flannel"]
    values = resolve(release.inputs["values"])
    assert leaf_paths(values) <= CHART_VALUE_PATHS
    assert values["flannel"]["args"] == [*CHART_DEFAULT_ARGS, "--iface=10.1.0.11", "--iface=bond0"]
    joins = {resolve(c.inputs["environment"])["NODE"]: resolve(c.inputs["environment"])
             for c in lab.commands("join-worker.sh")}
    assert (joins["gpu-1"]["NODE_IP"], joins["gpu-2"]["NODE_IP"]) == ("10.1.0.11", "10.1.0.12")
