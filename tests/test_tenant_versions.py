"""Per-tenant Kubernetes versions, and an upgrade of one tenant that touches nothing else."""

from __future__ import annotations

import pytest

from components.config import ConfigError, parse_settings
from tests.plan import NODE_IMAGE, Plan, changed, dev_config, plan, same_inputs
from tests.test_config_modes import EXISTING

TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
CONTAINER = "docker:index/container:Container"
IMAGE = "docker:index/remoteImage:RemoteImage"
RELEASE = "kubernetes:helm.sh/v3:Release"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
# The newest minor Kamaji's webhook admits with the default Kamaji image: upgrade.KubeadmVersion
# (clastix/kamaji internal/upgrade/kubeadm_version.go@ddbabd8).
KAMAJI_NEWEST = (1, 36)
TOO_NEW = f"v{KAMAJI_NEWEST[0]}.{KAMAJI_NEWEST[1] + 1}.0"
# Kamaji @ddbabd8 uploads kubeadm-config through kubeadm v1.36's upload-config phase, as kubeadm.k8s.io/v1beta4,
# the version kubeadm reads from v1.31 on (kubernetes/kubernetes cmd/kubeadm/app/apis/kubeadm/v1beta4).
OLDEST_JOINABLE = (1, 31)
TOO_OLD = f"v{OLDEST_JOINABLE[0]}.{OLDEST_JOINABLE[1] - 1}.14"
OLD, NEW = "v1.35.9", "v1.36.1"


def two_tenants(a: str, b: str = OLD) -> dict:
    return dev_config(
        tenants=[
            {"name": "a", "workers": 2, "kubernetesVersion": a, "gpus": [{"model": "NVIDIA L4 24GB"}]},
            {"name": "b", "kubernetesVersion": b},
        ],
    )


def of_tenant(plan_: Plan, tenant: str) -> list:
    component = next(r.urn for r in plan_.of_type("kamaji-hami-lab:index:Tenant") if r.name == tenant)
    return [r for r in plan_.registrations if component in plan_.ancestors(r.urn)]


def version_facts(plan_: Plan, tenant: str) -> dict:
    """What runs which version in one tenant, read from the plan."""
    resources = of_tenant(plan_, tenant)
    (tcp,) = [r for r in resources if r.type == TCP]
    (hami,) = [r for r in resources if r.type == RELEASE]
    (proxy,) = [r for r in resources if r.type == DAEMONSET and r.inputs["metadata"]["name"] == "kube-proxy"]
    containers = [r for r in resources if r.type == CONTAINER]
    images = {r.urn: r.inputs["name"] for r in plan_.of_type(IMAGE)}
    return {
        "control plane": tcp.inputs["spec"]["kubernetes"]["version"],
        "scheduler": hami.inputs["values"]["scheduler"]["kubeScheduler"]["image"]["tag"],
        "kube-proxy": proxy.inputs["spec"]["template"]["spec"]["containers"][0]["image"].rsplit(":", 1)[1],
        "workers": {images[urn] for c in containers for urn in c.property_dependencies["image"]},
    }


def test_two_tenants_run_their_own_versions_everywhere():
    lab = plan(two_tenants(NEW), preview=False)

    assert version_facts(lab, "a") == {
        "control plane": NEW,
        "scheduler": NEW,
        "kube-proxy": NEW,
        "workers": {f"kindest/node:{NEW}"},
    }
    assert version_facts(lab, "b") == {
        "control plane": OLD,
        "scheduler": OLD,
        "kube-proxy": OLD,
        "workers": {f"kindest/node:{OLD}"},
    }
    assert lab.outputs["tenants"]["a"]["kubernetesVersion"] == NEW


def test_a_tenant_on_the_labs_version_shares_the_labs_pinned_image():
    lab = plan(dev_config(tenants=[{"name": "a"}, {"name": "b", "kubernetesVersion": OLD}]), preview=True)

    assert version_facts(lab, "a")["workers"] == {NODE_IMAGE}
    assert sorted(r.inputs["name"] for r in lab.of_type(IMAGE)) == sorted([NODE_IMAGE, f"kindest/node:{OLD}"])
    # b pulls its own, from the lab's Docker daemon, and leaves it on the host like the lab's.
    (shared,) = [r for r in lab.of_type(IMAGE) if r.inputs["name"] == NODE_IMAGE]
    (own,) = [r for r in of_tenant(lab, "b") if r.type == IMAGE]
    assert own.provider == shared.provider and own.inputs["keepLocally"] is True


