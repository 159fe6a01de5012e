"""Kubernetes' own JSON Schemas as the judge of objects and hand-made API answers.

PyPI's kubernetes-validate ships, per Kubernetes release, the JSON Schemas generated from its
OpenAPI; the "-strict" set refuses unknown fields. Its `validate()` reports only one problem and
reads the 1.6 MB definitions file on every call, so this module resolves versions as it does
(the newest shipped release not newer than the one asked for), builds each validator once, and
reports every problem with the path of the field, as `kubectl create --validate=strict` names it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import importlib_resources
import jsonschema
import kubernetes_validate
from kubernetes_validate.utils import all_versions
from referencing import Registry, Resource

# The release whose API the tests answer for: the lab's default kubernetesVersion (Pulumi.yaml).
CURRENT = "1.36.0"
_SCHEMAS = importlib_resources.files(kubernetes_validate) / "kubernetes-json-schema"


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


def path_text(path: Any) -> str:
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


def is_built_in(obj: dict[str, Any], version: str = CURRENT) -> bool:
    return _validator(schema_version(version), obj.get("apiVersion", ""), obj.get("kind", "")) is not None


def problems(obj: dict[str, Any], version: str = CURRENT) -> list[str]:
    """Why Kubernetes `version`'s schema refuses `obj` (strict: unknown fields too); empty when it takes it."""
    validator = _validator(schema_version(version), obj.get("apiVersion", ""), obj.get("kind", ""))
    if validator is None:
        return [f"{obj.get('apiVersion')} {obj.get('kind')}: not a built-in kind of Kubernetes {version}"]
    return sorted(set(_described(validator.iter_errors(obj))))


def _described(errors: Iterator[jsonschema.ValidationError]) -> Iterator[str]:
    for error in errors:
        where = list(error.absolute_path)
        if error.validator == "required":
            # jsonschema puts a missing field at its parent; name the field itself.
            for field in error.validator_value:
                if isinstance(error.instance, dict) and field not in error.instance:
                    yield f"{path_text([*where, field])}: required field missing"
        elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
            for field in sorted(set(error.instance) - set(error.schema.get("properties", {}))):
                yield f"{path_text([*where, field])}: unknown field"
        else:
            yield f"{path_text(where) or '(object)'}: {error.message}"
