"""The hand-made API answers under tests/fixtures/ are ones Kubernetes v1.36 could return: its own schemas say so.

Every object of a built-in kind (each item of a List too) is judged by the strict v1.36.0 JSON Schemas that
kubernetes-validate ships, a custom resource by its CRD's schema at the pinned version (tests/fixtures/crds/):
a field they do not know, a value of the wrong type, or a required field the fixture lacks fails the test,
naming the fixture, the object and the path of the field.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.kube_schemas import CURRENT, as_json_schema, is_built_in, problems, schema_version, shipped_minors

FIXTURES = Path(__file__).parent / "fixtures"


def answers() -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, object) of every object in a fixture, each item of a List on its own."""
    for path in sorted(FIXTURES.rglob("*.json")):
        document = json.loads(path.read_text())
        if not isinstance(document, dict) or "kind" not in document:
            continue  # stack outputs, /version and CRD schemas are not API objects
        name = path.relative_to(FIXTURES).as_posix()
        if document["kind"] == "List":
            for index, item in enumerate(document["items"]):
                yield f"{name} items[{index}] {item['kind']}/{item['metadata']['name']}", item
        else:
            yield f"{name} {document['kind']}/{document['metadata']['name']}", document


ANSWERS = dict(answers())


def verdict(label: str, obj: dict[str, Any]) -> list[str]:
    return [f"{label}: {problem}" for problem in problems(obj, CURRENT)]


@pytest.mark.parametrize("label", list(ANSWERS))
def test_every_hand_made_answer_is_one_kubernetes_v1_36_and_the_pinned_crds_accept(label):
    assert verdict(label, ANSWERS[label]) == []


def test_the_fixtures_hold_answers_of_each_kind_the_code_reads():
    built_in = {(obj["apiVersion"], obj["kind"]) for obj in ANSWERS.values() if is_built_in(obj)}
    custom = {(obj["apiVersion"], obj["kind"]) for obj in ANSWERS.values() if not is_built_in(obj)}
    assert custom == {
        ("kamaji.clastix.io/v1alpha1", "TenantControlPlane"),
        ("kamaji.clastix.io/v1alpha1", "DataStore"),
        ("cert-manager.io/v1", "Issuer"),
    }
    assert built_in >= {
        ("v1", "Node"),
        ("v1", "Pod"),
        ("v1", "Event"),
        ("v1", "ResourceQuota"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "DaemonSet"),
        ("discovery.k8s.io/v1", "EndpointSlice"),
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
    }


@dataclass(frozen=True)
class Absent:
    fixture: str
    path: str
    """Dotted path below the fixture's document, e.g. items[1].count."""
    reason: str


# Fields a v1.36 answer may lack, left out of a fixture on purpose. JSON has no comments, so the reason
# lives here; each must be absent, and the fixture must still validate (the schema lets it be absent).
ABSENT = (
    Absent("validation/events-oversized.json", "items[1].count",
           "written through events.k8s.io/v1 (the kube-scheduler's recorder), read through core/v1: no count"),
    Absent("validation/events-oversized.json", "items[1].source.component",
           "events.k8s.io/v1 events name reportingComponent instead; the suite must read that"),
    Absent("validation/pod-oversized-pending.json", "spec.nodeName", "the pod fits no GPU, so it is never bound"),
    Absent("validation/pod-oversized-pending.json", "status.containerStatuses",
           "no kubelet has seen the unscheduled pod"),
    Absent("validation/pod-dry-run-mutated.json", "spec.nodeName", "a server-side dry run binds nothing"),
    Absent("validation/pod-dry-run-mutated.json", "status.conditions", "a dry-run pod is never scheduled"),
)


def _at(document: Any, path: str) -> tuple[Any, Any, str]:
    """The object judged (a List's item, or the document), the parent of the path's last field, and that field."""
    *steps, field = path.split(".")
    judged = node = document
    for step in steps:
        key, _, index = step.partition("[")
        node = node[key]
        if index:
            node = node[int(index.rstrip("]"))]
            judged = node if key == "items" and judged is document else judged
    return judged, node, field


@pytest.mark.parametrize("absent", ABSENT, ids=lambda a: f"{a.fixture}:{a.path}")
def test_a_field_left_out_on_purpose_is_absent_and_one_the_schema_lets_be_absent(absent):
    judged, parent, field = _at(json.loads((FIXTURES / absent.fixture).read_text()), absent.path)
    assert field not in parent, f"{absent.fixture}: {absent.path} is present; drop it from ABSENT"
    assert problems(judged, CURRENT) == []


# --- a broken answer fails, naming the path of the bad field -------------------------------------


