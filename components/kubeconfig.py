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
