"""Kubeconfigs with parts missing: the reader answers empty values, never a made-up server or CA.

Kubernetes' kubeconfig format (client-go tools/clientcmd/api/v1 types) makes `clusters`,
`server` and `certificate-authority-data` optional; callers treat "" as "not given".
"""

import pytest

from components.kubeconfig import KubeconfigCluster, current_cluster

NOTHING = KubeconfigCluster(server="", ca_data="")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "apiVersion: v1\nkind: Config\n",
        "clusters: []\ncontexts: []\n",
        "clusters:\n- name: lab\n  cluster: {}\ncurrent-context: gone\n",
    ],
    ids=["empty", "no-clusters", "empty-lists", "cluster-without-fields"],
)
def test_a_kubeconfig_without_server_or_ca_gives_empty_values(text):
    assert current_cluster(text) == NOTHING


def test_a_cluster_with_a_server_but_no_ca_keeps_the_ca_empty():
    text = "clusters:\n- name: lab\n  cluster: {server: 'https://172.18.0.3:6443'}\n"
    assert current_cluster(text) == KubeconfigCluster(server="https://172.18.0.3:6443", ca_data="")


def test_a_cluster_with_a_ca_but_no_server_keeps_the_server_empty():
    text = "clusters:\n- name: lab\n  cluster: {certificate-authority-data: Q0E=}\n"
    assert current_cluster(text) == KubeconfigCluster(server="", ca_data="Q0E=")


def test_the_yaml_error_says_which_file_kind_is_broken():
    with pytest.raises(ValueError) as raised:
        current_cluster("clusters: [unclosed")
    assert str(raised.value) == "kubeconfig is not valid YAML"
