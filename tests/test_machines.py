"""Plans of tenants whose workers are real machines joined over SSH, with mock or real GPUs."""

from __future__ import annotations

import pytest

from components import config
from tests.plan import LAB_IDENTITY, changed, dev_config, fake_kubeconfig, is_unknown, plan, resolve
from tests.ssh_keys import made_key
from tests.test_gpu_sharing import HAMI_VALUE_KEYS, leaf_paths
from tests.test_state_safety import qualified

EXISTING_KUBECONFIG = fake_kubeconfig("https://10.20.0.1:6443", "platform-admin")
LAB_KEY = made_key("ed25519", "lab")
OWN_KEY = made_key("ed25519", "gpu-2")
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyOfGpu1"
EXISTING = {"managementCluster": "existing", "metallbAddressRange": "192.168.50.240-192.168.50.250"}
SECRETS = {"managementKubeconfig": EXISTING_KUBECONFIG, "sshPrivateKeys": {"default": LAB_KEY, "gpu-2": OWN_KEY}}
MACHINES = [
    {"name": "gpu-1", "address": "10.0.0.11", "hostKey": HOST_KEY},
    {"name": "gpu-2", "address": "gpu-2.lab.example", "port": 2222, "user": "ops", "sshKey": "gpu-2",
     "hostKey": "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIHostKeyOfGpu2="},
]
MOCK_GPU_TENANT = {"name": "research", "machines": MACHINES, "gpus": [{"model": "NVIDIA L4 24GB"}]}
REAL_GPU_TENANT = {"name": "training", "machines": [{"name": "dgx-1", "address": "10.0.1.5",
                                                    "hostKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyOfDgx1"}],
                   "gpuDevices": "real"}
COMMAND = "command:local:Command"

@pytest.fixture(params=[(g, p) for g in ("mock", "real") for p in (True, False)],
                ids=["mock-first-preview", "mock-up", "real-first-preview", "real-up"])
def machines(request, machine_plan):
    return machine_plan(*request.param)


@pytest.fixture(params=[True, False], ids=["first-preview", "up"])
def mock_gpus(request, machine_plan):
    return machine_plan("mock", request.param)


def of_machine(plan_, script: str, machine: str):
    (command,) = [c for c in plan_.commands(script) if resolve(c.inputs["environment"]).get("NODE") == machine]
    return command


def machine_commands(plan_):
    return [c for c in plan_.of_type(COMMAND) if resolve(c.inputs.get("environment", {})).get("NODE_TRANSPORT")]


def test_a_machine_is_marked_with_the_lab_and_tenant_and_reset_only_when_adopted_or_marked():
    adopted = {**MOCK_GPU_TENANT, "machines": [MACHINES[0], {**MACHINES[1], "adopt": True}]}
    lab = plan(dev_config(tenants=[adopted], managementClusterName="gpu-lab"), preview=True,
               secrets={"sshPrivateKeys": SECRETS["sshPrivateKeys"]})
    envs = {machine: resolve(of_machine(lab, "join-worker.sh", machine).inputs["environment"])
            for machine in ("gpu-1", "gpu-2")}
    # The project and stack the program runs as (tests/plan.py), and the lab's name.
    assert {env["LAB_ID"] for env in envs.values()} == {"kamaji-hami-lab/dev/gpu-lab"}
    assert {env["TENANT"] for env in envs.values()} == {"research"}
    assert (envs["gpu-1"]["ADOPT"], envs["gpu-2"]["ADOPT"]) == ("false", "true")
    assert not any("LAB_ID" in resolve(c.inputs["environment"]) for c in lab.commands("check-machine.sh"))


