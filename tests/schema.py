"""A small structural-schema checker for Kubernetes custom resources.

The API server prunes unknown fields of a structural schema without an error,
so a misspelt field in a TenantControlPlane would silently do nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures"
_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "number": (int, float)}


def load_schema(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def violations(value: Any, schema: dict, path: str = "spec") -> list[str]:
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        return []
    expected = schema.get("type")
    if expected and not _is_type(value, expected):
        return [f"{path}: expected {expected}, got {value!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} is not one of {schema['enum']}"]
    found = []
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for missing in set(schema.get("required", [])) - set(value):
            found.append(f"{path}.{missing}: required")
        for key, item in value.items():
            if key in properties:
                found += violations(item, properties[key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                found += violations(item, schema["additionalProperties"], f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                found.append(f"{path}.{key}: unknown field (the API server would drop it)")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            found.append(f"{path}: {len(value)} items is outside the allowed count")
        for index, item in enumerate(value):
            found += violations(item, schema.get("items", {}), f"{path}[{index}]")
    return found


def _is_type(value: Any, expected: str) -> bool:
    if expected in ("integer", "number") and isinstance(value, bool):
        return False
    if expected == "integer":
        # Pulumi carries every number as a double; whole ones reach the API server as integers.
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return isinstance(value, _TYPES[expected])
