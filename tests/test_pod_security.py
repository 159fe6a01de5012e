"""Pod Security in every tenant (issue 47, point 1) and NodeRestriction (point 2), on the API-server side: the
admission configuration as kube-apiserver reads it, where the TenantControlPlane puts it, the tenant's
`podSecurity`, and the admission plugins Kamaji enables."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from components.config import ConfigError, parse_settings
from components.tenant_control_plane import combined
from tests.plan import changed, dev_config, exported_json, plan
from tests.test_check_config import checked
from validation.stack_outputs import parse_outputs

ROOT = Path(__file__).resolve().parent.parent
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
KUBE_APISERVER = json.loads((ROOT / "tests" / "fixtures" / "kube-apiserver-admission.json").read_text())["versions"]
TCP_CRD = json.loads(
    (ROOT / "tests" / "fixtures" / "crds" / "tenantcontrolplanes.kamaji.clastix.io-v1alpha1.schema.json").read_text()
)
# The workload kinds the lab runs pods with inside a tenant (Helm releases render theirs).
WORKLOADS = ("kubernetes:apps/v1:DaemonSet", "kubernetes:apps/v1:Deployment", "kubernetes:helm.sh/v3:Release")
# A namespace name as the pod-security-admission validation checks it (k8s.io/apimachinery
# pkg/api/validation ValidateNamespaceName: a DNS-1123 label).
DNS_1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"


def deployment_of(tcp) -> dict:
    return tcp.inputs["spec"]["controlPlane"]["deployment"]


def flag_values(args: list[str]) -> dict[str, str]:
    return dict(arg.split("=", 1) for arg in args)


def admission_file(plan_, tcp) -> tuple[dict, object]:
    """The admission configuration a tenant's API server reads: the file --admission-control-config-file names,
    followed through the mount and the volume to the ConfigMap that holds it; and that ConfigMap."""
    deployment = deployment_of(tcp)
    path = flag_values(deployment["extraArgs"]["apiServer"])["--admission-control-config-file"]
    directory, file = path.rsplit("/", 1)
    (mount,) = [m for m in deployment["additionalVolumeMounts"]["apiServer"] if m["mountPath"] == directory]
    (volume,) = [v for v in deployment["additionalVolumes"] if v["name"] == mount["name"]]
    (config_map,) = [
        r for r in plan_.of_type(CONFIG_MAP) if r.parent == tcp.parent
        and r.inputs["metadata"]["name"] == volume["configMap"]["name"]
    ]
    return yaml.safe_load(config_map.inputs["data"][file]), config_map


def pod_security_of(plan_, tcp) -> dict:
    document, _ = admission_file(plan_, tcp)
    (plugin,) = [p for p in document["plugins"] if p["name"] == "PodSecurity"]
    return plugin["configuration"]


def tenants_by_name(plan_) -> dict:
    return {tcp.inputs["metadata"]["name"]: tcp for tcp in plan_.of_type(TCP)}


# --- where the configuration lives -----------------------------------------------------------------------------


def test_every_api_server_reads_its_admission_configuration_from_a_config_map_beside_its_control_plane(up_plan):
    for tcp in up_plan.of_type(TCP):
        deployment = deployment_of(tcp)
        _, config_map = admission_file(up_plan, tcp)
        # In the management cluster's tenants namespace, out of the tenant's reach, and there before Kamaji
        # starts an API server that reads it.
        assert config_map.inputs["metadata"]["namespace"] == tcp.inputs["metadata"]["namespace"]
        assert config_map.provider_urn == tcp.provider_urn
        assert config_map.urn in tcp.dependencies
        # Mounted read-only, and only into the API server.
        path = flag_values(deployment["extraArgs"]["apiServer"])["--admission-control-config-file"]
        (mount,) = [m for m in deployment["additionalVolumeMounts"]["apiServer"] if path.startswith(m["mountPath"])]
        assert mount["readOnly"] is True
        assert set(deployment["additionalVolumeMounts"]) == {"apiServer"}


def test_two_tenants_never_share_an_admission_configuration(up_plan):
    names = [admission_file(up_plan, tcp)[1].inputs["metadata"]["name"] for tcp in up_plan.of_type(TCP)]
    assert len(names) == len(set(names)) == 2


def test_the_audit_log_and_the_admission_configuration_reach_the_api_server_together(up_plan):
    for tcp in up_plan.of_type(TCP):
        deployment = deployment_of(tcp)
        flags = flag_values(deployment["extraArgs"]["apiServer"])
        # Both features' flags, each once.
        assert len(flags) == len(deployment["extraArgs"]["apiServer"])
        assert {"--audit-policy-file", "--audit-log-path", "--admission-control-config-file"} <= set(flags)
        # Every volume once, every mount on a volume of the pod, no two at one path.
        volumes = [volume["name"] for volume in deployment["additionalVolumes"]]
        assert len(volumes) == len(set(volumes))
        mounts = deployment["additionalVolumeMounts"]["apiServer"]
        assert {mount["name"] for mount in mounts} <= set(volumes)
        assert len({mount["mountPath"] for mount in mounts}) == len(mounts)
        # The audit's policy is still mounted where its flag says, beside the admission configuration.
        policy_dir = flags["--audit-policy-file"].rsplit("/", 1)[0]
        admission_dir = flags["--admission-control-config-file"].rsplit("/", 1)[0]
        assert policy_dir != admission_dir
        assert {policy_dir, admission_dir} <= {mount["mountPath"] for mount in mounts}
        # Its reader and init container are still there.
        assert deployment["additionalContainers"] and deployment["additionalInitContainers"]


def test_combined_joins_lists_in_order_and_merges_objects_key_by_key():
    first = {"extraArgs": {"apiServer": ["--a=1"]}, "additionalVolumes": [{"name": "a"}], "only": {"x": 1}}
    second = {"extraArgs": {"apiServer": ["--b=2"], "scheduler": ["--c=3"]}, "additionalVolumes": [{"name": "b"}]}
    assert combined(first, second) == {
        "extraArgs": {"apiServer": ["--a=1", "--b=2"], "scheduler": ["--c=3"]},
        "additionalVolumes": [{"name": "a"}, {"name": "b"}],
        "only": {"x": 1},
    }
    # The parts are left as they were.
    assert first["extraArgs"]["apiServer"] == ["--a=1"] and second["additionalVolumes"] == [{"name": "b"}]


@pytest.mark.parametrize("clash", [{"replicas": 2}, {"replicas": [2]}, {"replicas": {"n": 2}}])
def test_combined_refuses_one_value_given_twice_rather_than_dropping_one(clash):
    with pytest.raises(ValueError, match="^replicas is given twice: "):
        combined({"replicas": 1}, clash)


# --- the configuration, as kube-apiserver reads it -------------------------------------------------------------


def test_the_recorded_versions_are_the_oldest_a_tenant_may_run_and_the_current():
    from tests.test_object_schemas import oldest_tenant_version

    oldest = ".".join(oldest_tenant_version().split(".")[:2])
    assert {oldest, "v1.36"} <= set(KUBE_APISERVER)


@pytest.mark.parametrize("version", sorted(KUBE_APISERVER))
def test_the_admission_configuration_is_one_kube_apiserver_of_this_version_reads(version, up_plan):
    known = KUBE_APISERVER[version]
    admission, pod_security = known["admission_configuration"], known["pod_security_configuration"]
    for tcp in up_plan.of_type(TCP):
        flags = flag_values(deployment_of(tcp)["extraArgs"]["apiServer"])
        assert known["flags"]["admission-control-config-file"] == "string"
        assert flags["--admission-control-config-file"].startswith("/")

        document, _ = admission_file(up_plan, tcp)
        assert (document["apiVersion"], document["kind"]) == (admission["apiVersion"], admission["kind"])
        assert set(document) <= set(admission["fields"])
        assert [plugin["name"] for plugin in document["plugins"]] == ["PodSecurity"]
        for plugin in document["plugins"]:
            assert set(plugin) <= set(admission["plugin_fields"])

        configuration = pod_security_of(up_plan, tcp)
        assert (configuration["apiVersion"], configuration["kind"]) == (pod_security["apiVersion"],
                                                                        pod_security["kind"])
        assert set(configuration) <= set(pod_security["configuration_fields"])
        defaults, exemptions = configuration["defaults"], configuration["exemptions"]
        # Every mode given, so no upstream default decides one.
        assert set(defaults) == set(pod_security["defaults_fields"])
        assert set(exemptions) <= set(pod_security["exemptions_fields"])
        for mode in ("enforce", "audit", "warn"):
            assert defaults[mode] in pod_security["levels"], mode
            assert re.fullmatch(pod_security["version_pattern"], defaults[f"{mode}-version"]), mode
        namespaces = exemptions["namespaces"]
        assert all(re.fullmatch(DNS_1123_LABEL, namespace) for namespace in namespaces)
        assert len(namespaces) == len(set(namespaces))
        assert exemptions.get("usernames", []) == [] and exemptions.get("runtimeClasses", []) == []


def test_the_config_map_is_one_kubernetes_accepts(up_plan):
    from tests.kube_schemas import problems

    for tcp in up_plan.of_type(TCP):
        _, config_map = admission_file(up_plan, tcp)
        sent = {"apiVersion": "v1", "kind": "ConfigMap", **config_map.inputs}
        assert problems(sent) == []


def test_the_exempt_namespaces_are_exactly_those_the_lab_runs_its_own_pods_in(up_plan, machine_plan):
    # Container workers (kube-proxy, HAMi) and machines (flannel too): every namespace the lab's own workloads use
    # inside a tenant, and no other; the team's namespaces (its quotas') stay under Pod Security.
    lab_namespaces = set()
    for plan_ in (up_plan, machine_plan("mock", False)):
        # Each tenant's provider is its control plane component's.
        components = {tcp.parent for tcp in plan_.of_type(TCP)}
        tenant_providers = {
            r.urn for r in plan_.registrations if r.type == "pulumi:providers:kubernetes" and r.parent in components
        }
        assert len(tenant_providers) == len(components)
        for resource in plan_.registrations:
            if resource.type in WORKLOADS and resource.provider_urn in tenant_providers:
                metadata = resource.inputs.get("metadata") or {}
                lab_namespaces.add(resource.inputs.get("namespace") or metadata.get("namespace"))
    assert "kube-flannel" in lab_namespaces and "kube-system" in lab_namespaces

    quotas = plan(dev_config(tenants=[{"name": "team", "quotas": [{"namespace": "team-a", "gpus": 1}]}]),
                  preview=False)
    for plan_ in (up_plan, machine_plan("mock", False), quotas):
        for tcp in plan_.of_type(TCP):
            assert sorted(pod_security_of(plan_, tcp)["exemptions"]["namespaces"]) == sorted(lab_namespaces)


# --- podSecurity ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_levels():
    """One tenant on each level, and one that names none: each tenant's level must be its own."""
    return plan(dev_config(tenants=[
        {"name": "strict", "podSecurity": "restricted"},
        {"name": "open", "podSecurity": "privileged"},
        {"name": "plain"},
        {"name": "said", "podSecurity": "baseline"},
    ]), preview=False)