def test_every_machine_carries_one_random_identity_made_once_for_the_stack():
    config = dev_config(tenants=[MOCK_GPU_TENANT, REAL_GPU_TENANT], **EXISTING)
    first_up = plan(config, preview=False, secrets=SECRETS)

    (made,) = first_up.commands("lab-identity.sh")
    identities = {resolve(join.inputs["environment"])["LAB_IDENTITY"] for join in first_up.commands("join-worker.sh")}
    assert identities == {LAB_IDENTITY} and len(first_up.commands("join-worker.sh")) == 3
    # Made on create only: no trigger, no update step and no input that could ever change re-runs it.
    assert not made.inputs.get("triggers") and not made.inputs.get("update") and not made.inputs.get("environment")
    later = plan(config, preview=True, previous=first_up, secrets=SECRETS)
    assert changed(later, first_up) == set(), "a later up keeps the identity and every join"
    assert resolve(of_machine(later, "join-worker.sh", "dgx-1").inputs["environment"])["LAB_IDENTITY"] == LAB_IDENTITY


def test_a_lab_makes_an_identity_only_for_machines_or_its_network_filter(mock_gpus, preview_plan, existing_plan):
    # Container workers on an existing cluster's docker network: no machine to mark, no filter to name.
    assert existing_plan("installed", True).commands("lab-identity.sh") == []
    assert len(mock_gpus.commands("lab-identity.sh")) == 1
    # The kind lab's container workers: one identity, which names the filter's chains.
    assert len(preview_plan.commands("lab-identity.sh")) == 1


@pytest.mark.parametrize("key", ["nodeIp", "flannelInterface"])
def test_changing_how_a_machine_is_addressed_joins_it_again_and_only_it(key, machine_plan):
    first_up = machine_plan("mock", preview=False)
    moved = [{**MACHINES[0], key: "10.0.0.21"}, MACHINES[1]]

    later = plan(dev_config(tenants=[{**MOCK_GPU_TENANT, "machines": moved}], **EXISTING), preview=True,
                 previous=first_up, secrets=SECRETS)

    rejoined = {later.by_urn[urn].name for urn in changed(later, first_up)}
    assert of_machine(later, "join-worker.sh", "gpu-1").name in rejoined
    assert of_machine(later, "join-worker.sh", "gpu-2").name not in rejoined
    assert f"{key}=10.0.0.21" in resolve(of_machine(later, "join-worker.sh", "gpu-1").inputs["triggers"])


def test_each_machine_must_reach_the_konnectivity_port_its_control_plane_serves(mock_gpus):
    (tcp,) = mock_gpus.of_type("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane")
    served = resolve(tcp.inputs["spec"])["addons"]["konnectivity"]["server"]["port"]
    for machine in ("gpu-1", "gpu-2"):
        assert resolve(of_machine(mock_gpus, "check-machine.sh", machine).inputs["environment"])[
            "KONNECTIVITY_PORT"] == str(int(served))


def test_machines_on_an_existing_cluster_touch_no_docker_and_no_kind(machines):
    assert not [r for r in machines.registrations if r.type.startswith(("docker:", "pulumi:providers:docker"))]
    assert not any(machines.commands(s) for s in ("kind-up.sh", "install-cni.sh", "kind-subnet.sh"))


def test_each_machine_is_checked_then_joined_over_ssh_as_configured(mock_gpus):
    check, join = of_machine(mock_gpus, "check-machine.sh", "gpu-2"), of_machine(mock_gpus, "join-worker.sh", "gpu-2")
    env = resolve(join.inputs["environment"])
    assert (env["NODE_TRANSPORT"], env["SSH_ADDRESS"], env["SSH_PORT"], env["SSH_USER"]) == (
        "ssh", "gpu-2.lab.example", "2222", "ops")
    assert env["SSH_PRIVATE_KEY"] == OWN_KEY and env["SSH_HOST_KEY"] == MACHINES[1]["hostKey"]
    assert {"gpu-2.lab.example", "2222"} <= set(resolve(join.inputs["triggers"]))  # another address re-joins
    assert resolve(of_machine(mock_gpus, "join-worker.sh", "gpu-1").inputs["environment"])["SSH_HOST_KEY"] == HOST_KEY
    assert check.urn in join.all_dependencies
    assert resolve(check.inputs["environment"])["KUBERNETES_VERSION"] == "v1.36.4"
    # check-machine.sh looks for the NVIDIA driver and toolkit only when REAL_GPUS is "true".
    assert resolve(check.inputs["environment"])["REAL_GPUS"] == "false"


