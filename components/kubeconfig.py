"""Reading kubeconfigs (YAML only): shared by the program, its config checks and the host-side tools.

A kubeconfig is outside input: any shape it has is refused with a ValueError, never a traceback.
Messages never quote the text: it holds credentials.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml


@dataclass(frozen=True)
class KubeconfigCluster:
    server: str
    ca_data: str
    """certificate-authority-data, base64 as written in the kubeconfig."""


_NOT_YAML = "is not valid YAML (the value is not shown: it is a secret)"


def _loaded(text: str, not_yaml: str = _NOT_YAML) -> dict[str, Any]:
    try:
        config = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        raise ValueError(not_yaml) from None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ValueError("is not a kubeconfig (the value is not shown: it is a secret)")
    return config


def _named(config: dict[str, Any], key: str, inner: str) -> dict[Any, dict[str, Any]]:
    """`contexts` or `clusters`: a list of {name, <inner>: object}, by name; ValueError for any other shape."""
    items = config.get(key) or []
    if not isinstance(items, list):
        raise ValueError(f"has {key} that are not a list (the value is not shown: it is a secret)")
    found = {}
    for index, item in enumerate(items):
        body = item.get(inner) if isinstance(item, dict) else None
        # A name is text (or missing); a list or map as one could not even be looked up.
        if not isinstance(item, dict) or not isinstance(body, dict | None) or \
                not isinstance(item.get("name"), str | None):
            raise ValueError(f"has {key}[{index}] that is not an object with a name and a {inner} object "
                             "(the value is not shown: it is a secret)")
        found[item.get("name")] = body or {}
    return found


def current_cluster(text: str) -> KubeconfigCluster:
    """The cluster the current context uses (else the first one); ValueError unless the text is a kubeconfig."""
    config = _loaded(text, "kubeconfig is not valid YAML")
    contexts, clusters = _named(config, "contexts", "context"), _named(config, "clusters", "cluster")
    current = contexts.get(_hashable(config.get("current-context")), {}).get("cluster")
    cluster = clusters.get(_hashable(current)) or next(iter(clusters.values()), {})
    ca_data = _text(cluster.get("certificate-authority-data"))
    return KubeconfigCluster(server=_text(cluster.get("server")), ca_data=ca_data)


class NoSuchContext(ValueError):
    """The chosen context is not in the kubeconfig."""


def check_kubeconfig(text: str, context: str | None) -> None:
    """Raises ValueError (NoSuchContext for a wrong `context`) unless `text` reaches a cluster through
    `context`, else its current context."""
    config = _loaded(text)
    contexts = _named(config, "contexts", "context")
    known = ", ".join(repr(name) for name in contexts if isinstance(name, str)) or "none"
    if context and context not in contexts:
        raise NoSuchContext(f"has no context {_short(context)} (its contexts: {known})")
    chosen = context or _hashable(config.get("current-context"))
    if not isinstance(chosen, str) or chosen not in contexts:
        raise ValueError(f"names no current context (its contexts: {known}); choose one with managementContext")
    clusters = _named(config, "clusters", "cluster")
    if not _text(clusters.get(_hashable(contexts[chosen].get("cluster")), {}).get("server")):
        raise ValueError(f"context {chosen!r} names no cluster with a server")


def with_current_context(text: str, context: str | None) -> str:
    """The kubeconfig with `context` as its current context, so every reader of it uses that one."""
    if not context:
        return text
    return yaml.safe_dump({**_loaded(text), "current-context": context}, sort_keys=False)


def _hashable(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | None) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _short(name: str) -> str:
    return repr(name) if len(name) <= 80 else f"{name[:60]!r}… ({len(name)} characters)"
