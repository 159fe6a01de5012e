"""Plans of a lab on an existing management cluster, with its platform pieces installed or provided."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import yaml

from components import config, docker_host
from components.addresses import DEFAULT_KIND_SUBNET
from tests.plan import ROOT, dev_config, fake_kubeconfig, is_secret, plan, resolve
from tests.test_guards import (
    CONSOLE_SAFE_LOGGING,
    assert_variables_match_scripts,
    declared_bound,
    script_name,
    script_of,
    seconds,
)

EXISTING_SERVER = "https://10.20.0.1:6443"
EXISTING_KUBECONFIG = fake_kubeconfig(EXISTING_SERVER, "platform-admin")
POOL = "192.168.50.240-192.168.50.250"
RELEASE = "kubernetes:helm.sh/v3:Release"
CONTROL_PLANE = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
# Scripts that create, read or inspect the kind cluster and its network.
KIND_SCRIPTS = ("kind-up.sh", "kind-kubeconfig.sh", "kind-subnet.sh")

INSTALLED = {"managementCluster": "existing", "dockerNetwork": "lab-net", "metallbAddressRange": POOL}
PROVIDED = {
    "managementCluster": "existing",
    "dockerNetwork": "lab-net",
    "certManager": "provided",
    "loadBalancer": "provided",
    "kamaji": "provided",
    "kamajiDataStore": "shared-etcd",
}


@pytest.fixture(params=[True, False], ids=["first-preview", "up"])
def installed(request, existing_plan):
    return existing_plan("installed", request.param)


@pytest.fixture(params=[True, False], ids=["first-preview", "up"])
def provided(request, existing_plan):
    return existing_plan("provided", request.param)


@pytest.fixture(
    params=[(p, v) for p in ("installed", "provided") for v in (True, False)],
    ids=["installed-first-preview", "installed-up", "provided-first-preview", "provided-up"],
)
def existing(request, existing_plan):
    return existing_plan(*request.param)


def is_existing_kubeconfig(text) -> bool:
    return isinstance(text, str) and yaml.safe_load(text) == yaml.safe_load(EXISTING_KUBECONFIG)


def charts(plan_):
    return sorted(r.inputs["chart"] for r in plan_.of_type(RELEASE))


def management_provider(plan_):
    (provider,) = [r for r in plan_.of_type("pulumi:providers:kubernetes") if r.name == "management-kubernetes"]
    return provider


def on_management(plan_):
    """Kubernetes resources outside the tenants' own clusters."""
    tenant_providers = {r.urn for r in plan_.of_type("pulumi:providers:kubernetes")} - {management_provider(plan_).urn}
    return [
        r for r in plan_.registrations if r.type.startswith("kubernetes:") and r.provider_urn not in tenant_providers
    ]


def test_an_existing_cluster_is_used_as_given_and_no_kind_cluster_is_made(existing):
    assert not any(existing.commands(script) for script in KIND_SCRIPTS)
    provider = management_provider(existing)
    assert "kubeconfig" in provider.secret_inputs
    assert is_existing_kubeconfig(provider.inputs["kubeconfig"])
    assert provider.inputs["clusterIdentifier"] == "existing-kamaji"


def test_every_management_resource_uses_the_existing_clusters_provider(existing):
    provider = management_provider(existing)
    resources = on_management(existing)
    assert {r.type for r in resources} >= {CONTROL_PLANE, "kubernetes:core/v1:Namespace"}
    assert all(r.provider_urn == provider.urn for r in resources)


def test_the_management_kubeconfig_stays_secret_in_commands_and_outputs(existing):
    handed = [
        c for c in existing.of_type("command:local:Command") if "KUBECONFIG_DATA" in c.inputs.get("environment", {})
    ]
    management = [c for c in handed if is_existing_kubeconfig(c.inputs["environment"]["KUBECONFIG_DATA"])]
    assert management and all("environment" in c.secret_inputs for c in handed)
    output = existing.outputs["managementKubeconfig"]
    assert is_secret(output)
    assert is_existing_kubeconfig(resolve(output))


def test_docker_is_used_only_for_the_container_workers_on_the_configured_network(existing):
    docker = [r for r in existing.registrations if r.type.startswith("docker:")]
    (docker_provider,) = existing.of_type("pulumi:providers:docker")
    containers = existing.of_type("docker:index/container:Container")
    assert {r.type for r in docker} == {"docker:index/remoteImage:RemoteImage", "docker:index/container:Container"}
    assert all(r.provider_urn == docker_provider.urn for r in docker)
    assert all(c.inputs["networksAdvanced"] == [{"name": "lab-net"}] for c in containers)


