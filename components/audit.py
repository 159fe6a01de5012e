"""A tenant API server's audit trail: the policy it follows and where it writes, all in the management cluster.

The tenant sees none of it: the policy is a ConfigMap and the log a PersistentVolumeClaim in the management
cluster's tenants namespace, mounted into the API server pods Kamaji runs there. docs/architecture.md#the-audit-trail
says why a volume, how two API servers share it and what it costs.
"""

from __future__ import annotations

import yaml

# The volume the log lives on, as every container of the API server pod mounts it.
LOG_ROOT = "/var/log/kamaji-hami-lab/audit"
# One directory per API server pod (a Deployment's pods share one template, so a pod's own name is the only thing
# telling two writers apart): the init container links THIS_POD to LOG_ROOT/<pod name>, and the API server writes
# through the link, each its own file and its own rotation.
THIS_POD_ROOT = "/var/run/kamaji-hami-lab/audit"
THIS_POD = f"{THIS_POD_ROOT}/this-pod"
LOG_FILE = "audit.log"
POLICY_ROOT = "/etc/kamaji-hami-lab/audit"
POLICY_FILE = "policy.yaml"
# Rotation (kube-apiserver --audit-log-maxsize in MB, --audit-log-maxbackup files): one pod keeps at most
# (MAX_BACKUPS + 1) * MAX_SIZE_MB, about 30 000 Metadata-level events.
MAX_SIZE_MB = 10
MAX_BACKUPS = 2
# Pod directories besides the starting pod's own kept on the volume: the API servers of the tenant's replicas,
# plus one generation before them (the pods before the last sleep, restore or upgrade).
EARLIER_GENERATIONS = 1
# What the log's claim asks for: more than the log of up to 30 replicas (log_bytes), which is what it may grow to.
CLAIM_REQUEST = "1Gi"
# What the init container and the reader run: the image validation already pulls.
TOOLS_IMAGE = "busybox:1.36.1"
READER_CONTAINER = "audit-reader"
# Container and volume names beside Kamaji's own (clastix/kamaji internal/builders/controlplane/deployment.go
# @26.8.2-edge names its volumes kubernetes-pki, etc-ca-certificates, ...; none starts with "audit").
LOG_VOLUME = "audit-log"
POLICY_VOLUME = "audit-policy"
THIS_POD_VOLUME = "audit-this-pod"

READ_ONLY = ["get", "list", "watch"]
WRITES = ["create", "update", "patch", "delete", "deletecollection"]


def pod_logs_kept(replicas: int) -> int:
    """Pod directories the volume holds at most: its replicas' and one earlier generation, plus a starting pod."""
    return replicas + EARLIER_GENERATIONS + 1


def log_bytes(replicas: int) -> int:
    """The most disk one tenant's audit trail takes: every kept pod's live file and its backups."""
    return pod_logs_kept(replicas) * (MAX_BACKUPS + 1) * MAX_SIZE_MB * 1024 * 1024


