"""HAMi on mock GPUs in every tenant: release values, node registration, quotas, readiness."""

import json
from pathlib import Path

import pytest

from components.config import ConfigError, parse_settings
from components.gpus import GPU_CATALOGUE
from tests.plan import dev_config, plan

RELEASE = "kubernetes:helm.sh/v3:Release"
HAMI_VALUE_KEYS = {
    line
    for line in (Path(__file__).parent / "fixtures" / "hami-2.10.0-value-keys.txt").read_text().splitlines()
    if line and not line.startswith("#")
}


def hami_releases(plan_):
    return [r for r in plan_.of_type(RELEASE) if r.inputs["chart"] == "hami"]


def leaf_paths(values, prefix=""):
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from leaf_paths(value, path + ".")
        else:
            yield path


def registrations(plan_):
    """Node name -> (parsed register annotation, nvidia.com/gpu capacity)."""
    return {
        c.inputs["environment"]["NODE"]: (
            json.loads(c.inputs["environment"]["GPU_REGISTER_JSON"]),
            int(c.inputs["environment"]["GPU_CAPACITY"]),
        )
        for c in plan_.commands("register-gpus.sh")
    }


def test_one_hami_release_per_tenant_on_its_own_provider(dev_plan):
    releases = hami_releases(dev_plan)
    providers = {r.provider_urn for r in releases}
    assert len(releases) == 2 and len(providers) == 2
    tenant_providers = {
        p.urn for p in dev_plan.of_type("pulumi:providers:kubernetes") if p.name != "management-kubernetes"
    }
    assert providers == tenant_providers
    for release in releases:
        assert (release.inputs["name"], release.inputs["namespace"], release.inputs["version"]) == (
            "hami",
            "kube-system",
            "2.10.0",
        )
        assert release.inputs["repositoryOpts"]["repo"] == "https://project-hami.github.io/HAMi/"


def test_hami_values_use_only_keys_the_chart_has(dev_plan):
    for release in hami_releases(dev_plan):
        unknown = [path for path in leaf_paths(release.inputs["values"]) if path not in HAMI_VALUE_KEYS]
        assert unknown == []


def test_the_mock_schedulers_extender_gets_klogs_verbosity_and_the_node_lock_flag_only(dev_plan):
    # Both are flags of HAMi's scheduler (cmd/scheduler/main.go@v2.10.0: klog's -v, --node-lock-timeout);
    # the list replaces the chart's, so anything else would be a flag it refuses to start with.
    for release in hami_releases(dev_plan):
        verbosity, lock = release.inputs["values"]["scheduler"]["extender"]["extraArgs"]
        assert verbosity == "-v=4" and lock.startswith("--node-lock-timeout=")


# The chart's own kube-scheduler args for clusters from v1.22 on (charts/hami/values.yaml@v2.10.0:
# scheduler.kubeScheduler.extraNewArgs); a list in the values replaces it whole.
CHART_KUBE_SCHEDULER_ARGS = ["--config=/config/config.yaml", "-v=4"]
# The delegated authorizer's own always-allowed paths (kubernetes/apiserver
# pkg/server/options/authorization.go@v0.36.3): the flag replaces them, so they are named again.
DELEGATED_AUTHZ_DEFAULT_PATHS = {"/healthz", "/readyz", "/livez"}


def always_allowed(args: list[str]) -> set[str]:
    [flag] = [arg for arg in args if arg.startswith("--authorization-always-allow-paths=")]
    return set(flag.split("=", 1)[1].split(","))


@pytest.mark.parametrize("real_gpus", [False, True])
def test_hamis_kube_scheduler_keeps_the_charts_args_and_lets_only_metrics_skip_authorization(real_gpus):
    from components.gpu_sharing import hami_values

    args = hami_values("v1.36.4", 4, real_gpus, "docker.io/projecthami/mock-device-plugin:1.0.1",
                       scheduler_metrics=True)["scheduler"]["kubeScheduler"]["extraNewArgs"]
    assert args[: len(CHART_KUBE_SCHEDULER_ARGS)] == CHART_KUBE_SCHEDULER_ARGS and len(args) == 3
    # Exactly /metrics: not /metrics/resources (pod names), no prefix wildcard, nothing else.
    assert always_allowed(args) == DELEGATED_AUTHZ_DEFAULT_PATHS | {"/metrics"}


def test_every_tenants_hami_release_gets_the_kube_scheduler_args(dev_plan):
    for release in hami_releases(dev_plan):
        args = release.inputs["values"]["scheduler"]["kubeScheduler"]["extraNewArgs"]
        assert "/metrics" in always_allowed(args), release.name


def test_without_observability_the_kube_scheduler_keeps_the_charts_args_and_metrics_stay_authorized(shared):
    off = shared("observability-off", lambda: plan(dev_config(observability=False), preview=False))
    for release in hami_releases(off):
        # No extraNewArgs: the chart's own list applies, and with it the delegated authorizer's defaults.
        assert "extraNewArgs" not in release.inputs["values"]["scheduler"]["kubeScheduler"], release.name


