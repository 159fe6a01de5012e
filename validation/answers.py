"""Reading what an API server answered: every field type-checked where it is read.

A field the API may leave out, or send as null, reads as empty. A field of the wrong type, or one
every object of its kind has (a listed object's metadata), makes the answer malformed: the caller
gets MalformedAnswer, a CheckFailed whose message names the field, never a TypeError or KeyError.
Anyone allowed to patch an object (a tenant admin patching its node) can write such an answer.
"""

from __future__ import annotations

from typing import Any

from validation.results import CheckFailed


class MalformedAnswer(CheckFailed):
    """The API answered, but not in the shape its type has."""


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number" if isinstance(value, int | float) else type(value).__name__
    )


def listed(answer: Any, what: str) -> list[dict[str, Any]]:
    """The items of a `kubectl get -o json` list, each one an object."""
    found = answer.get("items") if isinstance(answer, dict) else None
    if not isinstance(found, list):
        shown = _kind(answer) if not isinstance(answer, dict) else f"items {_kind(found)}"
        raise MalformedAnswer(f"{what}: expected a list of items, got {shown}")
    for position, item in enumerate(found):
        if not isinstance(item, dict):
            raise MalformedAnswer(f"{what}: item {position} is {_kind(item)}, not an object")
    return found


def one_object(answer: Any, what: str) -> dict[str, Any]:
    """What `kubectl get TYPE NAME -o json` printed: one object, never a list (kind List, or items) nor a
    bare value. Such an answer will not turn into the object by asking again, so the caller stops at once."""
    if not isinstance(answer, dict):
        raise MalformedAnswer(f"{what}: expected an object, got {_kind(answer)}")
    kind = answer.get("kind")
    if "items" in answer or (isinstance(kind, str) and kind.endswith("List")):
        raise MalformedAnswer(f"{what}: expected one object, got a list")
    if kind is not None and not isinstance(kind, str):
        raise MalformedAnswer(f"{what}: kind is {_kind(kind)}, not a string")
    return answer


def mapping(obj: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """obj[key] as an object; {} when absent or null."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedAnswer(f"{where}: {key} is {_kind(value)}, not an object")
    return value


def sequence(obj: dict[str, Any], key: str, where: str) -> list[Any]:
    """obj[key] as a list; [] when absent or null."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedAnswer(f"{where}: {key} is {_kind(value)}, not a list")
    return value


def objects(obj: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    """obj[key] as a list of objects; [] when absent or null."""
    found = sequence(obj, key, where)
    for position, item in enumerate(found):
        if not isinstance(item, dict):
            raise MalformedAnswer(f"{where}: {key}[{position}] is {_kind(item)}, not an object")
    return found


def text(obj: dict[str, Any], key: str, where: str) -> str:
    """obj[key] as a string; "" when absent or null."""
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedAnswer(f"{where}: {key} is {_kind(value)}, not a string")
    return value


def metadata(obj: dict[str, Any], where: str) -> dict[str, Any]:
    """An object's metadata, which every object the API lists has."""
    found = obj.get("metadata")
    if not isinstance(found, dict):
        raise MalformedAnswer(f"{where}: {'no metadata' if found is None else 'metadata is not an object'}")
    return found


def named(obj: dict[str, Any], where: str, namespaced: bool = False) -> tuple[str, str]:
    """(namespace, name) of a listed object; the namespace is "" for a cluster-scoped one."""
    meta = metadata(obj, where)
    name, namespace = text(meta, "name", where), text(meta, "namespace", where)
    if not name or (namespaced and not namespace):
        raise MalformedAnswer(f"{where}: metadata has no {'name' if not name else 'namespace'}")
    return namespace, name


def annotations(obj: dict[str, Any], where: str) -> dict[str, str]:
    """An object's annotations; every value a string, as the API stores them."""
    found = mapping(metadata(obj, where), "annotations", where)
    for key, value in found.items():
        if not isinstance(value, str):
            raise MalformedAnswer(f"{where}: annotation {key} is {_kind(value)}, not a string")
    return found
