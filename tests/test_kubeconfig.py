"""Reading the current cluster of a kubeconfig (program and host tools share it)."""

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from components.config import ConfigError, parse_settings
from components.kubeconfig import check_kubeconfig, current_cluster
from tests.plan import dev_config

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


NAMES = st.one_of(st.lists(st.text(max_size=3), max_size=2),
                  st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@given(NAMES, st.sampled_from(["contexts", "clusters"]))
def test_a_context_or_cluster_named_by_a_list_or_map_is_refused_as_a_kubeconfig_error(name, key):
    # Found by fuzzing the config (issue 50): a list as a name once raised TypeError (unhashable) instead.
    inner = key[:-1]
    config = {"contexts": [{"name": "lab", "context": {"cluster": "c"}}],
              "clusters": [{"name": "c", "cluster": {"server": "https://h:6443"}}], "current-context": "lab"}
    config[key].append({"name": name, inner: {}})
    text = yaml.safe_dump(config)
    for read in (current_cluster, lambda text: check_kubeconfig(text, None)):
        with pytest.raises(ValueError) as raised:
            read(text)
        assert str(raised.value) == (f"has {key}[1] that is not an object with a name and a {inner} object "
                                     "(the value is not shown: it is a secret)")


def test_a_list_as_the_management_kubeconfigs_context_name_is_a_config_error():
    text = yaml.safe_dump({"contexts": [{"name": ["lab"], "context": {"cluster": "c"}}], "current-context": "lab"})
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(managementCluster="existing", managementKubeconfig=text))
    assert "kamaji-hami-lab:managementKubeconfig: has contexts[0] that is not an object" in str(raised.value)