def test_the_machine_check_gets_the_tenant_endpoint_as_host_and_port(machine_plan):
    up = machine_plan("mock", preview=False)
    env = resolve(of_machine(up, "check-machine.sh", "gpu-1").inputs["environment"])
    assert env["ENDPOINT"].count(":") == 1 and "://" not in env["ENDPOINT"]
    assert f"https://{env['ENDPOINT']}" == resolve(up.outputs["tenants"])["research"]["endpoint"]


def test_private_keys_and_the_tenant_kubeconfig_stay_secret_in_every_machine_step(machines):
    steps = machine_commands(machines)
    assert {c.inputs.get("create", "").rsplit("/", 1)[-1] for c in steps} >= {"check-machine.sh", "join-worker.sh"}
    for step in steps:
        assert "environment" in step.secret_inputs
        assert resolve(step.inputs["environment"])["SSH_PRIVATE_KEY"] in (LAB_KEY, OWN_KEY)
    joins = [c for c in steps if c.inputs.get("create", "").endswith("/join-worker.sh")]
    assert all({"stdout", "stderr"} <= set(c.secret_outputs) for c in joins)


def test_machines_join_one_after_another_once_the_control_plane_is_ready(mock_gpus):
    (control_plane,) = mock_gpus.of_type("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane")
    first_check, second_check = (of_machine(mock_gpus, "check-machine.sh", m) for m in ("gpu-1", "gpu-2"))
    first_gpus = of_machine(mock_gpus, "register-gpus.sh", "gpu-1")
    assert control_plane.urn in mock_gpus.upstream(first_check.urn)
    # Through the first machine's last step, its sleep-or-wake step (components/worker_power.py).
    assert first_gpus.urn in mock_gpus.upstream(second_check.urn)


def test_a_machine_leaves_the_tenant_and_drops_its_mock_gpus_on_destroy(mock_gpus):
    join, gpus = of_machine(mock_gpus, "join-worker.sh", "gpu-1"), of_machine(mock_gpus, "register-gpus.sh", "gpu-1")
    assert join.inputs["delete"].endswith("/leave-worker.sh") and join.delete_before_replace
    assert gpus.inputs["delete"].endswith("/unregister-gpus.sh")
    assert join.urn in gpus.all_dependencies
    # unregister-gpus.sh compares the machine's binding with the tenant's; the kubeconfig stays a secret.
    kubeconfig = resolve(gpus.inputs["environment"])["KUBECONFIG_DATA"]
    assert is_unknown(kubeconfig) or kubeconfig == resolve(join.inputs["environment"])["KUBECONFIG_DATA"]
    assert "environment" in gpus.secret_inputs


def test_machine_tenants_get_a_cni_from_the_cluster_side_on_their_own_provider(machines):
    providers = machines.of_type("pulumi:providers:kubernetes")
    (tenant_provider,) = [p for p in providers if p.name != "management-kubernetes"]
    releases = {r.inputs["chart"]: r for r in machines.of_type("kubernetes:helm.sh/v3:Release")
                if r.provider_urn == tenant_provider.urn}
    assert {"flannel", "hami"} <= set(releases)
    assert releases["flannel"].urn in machines.upstream(releases["hami"].urn)


def test_hami_waits_for_every_machine_to_join(machines):
    (hami,) = [r for r in machines.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "hami"]
    joins = [c for c in machines.commands("join-worker.sh")]
    assert joins and all(join.urn in machines.upstream(hami.urn) for join in joins)


def test_real_gpus_are_not_registered_as_mock_ones(machine_plan):
    real = machine_plan("real", preview=False)
    assert not real.commands("register-gpus.sh")
    assert resolve(of_machine(real, "check-machine.sh", "dgx-1").inputs["environment"])["REAL_GPUS"] == "true"
    facts = resolve(real.outputs["tenants"])["training"]
    assert facts["workers"] == ["dgx-1"] and facts["gpuDevices"] == "real" and facts["gpusPerWorker"] == []


def test_tenant_facts_name_the_machines_as_workers(machine_plan):
    facts = resolve(machine_plan("mock", preview=False).outputs["tenants"])["research"]
    assert facts["workers"] == ["gpu-1", "gpu-2"] and facts["gpuDevices"] == "mock"