def test_a_tenant_naming_the_labs_version_and_image_gets_exactly_the_plan_of_one_that_inherits_them(up_plan):
    inherited = up_plan
    explicit_tenants = [
        {**tenant, "kubernetesVersion": "v1.36.4", "nodeImage": NODE_IMAGE} for tenant in dev_config()["tenants"]
    ]
    explicit = plan(dev_config(tenants=explicit_tenants), preview=False)

    assert explicit.by_urn.keys() == inherited.by_urn.keys()
    for urn, before in inherited.by_urn.items():
        assert same_inputs(before, explicit.by_urn[urn]), urn


def test_a_tenant_image_override_pins_its_workers():
    pinned = f"kindest/node:{OLD}@sha256:" + "2" * 64
    lab = plan(dev_config(tenants=[{"name": "a", "kubernetesVersion": OLD, "nodeImage": pinned}]), preview=True)
    assert version_facts(lab, "a")["workers"] == {pinned}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"tenants": [{"name": "a"}, {"name": "b", "kubernetesVersion": TOO_NEW}]},
            f"tenants[1].kubernetesVersion: {TOO_NEW} is newer than Kamaji supports",
        ),
        (
            {"kubernetesVersion": TOO_NEW, "nodeImage": "", "tenants": [{"name": "a"}]},
            f"kubernetesVersion: {TOO_NEW} is newer than Kamaji supports",
        ),
        (
            {"tenants": [{"name": "a"}, {"name": "b", "kubernetesVersion": TOO_OLD}]},
            f"tenants[1].kubernetesVersion: {TOO_OLD} is older than v1.31: Kamaji writes the tenant's kubeadm-config "
            "as kubeadm.k8s.io/v1beta4, which kubeadm reads only from v1.31 on, so no worker could join",
        ),
        (
            {"kubernetesVersion": TOO_OLD, "nodeImage": "", "tenants": [{"name": "a"}]},
            f"kubernetesVersion: {TOO_OLD} is older than v1.31",
        ),
        (
            {"tenants": [{"name": "a", "kubernetesVersion": OLD, "nodeImage": "kindest/node:v1.36.4"}]},
            f"tenants[0].nodeImage: 'kindest/node:v1.36.4' runs Kubernetes v1.36.4, but the tenant runs {OLD}",
        ),
        (
            {"tenants": [{"name": "a", "nodeImage": f"kindest/node:{OLD}"}]},
            f"tenants[0].nodeImage: 'kindest/node:{OLD}' runs Kubernetes {OLD}, but the tenant runs v1.36.4",
        ),
        ({"tenants": [{"name": "a", "kubernetesVersion": "1.36.4"}]}, "tenants[0].kubernetesVersion: '1.36.4' is not"),
    ],
)
@pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
def test_versions_kamaji_would_refuse_stop_the_program_before_any_resource(overrides, expected, preview):
    with pytest.raises(ConfigError) as raised:
        plan(dev_config(**overrides), preview=preview)
    assert f"kamaji-hami-lab:{expected}" in str(raised.value)
    assert raised.value.plan.registrations == []


def test_an_unsupported_lab_version_every_tenant_overrides_is_only_the_management_clusters():
    lab = parse_settings(
        dev_config(kubernetesVersion=TOO_NEW, nodeImage="", tenants=[{"name": "a", "kubernetesVersion": NEW}])
    )
    assert lab.tenants[0].kubernetes_version == NEW


def test_a_pinned_kamaji_image_leaves_the_newest_version_to_kamajis_webhook():
    lab = parse_settings(
        dev_config(kamajiImageTag="27.1.1-edge", tenants=[{"name": "a", "kubernetesVersion": TOO_NEW}])
    )
    assert lab.tenants[0].kubernetes_version == TOO_NEW


def test_a_provided_kamaji_judges_the_newest_version_itself():
    provided = {"certManager": "provided", "kamaji": "provided", "kamajiDataStore": "etcd"}
    lab = parse_settings(dev_config(**EXISTING, **provided, tenants=[{"name": "a", "kubernetesVersion": TOO_NEW}]))
    assert lab.tenants[0].kubernetes_version == TOO_NEW


# --- an upgrade of tenant a, as `pulumi preview` shows it on the running lab -------------------------


@pytest.fixture
def running(shared):
    return shared("versions-running", lambda: plan(two_tenants(OLD), preview=False))


@pytest.fixture
def upgrade(running, shared):
    return shared("versions-upgrade", lambda: plan(two_tenants(NEW), preview=True, previous=running))


