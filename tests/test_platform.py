"""Management cluster and platform: what `pulumi up` on the dev stack plans for them."""

import yaml

from components.addresses import DEFAULT_KIND_SUBNET
from tests.plan import NODE_IMAGE, dev_config, is_secret, plan, resolve

RELEASE = "kubernetes:helm.sh/v3:Release"
COMMAND = "command:local:Command"


def release(plan_, chart):
    (match,) = [r for r in plan_.of_type(RELEASE) if r.inputs["chart"] == chart]
    return match


def test_dev_stack_plans_in_first_preview_and_up(dev_plan):
    charts = sorted(r.inputs["chart"] for r in dev_plan.of_type(RELEASE))
    # The dev stack turns observability on: Prometheus and Grafana (tests/test_observability.py).
    assert charts == ["cert-manager", "grafana", "hami", "hami", "kamaji", "metallb", "prometheus"]


def test_releases_pin_their_versions_and_namespaces(dev_plan):
    pinned = {
        r.inputs["chart"]: (r.inputs["repositoryOpts"]["repo"], r.inputs["version"], r.inputs["namespace"])
        for r in dev_plan.of_type(RELEASE)
        if r.inputs["chart"] != "hami"
    }
    assert pinned == {
        "cert-manager": ("https://charts.jetstack.io", "v1.21.2", "cert-manager"),
        "metallb": ("https://metallb.github.io/metallb", "0.16.1", "metallb-system"),
        "kamaji": ("https://clastix.github.io/charts", "0.0.0+latest", "kamaji-system"),
        "prometheus": ("https://prometheus-community.github.io/helm-charts", "29.27.0", "lab-monitoring"),
        "grafana": ("https://grafana-community.github.io/helm-charts", "12.11.1", "lab-monitoring"),
    }


def test_every_release_waits_ten_minutes_for_its_pods(dev_plan):
    # On a cold host the images of cert-manager, Kamaji and HAMi (scheduler, kube-scheduler, device
    # plugin) take longer to pull than the 300 s Helm waits by default.
    timeouts = {(r.inputs["chart"], r.inputs["timeout"]) for r in dev_plan.of_type(RELEASE)}
    assert timeouts == {("cert-manager", 600), ("metallb", 600), ("kamaji", 600), ("hami", 600), ("prometheus", 600),
                        ("grafana", 600)}


def test_every_release_has_a_fixed_name_and_creates_a_namespace_the_cluster_lacks(dev_plan):
    # Unnamed, Pulumi would add a random suffix. The names matter: Kamaji's CRD webhooks are wired
    # to kamaji-system/kamaji, validation finds cert-manager's Deployments by the release's name,
    # and the README's troubleshooting names deploy/hami-scheduler.
    releases = dev_plan.of_type(RELEASE)
    named = {(r.inputs["chart"], r.inputs["name"], r.inputs.get("createNamespace", False)) for r in releases}
    assert named == {
        ("cert-manager", "cert-manager", True),
        ("metallb", "metallb", True),
        ("kamaji", "kamaji", True),
        ("hami", "hami", False),  # kube-system
        # The observability layer creates its namespace itself, before the releases.
        ("prometheus", "lab-prometheus", False),
        ("grafana", "lab-grafana", False),
    }


def test_the_platform_component_records_what_the_stack_outputs_show(up_plan):
    (platform,) = up_plan.of_type("kamaji-hami-lab:index:Platform")
    assert up_plan.component_outputs[platform.urn] == {
        "addressRange": resolve(up_plan.outputs["metallbAddressRange"]),
        "tenantsNamespace": "tenants",
        "facts": resolve(up_plan.outputs["platform"]),
    }


def test_the_tenants_namespace_exists_only_once_kamaji_is_ready(dev_plan):
    # Every tenant takes its namespace from this resource, so through it they wait for Kamaji and
    # its DataStore, and on destroy go first, while Kamaji still runs to release their finalizers.
    namespace = dev_plan.named("platform-tenants-namespace")
    (kamaji_ready,) = dev_plan.commands("wait-kamaji.sh")
    assert kamaji_ready.urn in namespace.dependencies


def test_cert_manager_installs_its_crds(dev_plan):
    assert release(dev_plan, "cert-manager").inputs["values"] == {"crds": {"enabled": True}}