@pytest.fixture
def mixed_lab(shared):
    """A tenant on containers and one on machines, as a first preview."""
    return shared("machines-and-containers", lambda: plan(dev_config(tenants=[{"name": "web"}, MOCK_GPU_TENANT]),
                                                          preview=True,
                                                          secrets={"sshPrivateKeys": SECRETS["sshPrivateKeys"]}))


def test_a_lab_mixing_container_and_machine_tenants_uses_docker_only_for_the_containers(mixed_lab):
    containers = mixed_lab.of_type("docker:index/container:Container")
    assert [c.inputs["name"] for c in containers] == ["kamaji-web-w1"]
    assert [c.name for c in mixed_lab.commands("install-cni.sh")] == ["web-cni"]
    assert {resolve(c.inputs["environment"])["NODE"] for c in machine_commands(mixed_lab)} == {"gpu-1", "gpu-2"}


def test_secret_keys_in_plain_config_are_refused_before_any_resource():
    with pytest.raises(config.ConfigError, match=r"sshPrivateKeys: must be a secret") as refused:
        plan(dev_config(tenants=[MOCK_GPU_TENANT], sshPrivateKeys={"default": LAB_KEY, "gpu-2": OWN_KEY}),
             preview=True)
    assert LAB_KEY not in str(refused.value)
    assert not refused.value.plan.registrations


@pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
def test_a_machine_without_a_pinned_host_key_is_refused_before_any_resource(preview):
    unpinned = {**MOCK_GPU_TENANT, "machines": [MACHINES[0], {k: v for k, v in MACHINES[1].items() if k != "hostKey"}]}
    missing = r"tenants\[0\]\.machines\[1\]\.hostKey: required; pin the key"
    with pytest.raises(config.ConfigError, match=missing) as refused:
        plan(dev_config(tenants=[unpinned]), preview=preview, secrets={"sshPrivateKeys": SECRETS["sshPrivateKeys"]})
    assert "ssh-keyscan -t ed25519 -p 2222 gpu-2.lab.example" in str(refused.value)
    assert refused.value.plan.registrations == []


def test_machine_kubelets_keep_disk_eviction_and_swap_checks_that_containers_turn_off(mixed_lab):
    patches = {
        r.name: {p["path"] for p in r.inputs["spec"]["kubernetes"]["kubelet"]["configurationJSONPatches"]}
        for r in mixed_lab.of_type("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane")
    }
    # A machine's own disk fills and its swap is off (check-machine.sh), so its kubelet keeps the defaults.
    assert patches["research-control-plane"] == {"/cgroupDriver"}
    shared_host = {"/cgroupDriver", "/failSwapOn", "/evictionHard", "/imageGCHighThresholdPercent"}
    assert shared_host <= patches["web-control-plane"]


# HAMi chart 2.10.0 with the values the program sends for real GPUs, rendered once with
# `helm template` (charts/hami-2.10.0.tgz of Project-HAMi/HAMi's gh-pages branch):
# the NVIDIA plugin's DaemonSet is hami-device-plugin and selects nodes labelled gpu=on
# (values.yaml devicePlugin.nvidiaNodeSelector); the mock DaemonSet is not rendered; the
# device ConfigMap (scheduler/device-configmap.yaml) carries deviceSplitCount from
# devicePlugin.deviceSplitCount, and the plugin reads that same file (--config-file).
REAL_PLUGIN_DAEMONSET = "hami-device-plugin"
REAL_PLUGIN_NODE_SELECTOR = {"gpu": "on"}


def test_real_gpus_run_hamis_nvidia_plugin_with_the_tenants_slots(machine_plan):
    real = machine_plan("real", preview=True)
    (hami,) = [r for r in real.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "hami"]
    values = resolve(hami.inputs["values"])
    assert set(leaf_paths(values)) <= HAMI_VALUE_KEYS
    # Its metrics Service too stays inside the tenant (tests/test_hami_services.py).
    assert values["devicePlugin"] == {"enabled": True, "deviceSplitCount": 10, "service": {"type": "ClusterIP"}}
    assert values["mockDevicePlugin"] == {"enabled": False}
    assert "device-config" not in values, "the chart's own device config is the real plugin's"
    # Only klog's verbosity, which the extender takes (cmd/scheduler/main.go@v2.10.0): no node-lock override.
    assert values["scheduler"]["extender"]["extraArgs"] == ["-v=4"]


