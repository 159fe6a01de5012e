"""What an API server would refuse in the objects the validation suite creates.

Fields and types of the kinds the suite creates, from the Kubernetes API reference for v1.36
(kubernetes.io/docs/reference/kubernetes-api/: Namespace, ConfigMap, Secret, ResourceQuota, Pod with
PodSpec, Container, SecurityContext, PodSecurityContext, VolumeMount and the projected and hostPath Volumes)
and cert-manager's API reference (cert-manager.io/v1 Issuer, spec.selfSigned), narrowed to
what the suite uses. A field outside this table is refused as
`kubectl create --validate=strict` refuses an unknown field, a value of another type as the
API server's decoding does, and a missing required field as Pod validation does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ListOf:
    item: Any


@dataclass(frozen=True)
class MapOf:
    value: Any


@dataclass(frozen=True)
class OneOf:
    values: tuple[str, ...]


@dataclass(frozen=True)
class Label:
    """A DNS-1123 label, as container and volume names must be (kubernetes pkg/apis/core/validation)."""


@dataclass(frozen=True)
class Fields:
    fields: dict[str, Any]
    required: tuple[str, ...] = ()


QUANTITIES = MapOf(str)  # a resource list: quantities as strings
OBJECT_META = Fields(
    {"name": str, "namespace": str, "labels": MapOf(str), "annotations": MapOf(str)}, required=("name",)
)
SECCOMP_PROFILE = Fields(
    {"type": OneOf(("RuntimeDefault", "Localhost", "Unconfined")), "localhostProfile": str}, required=("type",)
)
SECURITY_CONTEXT = Fields(
    {
        "allowPrivilegeEscalation": bool,
        "capabilities": Fields({"add": ListOf(str), "drop": ListOf(str)}),
        "privileged": bool,
        "readOnlyRootFilesystem": bool,
        "runAsGroup": int,
        "runAsNonRoot": bool,
        "runAsUser": int,
        "seccompProfile": SECCOMP_PROFILE,
    }
)
CONTAINER = Fields(
    {
        "name": Label(),
        "image": str,
        "command": ListOf(str),
        "args": ListOf(str),
        "resources": Fields({"limits": QUANTITIES, "requests": QUANTITIES}),
        "securityContext": SECURITY_CONTEXT,
        "volumeMounts": ListOf(
            Fields(
                {"name": Label(), "mountPath": str, "readOnly": bool, "subPath": str}, required=("name", "mountPath")
            )
        ),
    },
    required=("name", "image"),
)
PROJECTED_SECRET = Fields(
    {"name": str, "optional": bool, "items": ListOf(Fields({"key": str, "path": str, "mode": int}, ("key", "path")))}
)
VOLUME = Fields(
    {
        "name": Label(),
        "projected": Fields({"defaultMode": int, "sources": ListOf(Fields({"secret": PROJECTED_SECRET}))}),
        "hostPath": Fields({"path": str, "type": str}, required=("path",)),
    },
    required=("name",),
)
POD_SPEC = Fields(
    {
        "containers": ListOf(CONTAINER),
        "restartPolicy": OneOf(("Always", "OnFailure", "Never")),
        "terminationGracePeriodSeconds": int,
        "hostNetwork": bool,
        "securityContext": Fields(
            {
                "fsGroup": int,
                "runAsGroup": int,
                "runAsNonRoot": bool,
                "runAsUser": int,
                "seccompProfile": SECCOMP_PROFILE,
            }
        ),
        "volumes": ListOf(VOLUME),
    },
    required=("containers",),
)
KINDS = {
    ("v1", "Namespace"): Fields({"metadata": OBJECT_META}, required=("metadata",)),
    ("v1", "ConfigMap"): Fields({"metadata": OBJECT_META, "data": MapOf(str)}, required=("metadata",)),
    # Secret: type is a string, data maps keys to base64 strings.
    ("v1", "Secret"): Fields({"metadata": OBJECT_META, "type": str, "data": MapOf(str)}, required=("metadata",)),
    ("v1", "ResourceQuota"): Fields(
        {"metadata": OBJECT_META, "spec": Fields({"hard": QUANTITIES})}, required=("metadata",)
    ),
    ("v1", "Pod"): Fields({"metadata": OBJECT_META, "spec": POD_SPEC}, required=("metadata", "spec")),
    ("cert-manager.io/v1", "Issuer"): Fields(
        {"metadata": OBJECT_META, "spec": Fields({"selfSigned": Fields({})})}, required=("metadata", "spec")
    ),
}


def is_label(value: Any) -> bool:
    """A DNS-1123 label: what the API server takes as a container's or a volume's name."""
    return isinstance(value, str) and len(value) <= 63 and bool(re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", value))


def refusals(manifest: Any) -> list[str]:
    """Why an API server would refuse this object; empty when it would take it."""
    kind = (manifest.get("apiVersion"), manifest.get("kind")) if isinstance(manifest, dict) else None
    if kind not in KINDS:
        return [f"not an object of a kind the suite creates: {str(manifest)[:80]}"]
    body = {key: value for key, value in manifest.items() if key not in ("apiVersion", "kind")}
    return list(_problems(body, KINDS[kind], kind[1]))


def _problems(value: Any, schema: Any, path: str) -> Iterator[str]:
    if isinstance(schema, Fields):
        if not isinstance(value, dict):
            yield f"{path}: expected an object, got {value!r}"
            return
        for key in schema.required:
            if value.get(key) in (None, "", []):
                yield f"{path}.{key}: required value"
        for key, item in value.items():
            if key not in schema.fields:
                yield f"{path}.{key}: unknown field"
            else:
                yield from _problems(item, schema.fields[key], f"{path}.{key}")
    elif isinstance(schema, ListOf | MapOf):
        container = list if isinstance(schema, ListOf) else dict
        if not isinstance(value, container):
            yield f"{path}: expected a {container.__name__}, got {value!r}"
            return
        items = enumerate(value) if isinstance(schema, ListOf) else value.items()
        inner = schema.item if isinstance(schema, ListOf) else schema.value
        for key, item in items:
            yield from _problems(item, inner, f"{path}[{key}]")
    elif isinstance(schema, Label):
        if not is_label(value):
            yield f"{path}: {value!r} is not a DNS-1123 label"
    elif isinstance(schema, OneOf):
        if value not in schema.values:
            yield f"{path}: {value!r} is not one of {', '.join(schema.values)}"
    # bool is an int in Python but not in JSON: a boolean where a number belongs is refused.
    elif not isinstance(value, schema) or (schema is int and isinstance(value, bool)):
        yield f"{path}: expected {schema.__name__}, got {value!r}"
