"""Tenants: a ready-gated Kamaji control plane each, secret kubeconfigs, isolation and parallelism."""

import json

import pytest
import yaml

from components.config import parse_settings
from components.tenant_control_plane import control_plane_spec
from tests.kube_schemas import problems
from tests.plan import dev_config, is_secret, is_unknown, plan, resolve, tenants

TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
TENANT_COMPONENT = "kamaji-hami-lab:index:Tenant"


def tenant_of(plan_, urn):
    """The Tenant component a resource belongs to, or None for shared layers."""
    owners = [a for a in plan_.ancestors(urn) if plan_.by_urn[a].type == TENANT_COMPONENT]
    return plan_.by_urn[owners[0]].name if owners else None


def control_planes(plan_):
    return {r.inputs["metadata"]["name"]: r for r in plan_.of_type(TCP)}


def test_one_control_plane_per_tenant_in_the_tenants_namespace(dev_plan):
    planes = control_planes(dev_plan)
    assert sorted(planes) == ["tenant-a", "tenant-b"]
    for name, tcp in planes.items():
        namespace = tcp.inputs["metadata"]["namespace"]
        # A first preview knows no output of the namespace: its provider's kubeconfig is not known yet.
        assert namespace == "tenants" or is_unknown(namespace)
        assert tenant_of(dev_plan, tcp.urn) == name


def test_control_planes_carry_the_label_kamajis_kubeconfig_generator_selects(dev_plan):
    # clastix/kamaji config/samples/kamaji_v1alpha1_kubeconfiggenerator.yaml@ddbabd8 selects
    # TenantControlPlanes by this label's presence.
    for name, tcp in control_planes(dev_plan).items():
        assert tcp.inputs["metadata"]["labels"] == {"tenant.clastix.io": name}


def test_the_version_check_runs_once_kamajis_crd_is_there(dev_plan):
    (kamaji_ready,) = dev_plan.commands("wait-kamaji.sh")
    for check in dev_plan.commands("check-tenant-version.sh"):
        # It lists TenantControlPlanes, a kind that exists only once Kamaji is installed.
        assert kamaji_ready.urn in check.dependencies, check.name


def test_control_planes_have_time_for_a_first_start_and_an_upgrade(dev_plan):
    # A first start pulls the control-plane images; an upgrade rolls the API server, controller
    # manager and scheduler pods and runs kubeadm's upgrade phases. Both take minutes.
    for tcp in control_planes(dev_plan).values():
        assert tcp.custom_timeouts == {"create": "15m", "update": "15m", "delete": "10m"}


def with_spec(spec: dict) -> dict:
    """A TenantControlPlane of this spec, as Kamaji's CRD judges it (the API server prunes an unknown field)."""
    return {"apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane", "metadata": {"name": "t"},
            "spec": spec}


def test_control_plane_specs_are_valid_against_kamajis_crd(dev_plan):
    for name, tcp in control_planes(dev_plan).items():
        assert problems(with_spec(tcp.inputs["spec"])) == [], name


def test_the_schema_check_catches_a_misspelt_field():
    tenant = parse_settings(dev_config()).tenants[0]
    spec = control_plane_spec(tenant, "v1.36.4")
    spec["addons"]["konectivity"] = spec["addons"].pop("konnectivity")
    assert problems(with_spec(spec)) == ["spec.addons.konectivity: unknown field"]