def test_an_upgrade_changes_nothing_of_the_other_tenant_or_the_platform(running, upgrade):
    moved = changed(upgrade, running)
    tenant_a = {r.urn for r in of_tenant(upgrade, "a")}
    assert moved and moved <= tenant_a, sorted(moved - tenant_a)
    assert {r.urn for r in running.registrations} == {r.urn for r in upgrade.registrations} | (
        {r.urn for r in of_tenant(running, "a")} - {r.urn for r in of_tenant(upgrade, "a")}
    )


def test_an_upgrade_updates_the_control_plane_in_place(running, upgrade):
    (before,) = [r for r in of_tenant(running, "a") if r.type == TCP]
    after = upgrade.by_urn[before.urn]
    # pulumi-kubernetes replaces an object only when apiVersion, kind, metadata.name or metadata.namespace
    # change (pulumi/pulumi-kubernetes provider/pkg/provider/diff.go@94977969, forceNewProperties).
    for key in ("apiVersion", "kind"):
        assert after.inputs[key] == before.inputs[key]
    for key in ("name", "namespace"):
        assert after.inputs["metadata"][key] == before.inputs["metadata"][key]
    assert not after.replace_on_changes and not after.delete_before_replace
    # Same datastore schema and network: same endpoint, CA and data; only the version moves.
    spec_before, spec_after = before.inputs["spec"], after.inputs["spec"]
    assert spec_after["kubernetes"]["version"] == NEW
    assert {**spec_after, "kubernetes": spec_before["kubernetes"]} == spec_before
    assert {**spec_after["kubernetes"], "version": OLD} == spec_before["kubernetes"]
    # The admin kubeconfig is not read again: workers and users keep their credentials.
    (read,) = [r for r in of_tenant(upgrade, "a") if r.inputs.get("create", "").endswith("/tenant-kubeconfig.sh")]
    assert read.urn not in changed(upgrade, running)


def test_an_upgrade_checks_the_running_version_before_the_control_plane_or_its_image(running, upgrade):
    (check,) = [r for r in of_tenant(upgrade, "a") if r.inputs.get("create", "").endswith("/check-tenant-version.sh")]
    assert check.urn in changed(upgrade, running), "the check runs again for the new version"
    assert check.inputs["environment"]["KUBERNETES_VERSION"] == NEW
    (tcp,) = [r for r in of_tenant(upgrade, "a") if r.type == TCP]
    (image,) = [r for r in of_tenant(upgrade, "a") if r.type == IMAGE]
    assert check.urn in tcp.dependencies and check.urn in image.dependencies


def test_an_upgrade_replaces_the_workers_in_sequence_after_the_control_plane(running, upgrade):
    resources = of_tenant(upgrade, "a")
    (tcp,) = [r for r in resources if r.type == TCP]
    workers = sorted((r for r in resources if r.type == CONTAINER), key=lambda r: r.inputs["name"])
    moved = changed(upgrade, running)
    assert len(workers) == 2 and all(w.urn in moved for w in workers), "a new image replaces each container"
    first, second = workers
    assert tcp.urn in upgrade.upstream(first.urn)
    # The second waits for the first to have joined again (and its GPUs to be registered).
    first_steps = {r.urn for r in resources if r.type == "command:local:Command" and r.parent == first.parent}
    assert first_steps and first_steps <= upgrade.upstream(second.urn)
    # HAMi's kube-scheduler moves last, once every worker is back.
    (hami,) = [r for r in resources if r.type == RELEASE]
    assert hami.urn in moved and {first.urn, second.urn} <= upgrade.upstream(hami.urn)


def test_after_an_upgrade_the_gpus_are_checked_again_on_the_new_workers(running, upgrade):
    (ready,) = [r for r in of_tenant(upgrade, "a") if r.inputs.get("create", "").endswith("/wait-gpus.sh")]
    assert ready.urn in changed(upgrade, running)
    registrations = [r for r in of_tenant(upgrade, "a") if r.inputs.get("create", "").endswith("/register-gpus.sh")]
    assert {r.urn for r in registrations} <= upgrade.upstream(ready.urn)


def test_the_oldest_minor_kubeadm_reads_kamajis_config_with_is_accepted_at_any_patch():
    oldest = "v{}.{}.0".format(*OLDEST_JOINABLE)
    lab = parse_settings(dev_config(tenants=[{"name": "a", "kubernetesVersion": oldest}]))
    assert lab.tenants[0].kubernetes_version == oldest
