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


def config_map(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": MANAGED_BY}, "data": data}


def certificate_copy(name: str, key: str, encoded: str) -> dict[str, Any]:
    """A Secret holding one public certificate (base64, as the Secret it was copied from holds it)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "labels": MANAGED_BY},
        "type": "Opaque",
        "data": {key: encoded},
    }


# Where etcdctl pods find their client certificate: file names, not contents, reach argv.
ETCD_CERT_DIR = "/etc/etcd-client"
ETCD_CA, ETCD_CERT, ETCD_KEY = "ca.crt", "client.crt", "client.key"
# etcd-io/etcd Dockerfile (distroless, no shell): the binaries are added to /usr/local/bin.
ETCDCTL = "/usr/local/bin/etcdctl"


def etcdctl_pod(
    name: str, image: str, endpoints: str, files: dict[tuple[str, str], str], commands: dict[str, list[str]]
) -> dict[str, Any]:
    """A pod whose containers each run one etcdctl command (its arguments after the connection flags), then exit.

    files maps (secret name, key in the secret) to the file name etcdctl reads
    (ETCD_CA, ETCD_CERT, ETCD_KEY); only those keys are mounted, so a CA's
    private key stored beside its certificate stays out of the pod.
    """
    sources: dict[str, list[dict[str, str]]] = {}
    for (secret, key), path in files.items():
        sources.setdefault(secret, []).append({"key": key, "path": path})
    flags = [
        f"--endpoints={endpoints}",
        f"--cacert={ETCD_CERT_DIR}/{ETCD_CA}",
        f"--cert={ETCD_CERT_DIR}/{ETCD_CERT}",
        f"--key={ETCD_CERT_DIR}/{ETCD_KEY}",
        "--dial-timeout=5s",
        "--command-timeout=10s",
    ]
    containers = [
        {
            "name": container,
            "image": image,
            "command": [ETCDCTL, *flags, *arguments],
            "volumeMounts": [{"name": "etcd-client", "mountPath": ETCD_CERT_DIR, "readOnly": True}],
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
        for container, arguments in commands.items()
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": MANAGED_BY},
        "spec": {
            "containers": containers,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            # Nobody, yet able to read the 0440 certificate files through their group.
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65534,
                "fsGroup": 65534,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "volumes": [
                {
                    "name": "etcd-client",
                    "projected": {
                        "defaultMode": 0o440,
                        "sources": [{"secret": {"name": secret, "items": items}} for secret, items in sources.items()],
                    },
                }
            ],
        },
    }


# Each a way from a pod onto its node (and, through a privileged container worker, the Docker host) that Pod
# Security's baseline level refuses (kubernetes/pod-security-admission policy/check_privileged.go,
# check_hostPathVolumes.go, check_hostNamespaces.go@v0.36.2). Each pod asks for that one thing only, so a
# refusal names the rule that holds.
HOST_ACCESS = ("privileged", "host-path", "host-network")


def host_access_pod(name: str, access: str) -> dict[str, Any]:
    """A sleeper pod asking for one of HOST_ACCESS; never meant to run (the checks dry-run it)."""
    pod = sleeper_pod(name)
    spec, container = pod["spec"], pod["spec"]["containers"][0]
    if access == "privileged":
        # The API server refuses privileged with allowPrivilegeEscalation false as invalid (422), before admission.
        container["securityContext"] = {"privileged": True}
    elif access == "host-path":
        spec["volumes"] = [{"name": "node-root", "hostPath": {"path": "/"}}]
        container["volumeMounts"] = [{"name": "node-root", "mountPath": "/node"}]
    elif access == "host-network":
        spec["hostNetwork"] = True
    else:
        raise ValueError(f"unknown host access {access!r} (expected one of {', '.join(HOST_ACCESS)})")
    return pod
