"""Reading the current cluster of a kubeconfig (program and host tools share it)."""

import pytest

from components.kubeconfig import current_cluster

TWO_CLUSTERS = """
apiVersion: v1
kind: Config
clusters:
- name: old
  cluster: {server: "https://10.0.0.1:6443", certificate-authority-data: T0xE}
- name: lab
  cluster: {server: "https://172.18.149.3:6443", certificate-authority-data: TEFC}
contexts:
- name: first
  context: {cluster: old, user: u}
- name: current
  context: {cluster: lab, user: u}
current-context: current
"""


def test_the_current_context_chooses_the_cluster_not_the_order():
    cluster = current_cluster(TWO_CLUSTERS)
    assert (cluster.server, cluster.ca_data) == ("https://172.18.149.3:6443", "TEFC")


def test_without_a_current_context_the_first_cluster_is_used():
    cluster = current_cluster(TWO_CLUSTERS.replace("current-context: current", ""))
    assert cluster.server == "https://10.0.0.1:6443"


def test_text_that_is_not_yaml_is_a_value_error():
    with pytest.raises(ValueError, match="not valid YAML"):
        current_cluster("clusters: [unclosed")