def test_each_tenant_enforces_and_warns_at_its_own_level_and_baseline_unless_it_names_one(three_levels):
    levels = {
        name: (defaults["enforce"], defaults["warn"])
        for name, tcp in tenants_by_name(three_levels).items()
        for defaults in [pod_security_of(three_levels, tcp)["defaults"]]
    }
    assert levels == {
        "strict": ("restricted", "restricted"),
        "open": ("privileged", "privileged"),
        "plain": ("baseline", "baseline"),
        "said": ("baseline", "baseline"),
    }


def test_every_tenant_records_in_its_audit_log_what_restricted_would_refuse(three_levels):
    # The audit annotations reach the log only through the pods' create requests, which the policy records.
    for tcp in three_levels.of_type(TCP):
        assert pod_security_of(three_levels, tcp)["defaults"]["audit"] == "restricted"


def test_a_privileged_tenant_enforces_nothing_but_keeps_the_lab_namespaces_exempt(three_levels):
    tenants = tenants_by_name(three_levels)
    opened, plain = pod_security_of(three_levels, tenants["open"]), pod_security_of(three_levels, tenants["plain"])
    assert opened["defaults"]["enforce"] == "privileged"
    assert opened["exemptions"] == plain["exemptions"]


def test_settings_carry_the_level_and_baseline_by_default():
    lab = parse_settings(dev_config(tenants=[{"name": "a"}, {"name": "b", "podSecurity": "restricted"}]))
    assert [tenant.pod_security for tenant in lab.tenants] == ["baseline", "restricted"]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("Baseline", "'Baseline' is not one of 'baseline', 'restricted', 'privileged'"),
        ("none", "'none' is not one of 'baseline', 'restricted', 'privileged'"),
        ("", "'' is not one of 'baseline', 'restricted', 'privileged'"),
        (None, "expected a string, got null"),
        (False, "expected a string, got false"),
        (["restricted"], 'expected a string, got ["restricted"]'),
    ],
)
def test_a_bad_pod_security_is_refused_naming_the_key_and_the_value(value, problem):
    with pytest.raises(ConfigError) as refused:
        parse_settings(dev_config(tenants=[{"name": "a"}, {"name": "b", "podSecurity": value}]))
    assert f"kamaji-hami-lab:tenants[1].podSecurity: {problem}\n" in str(refused.value) + "\n"