def test_the_value_key_check_catches_a_stale_key():
    assert "scheduler.kubeScheduler.imageTag" not in HAMI_VALUE_KEYS
    assert "scheduler.kubeScheduler.image.tag" in HAMI_VALUE_KEYS


def test_hami_runs_the_mock_plugin_and_a_matching_kube_scheduler(dev_plan):
    values = hami_releases(dev_plan)[0].inputs["values"]
    assert values["devicePlugin"]["enabled"] is False
    assert values["mockDevicePlugin"]["enabled"] is True
    image = values["scheduler"]["kubeScheduler"]["image"]
    assert (image["registry"], image["repository"], image["tag"]) == ("registry.k8s.io", "kube-scheduler", "v1.36.4")


def test_hami_installs_after_the_workers_joined_and_the_cni(dev_plan):
    joins = {j.inputs["environment"]["NODE"]: j.urn for j in dev_plan.commands("join-worker.sh")}
    for release in hami_releases(dev_plan):
        upstream = dev_plan.upstream(release.urn)
        own_joins = {urn for node, urn in joins.items() if urn in upstream}
        assert len(own_joins) == 1
        assert any(c.urn in upstream for c in dev_plan.commands("install-cni.sh"))


def test_dev_layout_registers_one_a100_and_two_l4s(dev_plan):
    nodes = registrations(dev_plan)
    a_devices, a_capacity = nodes["kamaji-tenant-a-w1"]
    b_devices, b_capacity = nodes["kamaji-tenant-b-w1"]
    assert [(d["type"], d["devmem"], d["count"]) for d in a_devices] == [("NVIDIA A100 80GB", 81920, 10)]
    assert [(d["type"], d["devmem"]) for d in b_devices] == [("NVIDIA L4 24GB", 23034)] * 2
    assert (a_capacity, b_capacity) == (10, 20)


def test_register_annotation_is_hamis_device_list(dev_plan):
    for devices, _ in registrations(dev_plan).values():
        for index, device in enumerate(devices):
            assert device["index"] == index
            assert device["health"] is True  # HAMi reads an absent health as unhealthy
            assert device["devcore"] == 100 and device["mode"] == "hami-core"
            assert not set(",:;") & set(device["id"]), "pod annotations use , : ; as separators"
    all_ids = [d["id"] for devices, _ in registrations(dev_plan).values() for d in devices]
    assert len(all_ids) == len(set(all_ids))


def test_other_layouts_register_what_they_configure():
    layout = plan(
        dev_config(
            tenants=[
                {
                    "name": "mixed",
                    "workers": 2,
                    "gpuSlots": 4,
                    "gpus": [{"model": "NVIDIA T4 16GB", "count": 2}, {"model": "ACME X1", "memoryMiB": 12000}],
                }
            ]
        ),
        preview=True,
    )
    nodes = registrations(layout)
    assert sorted(nodes) == ["kamaji-mixed-w1", "kamaji-mixed-w2"]
    devices, capacity = nodes["kamaji-mixed-w2"]
    assert [(d["type"], d["devmem"], d["count"]) for d in devices] == [
        ("NVIDIA T4 16GB", 15360, 4),
        ("NVIDIA T4 16GB", 15360, 4),
        ("NVIDIA-ACME X1", 12000, 4),
    ]
    assert capacity == 12
    (ready,) = layout.commands("wait-gpus.sh")
    assert ready.inputs["environment"]["NODES"] == "kamaji-mixed-w1 kamaji-mixed-w2"
    assert ready.inputs["environment"]["EXPECTED_GPUMEM"] == str(2 * 15360 + 12000)
    # The mock plugin's DaemonSet (charts/hami/templates/device-plugin/daemonsetmock.yaml@v2.10.0).
    assert ready.inputs["environment"]["DEVICE_PLUGIN"] == "hami-mock-device-plugin"


def test_registration_is_stable_between_runs(preview_plan):
    assert registrations(preview_plan) == registrations(plan(dev_config(), preview=True))


def test_registration_runs_after_the_join_and_again_for_a_new_container(dev_plan):
    joins = {j.inputs["environment"]["NODE"]: j.urn for j in dev_plan.commands("join-worker.sh")}
    for command in dev_plan.commands("register-gpus.sh"):
        assert joins[command.inputs["environment"]["NODE"]] in command.dependencies
        assert command.inputs.get("triggers")
        # Uses the node's own kubelet credentials, so no tenant credential is handed to it.
        assert "KUBECONFIG_DATA" not in command.inputs["environment"]


def test_gpu_readiness_waits_for_hami_and_every_registration(dev_plan):
    registered = {c.urn for c in dev_plan.commands("register-gpus.sh")}
    for ready in dev_plan.commands("wait-gpus.sh"):
        upstream = dev_plan.upstream(ready.urn)
        assert any(r.urn in upstream for r in hami_releases(dev_plan))
        assert len(registered & upstream) == 1


