"""Issue 47, point 2: what the lab has a node's own credential write still passes NodeRestriction.

NodeRestriction judges only requests made as a node (system:node:<name>); the lab's other node writes go through
the tenant's admin kubeconfig or a ServiceAccount and are not its business. Two writes are a node's: the labels a
kubelet registers its Node with (join-worker.sh NODE_LABELS, kubelet --node-labels) and the mock-GPU registration
the worker's timer makes with its kubelet.conf (register-gpus.sh).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from tests.test_scripts import (
    installed_register_script,
)


@dataclass(frozen=True)
class NodeRestrictionRule:
    """What NodeRestriction lets a node write to Node objects (create and update)."""

    own_node_only: bool
    """A node may create or change only the Node of its own name."""
    forbidden_namespace: str
    """Labels in this namespace or a subdomain of it: never."""
    kubernetes_namespaces: tuple[str, ...]
    """Labels in these namespaces or their subdomains: only the kubelet's own ones below."""
    kubelet_labels: frozenset[str]
    kubelet_namespaces: tuple[str, ...]
    """Namespaces (and their subdomains) a kubelet may always label itself in."""
    taints_fixed_on_update: bool
    """An update may not change the Node's taints."""
    source: str


# kubernetes/kubernetes plugin/pkg/admission/noderestriction/admission.go (admitNode, getForbiddenLabels,
# isKubernetesLabel) and staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go (kubeletLabels,
# kubeletLabelNamespaces) with the constants of staging/src/k8s.io/api/core/v1/well_known_labels.go, as indexed
# for v1.36. Annotations are not judged at all.
NODE_RESTRICTION = NodeRestrictionRule(
    own_node_only=True,
    forbidden_namespace="node-restriction.kubernetes.io",
    kubernetes_namespaces=("kubernetes.io", "k8s.io"),
    kubelet_labels=frozenset({
        "kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type", "kubernetes.io/os",
        "kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
    }),
    kubelet_namespaces=("kubelet.kubernetes.io", "node.kubernetes.io"),
    taints_fixed_on_update=True,
    source="kubernetes plugin/pkg/admission/noderestriction/admission.go, k8s.io/kubelet pkg/apis/well_known_labels.go",
)


def _in(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def node_may_set_label(key: str, rule: NodeRestrictionRule = NODE_RESTRICTION) -> bool:
    namespace = key.split("/", 1)[0] if "/" in key else ""
    if _in(namespace, rule.forbidden_namespace):
        return False
    if any(_in(namespace, domain) for domain in rule.kubernetes_namespaces):
        return key in rule.kubelet_labels or any(_in(namespace, domain) for domain in rule.kubelet_namespaces)
    return True


@pytest.mark.parametrize(("key", "allowed"), [
    ("gpu", True),
    ("example.com/gpu", True),
    ("kubernetes.io/hostname", True),
    ("node.kubernetes.io/instance-type", True),
    ("pool.node.kubernetes.io/name", True),
    ("kubelet.kubernetes.io/anything", True),
    ("mykubernetes.io/role", True),  # a namespace that only ends in the letters is not Kubernetes'
    ("node-role.kubernetes.io/worker", False),
    ("kubernetes.io/role", False),
    ("k8s.io/anything", False),
    ("nvidia.k8s.io/gpu", False),
    ("node-restriction.kubernetes.io/pool", False),
    ("team.node-restriction.kubernetes.io/pool", False),
])
def test_the_rule_reads_as_node_restriction_does(key, allowed):
    assert node_may_set_label(key) is allowed


def kubelet_labels_of(plan_) -> dict[str, dict[str, str]]:
    """Node name -> the labels the lab has its kubelet register it with (join-worker.sh NODE_LABELS)."""
    labelled = {}
    for join in plan_.commands("join-worker.sh"):
        env = join.inputs["environment"]
        given = env.get("NODE_LABELS", "")
        labelled[env["NODE"]] = dict(pair.split("=", 1) for pair in given.split(",")) if given else {}
    return labelled


@pytest.mark.parametrize("gpus", ["mock", "real"])
def test_every_label_a_kubelet_registers_its_node_with_passes_node_restriction(machine_plan, up_plan, gpus):
    labelled = {**kubelet_labels_of(machine_plan(gpus, False)), **kubelet_labels_of(up_plan)}
    assert labelled, "the plans join workers"
    given = {key for labels in labelled.values() for key in labels}
    if gpus == "real":
        assert given, "real GPUs: the kubelet registers the label HAMi's NVIDIA plugin selects"
    assert {key for key in given if not node_may_set_label(key)} == set()


# --- register-gpus.sh: the worker's timer writes with the node's own credential ------------------------------


def node_writes(kubectl_calls: list[dict], kubelet_conf: str) -> list[dict]:
    """What each kubectl call made with the node's kubeconfig would change: which Node, and which of its
    labels, annotations, taints and status fields."""
    writes = []
    for call in kubectl_calls:
        argv = call["argv"]
        assert argv[0] == f"--kubeconfig={kubelet_conf}", "every call of the timer is the node's own"
        verb, kind, name, *rest = [arg for arg in argv[1:] if not arg.startswith("--request-timeout")]
        assert kind == "node"
        change = {"node": name, "labels": set(), "annotations": set(), "taints": False, "status": set()}
        if verb == "annotate":
            change["annotations"] = {arg.split("=", 1)[0] for arg in rest if "=" in arg and not arg.startswith("-")}
        elif verb == "label":
            change["labels"] = {arg.split("=", 1)[0].rstrip("-") for arg in rest if not arg.startswith("-")}
        elif verb == "taint":
            change["taints"] = True
        elif verb == "patch":
            status = "--subresource=status" in rest
            for operation in json.loads(rest[rest.index("-p") + 1]):
                part, _, field = operation["path"].strip("/").partition("/")
                # Through the status subresource the API server keeps the Node's spec and metadata.
                if part == "status":
                    change["status"].add(field)
                elif not status and part == "metadata" and field.startswith("labels/"):
                    change["labels"].add(field.removeprefix("labels/").replace("~1", "/"))
                elif not status and part == "spec" and field.startswith("taints"):
                    change["taints"] = True
        else:
            raise AssertionError(f"the timer makes a write this test does not model: {argv}")
        writes.append(change)
    return writes


def test_the_mock_gpu_registration_writes_only_what_node_restriction_lets_a_node_write(fakes, tmp_path):
    node_script = installed_register_script(fakes, tmp_path)
    fakes.on("kubectl", r" (annotate|label|taint|patch) node ", "")

    assert fakes.run(node_script).returncode == 0

    writes = node_writes(fakes.calls("kubectl"), "/etc/kubernetes/kubelet.conf")
    assert writes, "the timer writes"
    for write in writes:
        assert write["node"] == "w1", "a node may change only its own Node"
        assert {key for key in write["labels"] if not node_may_set_label(key)} == set()
        assert write["taints"] is False
    # What HAMi reads: the annotation and the capacity, both still written.
    assert {key for write in writes for key in write["annotations"]} == {"hami.io/node-nvidia-register"}
    assert {field for write in writes for field in write["status"]} == {"capacity/nvidia.com~1gpu"}
