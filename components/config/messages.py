"""Pydantic's findings rewritten as lines a user acts on: `<project>:<key path>: <problem>`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from components.config.models import RULES_ERROR, VALUE_ERROR, StackConfig, show

PROJECT = "kamaji-hami-lab"
# Top-level keys without a default, and what to do about a missing one.
_REQUIRED_HINTS = {"tenants": "set at least one tenant (see README, 'Configuration')"}


def problem_lines(invalid: ValidationError) -> Iterator[str]:
    for error in invalid.errors(include_url=False):
        if error["type"] == RULES_ERROR:
            for below, message in error["ctx"]["problems"]:
                yield f"{key_path((*error['loc'], *below))}: {message}"
        else:
            yield f"{key_path(error['loc'])}: {_describe(error)}"


def key_path(loc: tuple[str | int, ...]) -> str:
    """('tenants', 1, 'gpus', 0, 'model') -> 'kamaji-hami-lab:tenants[1].gpus[0].model'."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return f"{PROJECT}:{path.lstrip('.')}"


def _describe(error: ErrorDetails) -> str:
    kind, loc, value = error["type"], error["loc"], error.get("input")
    if kind == VALUE_ERROR:
        return error["msg"]
    if kind == "missing":
        hint = _REQUIRED_HINTS.get(loc[0]) if len(loc) == 1 else None
        return f"required; {hint}" if hint else "required"
    if kind == "extra_forbidden":
        if len(loc) == 1:
            return f"unknown config key (known: {', '.join(_keys(StackConfig))})"
        return f"unknown key (allowed: {', '.join(sorted(_keys(_model_at(loc[:-1]))))})"
    if kind in ("tuple_type", "list_type"):
        return f"expected a list of {_model_at((*loc, 0)).noun} objects, got {show(value)}"
    if kind == "model_type":
        return f"expected an object, got {show(value)}"
    # A constraint without a message of its own; still keyed, never pydantic's raw loc.
    return f"{error['msg'][0].lower()}{error['msg'][1:]}, got {show(value)}"


def _keys(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel]:
    """The model validating the object at `loc` (list indexes step into the item type)."""
    model = StackConfig
    for part in loc:
        if isinstance(part, int):
            continue
        (field,) = (f for name, f in model.model_fields.items() if (f.alias or name) == part)
        model = _inner_model(field.annotation)
    return model


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for arg in get_args(annotation) if (m := _inner_model(arg)) is not None), None)
