"""Kubernetes' own JSON Schemas, and the CRDs' schemas, as the judge of objects and hand-made API answers.

PyPI's kubernetes-validate ships, per Kubernetes release, the JSON Schemas generated from its
OpenAPI; the "-strict" set refuses unknown fields. Its `validate()` reports only one problem and
reads the 1.6 MB definitions file on every call, so this module resolves versions as it does
(the newest shipped release not newer than the one asked for), builds each validator once, and
reports every problem with the path of the field, as `kubectl create --validate=strict` names it.

A custom resource is judged by its CRD's structural schema (tests/fixtures/crds/, see its README),
read as JSON Schema: closed where the API server would prune an unknown field, its metadata judged
as the release's ObjectMeta. CEL rules (x-kubernetes-validations) are not evaluated.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
from kubernetes_validate.utils import all_versions
from referencing import Registry, Resource

# The release whose API the tests answer for: the lab's default kubernetesVersion (Pulumi.yaml).
CURRENT = "1.36.0"
_SCHEMAS = resources.files(kubernetes_validate) / "kubernetes-json-schema"
_CRDS = Path(__file__).resolve().parent / "fixtures" / "crds"
# Custom resources the lab creates or reads, and the file holding their CRD's schema at the pinned version.
CUSTOM_RESOURCES = {
    ("kamaji.clastix.io/v1alpha1", "TenantControlPlane"): "tenantcontrolplanes.kamaji.clastix.io-v1alpha1",
    ("kamaji.clastix.io/v1alpha1", "DataStore"): "datastores.kamaji.clastix.io-v1alpha1",
    ("metallb.io/v1beta1", "IPAddressPool"): "ipaddresspools.metallb.io-v1beta1",
    ("metallb.io/v1beta1", "L2Advertisement"): "l2advertisements.metallb.io-v1beta1",
    ("cert-manager.io/v1", "Issuer"): "issuers.cert-manager.io-v1",
}
_OBJECT_META = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def minor(version: str) -> tuple[int, int]:
    major, minor_, *_ = version.lstrip("v").split(".")
    return int(major), int(minor_)


def shipped_minors() -> list[tuple[int, int]]:
    return sorted({minor(version) for version in all_versions()})


def schema_version(version: str) -> str:
    """The release whose schemas judge `version`: the newest shipped one not newer than it."""
    candidates = [found for found in shipped_minors() if found <= minor(version)]
    if not candidates:
        raise ValueError(f"kubernetes-validate ships no schemas as old as {version}")
    return "{}.{}.0".format(*candidates[-1])


def _path_text(path: Any) -> str:
    """A JSON path as kubectl prints it: spec.containers[0].image."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


@functools.cache
def _definitions(version: str) -> Registry:
    contents = json.loads((_SCHEMAS / f"v{version}-local-strict" / "_definitions.json").read_text())
    return Resource.from_contents(contents) @ Registry()


@functools.cache
def _validator(version: str, api_version: str, kind: str) -> jsonschema.Draft202012Validator | None:
    # kubernetes-validate's file names: rbac.authorization.k8s.io/v1 Role -> role-rbac-v1.json.
    group, _, group_version = api_version.rpartition("/")
    name = f"{kind.lower()}-{group.split('.')[0] + '-' if group else ''}{group_version}.json"
    file = _SCHEMAS / f"v{version}-local-strict" / name
    if not file.is_file():
        return None
    schema = json.loads(file.read_text())
    return jsonschema.Draft202012Validator(schema, registry=Resource.from_contents(schema) @ _definitions(version))


def _crd_schema(name: str) -> dict[str, Any]:
    """A CRD version's structural schema, as stored in tests/fixtures/crds/."""
    return json.loads((_CRDS / f"{name}.schema.json").read_text())


def as_json_schema(node: dict[str, Any]) -> dict[str, Any]:
    """A structural schema (OpenAPI v3, as a CRD holds it) as JSON Schema, closed where the API server prunes."""
    converted = {key: value for key, value in node.items() if not key.startswith("x-kubernetes-") and key not in (
        "nullable", "properties", "items", "additionalProperties", "allOf", "anyOf", "oneOf", "not")}
    if "properties" in node:
        converted["properties"] = {key: as_json_schema(value) for key, value in node["properties"].items()}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            converted[key] = as_json_schema(node[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in node:
            converted[key] = [as_json_schema(item) for item in node[key]]
    open_object = node.get("x-kubernetes-preserve-unknown-fields") or node.get("x-kubernetes-embedded-resource")
    if node.get("type") == "object" and "additionalProperties" not in node and not open_object:
        converted["additionalProperties"] = False  # the API server would silently drop an unknown field
    if node.get("x-kubernetes-int-or-string"):
        converted["type"] = ["integer", "string"]
    if node.get("nullable") and "type" in converted:
        types = converted["type"]
        converted["type"] = [*([types] if isinstance(types, str) else types), "null"]
    return converted


@functools.cache
def _custom_validator(version: str, api_version: str, kind: str) -> jsonschema.Draft202012Validator | None:
    name = CUSTOM_RESOURCES.get((api_version, kind))
    if name is None:
        return None
    schema = as_json_schema(_crd_schema(name))
    schema["properties"]["metadata"] = {"$ref": _OBJECT_META}
    return jsonschema.Draft202012Validator(schema, registry=_definitions(version))


def _any_validator(obj: dict[str, Any], version: str) -> jsonschema.Draft202012Validator | None:
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    resolved = schema_version(version)
    return _validator(resolved, api_version, kind) or _custom_validator(resolved, api_version, kind)


def is_built_in(obj: dict[str, Any], version: str = CURRENT) -> bool:
    return _validator(schema_version(version), obj.get("apiVersion", ""), obj.get("kind", "")) is not None


def problems(obj: dict[str, Any], version: str = CURRENT) -> list[str]:
    """Why Kubernetes `version`'s schema (or the CRD's) refuses `obj`, unknown fields too; empty when it takes it."""
    validator = _any_validator(obj, version)
    if validator is None:
        return [f"{obj.get('apiVersion')} {obj.get('kind')}: neither a kind of Kubernetes {version} nor a known CRD"]
    return sorted(set(_described(validator.iter_errors(obj))))


def _described(errors: Iterator[jsonschema.ValidationError]) -> Iterator[str]:
    for error in errors:
        where = list(error.absolute_path)
        if error.validator == "required":
            # jsonschema puts a missing field at its parent; name the field itself.
            for field in error.validator_value:
                if isinstance(error.instance, dict) and field not in error.instance:
                    yield f"{_path_text([*where, field])}: required field missing"
        elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
            for field in sorted(set(error.instance) - set(error.schema.get("properties", {}))):
                yield f"{_path_text([*where, field])}: unknown field"
        else:
            yield f"{_path_text(where) or '(object)'}: {error.message}"
