"""Host-side scripts on hosts that differ from the happy path (fake docker/kind/kubectl)."""

# The fixture `fakes` is imported from test_scripts, so test arguments "redefine" it.
# ruff: noqa: F811

from __future__ import annotations

from tests.test_scripts import MANAGEMENT_KUBECONFIG, TENANT_KUBECONFIG, b64, fakes, reply, run_kind_up  # noqa: F401


def run_tenant_kubeconfig(fakes):
    return fakes.run(
        "tenant-kubeconfig.sh",
        KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG,
        TENANT="tenant-a",
        NAMESPACE="tenants",
        AUTH_TIMEOUT="0",
    )


def test_an_unreachable_tenant_api_is_reported_as_unreachable_not_unauthorised(fakes):
    fakes.on("kubectl", r"get secret", b64(TENANT_KUBECONFIG))
    # What kubectl prints when the MetalLB address is out of the host's reach.
    fakes.on(
        "kubectl",
        r"auth can-i",
        reply(
            exit=1, stderr="Unable to connect to the server: dial tcp 172.18.255.200:6443: connect: no route to host\n"
        ),
    )

    result = run_tenant_kubeconfig(fakes)

    assert result.returncode != 0
    assert result.stdout == ""
    assert "tenant tenant-a's API server is unreachable from this host" in result.stderr
    assert "no route to host" in result.stderr and "make preflight" in result.stderr
    assert "to authorise admin.conf" not in result.stderr


def test_a_refusing_tenant_api_is_reported_as_not_yet_authorised(fakes):
    fakes.on("kubectl", r"get secret", b64(TENANT_KUBECONFIG))
    fakes.on("kubectl", r"auth can-i", reply("no\n", exit=1))

    result = run_tenant_kubeconfig(fakes)

    assert result.returncode != 0
    assert "waiting for tenant tenant-a to authorise admin.conf" in result.stderr
    assert "unreachable" not in result.stderr


def test_kind_up_keeps_kind_on_the_kind_network(fakes):
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")

    result = run_kind_up(fakes, KIND_EXPERIMENTAL_DOCKER_NETWORK="elsewhere")

    assert result.returncode == 0, result.stderr
    (create,) = fakes.calls("kind", "^create cluster")
    # kubernetes-sigs/kind pkg/cluster/internal/providers/docker: the variable renames the node network.
    assert "KIND_EXPERIMENTAL_DOCKER_NETWORK" not in create["env"]