def test_tenant_without_gpus_gets_hami_but_no_registration():
    cpu_only = plan(dev_config(tenants=[{"name": "cpu"}]), preview=True)
    assert len(hami_releases(cpu_only)) == 1
    assert cpu_only.commands("register-gpus.sh") == []
    (ready,) = cpu_only.commands("wait-gpus.sh")
    assert ready.inputs["environment"]["NODES"] == ""


def test_quotas_render_as_resource_quotas_in_the_tenant():
    quota_plan = plan(
        dev_config(
            tenants=[
                {
                    "name": "q",
                    "quotas": [
                        {"namespace": "team-a", "gpumemMiB": 8192, "gpucores": 50, "gpus": 4},
                        {"namespace": "default", "gpumemMiB": 4096},
                    ],
                },
                # The same namespace in another tenant: Pulumi refuses two resources with one URN.
                {"name": "r", "quotas": [{"namespace": "team-a", "gpus": 1}]},
            ]
        ),
        preview=False,
    )
    urns = [r.urn for r in quota_plan.registrations]
    assert len(urns) == len(set(urns))
    of_q = [r for r in quota_plan.registrations if r.name.startswith("q-")]
    quotas = {q.inputs["metadata"]["namespace"]: q for q in of_q if q.type == "kubernetes:core/v1:ResourceQuota"}
    # The name `make status` shows (README: "team-a/gpu-quota").
    assert {q.inputs["metadata"]["name"] for q in quotas.values()} == {"gpu-quota"}
    assert quotas["team-a"].inputs["spec"]["hard"] == {
        "limits.nvidia.com/gpumem": "8192",
        "limits.nvidia.com/gpucores": "50",
        "requests.nvidia.com/gpu": "4",
    }
    assert quotas["default"].inputs["spec"]["hard"] == {"limits.nvidia.com/gpumem": "4096"}
    namespaces = {n.inputs["metadata"]["name"]: n for n in of_q if n.type == "kubernetes:core/v1:Namespace"}
    assert "team-a" in namespaces and "default" not in namespaces
    tenant_provider = quota_plan.named("q-kubernetes").urn
    assert all(r.provider_urn == tenant_provider for r in [*quotas.values(), *namespaces.values()])
    facts = quota_plan.outputs["tenants"]["q"]["quotas"]
    assert facts == [
        {"namespace": "team-a", "gpumemMiB": 8192, "gpucores": 50, "gpus": 4},
        {"namespace": "default", "gpumemMiB": 4096},
    ]


def test_catalogue_covers_the_usual_models():
    for model in ("A100 40GB", "A100 80GB", "H100", "L4", "L40S", "T4"):
        assert any(model in name for name in GPU_CATALOGUE), model


def test_catalogue_rejects_unknown_models_without_memory():
    with pytest.raises(ConfigError, match="unknown GPU model 'NVIDIA B200'"):
        parse_settings(dev_config(tenants=[{"name": "a", "gpus": [{"model": "NVIDIA B200"}]}]))


def test_kubeconfig_of_the_right_tenant_gates_gpu_readiness(up_plan):
    for ready in up_plan.commands("wait-gpus.sh"):
        tenant = "tenant-a" if "tenant-a" in ready.inputs["environment"]["NODES"] else "tenant-b"
        assert up_plan.tenant_server(tenant) in ready.inputs["environment"]["KUBECONFIG_DATA"]


def chart_reference(image: dict) -> str:
    # How chart 2.10.0 joins them (charts/hami/templates/_commons.tpl@v2.10.0, common.images.image).
    return f"{image['registry']}/{image['repository']}:{image['tag']}" if image["registry"] else \
        f"{image['repository']}:{image['tag']}"


DIGEST = "@sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "reference",
    [
        "docker.io/projecthami/mock-device-plugin:1.0.1",  # the default
        f"registry.example:5000/mirror/hami/mock-device-plugin:1.0.1{DIGEST}",
        "localhost/mock-device-plugin:dev",
        "projecthami/mock-device-plugin:1.0.2",
    ],
)
def test_the_mock_device_plugin_runs_the_configured_image(reference, preview_plan):
    default = reference.startswith("docker.io/")
    lab = preview_plan if default else plan(dev_config(mockDevicePluginImage=reference), preview=True)
    for release in hami_releases(lab):
        image = release.inputs["values"]["mockDevicePlugin"]["image"]
        assert chart_reference(image) == reference
        # the chart's tag field carries the tag (and any digest); the repository never does
        assert ":" not in image["repository"] and reference.endswith(":" + image["tag"])


@pytest.mark.parametrize("reference", ["projecthami/mock-device-plugin", "Docker.io/x:1", f"x{DIGEST}"])
def test_a_mock_device_plugin_image_without_a_tag_is_refused(reference):
    with pytest.raises(ConfigError, match=rf"kamaji-hami-lab:mockDevicePluginImage: '{reference}' is not an image "
                       "reference with a tag"):
        parse_settings(dev_config(mockDevicePluginImage=reference))