def test_kamaji_release_is_named_kamaji_and_drops_the_default_resource_limits(dev_plan):
    kamaji = release(dev_plan, "kamaji")
    assert kamaji.inputs["name"] == "kamaji"
    (values_file,) = kamaji.inputs["valueYamlFiles"]
    # A YAML null is what removes the chart's default; a Python None in `values` would be dropped.
    assert yaml.safe_load(values_file.text) == {"resources": None}
    assert "resources" not in kamaji.inputs.get("values", {})


def test_kamaji_waits_for_cert_manager(dev_plan):
    assert release(dev_plan, "cert-manager").urn in dev_plan.upstream(release(dev_plan, "kamaji").urn)


def test_metallb_pool_and_advertisement_wait_until_metallb_admits_pools(dev_plan):
    (webhook_ready,) = dev_plan.commands("wait-metallb.sh")
    assert release(dev_plan, "metallb").urn in webhook_ready.dependencies
    assert webhook_ready.inputs["environment"]["NAMESPACE"] == "metallb-system"
    for kind in ("IPAddressPool", "L2Advertisement"):
        (resource,) = dev_plan.of_type(f"kubernetes:metallb.io/v1beta1:{kind}")
        assert webhook_ready.urn in resource.dependencies


def test_metallb_announces_the_labs_pool_from_its_own_namespace(dev_plan):
    (pool,) = dev_plan.of_type("kubernetes:metallb.io/v1beta1:IPAddressPool")
    (advertisement,) = dev_plan.of_type("kubernetes:metallb.io/v1beta1:L2Advertisement")
    # MetalLB reads both only from the namespace it runs in (its chart's), and the advertisement
    # names the pools it announces (metallb.io/v1beta1 L2AdvertisementSpec.ipAddressPools).
    for resource in (pool, advertisement):
        assert resource.inputs["metadata"]["namespace"] == "metallb-system"
    assert advertisement.inputs["spec"] == {"ipAddressPools": [pool.inputs["metadata"]["name"]]}
    # It names the pool by a plain string: only depends_on orders it after the pool, and before it on destroy.
    assert pool.urn in advertisement.dependencies


def test_pool_is_carved_from_the_kind_network(up_plan):
    (pool,) = up_plan.of_type("kubernetes:metallb.io/v1beta1:IPAddressPool")
    # The lab's network has the default subnet 172.30.0.0/16; this is the block the default lab name "kamaji"
    # gets. Pinned: a different block would move the addresses of every existing lab.
    assert pool.inputs["spec"]["addresses"] == ["172.30.149.0-172.30.149.50"]
    assert resolve(up_plan.outputs["metallbAddressRange"]) == "172.30.149.0-172.30.149.50"


def test_a_configured_range_in_a_known_subnet_is_known_at_preview():
    preview = plan(dev_config(metallbAddressRange="172.18.200.0/26", kindSubnet="172.18.0.0/16"), preview=True)
    (pool,) = preview.of_type("kubernetes:metallb.io/v1beta1:IPAddressPool")
    assert pool.inputs["spec"]["addresses"] == ["172.18.200.0-172.18.200.63"]


def test_datastore_is_deleted_after_the_tenants_and_before_the_kamaji_release(dev_plan):
    (kamaji_ready,) = dev_plan.commands("wait-kamaji.sh")
    # Destroy runs dependents first: every control plane waits on this command, and it on Kamaji.
    assert kamaji_ready.inputs["delete"].endswith("/delete-datastore.sh")
    assert release(dev_plan, "kamaji").urn in kamaji_ready.dependencies
    for control_plane in dev_plan.of_type("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"):
        assert kamaji_ready.urn in control_plane.dependencies


def test_tenants_wait_for_kamaji_and_its_datastore(dev_plan):
    (kamaji_ready,) = dev_plan.commands("wait-kamaji.sh")
    assert release(dev_plan, "kamaji").urn in kamaji_ready.dependencies
    for control_plane in dev_plan.of_type("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"):
        upstream = dev_plan.upstream(control_plane.urn)
        assert kamaji_ready.urn in control_plane.dependencies, "a direct wait, not a side effect of the namespace"
        assert {r.urn for r in dev_plan.of_type("kubernetes:metallb.io/v1beta1:L2Advertisement")} <= upstream


def test_every_kubernetes_resource_names_an_explicit_provider(dev_plan):
    providers = {r.urn for r in dev_plan.of_type("pulumi:providers:kubernetes")}
    kubernetes_resources = [r for r in dev_plan.registrations if r.type.startswith("kubernetes:")]
    assert kubernetes_resources
    for resource in kubernetes_resources:
        assert resource.provider_urn in providers, f"{resource.name} uses {resource.provider or 'the default provider'}"