def test_control_plane_spec_fits_kindest_node_workers(dev_plan):
    spec = control_planes(dev_plan)["tenant-a"].inputs["spec"]
    assert spec["kubernetes"]["version"] == "v1.36.4"
    assert spec["controlPlane"]["service"]["serviceType"] == "LoadBalancer"
    assert spec["controlPlane"]["deployment"]["replicas"] == 1
    assert spec["addons"]["konnectivity"] == {"server": {"port": 8132}, "agent": {"mode": "DaemonSet"}}
    assert "coreDNS" in spec["addons"]
    assert "kubeProxy" not in spec["addons"]  # installed by the lab itself, see test_kube_proxy.py
    patches = spec["kubernetes"]["kubelet"]["configurationJSONPatches"]
    assert {"op": "add", "path": "/cgroupDriver", "value": "systemd"} in patches
    assert {"op": "add", "path": "/failSwapOn", "value": False} in patches
    # The kubelet sees the host's disk; kind's own nodes switch disk-pressure eviction and image
    # GC off with these values (kubernetes-sigs/kind pkg/cluster/internal/kubeadm/config.go@v0.32.0).
    assert {"op": "add", "path": "/imageGCHighThresholdPercent", "value": 100} in patches
    kind_eviction_hard = {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"}
    assert {"op": "add", "path": "/evictionHard", "value": kind_eviction_hard} in patches
    assert spec["networkProfile"]["podCidrs"] == ["10.244.0.0/16"]
    assert spec["networkProfile"]["dnsServiceIPs"] == ["10.96.0.10"]


def test_per_tenant_overrides_reach_the_spec():
    custom = plan(
        dev_config(
            tenants=[
                {"name": "big", "controlPlaneReplicas": 3, "podCidr": "10.50.0.0/16", "serviceCidr": "10.60.0.0/16"}
            ]
        ),
        preview=True,
    )
    spec = control_planes(custom)["big"].inputs["spec"]
    assert spec["controlPlane"]["deployment"]["replicas"] == 3
    assert spec["networkProfile"]["podCidrs"] == ["10.50.0.0/16"]
    assert spec["networkProfile"]["dnsServiceIPs"] == ["10.60.0.10"]


def test_each_tenant_has_its_own_datastore_schema(dev_plan):
    schemas = {name: tcp.inputs["spec"]["dataStoreSchema"] for name, tcp in control_planes(dev_plan).items()}
    assert schemas == {"tenant-a": "tenants_tenant_a", "tenant-b": "tenants_tenant_b"}


def kamaji_status(phase: str, version: str) -> dict:
    """Kamaji's status: the phase, and the version it copies from the spec once that version is Ready (clastix/kamaji
    api/v1alpha1/tenantcontrolplane_status.go, internal/resources/k8s_deployment_resource.go@26.8.2-edge)."""
    return {"status": {"kubernetesResources": {"version": {"status": phase, "version": version}}}}


def waits_out(tcp, status: dict) -> bool:
    """Whether pulumi-kubernetes' waitFor of `tcp` holds on this status: a JSON list of `jsonpath={path}=value`
    conditions that must all hold (pulumi/pulumi-kubernetes provider/pkg/metadata/overrides.go@94977969)."""
    for condition in json.loads(tcp.inputs["metadata"]["annotations"]["pulumi.com/waitFor"]):
        path, _, wanted = condition.removeprefix("jsonpath={.").partition("}=")
        value = status
        for key in path.split("."):
            value = value.get(key, {}) if isinstance(value, dict) else {}
        if value != wanted:
            return False
    return True


def test_pulumi_waits_until_kamaji_runs_the_configured_version(dev_plan):
    for tcp in control_planes(dev_plan).values():
        version = tcp.inputs["spec"]["kubernetes"]["version"]
        # Kamaji copies the version only once that version runs Ready (or Sleeping).
        assert waits_out(tcp, kamaji_status("Ready", version))
        assert not waits_out(tcp, kamaji_status("Upgrading", "v1.30.0"))
        assert not waits_out(tcp, kamaji_status("Provisioning", ""))


def test_a_failed_move_does_not_hold_the_control_planes_update(dev_plan):
    # Kamaji keeps a tenant whose migration Job failed Migrating, at its version, until the Job goes (clastix/kamaji
    # internal/resources/datastore/datastore_migrate.go@26.8.2-edge): the step that deletes that Job comes after.
    for tcp in control_planes(dev_plan).values():
        assert waits_out(tcp, kamaji_status("Migrating", tcp.inputs["spec"]["kubernetes"]["version"]))


def test_its_workers_wait_for_kamaji_to_report_it_ready(dev_plan):
    for tenant, tcp in control_planes(dev_plan).items():
        (moved,) = [c for c in dev_plan.commands("wait-datastore-move.sh")
                    if c.inputs["environment"]["TENANT"] == tenant]
        assert moved.inputs["environment"]["WANTED_STATE"] == "Ready"
        assert tcp.urn in moved.dependencies


def test_kubeconfig_is_read_after_the_control_plane_is_ready_and_kept_secret(dev_plan):
    planes = control_planes(dev_plan)
    readers = dev_plan.commands("tenant-kubeconfig.sh")
    assert sorted(r.inputs["environment"]["TENANT"] for r in readers) == ["tenant-a", "tenant-b"]
    for reader in readers:
        tenant = reader.inputs["environment"]["TENANT"]
        assert planes[tenant].urn in reader.dependencies
        assert {"stdout", "stderr"} <= set(reader.secret_outputs)


def test_the_tenants_management_commands_get_the_management_clusters_kubeconfig(up_plan):
    management = resolve(up_plan.outputs["managementKubeconfig"])
    commands = [*up_plan.commands("check-tenant-version.sh"), *up_plan.commands("tenant-kubeconfig.sh")]
    assert len(commands) == 4
    for command in commands:
        assert command.inputs["environment"]["KUBECONFIG_DATA"] == management, command.name
        assert "environment" in command.secret_inputs, command.name


def test_each_tenant_component_records_its_kubeconfig_and_facts(up_plan):
    kubeconfigs, facts = resolve(up_plan.outputs["kubeconfigs"]), resolve(up_plan.outputs["tenants"])
    teams = resolve(up_plan.outputs["teamKubeconfigs"])
    for tenant in up_plan.of_type(TENANT_COMPONENT):
        recorded = up_plan.component_outputs[tenant.urn]
        assert recorded == {"kubeconfig": kubeconfigs[tenant.name], "teamKubeconfig": teams[tenant.name],
                            "facts": facts[tenant.name]}


def test_kindnet_is_installed_once_the_node_image_it_is_read_from_is_pulled(dev_plan):
    images = {r.urn: r.inputs["name"] for r in dev_plan.of_type("docker:index/remoteImage:RemoteImage")}
    for cni in dev_plan.commands("install-cni.sh"):
        pulled = [images[urn] for urn in cni.dependencies if urn in images]
        assert pulled == [cni.inputs["environment"]["NODE_IMAGE"]], cni.name


def test_each_control_plane_component_records_its_kubeconfig_and_endpoint(up_plan):
    kubeconfigs = resolve(up_plan.outputs["kubeconfigs"])
    for plane in up_plan.of_type("kamaji-hami-lab:index:TenantControlPlane"):
        recorded = up_plan.component_outputs[plane.urn]
        assert recorded == {"kubeconfig": kubeconfigs[plane.name], "endpoint": up_plan.tenant_server(plane.name)}


def test_each_tenant_gets_its_own_provider_with_a_stable_identity(dev_plan):
    providers = {tenant_of(dev_plan, p.urn): p for p in dev_plan.of_type("pulumi:providers:kubernetes")}
    assert providers["tenant-a"].inputs["clusterIdentifier"] == "kamaji-kamaji-tenant-a"
    assert providers["tenant-b"].inputs["clusterIdentifier"] == "kamaji-kamaji-tenant-b"
    assert all("kubeconfig" in providers[t].secret_inputs for t in ("tenant-a", "tenant-b"))


def test_kubeconfigs_output_is_secret_and_keyed_by_tenant(up_plan):
    kubeconfigs = up_plan.outputs["kubeconfigs"]
    assert is_secret(kubeconfigs)
    servers = {
        name: yaml.safe_load(text)["clusters"][0]["cluster"]["server"] for name, text in resolve(kubeconfigs).items()
    }
    assert servers == {name: up_plan.tenant_server(name) for name in ("tenant-a", "tenant-b")}


def test_tenant_facts_are_plain_outputs(up_plan):
    facts = resolve(up_plan.outputs["tenants"])
    assert facts["tenant-b"]["endpoint"] == up_plan.tenant_server("tenant-b")
    assert facts["tenant-b"]["kubernetesVersion"] == "v1.36.4"
    assert facts["tenant-b"]["dataStoreSchema"] == "tenants_tenant_b"
    assert facts["tenant-b"]["workers"] == ["kamaji-tenant-b-w1"]
    assert not is_secret(up_plan.outputs["tenants"]["tenant-b"]["endpoint"])


def test_first_preview_leaves_tenant_facts_unknown_without_failing(preview_plan):
    facts = resolve(preview_plan.outputs["tenants"])
    assert facts["tenant-a"]["endpoint"] is None
    assert facts["tenant-a"]["dataStoreSchema"] == "tenants_tenant_a"


@pytest.fixture(params=[1, 2, 16], ids=str)
def t4_tenants(request, shared):
    """A first preview of 1, 2 and 16 tenants with a T4 each."""
    layout = tenants(request.param, gpus=[{"model": "NVIDIA T4 16GB"}])
    return shared(f"t4-tenants-{request.param}", lambda: plan(dev_config(tenants=layout), preview=True))


def test_tenant_resources_use_only_their_own_provider(t4_tenants):
    for resource in t4_tenants.registrations:
        owner = tenant_of(t4_tenants, resource.urn)
        if owner and resource.type.startswith("kubernetes:"):
            # The TenantControlPlane and its audit policy and log are the management cluster's, out of the tenant's
            # reach; everything else of the tenant is in the tenant.
            in_management = t4_tenants.by_urn[resource.parent].type == "kamaji-hami-lab:index:TenantControlPlane"
            expected = None if in_management else owner
            assert tenant_of(t4_tenants, resource.provider_urn) == expected, resource.name


def test_no_tenant_waits_on_another(t4_tenants):
    for resource in t4_tenants.registrations:
        owner = tenant_of(t4_tenants, resource.urn)
        if owner:
            others = {tenant_of(t4_tenants, urn) for urn in t4_tenants.upstream(resource.urn)} - {owner, None}
            assert not others, f"{resource.name} waits on tenants {others}"


def test_resources_grow_by_a_constant_per_tenant(tenants_preview):
    counts = {n: len(tenants_preview(n).registrations) for n in (1, 2, 16)}
    per_tenant = counts[2] - counts[1]
    assert per_tenant > 0
    assert counts[16] == counts[1] + 15 * per_tenant


def test_tenants_are_destroyed_before_kamaji(dev_plan):
    (kamaji,) = [r for r in dev_plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "kamaji"]
    for resource in dev_plan.registrations:
        if tenant_of(dev_plan, resource.urn) and resource.custom and not resource.type.startswith("pulumi:providers"):
            # Pulumi deletes dependents first, so Kamaji's finalizers can still clean each tenant's datastore.
            assert kamaji.urn in dev_plan.upstream(resource.urn), resource.name
