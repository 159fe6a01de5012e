"""The objects the checks create: all small, labelled, and quick to delete."""

from __future__ import annotations

from typing import Any

MANAGED_BY = {"app.kubernetes.io/managed-by": "kamaji-hami-lab-validation"}
IMAGE = "busybox:1.36.1"


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": MANAGED_BY}}


def sleeper_pod(
    name: str,
    *,
    command: str = "sleep 3600",
    limits: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": IMAGE,
        "command": ["sh", "-c", command],
        # Meets the "restricted" Pod Security level, in case a tenant enforces it.
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if limits:
        container["resources"] = {"limits": limits}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": MANAGED_BY, "annotations": annotations or {}},
        "spec": {
            "containers": [container],
            "restartPolicy": "Never",
            # sh as PID 1 ignores SIGTERM; don't let every cleanup wait the default 30 s.
            "terminationGracePeriodSeconds": 1,
        },
    }


def gpu_pod(name: str, gpumem_mib: int, gpucores: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod asking HAMi for a slice of one GPU.

    It sets no nvidia.com/gpu on purpose: HAMi's webhook must add it, and must
    route the pod to hami-scheduler.
    """
    limits = {"nvidia.com/gpumem": str(gpumem_mib), "nvidia.com/gpucores": str(gpucores)}
    return sleeper_pod(name, limits=limits, annotations=annotations)


def resource_quota(name: str, hard: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "labels": MANAGED_BY},
        "spec": {"hard": hard},
    }
