"""A nodeImage bump on a running lab previews as what it is: new image, new workers, same clusters."""

import pytest

from tests.plan import changed as changed_urns
from tests.plan import dev_config, plan

# The default pins kind's v0.33.0 digest; the same tag by another reference is a new node image.
NEW_IMAGE = "kindest/node:v1.36.4@sha256:" + "1" * 64


def changed(preview, previous):
    """Names of the resources whose inputs differ from what the previous up recorded."""
    return {preview.by_urn[urn].name for urn in changed_urns(preview, previous)}


@pytest.fixture
def bump(shared, up_plan):
    """The preview of a nodeImage bump on the dev stack brought up."""
    return shared("node-image-bump", lambda: plan(dev_config(nodeImage=NEW_IMAGE), preview=True, previous=up_plan))


def test_a_node_image_bump_leaves_the_management_kubeconfig_and_everything_on_the_clusters_untouched(bump, up_plan):
    (kubeconfig,) = bump.commands("kind-kubeconfig.sh")

    assert kubeconfig.name not in changed(bump, up_plan), "its producer never sees the image"
    assert kubeconfig.outputs == up_plan.by_urn[kubeconfig.urn].outputs, "so its kubeconfig stays known"
    assert "management-kubernetes" not in changed(bump, up_plan)
    for resource in bump.registrations:
        if resource.type.startswith(("kubernetes:", "pulumi:providers:")):
            assert resource.name not in changed(bump, up_plan), f"{resource.name} would show 'diff unavailable'"
        if resource.type.startswith("kubernetes:"):
            assert resource.outputs, f"{resource.name} would lose its outputs in the preview"
    for read in bump.commands("tenant-kubeconfig.sh"):
        assert read.name not in changed(bump, up_plan), "a tenant kubeconfig read would preview as a replacement"


def test_a_node_image_bump_changes_only_what_runs_the_image(bump, up_plan):
    by_name = {r.name: r for r in bump.registrations}
    # install-cni.sh reads kindnet's manifest from the node image, network-filter.sh runs its iptables; the rest
    # re-run for new containers (wait-gpus.sh checks that the new workers advertise their GPUs again).
    runs_the_image = {"kind-up.sh", "install-cni.sh", "network-filter.sh", "join-worker.sh", "register-gpus.sh",
                      "wait-gpus.sh"}

    for name in changed(bump, up_plan):
        resource = by_name[name]
        script = resource.inputs.get("create", "").rsplit("/", 1)[-1]
        assert (
            resource.type in ("docker:index/remoteImage:RemoteImage", "docker:index/container:Container")
            or script in runs_the_image
        ), name
    assert "management-node-image" in changed(bump, up_plan)
    assert any(by_name[name].type == "docker:index/container:Container" for name in changed(bump, up_plan))
