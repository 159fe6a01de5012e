"""Reading kubeconfigs (YAML only): shared by the program, its config checks and the host-side tools."""

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


class NoSuchContext(ValueError):
    """The chosen context is not in the kubeconfig."""


def check_kubeconfig(text: str, context: str | None) -> None:
    """Raises ValueError (NoSuchContext for a wrong `context`) unless `text` reaches a cluster through
    `context`, else its current context. Messages never quote the text: it holds credentials."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ValueError("is not valid YAML (the value is not shown: it is a secret)") from None
    if not isinstance(config, dict):
        raise ValueError("is not a kubeconfig (the value is not shown: it is a secret)")
    contexts = {item.get("name"): item.get("context") or {} for item in config.get("contexts") or []}
    known = ", ".join(repr(name) for name in contexts) or "none"
    if context and context not in contexts:
        raise NoSuchContext(f"has no context {context!r} (its contexts: {known})")
    chosen = context or config.get("current-context")
    if chosen not in contexts:
        raise ValueError(f"names no current context (its contexts: {known}); choose one with managementContext")
    clusters = {item.get("name"): item.get("cluster") or {} for item in config.get("clusters") or []}
    if not clusters.get(contexts[chosen].get("cluster"), {}).get("server"):
        raise ValueError(f"context {chosen!r} names no cluster with a server")


def with_current_context(text: str, context: str | None) -> str:
    """The kubeconfig with `context` as its current context, so every reader of it uses that one."""
    if not context:
        return text
    return yaml.safe_dump({**yaml.safe_load(text), "current-context": context}, sort_keys=False)
