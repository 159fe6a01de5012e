"""Pydantic's findings rewritten as lines a user acts on: `<project>:<key path>: <problem>`."""

from __future__ import annotations

from collections.abc import Iterator
from difflib import get_close_matches
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from components.config.models import RULES_ERROR, StackConfig
from components.config.values import VALUE_ERROR, show

PROJECT = "kamaji-hami-lab"
# Top-level keys without a default, and what to do about a missing one.
_REQUIRED_HINTS = {"tenants": "set at least one tenant (see docs/configuration.md)"}

Loc = tuple[str | int, ...]


def problem_lines(invalid: ValidationError, root: type[BaseModel] = StackConfig) -> Iterator[str]:
    yield from _lines(invalid.errors(include_url=False), root)


def rules_held_back(invalid: ValidationError) -> bool:
    """Whether the stack's own rules, which join its keys, have not run yet.

    A model's rules run only once all its keys are valid, so any problem but the stack's own broken rules
    holds them back: a wrong value anywhere, or a tenant's or GPU's broken rule (an unknown GPU model).
    """
    return any(error["loc"] or error["type"] != RULES_ERROR for error in invalid.errors(include_url=False))


def _lines(errors: list[ErrorDetails], root: type[BaseModel], above: Loc = ()) -> Iterator[str]:
    for error in errors:
        loc = (*above, *error["loc"])
        if error["type"] == RULES_ERROR:  # pydantic's errors for the value, then its broken rules
            yield from _lines(error["ctx"]["errors"], root, loc)
            for below, message in error["ctx"]["problems"]:
                yield f"{key_path(_resolve(root, (*loc, *below))[0])}: {message}"
        else:
            path, models = _resolve(root, loc)
            if error["type"].startswith("union_tag_"):
                path = (*path, error["ctx"]["discriminator"].strip("'"))
            yield f"{key_path(path)}: {_describe({**error, 'loc': loc}, root, models)}"


def key_path(path: Loc) -> str:
    """('tenants', 1, 'gpus', 0, 'model') -> 'kamaji-hami-lab:tenants[1].gpus[0].model'."""
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
    return f"{PROJECT}:{text.lstrip('.')}"


def _describe(error: ErrorDetails, root: type[BaseModel], models: list[type[BaseModel]]) -> str:
    kind, loc, value, context = error["type"], error["loc"], error.get("input"), error.get("ctx", {})
    if kind == VALUE_ERROR:
        return error["msg"]
    if kind == "missing":
        hint = _REQUIRED_HINTS.get(loc[0]) if root is StackConfig and len(loc) == 1 else None
        for model in _resolve(root, loc[:-1])[1]:
            hint = hint or model.missing_hint(loc[-1], value)
        return f"required; {hint}" if hint else "required"
    if kind == "extra_forbidden":
        (model,) = _resolve(root, loc[:-1])[1]
        known = sorted(_keys(model))
        what, listed = ("unknown config key", "known") if len(loc) == 1 else ("unknown key", "allowed")
        return f"{what}{_did_you_mean(str(loc[-1]), known)} ({listed}: {', '.join(known)})"
    if kind in ("tuple_type", "list_type"):
        return f"expected a list of {' or '.join(model.noun for model in models)} objects, got {show(value)}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected an object, got {show(value)}"
    if kind == "string_type":
        return f"expected a string, got {show(value)}"
    expected = ", ".join(repr(tag) for model in models for tag in _tags(model))
    if kind == "union_tag_invalid":
        return f"{show(context['tag'])} is not one of {expected}"
    if kind == "union_tag_not_found":
        return f"required; one of {expected}"
    # A constraint without a message of its own: still keyed, in lower case.
    return f"{error['msg'][0].lower()}{error['msg'][1:]}, got {show(value)}"


def _did_you_mean(key: str, known: list[str]) -> str:
    """'; did you mean <the closest known key>?', or nothing when none is close; case is ignored."""
    by_lower = {name.lower(): name for name in known}
    close = get_close_matches(key.lower(), by_lower, n=1)
    return f"; did you mean {by_lower[close[0]]!r}?" if close else ""


def _resolve(root: type[BaseModel], loc: Loc) -> tuple[Loc, list[type[BaseModel]]]:
    """The key path as users write it, and the models that may validate the object at `loc`.

    Pydantic puts the tag of a discriminated union into `loc` (workers.machine.host);
    users wrote no such key, so it is dropped from the path.
    """
    path: list[str | int] = []
    models = [root]
    for part in loc:
        if isinstance(part, int):
            path.append(part)
            continue
        fields = [f for model in models for name, f in model.model_fields.items() if (f.alias or name) == part]
        tagged = [model for model in models if part in _tags(model)]
        if tagged and not fields:  # a union tag: it picks the member
            models = tagged
            continue
        path.append(part)
        models = _models_in(fields[0].annotation) if fields else []
    return tuple(path), models


def _keys(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in _models_in(arg)]


def _tags(model: type[BaseModel]) -> list[Any]:
    """A union member's tags: the values of its Literal fields."""
    return [tag for field in model.model_fields.values() if get_origin(field.annotation) is Literal
            for tag in get_args(field.annotation)]
