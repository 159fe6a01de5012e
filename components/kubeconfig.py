"""Reading a kubeconfig's current cluster; shared by the program and the host-side tools (YAML only)."""

from __future__ import annotations

from dataclasses import dataclass

import yaml


@dataclass(frozen=True)
class KubeconfigCluster:
    server: str
    ca_data: str
    """certificate-authority-data, base64 as written in the kubeconfig."""


def current_cluster(text: str) -> KubeconfigCluster:
    """The cluster the current context uses (else the first one); ValueError if the text is not YAML."""
    try:
        config = yaml.safe_load(text) or {}
    except yaml.YAMLError as problem:
        raise ValueError("kubeconfig is not valid YAML") from problem
    contexts = {item.get("name"): item.get("context") or {} for item in config.get("contexts") or []}
    clusters = {item.get("name"): item.get("cluster") or {} for item in config.get("clusters") or []}
    current = contexts.get(config.get("current-context"), {}).get("cluster")
    cluster = clusters.get(current) or next(iter(clusters.values()), {})
    return KubeconfigCluster(server=cluster.get("server", ""), ca_data=cluster.get("certificate-authority-data", ""))


def kubeconfig_problem(text: str, context: str | None) -> str | None:
    """Why `text` cannot reach a cluster through `context` (else its current context); None if it can.

    Never quotes the text: it holds credentials.
    """
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return "is not valid YAML (the value is not shown: it is a secret)"
    if not isinstance(config, dict):
        return "is not a kubeconfig (the value is not shown: it is a secret)"
    contexts = {item.get("name"): item.get("context") or {} for item in config.get("contexts") or []}
    chosen = context or config.get("current-context")
    if chosen not in contexts:
        known = ", ".join(repr(name) for name in contexts) or "none"
        return (
            f"has no context {chosen!r} (its contexts: {known})"
            if chosen
            else f"names no current-context (its contexts: {known}); set managementContext"
        )
    clusters = {item.get("name"): item.get("cluster") or {} for item in config.get("clusters") or []}
    if not clusters.get(contexts[chosen].get("cluster"), {}).get("server"):
        return f"context {chosen!r} names no cluster with a server"
    return None


def with_current_context(text: str, context: str | None) -> str:
    """The kubeconfig with `context` as its current context, so every reader of it uses that one."""
    if not context:
        return text
    return yaml.safe_dump({**yaml.safe_load(text), "current-context": context}, sort_keys=False)
