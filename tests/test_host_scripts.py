"""Host-side scripts on hosts that differ from the happy path (fake docker/kind/kubectl)."""

from __future__ import annotations

import pytest

from components.kind_management_cluster import KIND_NETWORK
from tests.test_scripts import MANAGEMENT_KUBECONFIG, TENANT_KUBECONFIG, b64, reply, run_kind_up


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


@pytest.mark.parametrize("users_setting", [{}, {"KIND_EXPERIMENTAL_DOCKER_NETWORK": "elsewhere"},
                                           {"KIND_EXPERIMENTAL_DOCKER_NETWORK": ""}])
def test_kind_up_puts_kinds_node_on_the_labs_network(fakes, users_setting):
    # Whatever the user's shell says: the workers and the MetalLB pools are on the lab's network.
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")

    result = run_kind_up(fakes, **users_setting)

    assert result.returncode == 0, result.stderr
    (create,) = fakes.calls("kind", "^create cluster")
    # kind puts the node on the network this names, else on `kind`
    # (kubernetes-sigs/kind pkg/cluster/internal/providers/docker/provider.go@v0.33.0-alpha, Provision).
    assert create["env"]["KIND_EXPERIMENTAL_DOCKER_NETWORK"] == KIND_NETWORK
