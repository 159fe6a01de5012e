"""Pod Security in every tenant, set by the lab where the tenant cannot lift it, and the tenant's namespaces that
belong to the lab rather than to the team that uses the tenant.

The lab's own pods there (HAMi, flannel, kube-proxy, CoreDNS) need host access, so Pod Security exempts them; for
the same reason the team's credential may not write into them. The level every other namespace gets is the
tenant's `podSecurity` (docs/configuration.md), from an admission configuration the team can neither read nor edit.
"""

from __future__ import annotations

import hashlib

import yaml

from components.flannel import FLANNEL_NAMESPACE
from components.gpu_sharing import HAMI_NAMESPACE
from components.kube_proxy import NAMESPACE as KUBE_PROXY_NAMESPACE

# Sorted and without repeats (HAMi and kube-proxy share kube-system), so specs built from it stay stable.
EXEMPT_NAMESPACES: tuple[str, ...] = tuple(sorted({FLANNEL_NAMESPACE, HAMI_NAMESPACE, KUBE_PROXY_NAMESPACE}))

# What the admission configuration looks like to the API server: a file in a ConfigMap of the management cluster,
# beside the TenantControlPlane, mounted into its API server pods. The tenant sees neither.
CONFIG_ROOT = "/etc/kamaji-hami-lab/admission"
CONFIG_FILE = "admission.yaml"
# Beside Kamaji's own volume names (clastix/kamaji internal/builders/controlplane/deployment.go@26.8.2-edge names
# its volumes etc-kubernetes-pki, etc-ca-certificates, ...; none starts with "admission").
CONFIG_VOLUME = "admission-config"
# The API server reads the file only when it starts: a new checksum in the pod template rolls its pods.
CONFIG_CHECKSUM_ANNOTATION = "kamaji-hami-lab.io/admission-config-sha256"
# The admission plugin the configuration is for, by the name kube-apiserver registers it under
# (kubernetes/kubernetes plugin/pkg/admission/security/podsecurity/admission.go, PluginName).
PLUGIN = "PodSecurity"
# What every tenant's pods are also checked against for the audit log only: the operator's record of what a
# stricter tenant would refuse, which neither refuses nor warns anyone.
AUDIT_LEVEL = "restricted"


def pod_security_configuration(level: str) -> dict:
    """The pod-security.admission.config.k8s.io/v1 PodSecurityConfiguration of a tenant enforcing `level`
    (kubernetes/pod-security-admission admission/api/v1/types.go@v0.36.0, the same at v0.31.0).

    Warnings at the enforced level reach whoever creates a Deployment or a Job whose pods would be refused:
    enforcement judges only pods, which their controller creates later, where no one sees the refusal."""
    return {
        "apiVersion": "pod-security.admission.config.k8s.io/v1",
        "kind": "PodSecurityConfiguration",
        "defaults": {
            "enforce": level,
            "enforce-version": "latest",
            "audit": AUDIT_LEVEL,
            "audit-version": "latest",
            "warn": level,
            "warn-version": "latest",
        },
        "exemptions": {"usernames": [], "runtimeClasses": [], "namespaces": list(EXEMPT_NAMESPACES)},
    }


def admission_configuration(level: str) -> dict:
    """The apiserver.config.k8s.io/v1 AdmissionConfiguration that --admission-control-config-file names, the
    plugin's configuration embedded (kubernetes/apiserver pkg/apis/apiserver/v1/types.go@v0.36.0)."""
    return {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [{"name": PLUGIN, "configuration": pod_security_configuration(level)}],
    }


def admission_document(level: str) -> str:
    return yaml.safe_dump(admission_configuration(level), sort_keys=False)


def api_server_args() -> list[str]:
    """kube-apiserver flags Kamaji keeps as given: it manages --enable-admission-plugins but not this one
    (clastix/kamaji internal/builders/controlplane/deployment.go@26.8.2-edge, buildKubeAPIServerCommand)."""
    return [f"--admission-control-config-file={CONFIG_ROOT}/{CONFIG_FILE}"]


def deployment_spec(config_map: str, level: str) -> dict:
    """The TenantControlPlane's spec.controlPlane.deployment fields that give its API servers the admission
    configuration of `level`, which `config_map` holds (clastix/kamaji api/v1alpha1/tenantcontrolplane_types.go
    @26.8.2-edge: DeploymentSpec; Kamaji copies podAdditionalMetadata into the pod template, deployment.go, Build)."""
    return {
        "podAdditionalMetadata": {
            "annotations": {CONFIG_CHECKSUM_ANNOTATION: hashlib.sha256(admission_document(level).encode()).hexdigest()}
        },
        "extraArgs": {"apiServer": api_server_args()},
        "additionalVolumes": [{"name": CONFIG_VOLUME, "configMap": {"name": config_map}}],
        "additionalVolumeMounts": {"apiServer": [{"name": CONFIG_VOLUME, "mountPath": CONFIG_ROOT, "readOnly": True}]},
    }