LEVELS = ("baseline", "restricted", "privileged")


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(max_size=20), st.sampled_from(LEVELS), st.integers(), st.booleans(), st.none(),
                 st.lists(st.sampled_from(LEVELS), max_size=2)))
def test_any_pod_security_is_a_level_the_api_server_knows_or_a_refusal_naming_the_key(value):
    try:
        (tenant,) = parse_settings(dev_config(tenants=[{"name": "a", "podSecurity": value}])).tenants
    except ConfigError as refused:
        (line,) = [line for line in str(refused).splitlines() if "podSecurity" in line]
        assert line.startswith("  kamaji-hami-lab:tenants[0].podSecurity: ")
        assert not (isinstance(value, str) and value.strip() in LEVELS)
    else:
        # The level the admission configuration enforces, taken as written around its spaces.
        assert isinstance(value, str) and tenant.pod_security == value.strip()
        assert tenant.pod_security in KUBE_APISERVER["v1.36"]["pod_security_configuration"]["levels"]


def test_make_check_config_names_a_bad_pod_security_by_tenant(tmp_path):
    run = checked(tmp_path, "config:\n  kamaji-hami-lab:tenants:\n    - name: web\n      podSecurity: permissive\n")
    assert run.returncode == 1
    assert run.stdout.splitlines()[1] == (
        "  kamaji-hami-lab:tenants[web].podSecurity: 'permissive' is not one of 'baseline', 'restricted', "
        "'privileged'"
    )


