"""scripts/join-worker.sh knows which tenant a worker belongs to (fake docker/kubectl, real openssl)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from tests.test_scripts import (
    ENDPOINT,
    TENANT_KUBECONFIG,
    b64,
    joinable_worker,
    node_booted,
    reply,
    tenant_api,
)

NODE_BINDING = r"^exec w1 kubectl --kubeconfig=/etc/kubernetes/kubelet.conf config view"


def bound_to(fakes, server: str, ca_pem: str):
    """The node's kubelet.conf points at `server` and trusts `ca_pem`."""
    return fakes.on("docker", NODE_BINDING, f"{server} {b64(ca_pem)}")


def run_join(fakes, **env):
    return fakes.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE="w1", **env)


def test_a_node_joined_to_this_tenant_is_left_alone(fakes, tenant_ca):
    tenant_api(node_booted(fakes), tenant_ca)
    bound_to(fakes, f"https://{ENDPOINT}", tenant_ca).on("kubectl", "get node w1", "node/w1\n")

    result = run_join(fakes)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"w1 already joined {ENDPOINT}\n"
    assert fakes.calls("docker", "kubeadm reset") == []
    assert fakes.calls("docker", "^exec -i") == []
    assert fakes.calls("kubectl", "create") == []


def test_a_worker_holding_another_tenants_ca_is_reset_and_rejoined(fakes, tenant_ca, other_tenant_ca):
    joinable_worker(fakes, tenant_ca)
    bound_to(fakes, f"https://{ENDPOINT}", other_tenant_ca)  # same address, replaced control plane

    result = run_join(fakes)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"w1 joined {ENDPOINT}\n"
    assert "not to this tenant" in result.stderr
    calls = [" ".join(c["argv"]) for c in fakes.calls("docker")]
    reset = next(i for i, call in enumerate(calls) if "kubeadm reset --force" in call)
    join = next(i for i, call in enumerate(calls) if call.startswith("exec -i w1 sh -c"))
    assert reset < join


def test_a_worker_bound_to_another_endpoint_is_reset_and_rejoined(fakes, tenant_ca):
    joinable_worker(fakes, tenant_ca)
    bound_to(fakes, "https://172.18.255.201:6443", tenant_ca)

    result = run_join(fakes)

    assert result.returncode == 0, result.stderr
    assert "bound to 172.18.255.201:6443" in result.stderr
    assert len(fakes.calls("docker", "kubeadm reset --force")) == 1
    assert len(fakes.calls("docker", "^exec -i w1 sh -c")) == 1


def test_what_a_killed_run_left_in_the_node_is_cleared_before_joining(fakes, tenant_ca):
    # No kubelet.conf (the fake answers nothing), but perhaps a kubeadm still running and its token file.
    joinable_worker(fakes, tenant_ca)

    assert run_join(fakes).returncode == 0
    (clean,) = fakes.calls("docker", "kubeadm reset --force")
    script, args = clean["argv"][4], clean["argv"][6:]
    assert args[2] == "/run/kamaji-hami-lab-join.yaml"
    assert script.index("pkill -x kubeadm") < script.index('rm -f "$3"') < script.index("kubeadm reset --force")


def test_each_attempt_is_bounded_inside_the_node_and_removes_its_token_file(fakes, tenant_ca):
    joinable_worker(fakes, tenant_ca)

    assert run_join(fakes).returncode == 0
    (join,) = fakes.calls("docker", "^exec -i w1 sh -c")
    in_node, config_path, seconds = join["argv"][5], join["argv"][7], int(join["argv"][8])
    assert config_path == "/run/kamaji-hami-lab-join.yaml"
    # The bound holds even when the docker exec client is killed (moby/moby#9098).
    assert 'timeout --kill-after=10s "$2" kubeadm join --config "$1"' in in_node
    assert in_node.index("kubeadm join") < in_node.index('rm -f "$1"')
    assert "trap" not in in_node
    # kubeadm's own timeouts end a stuck step inside that bound.
    timeouts = re.search(r"^timeouts:\n((?:  .+\n?)+)", join["stdin"], re.M).group(1)
    durations = [re.fullmatch(r"\s+\w+: (\d+)(m|s)", line).groups() for line in timeouts.splitlines()]
    assert {"discovery", "tlsBootstrap", "kubeletHealthCheck"} <= set(re.findall(r"(\w+):", timeouts))
    assert all(int(value) * (60 if unit == "m" else 1) < seconds for value, unit in durations)


@pytest.mark.parametrize("attempts", [1, 3, 5])
def test_each_attempts_token_outlives_that_attempt_and_no_more(fakes, tenant_ca, attempts):
    # Whoever reads a bootstrap token could join a machine of its own as a node: it lives for one attempt.
    joinable_worker(fakes, tenant_ca, *[reply(exit=1)] * attempts)

    result = run_join(fakes, JOIN_ATTEMPTS=str(attempts))

    assert result.returncode != 0
    creates = fakes.calls("kubectl", "create -f -")
    joins = fakes.calls("docker", "^exec -i w1 sh -c")
    assert len(creates) == len(joins) == attempts
    for create, join in zip(creates, joins, strict=True):
        expiration = datetime.strptime(re.search(r'expiration: "(.+)"', create["stdin"]).group(1),
                                       "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        attempt = timedelta(seconds=int(join["argv"][8]))
        assert attempt < expiration - datetime.now(UTC) <= attempt + timedelta(minutes=2)


# kubectl's answer when the API server does not accept connections (k8s.io/client-go, as kubectl prints it).
API_UNREACHABLE = reply(stderr="Unable to connect to the server: dial tcp 172.18.255.200:6443: connect: connection "
                               "refused\n", exit=1)


def test_a_joined_node_keeps_its_kubelet_when_the_tenant_api_cannot_say_whether_its_node_exists(fakes, tenant_ca):
    tenant_api(node_booted(fakes), tenant_ca)
    bound_to(fakes, f"https://{ENDPOINT}", tenant_ca).on("kubectl", "get node w1", API_UNREACHABLE)
    fakes.on("docker", "systemctl restart kubelet", "")

    result = run_join(fakes)

    assert result.returncode == 1 and result.stdout == ""
    assert "the tenant API at 172.18.255.200:6443 did not say whether its Node exists" in result.stderr
    assert fakes.calls("docker", "systemctl restart") == [] and fakes.calls("docker", "kubeadm reset") == []


@pytest.mark.parametrize("ca_data", ["not a certificate",
                                     "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"],
                         ids=["not-pem", "broken-pem"])
def test_a_tenant_ca_openssl_cannot_read_stops_the_join_before_the_node_is_touched(fakes, ca_data):
    tenant_api(node_booted(fakes), ca_data)

    result = run_join(fakes)

    assert result.returncode == 1
    assert "certificate-authority-data is not a PEM certificate openssl can read" in result.stderr
    assert "sha256:" not in result.stderr
    assert fakes.calls("docker", "^exec") == [] and fakes.calls("kubectl", "create") == []


def test_a_failed_container_reset_fails_the_join_instead_of_joining_a_half_reset_node(fakes, tenant_ca):
    joinable_worker(fakes, tenant_ca)
    fakes.rules.insert(0, {"tool": "docker", "match": "kubeadm reset --force",
                           "replies": [reply(stderr="iptables-restore: line 2 failed\n", exit=1)]})

    result = run_join(fakes)

    assert result.returncode == 1
    assert "resetting w1 failed" in result.stderr
    assert fakes.calls("docker", "^exec -i w1 sh -c") == [] and fakes.calls("kubectl", "create") == []