@pytest.mark.parametrize("preview", [True, False], ids=["first-preview", "up"])
def test_real_gpu_machines_are_labelled_for_the_nvidia_plugin_once_joined(preview, machine_plan):
    real = machine_plan("real", preview)
    (label,) = real.of_type("kubernetes:core/v1:NodePatch")
    (join,) = real.commands("join-worker.sh")
    (hami,) = [r for r in real.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "hami"]
    assert label.inputs["metadata"]["name"] == "dgx-1"
    assert label.inputs["metadata"]["labels"] == REAL_PLUGIN_NODE_SELECTOR
    # A NodePatch takes a field another manager owns only when forced (pulumi-kubernetes NodePatch docs).
    assert label.inputs["metadata"]["annotations"] == {"pulumi.com/patchForce": "true"}
    assert label.provider_urn == hami.provider_urn
    assert join.urn in real.upstream(label.urn)
    # The kubelet registers the label itself, so a Node re-created by a re-join has it too.
    assert resolve(join.inputs["environment"])["NODE_LABELS"] == ",".join(
        f"{key}={value}" for key, value in REAL_PLUGIN_NODE_SELECTOR.items())
    (mock_join, _) = machine_plan("mock", preview).commands("join-worker.sh")
    assert "NODE_LABELS" not in resolve(mock_join.inputs["environment"])
    (ready,) = real.commands("wait-gpus.sh")
    env = resolve(ready.inputs["environment"])
    assert (env["NODES"], env["EXPECTED_GPUMEM"], env["DEVICE_PLUGIN"]) == ("dgx-1", "", REAL_PLUGIN_DAEMONSET)
    assert label.urn in ready.all_dependencies


def test_mock_gpus_label_no_node(mock_gpus):
    assert mock_gpus.of_type("kubernetes:core/v1:NodePatch") == []


def test_machine_resources_keep_their_urns(mock_gpus):
    # As tests/test_state_safety.py: a renamed component type or parent would replace them on the next up.
    stable = {
        "kamaji-hami-lab:index:Tenant$kamaji-hami-lab:index:MachineWorker$command:local:Command::gpu-1-join",
        "kamaji-hami-lab:index:Tenant$kamaji-hami-lab:index:MachineWorker$command:local:Command::gpu-1-check",
        "kamaji-hami-lab:index:Tenant$kamaji-hami-lab:index:Flannel$kubernetes:helm.sh/v3:Release::research-flannel",
    }
    assert stable <= {qualified(mock_gpus, r) for r in mock_gpus.registrations}


def test_each_machine_component_records_the_node_it_became(mock_gpus):
    machines = mock_gpus.of_type("kamaji-hami-lab:index:MachineWorker")
    recorded = sorted(mock_gpus.component_outputs[machine.urn]["nodeName"] for machine in machines)
    assert recorded == sorted(machine["name"] for machine in MACHINES)


@pytest.mark.parametrize("gpus", ["mock", "real"])
def test_every_machine_lab_resource_is_named_after_its_component(gpus, machine_plan):
    lab = machine_plan(gpus, False)
    assert lab.misnamed() == [] and lab.outside_components() == []


def test_a_machine_behind_a_bastion_is_reached_through_it_by_every_script():
    bastion = "ops@bastion.lab.example:2222"
    behind = {**MOCK_GPU_TENANT, "machines": [{**MACHINES[0], "proxyJump": bastion}, MACHINES[1]]}
    lab = plan(dev_config(tenants=[behind], **EXISTING), preview=True, secrets=SECRETS)

    for script in ("check-machine.sh", "join-worker.sh", "register-gpus.sh"):
        assert resolve(of_machine(lab, script, "gpu-1").inputs["environment"])["SSH_PROXY_JUMP"] == bastion
        assert "SSH_PROXY_JUMP" not in resolve(of_machine(lab, script, "gpu-2").inputs["environment"])