def test_installed_pieces_on_an_existing_cluster_use_the_configured_pool(installed):
    # Prometheus and Grafana: the dev stack's observability, the lab's own on any cluster.
    assert charts(installed) == ["cert-manager", "grafana", "hami", "hami", "kamaji", "metallb", "prometheus"]
    (pool,) = installed.of_type("kubernetes:metallb.io/v1beta1:IPAddressPool")
    assert pool.inputs["spec"]["addresses"] == [POOL], "known at the first preview: no kind network to read"
    (check,) = installed.commands("check-address-pool.sh")
    assert (check.inputs["environment"]["POOL"], check.inputs["environment"]["KIND_NETWORK"]) == (POOL, "lab-net")


def test_installed_pieces_come_up_in_order_before_the_tenants(installed):
    def release(chart):
        (match,) = [r for r in installed.of_type(RELEASE) if r.inputs["chart"] == chart]
        return match.urn

    (kamaji_ready,) = installed.commands("wait-kamaji.sh")
    assert kamaji_ready.inputs["delete"].endswith("/delete-datastore.sh"), "the installed DataStore goes on destroy"
    assert release("cert-manager") in installed.upstream(release("kamaji"))
    for control_plane in installed.of_type(CONTROL_PLANE):
        assert kamaji_ready.urn in control_plane.dependencies
        assert {release("metallb"), release("kamaji")} <= installed.upstream(control_plane.urn)
        # Named, although Kamaji's default: a tenant that moves back from its own store names it (issue 51).
        assert control_plane.inputs["spec"]["dataStore"] == "default", "the installed chart's DataStore"


def test_provided_pieces_are_checked_not_installed(provided):
    assert charts(provided) == ["grafana", "hami", "hami", "prometheus"], "the tenants' HAMi and the lab's own"
    assert not [r for r in provided.registrations if r.type.startswith("kubernetes:metallb.io")]
    assert not provided.commands("wait-kamaji.sh") and not provided.commands("check-address-pool.sh")
    (cert_manager,) = provided.commands("check-cert-manager.sh")
    (kamaji,) = provided.commands("check-kamaji.sh")
    assert kamaji.inputs["environment"]["DATASTORE"] == "shared-etcd"
    assert "delete" not in kamaji.inputs, "destroy leaves a provided Kamaji's DataStore alone"
    assert cert_manager.urn in kamaji.dependencies


def test_tenants_wait_for_the_provided_kamaji_and_name_its_datastore(provided):
    (kamaji,) = provided.commands("check-kamaji.sh")
    control_planes = provided.of_type(CONTROL_PLANE)
    assert control_planes
    for control_plane in control_planes:
        assert kamaji.urn in provided.upstream(control_plane.urn)
        assert control_plane.inputs["spec"]["dataStore"] == "shared-etcd"


def test_tenants_wait_until_a_provided_load_balancer_has_handed_out_an_address(provided):
    (check,) = provided.commands("check-load-balancer.sh")
    namespace = provided.named("platform-tenants-namespace")
    assert namespace.urn in check.dependencies, "the probe Service goes into the tenants namespace"
    control_planes = provided.of_type(CONTROL_PLANE)
    assert control_planes
    for control_plane in control_planes:
        assert check.urn in provided.upstream(control_plane.urn)


def test_only_a_provided_load_balancer_is_probed(installed, up_plan):
    assert not installed.commands("check-load-balancer.sh") and not up_plan.commands("check-load-balancer.sh")
    assert installed.of_type("kubernetes:metallb.io/v1beta1:L2Advertisement"), "MetalLB is what gives addresses there"


def test_a_provided_load_balancer_leaves_the_address_range_output_empty(provided):
    # README, outputs: "empty with `loadBalancer: provided`", known in a first preview too.
    assert resolve(provided.outputs["metallbAddressRange"]) == ""


def test_every_resource_on_an_existing_cluster_belongs_to_a_component_of_the_lab(existing):
    assert existing.outside_components() == []
    assert existing.misnamed() == []


def test_the_kind_management_cluster_keeps_its_urns(up_plan):
    # A new component type would change every URN below it and replace the running lab.
    provider = up_plan.named("management-kubernetes")
    assert provider.parent.endswith("kamaji-hami-lab:index:ManagementCluster::management")
    assert not [r for r in up_plan.registrations if r.type == "kamaji-hami-lab:index:ExistingManagementCluster"]


def test_an_existing_cluster_keeps_its_urns_and_records_its_kubeconfig(existing):
    (cluster,) = existing.of_type("kamaji-hami-lab:index:ExistingManagementCluster")
    # Labs on an existing cluster hold these URNs: a new type or name would replace what runs there.
    assert cluster.urn.endswith("$kamaji-hami-lab:index:ExistingManagementCluster::management")
    assert existing.named("management-kubernetes").parent == cluster.urn
    assert existing.component_outputs[cluster.urn] == {"kubeconfig": resolve(existing.outputs["managementKubeconfig"])}