def broken(label: str) -> dict[str, Any]:
    return copy.deepcopy(ANSWERS[label])


def only(label_part: str) -> str:
    (label,) = [label for label in ANSWERS if label_part in label]
    return label


def test_an_unknown_field_fails_with_its_path():
    pod = broken(only("pod-probe-running.json"))
    pod["spec"]["containers"][0]["imagePullSecret"] = "regcred"  # imagePullSecrets lives on the pod spec
    pod["status"]["hostIp"] = "172.18.0.3"

    assert problems(pod, CURRENT) == [
        "spec.containers[0].imagePullSecret: unknown field",
        "status.hostIp: unknown field",
    ]


def test_a_missing_required_field_fails_with_its_path():
    pod = broken(only("pod-probe-running.json"))
    del pod["status"]["containerStatuses"][0]["imageID"]
    del pod["spec"]["containers"]

    assert problems(pod, CURRENT) == [
        "spec.containers: required field missing",
        "status.containerStatuses[0].imageID: required field missing",
    ]


def test_a_value_of_the_wrong_type_fails_with_its_path():
    node = broken(only("validation/nodes-tenant-a.json"))
    node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] = "10250"

    (problem,) = problems(node, CURRENT)
    assert problem.startswith("status.daemonEndpoints.kubeletEndpoint.Port: '10250' is not of type 'integer'")


def test_a_broken_list_item_is_named_by_its_fixture_and_index():
    label = only("pods-sharing-running.json items[1]")
    pod = broken(label)
    pod["spec"]["containers"][0]["resources"]["limit"] = {"nvidia.com/gpumem": "4096"}

    assert verdict(label, pod) == [
        "validation/pods-sharing-running.json items[1] Pod/share-1: spec.containers[0].resources.limit: unknown field"
    ]


def test_a_custom_resource_that_breaks_its_crd_fails_with_the_paths():
    tcp = broken(only("validation/tcp-tenant-a.json"))
    tcp["spec"]["addons"]["konectivity"] = tcp["spec"]["addons"].pop("konnectivity")  # the API server prunes it
    del tcp["spec"]["kubernetes"]["version"]
    tcp["status"]["kubernetesResources"]["version"]["status"] = "Healthy"
    store = broken(only("datastore-default.json"))
    del store["spec"]["driver"]
    store["metadata"]["label"] = {}

    assert problems(tcp, CURRENT) == [
        "spec.addons.konectivity: unknown field",
        "spec.kubernetes.version: required field missing",
        "status.kubernetesResources.version.status: 'Healthy' is not one of ['Unknown', 'Provisioning', "
        "'CertificateAuthorityRotating', 'Upgrading', 'Migrating', 'Ready', 'NotReady', 'Sleeping', 'WriteLimited']",
    ]
    assert problems(store, CURRENT) == ["metadata.label: unknown field", "spec.driver: required field missing"]


def test_an_object_no_schema_here_knows_is_refused_not_passed():
    assert problems({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}, CURRENT) == [
        "example.com/v1 Widget: neither a kind of Kubernetes 1.36.0 nor a known CRD"
    ]


def test_a_crd_schema_is_read_as_the_api_server_reads_it():
    structural = {
        "type": "object",
        "properties": {
            "port": {"x-kubernetes-int-or-string": True},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "note": {"type": "string", "nullable": True},
            "pruned": {"type": "object", "properties": {"known": {"type": "string"}}},
        },
    }
    validator = jsonschema.Draft202012Validator(as_json_schema(structural))
    taken = {"port": "https", "extra": {"anything": [1]}, "labels": {"a": "b"}, "note": None, "pruned": {"known": "x"}}

    assert list(validator.iter_errors(taken)) == []
    assert validator.is_valid({"port": 8132})
    assert not validator.is_valid({"port": 1.5})
    assert not validator.is_valid({"labels": {"a": 1}})
    assert not validator.is_valid({"pruned": {"unknown": "x"}}), "a field the API server would prune"
    assert not validator.is_valid({"typo": 1})


# --- which release's schemas judge which version ---------------------------------------------------


def test_a_version_is_judged_by_the_newest_shipped_release_not_newer_than_it():
    assert schema_version("v1.36.4") == "1.36.0"
    assert schema_version("v1.31.12") == "1.31.0"
    newest = shipped_minors()[-1]
    assert schema_version(f"v{newest[0]}.{newest[1] + 3}.0") == f"{newest[0]}.{newest[1]}.0"
    with pytest.raises(ValueError, match="no schemas as old as v1.2.0"):
        schema_version("v1.2.0")
