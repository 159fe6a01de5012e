"""Config at its edges: booleans where integers belong, the 63-character label limit, system namespaces."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.config import parse_settings
from tests.plan import dev_config
from tests.test_config import A100, config_error, tenants_error

# Kubernetes names and labels are DNS labels: at most 63 characters (RFC 1123; kubernetes
# staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go DNS1123LabelMaxLength).
MAX_LABEL = 63
# Namespaces every cluster has and kube-apiserver manages (kubernetes pkg/apis/core/types.go).
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")


@pytest.mark.parametrize("key", ["workers", "gpuSlots", "controlPlaneReplicas"])
@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_is_not_a_count_for_a_tenant(key, value):
    message = tenants_error({"name": "a", key: value})
    assert f"kamaji-hami-lab:tenants[0].{key}: expected a positive integer, got {str(value).lower()}" in message


@pytest.mark.parametrize("key", ["count", "memoryMiB"])
def test_a_boolean_is_not_a_gpu_number(key):
    message = tenants_error({"name": "a", "gpus": [{**A100, key: True}]})
    assert f"kamaji-hami-lab:tenants[0].gpus[0].{key}: expected a positive integer, got true" in message


@pytest.mark.parametrize("key", ["gpumemMiB", "gpucores", "gpus"])
def test_a_boolean_is_not_a_quota(key):
    message = tenants_error({"name": "a", "quotas": [{"namespace": "team-a", key: True}]})
    assert f"kamaji-hami-lab:tenants[0].quotas[0].{key}: expected a positive integer, got true" in message


@pytest.mark.parametrize("namespace", SYSTEM_NAMESPACES)
def test_every_system_namespace_is_refused_for_quotas(namespace):
    message = tenants_error({"name": "a", "quotas": [{"namespace": namespace, "gpus": 1}]})
    assert f"quotas[0].namespace: {namespace!r} is a system namespace" in message


def test_a_quota_namespace_may_have_63_characters_but_not_64():
    longest = "n" * MAX_LABEL
    lab = parse_settings(dev_config(tenants=[{"name": "a", "quotas": [{"namespace": longest, "gpus": 1}]}]))
    assert lab.tenants[0].quotas[0].namespace == longest
    message = tenants_error({"name": "a", "quotas": [{"namespace": longest + "n", "gpus": 1}]})
    assert f"quotas[0].namespace: {longest + 'n'!r} is not a DNS label" in message


def test_a_tenant_name_is_as_long_as_its_worker_node_names_allow():
    # Workers of the dev stack's cluster "kamaji" are named kamaji-<tenant>-w<N> (kamaji-tenant-a-w1),
    # and a node name is a DNS label: one worker leaves 63 - len("kamaji-") - len("-w1") = 53.
    fits = "t" * 53
    assert [t.name for t in parse_settings(dev_config(tenants=[{"name": fits}])).tenants] == [fits]
    message = tenants_error({"name": fits + "t"})
    assert f"'kamaji-{fits}t-w1' would exceed 63 characters" in message


def test_a_64_character_tenant_name_is_not_a_dns_label():
    assert "is not a DNS-1035 label" in tenants_error({"name": "t" * (MAX_LABEL + 1)})


@pytest.mark.parametrize("key", ["workersPerTenant", "gpuSlots", "controlPlaneReplicas"])
@pytest.mark.parametrize("value", [True, "true"])
def test_a_boolean_is_not_a_top_level_count(key, value):
    # The Pulumi CLI hands every config value over as text: `true` arrives as "true".
    assert f"kamaji-hami-lab:{key}: expected a positive integer, got " in config_error(**{key: value})


def test_cli_text_keeps_no_surrounding_whitespace_but_names_stay_exact():
    # `pulumi config set KEY < FILE` keeps the file's trailing newline.
    lab = parse_settings(dev_config(kubernetesVersion="v1.36.4\n", managementClusterName=" lab "))
    assert (lab.versions.kubernetes, lab.management_cluster_name) == ("v1.36.4", "lab")
    assert "tenants[0].name: ' a' is not" in tenants_error({"name": " a"})


def test_an_ipv6_pod_network_is_refused_saying_why():
    message = tenants_error({"name": "a", "podCidr": "fd00::/64"})
    assert "  kamaji-hami-lab:tenants[0].podCidr: 'fd00::/64' is not an IPv4 CIDR (IPv6 is not supported)" in (
        message.splitlines())


# kind's node is <name>-control-plane: its container name, host name and Kubernetes node name, a 63-character label.
@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=10_000))
def test_a_management_cluster_name_is_capped_where_its_kind_node_name_stops_being_a_label(length):
    name = "a" * length
    node = f"{name}-control-plane"
    if len(node) <= 63:
        assert parse_settings(dev_config(managementClusterName=name)).management_cluster_name == name
        return
    message = config_error(managementClusterName=name)
    (line,) = [line for line in message.splitlines() if "managementClusterName" in line]
    assert "at most 49 characters" in line
    assert len(line) < 300, "a long name is shortened, not echoed"


def test_the_longest_management_cluster_name_still_plans_its_workers():
    lab = parse_settings(dev_config(managementClusterName="a" * 49, tenants=[{"name": "t"}]))
    assert len(lab.worker_name(lab.tenants[0], 1)) <= 63