@pytest.fixture(scope="module")
def baseline_up():
    return plan(dev_config(), preview=False)


def test_a_new_level_rolls_the_api_servers_of_that_tenant_alone_in_place(baseline_up):
    tenants_list = [dict(tenant) for tenant in dev_config()["tenants"]]
    tenants_list[0]["podSecurity"] = "restricted"
    after = plan(dev_config(tenants=tenants_list), preview=True, previous=baseline_up)
    before_planes, after_planes = tenants_by_name(baseline_up), tenants_by_name(after)
    moved, kept = tenants_list[0]["name"], tenants_list[1]["name"]

    assert pod_security_of(after, after_planes[moved])["defaults"]["enforce"] == "restricted"
    assert pod_security_of(after, after_planes[kept]) == pod_security_of(baseline_up, before_planes[kept])
    # The API server reads the file only when it starts: its pod template changes, so Kamaji rolls it.
    template = [deployment_of(planes[moved])["podAdditionalMetadata"] for planes in (before_planes, after_planes)]
    assert template[0] != template[1]
    assert deployment_of(after_planes[kept]) == deployment_of(before_planes[kept])
    # Updated, not replaced: the tenant keeps its CA, its datastore and its admin credentials.
    updated = changed(after, baseline_up)
    assert after_planes[moved].urn in updated and after_planes[kept].urn not in updated
    assert after_planes[moved].outputs["metadata"]["uid"] == before_planes[moved].outputs["metadata"]["uid"]
    assert not after_planes[moved].replace_on_changes and not after_planes[moved].delete_before_replace
    assert not {read.urn for read in after.commands("tenant-kubeconfig.sh")} & updated


# --- the admission plugins --------------------------------------------------------------------------------------


def kamaji_default_admission_controllers() -> list[str]:
    return TCP_CRD["properties"]["spec"]["properties"]["kubernetes"]["properties"]["admissionControllers"]["default"]


def test_every_api_server_runs_kamajis_default_admission_plugins_and_node_restriction_and_pod_security(dev_plan):
    expected = [*kamaji_default_admission_controllers(), "NodeRestriction", "PodSecurity"]
    for tcp in dev_plan.of_type(TCP):
        enabled = tcp.inputs["spec"]["kubernetes"]["admissionControllers"]
        assert sorted(enabled) == sorted(expected)
        assert len(enabled) == len(set(enabled))


def test_no_extra_flag_takes_the_admission_plugins_or_the_node_authorizer_from_kamaji(up_plan, machine_plan):
    # Kamaji sets --enable-admission-plugins from admissionControllers over any extraArgs, and
    # --authorization-mode=Node,RBAC unless --authorization-config is given (clastix/kamaji
    # internal/builders/controlplane/deployment.go@26.8.2-edge, buildKubeAPIServerCommand). NodeRestriction
    # needs that Node authorizer; --disable-admission-plugins would switch it or PodSecurity off.
    taken = {"--enable-admission-plugins", "--disable-admission-plugins", "--authorization-mode",
             "--authorization-config", "--admission-control"}
    for plan_ in (up_plan, machine_plan("mock", False)):
        for tcp in plan_.of_type(TCP):
            assert not set(flag_values(deployment_of(tcp)["extraArgs"]["apiServer"])) & taken


def test_the_validation_reads_back_each_tenants_own_level_from_the_stack_outputs(three_levels):
    # The team-isolation check skips an opted-out tenant by this fact; without it every tenant reads as baseline.
    tenants = parse_outputs(exported_json(three_levels.outputs)).tenants
    assert {name: tenant.pod_security for name, tenant in tenants.items()} == {
        "strict": "restricted", "open": "privileged", "plain": "baseline", "said": "baseline",
    }