def test_docker_resources_use_the_explicit_docker_provider(dev_plan):
    (docker_provider,) = dev_plan.of_type("pulumi:providers:docker")
    docker_resources = [r for r in dev_plan.registrations if r.type.startswith("docker:")]
    assert docker_resources and all(r.provider_urn == docker_provider.urn for r in docker_resources)


def test_management_provider_has_a_stable_identity_and_a_secret_kubeconfig(dev_plan):
    (kind,) = dev_plan.commands("kind-up.sh")
    (kubeconfig,) = dev_plan.commands("kind-kubeconfig.sh")
    management = dev_plan.named("management-kubernetes")
    assert management.inputs["clusterIdentifier"] == "kind-kamaji"
    assert "kubeconfig" in management.secret_inputs
    assert management.property_dependencies["kubeconfig"] == [kubeconfig.urn]
    assert kind.urn in kubeconfig.dependencies, "read once the cluster exists"
    assert {"stdout", "stderr"} <= set(kubeconfig.secret_outputs)


def test_kind_cluster_is_created_and_deleted_by_name(dev_plan):
    (kind,) = dev_plan.commands("kind-up.sh")
    assert kind.inputs["delete"].endswith("/kind-down.sh")
    env = kind.inputs["environment"]
    assert (env["CLUSTER_NAME"], env["NODE_IMAGE"]) == ("kamaji", NODE_IMAGE)
    assert env["LAB_OWNER"] == "kamaji-hami-lab.dev", "marks the cluster as this stack's"
    # kind uses the image Pulumi pulled (and keeps), rather than pulling its own.
    (image,) = dev_plan.of_type("docker:index/remoteImage:RemoteImage")
    assert image.inputs["name"] == NODE_IMAGE and image.urn in kind.dependencies


def test_the_pool_is_known_at_the_first_preview_with_or_without_kind_subnet(up_plan):
    # Without kindSubnet the lab plans with the default kind-up.sh creates the network with.
    (applied,) = up_plan.of_type("kubernetes:metallb.io/v1beta1:IPAddressPool")
    for config in (dev_config(kindSubnet=str(DEFAULT_KIND_SUBNET)), dev_config()):
        (pool,) = plan(config, preview=True).of_type("kubernetes:metallb.io/v1beta1:IPAddressPool")
        assert pool.inputs["spec"] == applied.inputs["spec"]


def kind_command(**overrides):
    (kind,) = plan(dev_config(**overrides), preview=True).commands("kind-up.sh")
    return kind


def test_a_new_cluster_name_replaces_the_cluster_and_a_new_image_keeps_it():
    current = kind_command()
    renamed = kind_command(managementClusterName="lab2")
    reimaged = kind_command(nodeImage="kindest/node:v1.36.4@sha256:abc")
    # triggers force a replacement; deleting first means the old cluster is not orphaned.
    assert renamed.inputs["triggers"] != current.inputs["triggers"] and current.delete_before_replace
    assert reimaged.inputs["triggers"] == current.inputs["triggers"]
    assert "environment" not in current.replace_on_changes


def test_cluster_name_is_configurable():
    renamed = plan(dev_config(managementClusterName="lab2"), preview=True)
    (kind,) = renamed.commands("kind-up.sh")
    assert kind.inputs["environment"]["CLUSTER_NAME"] == "lab2"
    assert renamed.named("management-kubernetes").inputs["clusterIdentifier"] == "kind-lab2"


def test_management_kubeconfig_output_is_secret(up_plan):
    kubeconfig = up_plan.outputs["managementKubeconfig"]
    assert is_secret(kubeconfig)
    assert "server: https://127.0.0.1" in resolve(kubeconfig)


def test_node_image_is_pulled_once_and_kept(dev_plan):
    (image,) = dev_plan.of_type("docker:index/remoteImage:RemoteImage")
    assert image.inputs["name"] == NODE_IMAGE
    assert image.inputs["keepLocally"] is True


def test_commands_never_pass_previous_output_to_the_next_run(dev_plan):
    for command in dev_plan.of_type(COMMAND):
        assert command.inputs["addPreviousOutputInEnv"] is False, command.name


def test_management_kubeconfig_reaches_commands_only_as_a_secret(dev_plan):
    for command in dev_plan.of_type(COMMAND):
        if "KUBECONFIG_DATA" in command.inputs.get("environment", {}):
            assert "environment" in command.secret_inputs, command.name
