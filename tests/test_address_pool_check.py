"""scripts/check-address-pool.sh refuses a pool that overlaps addresses in use on the kind network."""

from __future__ import annotations

from tests.test_scripts import reply

POOL = "172.18.149.0-172.18.149.50"
# docker network inspect with the script's format: IPAM ranges | containers (name=address/prefix).
QUIET_NETWORK = " |kamaji-control-plane=172.18.0.2/16 kamaji-tenant-a-w1=172.18.0.3/16 "


def run_check(fakes, pool=POOL):
    return fakes.run("check-address-pool.sh", POOL=pool, CLUSTER_NAME="kamaji", KIND_NETWORK="kind")


def network(fakes, layout=QUIET_NETWORK, clusters=""):
    fakes.on("docker", r"^network inspect", layout)
    return fakes.on("docker", r"^ps --filter label=io.x-k8s.kind.role=control-plane --filter network=kind", clusters)


def test_a_pool_clear_of_everything_passes(fakes):
    network(fakes, clusters="kamaji\nguide\n")
    fakes.on("kind", r"^get kubeconfig --name guide$", "GUIDE-KUBECONFIG\n")
    # Kamaji's kind guide pool (clastix/kamaji docs/content/getting-started/kamaji-kind.md).
    fakes.on("kubectl", r"get ipaddresspools\.metallb\.io -A", "172.18.255.200-172.18.255.250")

    result = run_check(fakes)

    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    # This lab's own cluster is never compared with itself.
    assert [c["argv"][-1] for c in fakes.calls("kind")] == ["guide"]


def test_another_kind_clusters_overlapping_pool_is_refused_with_the_fix(fakes):
    network(fakes, clusters="kamaji\nother-lab\n")
    fakes.on("kind", r"^get kubeconfig --name other-lab$", "OTHER-KUBECONFIG\n")
    fakes.on("kubectl", r"get ipaddresspools", "10.0.0.0/24 172.18.149.32/27")

    result = run_check(fakes)

    assert result.returncode != 0
    assert "overlaps 172.18.149.32/27, a MetalLB pool of kind cluster other-lab on network kind" in result.stderr
    assert "kamaji-hami-lab:metallbAddressRange" in result.stderr
    assert "kamaji-hami-lab:managementClusterName" in result.stderr
    (read,) = fakes.calls("kubectl")
    assert read["kubeconfig"]["content"] == "OTHER-KUBECONFIG"


def test_a_container_inside_the_pool_is_refused(fakes):
    network(fakes, layout=" |stray=172.18.149.7/16 ")

    result = run_check(fakes)

    assert result.returncode != 0
    assert "contains 172.18.149.7, the address of container stray" in result.stderr


def test_dockers_assignment_range_overlapping_the_pool_is_refused(fakes):
    network(fakes, layout="172.18.128.0/17 |")

    result = run_check(fakes)

    assert result.returncode != 0
    assert "overlaps 172.18.128.0/17, the range Docker assigns container addresses from" in result.stderr


def test_a_cluster_without_metallb_passes_and_an_unreadable_one_is_named(fakes):
    network(fakes, clusters="plain\nstopped\n")
    fakes.on("kind", r"^get kubeconfig --name plain$", "PLAIN\n")
    fakes.on("kind", r"^get kubeconfig --name stopped$", reply(exit=1, stderr="could not locate any control plane\n"))
    fakes.on(
        "kubectl",
        r"get ipaddresspools",
        reply(exit=1, stderr='error: the server doesn\'t have a resource type "ipaddresspools"\n'),
    )

    result = run_check(fakes)

    assert result.returncode == 0, result.stderr
    assert "plain" not in result.stderr.replace("kind cluster stopped", "")
    assert "cannot read kind cluster stopped's kubeconfig" in result.stderr


def test_no_kind_network_yet_means_nothing_to_overlap(fakes):
    fakes.on("docker", r"^network inspect", reply(exit=1, stderr="Error: No such network: kind\n"))

    result = run_check(fakes)

    assert result.returncode == 0, result.stderr
    assert fakes.calls("docker", "^ps") == []


def test_nothing_goes_onto_the_management_cluster_before_the_pool_is_checked(up_plan):
    (check,) = up_plan.commands("check-address-pool.sh")
    (pool,) = up_plan.of_type("kubernetes:metallb.io/v1beta1:IPAddressPool")
    assert check.inputs["environment"]["POOL"] == pool.inputs["spec"]["addresses"][0]
    assert check.inputs["environment"]["CLUSTER_NAME"] == "kamaji"
    for release in up_plan.of_type("kubernetes:helm.sh/v3:Release"):
        assert check.urn in up_plan.upstream(release.urn), release.name