def policy() -> dict:
    """The audit.k8s.io/v1 Policy every tenant API server follows; the first rule that matches a request wins
    (kubernetes/apiserver pkg/apis/audit/v1/types.go@v0.36.0, Policy and PolicyRule)."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        # One event per request, written once it was answered (with its code); RequestReceived would double the log.
        "omitStages": ["RequestReceived"],
        "omitManagedFields": True,
        "rules": [
            # Probes and scrapes: the kubelet and Kamaji ask every few seconds, and they carry no identity worth
            # keeping.
            {"level": "None", "nonResourceURLs": ["/healthz*", "/livez*", "/readyz*", "/metrics", "/version"]},
            # Every component renews its lease every few seconds: the largest share of writes, and no one's action.
            {"level": "None", "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}]},
            # The control plane's own reads (controllers, scheduler, kube-proxy, the API server's loopback client):
            # watches and relists of everything, all day.
            {
                "level": "None",
                "users": [
                    "system:kube-controller-manager",
                    "system:kube-scheduler",
                    "system:kube-proxy",
                    "system:apiserver",
                ],
                "verbs": READ_ONLY,
            },
            # The kubelets' reads of their pods, secrets and config maps; their writes (node status, pods) stay.
            {"level": "None", "userGroups": ["system:nodes"], "verbs": READ_ONLY},
            # kube-system's service accounts are the control plane's and the addons' (controllers with their own
            # credentials, CoreDNS, Konnectivity, HAMi): their reads are the same background traffic.
            {"level": "None", "userGroups": ["system:serviceaccounts:kube-system"], "verbs": READ_ONLY},
            # Secrets, config maps, issued tokens and token reviews carry credentials in their bodies: who touched
            # which one is kept, never what it holds.
            {
                "level": "Metadata",
                "resources": [
                    {"group": "", "resources": ["secrets", "configmaps", "serviceaccounts/token"]},
                    {"group": "authentication.k8s.io", "resources": ["tokenreviews"]},
                ],
            },
            # Every other change keeps the request's body: what a privileged pod or a role binding was made with.
            {"level": "Request", "verbs": WRITES},
            # Everything else people do (reads, exec, port-forward): who, what, from where, when, and the answer.
            {"level": "Metadata"},
        ],
    }


def policy_document() -> str:
    return yaml.safe_dump(policy(), sort_keys=False)


def api_server_args() -> list[str]:
    """kube-apiserver flags Kamaji keeps as given: it overrides only the flags it manages, none of them --audit-*
    (clastix/kamaji internal/builders/controlplane/deployment.go@26.8.2-edge, mergeAPIServerArgs)."""
    return [
        f"--audit-policy-file={POLICY_ROOT}/{POLICY_FILE}",
        f"--audit-log-path={THIS_POD}/{LOG_FILE}",
        "--audit-log-format=json",
        f"--audit-log-maxsize={MAX_SIZE_MB}",
        f"--audit-log-maxbackup={MAX_BACKUPS}",
    ]


def link_script(replicas: int) -> str:
    """The init container's work: its pod's directory, the link the API server writes through, and the oldest
    pods' directories removed (by their live file's last write) so the volume stays bounded."""
    others_kept = pod_logs_kept(replicas) - 1
    return (
        'set -eu; mkdir -p "$LOG_ROOT/$POD_NAME"; ln -sfn "$LOG_ROOT/$POD_NAME" "$THIS_POD"; '
        f'ls -1t "$LOG_ROOT"/*/{LOG_FILE} 2>/dev/null | tail -n +{others_kept + 1} | '
        f'while read -r log; do rm -rf "${{log%/{LOG_FILE}}}"; done'
    )


def deployment_spec(claim: str, policy_config_map: str, replicas: int) -> dict:
    """The TenantControlPlane's spec.controlPlane.deployment fields that give its API servers their audit log
    (clastix/kamaji api/v1alpha1/tenantcontrolplane_types.go@26.8.2-edge: DeploymentSpec)."""
    log_mount = {"name": LOG_VOLUME, "mountPath": LOG_ROOT}
    this_pod_mount = {"name": THIS_POD_VOLUME, "mountPath": THIS_POD_ROOT}
    return {
        "extraArgs": {"apiServer": api_server_args()},
        "additionalVolumes": [
            {"name": LOG_VOLUME, "persistentVolumeClaim": {"claimName": claim}},
            {"name": POLICY_VOLUME, "configMap": {"name": policy_config_map}},
            {"name": THIS_POD_VOLUME, "emptyDir": {"sizeLimit": "1Mi"}},
        ],
        "additionalVolumeMounts": {
            "apiServer": [
                log_mount,
                this_pod_mount,
                {"name": POLICY_VOLUME, "mountPath": POLICY_ROOT, "readOnly": True},
            ]
        },
        "additionalInitContainers": [
            {
                "name": "audit-log-link",
                "image": TOOLS_IMAGE,
                "command": ["sh", "-c", link_script(replicas)],
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "LOG_ROOT", "value": LOG_ROOT},
                    {"name": "THIS_POD", "value": THIS_POD},
                ],
                "volumeMounts": [log_mount, this_pod_mount],
            }
        ],
        # The API server image has no shell or cat: `make audit` and the validation read the volume through this.
        "additionalContainers": [
            {
                "name": READER_CONTAINER,
                "image": TOOLS_IMAGE,
                "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 3600 & wait $!; done"],
                "volumeMounts": [{**log_mount, "readOnly": True}],
                "resources": {"requests": {"cpu": "1m", "memory": "4Mi"}, "limits": {"memory": "32Mi"}},
            }
        ],
    }