def test_the_kind_cluster_records_its_kubeconfig_and_subnet(up_plan):
    (cluster,) = up_plan.of_type("kamaji-hami-lab:index:ManagementCluster")
    assert up_plan.component_outputs[cluster.urn] == {
        "kubeconfig": resolve(up_plan.outputs["managementKubeconfig"]),
        "kindSubnet": str(DEFAULT_KIND_SUBNET),  # planned with the default when kindSubnet is empty
    }


@pytest.mark.parametrize("configured", [{}, {"kindSubnet": "10.89.0.0/16"}])
def test_the_real_kind_network_is_compared_with_the_planned_subnet_before_anything_uses_it(configured, request):
    # Without a kindSubnet it is the dev stack's first preview, made once for the session.
    preview = plan(dev_config(**configured), preview=True) if configured else request.getfixturevalue("preview_plan")
    (kind,) = preview.commands("kind-up.sh")
    (check,) = preview.commands("kind-subnet.sh")
    # The subnet kind-up.sh creates a missing network with is the one kind-subnet.sh then expects.
    assert check.inputs["environment"]["EXPECTED_SUBNET"] == kind.inputs["environment"]["KIND_SUBNET"]
    assert kind.inputs["environment"]["KIND_SUBNET"] == configured.get("kindSubnet", str(DEFAULT_KIND_SUBNET))
    assert kind.urn in check.dependencies, "read once the cluster (and so the network) exists"
    # Nothing goes onto the cluster before: its provider's kubeconfig is read after the check.
    (kubeconfig,) = preview.commands("kind-kubeconfig.sh")
    assert check.urn in kubeconfig.dependencies
    (pool_check,) = preview.commands("check-address-pool.sh")
    assert check.urn in pool_check.dependencies, "the pool is checked on the real network, not before it exists"


def uses_docker(script: str) -> bool:
    """Whether a host script runs the docker or kind CLI."""
    text = (ROOT / "scripts" / script).read_text()
    # In command position: at a line's start, in $(...), after a pipe, && or a keyword.
    command = r"(^\s*|\$\(|\|\s*|&&\s*|\b(until|if|then|do)\s+|!\s+)(docker|kind) [a-z]"
    return bool(re.search(command, text, re.MULTILINE))


@pytest.mark.parametrize("pieces", ["installed", "provided"])
def test_without_container_workers_an_existing_cluster_touches_no_docker(monkeypatch, pieces):
    # Tenants whose workers are machines come with the worker half of issue 11; until then a lab
    # without tenants stands in for one without container workers.
    load_settings = config.load_settings

    def without_container_workers():
        lab = load_settings()
        return replace(lab, tenants=(), existing_cluster=replace(lab.existing_cluster, docker_network=None))

    def no_daemon(*_):
        raise AssertionError("the Docker daemon's address was looked up")

    monkeypatch.setattr(config, "load_settings", without_container_workers)
    monkeypatch.setattr(docker_host, "docker_daemon_address", no_daemon)
    modes = INSTALLED if pieces == "installed" else PROVIDED
    lab = plan(dev_config(**modes), preview=False, secrets={"managementKubeconfig": EXISTING_KUBECONFIG})

    assert lab.of_type("kubernetes:core/v1:Namespace"), "the platform is planned"
    assert not [r.type for r in lab.registrations if r.type.startswith(("docker:", "pulumi:providers:docker"))]
    scripts = {
        c.inputs[op].rsplit("/", 1)[-1]
        for c in lab.of_type("command:local:Command")
        for op in ("create", "delete")
        if c.inputs.get(op)
    }
    assert scripts and not [script for script in scripts if uses_docker(script)]


def test_the_checks_of_provided_pieces_outlast_their_scripts(provided):
    pieces = {"check-cert-manager.sh", "check-kamaji.sh", "check-load-balancer.sh"}
    checks = [c for c in provided.of_type("command:local:Command") if script_name(c, "create") in pieces]
    assert {script_of(c, "create").name for c in checks} == pieces
    for check in checks:
        assert seconds(check.custom_timeouts["create"]) > declared_bound(script_of(check, "create")), check.name
        assert check.inputs.get("logging") in CONSOLE_SAFE_LOGGING and "environment" in check.secret_inputs


def test_the_provided_pieces_checks_get_exactly_the_variables_they_read(provided):
    assert provided.commands("check-kamaji.sh")
    assert_variables_match_scripts(provided)
