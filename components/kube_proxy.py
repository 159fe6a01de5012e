"""kube-proxy in one tenant, configured never to write host-wide sysctls.

Kamaji's kube-proxy addon is built from kubeadm's defaults, which raise
nf_conntrack_max and the conntrack hash size: both are host-wide, read-only in
a worker container's network namespace, and kube-proxy exits when it cannot
write them. So the addon stays off and this component installs kube-proxy the
way kubeadm does (kubernetes/kubernetes cmd/kubeadm/app/phases/addons/proxy),
with the configuration kind uses for its own container nodes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import yaml

NAME = "kube-proxy"
NAMESPACE = "kube-system"
CONFIG_KEY = "config.conf"
KUBECONFIG_KEY = "kubeconfig.conf"
CONFIG_DIR = "/var/lib/kube-proxy"
IMAGE_REPOSITORY = "registry.k8s.io/kube-proxy"
# kubeadm lets joining nodes (bootstrap tokens in this group) read kube-proxy's ConfigMap.
BOOTSTRAP_GROUP = "system:bootstrappers:kubeadm:default-node-token"
# In-cluster credentials of the kube-proxy ServiceAccount, as kubeadm's kubeconfig.conf uses them.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def proxy_configuration(pod_cidr: str) -> dict:
    """The KubeProxyConfiguration: kind's settings (pkg/cluster/internal/kubeadm/config.go)."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": f"{CONFIG_DIR}/{KUBECONFIG_KEY}"},
        # kubeadm fills this from the cluster's pod subnet.
        "clusterCIDR": pod_cidr,
        "iptables": {"minSyncPeriod": "1s"},
        # 0 skips nf_conntrack_max and the hash size, which are host-wide. The
        # conntrack timeouts are per network namespace and keep their defaults.
        "conntrack": {"maxPerCore": 0},
    }


def proxy_kubeconfig(endpoint: str) -> dict:
    """kube-proxy's kubeconfig: the tenant's API server, its ServiceAccount token and CA."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "default",
                "cluster": {"server": endpoint, "certificate-authority": f"{SERVICE_ACCOUNT_DIR}/ca.crt"},
            }
        ],
        "contexts": [{"name": "default", "context": {"cluster": "default", "namespace": "default", "user": "default"}}],
        "current-context": "default",
        "users": [{"name": "default", "user": {"tokenFile": f"{SERVICE_ACCOUNT_DIR}/token"}}],
    }


def config_checksum(config: str, kubeconfig: str) -> str:
    return hashlib.sha256(f"{config}\n---\n{kubeconfig}".encode()).hexdigest()


@dataclass(frozen=True)
class KubeProxyArgs:
    kubernetes_version: str
    """Image tag: kube-proxy runs at the tenant's version (kindest/node preloads that image)."""
    pod_cidr: str
    endpoint: pulumi.Input[str]
    """The tenant API server's https URL. kube-proxy cannot use the `kubernetes`
    Service: it is what makes Services work."""
    provider: k8s.Provider
    """The tenant's own provider."""


class KubeProxy(pulumi.ComponentResource):
    """kube-proxy's ServiceAccount, RBAC, ConfigMap and DaemonSet in one tenant."""

    def __init__(self, name: str, args: KubeProxyArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:KubeProxy", name, None, opts)
        in_tenant = pulumi.ResourceOptions(parent=self, provider=args.provider)
        labels = {"k8s-app": NAME}

        account = k8s.core.v1.ServiceAccount(
            f"{name}-kube-proxy", metadata={"name": NAME, "namespace": NAMESPACE}, opts=in_tenant
        )
        # The same bindings kubeadm creates. Without Kamaji's project label, so
        # Kamaji's addon clean-up never deletes them.
        node_proxier = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-kube-proxy-node-proxier",
            metadata={"name": "kubeadm:node-proxier"},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-proxier"},
            subjects=[{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
            opts=in_tenant,
        )
        config_reader = k8s.rbac.v1.Role(
            f"{name}-kube-proxy-config-reader",
            metadata={"name": NAME, "namespace": NAMESPACE},
            rules=[{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [NAME], "verbs": ["get"]}],
            opts=in_tenant,
        )
        k8s.rbac.v1.RoleBinding(
            f"{name}-kube-proxy-config-reader",
            metadata={"name": NAME, "namespace": NAMESPACE},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            subjects=[{"kind": "Group", "name": BOOTSTRAP_GROUP}],
            # After its Role: only a client allowed to `bind` may bind a Role that does not exist yet.
            opts=pulumi.ResourceOptions.merge(in_tenant, pulumi.ResourceOptions(depends_on=[config_reader])),
        )

        configuration = yaml.safe_dump(proxy_configuration(args.pod_cidr), sort_keys=False)
        kubeconfig = pulumi.Output.from_input(args.endpoint).apply(
            lambda endpoint: yaml.safe_dump(proxy_kubeconfig(endpoint), sort_keys=False)
        )
        config = k8s.core.v1.ConfigMap(
            f"{name}-kube-proxy",
            metadata={"name": NAME, "namespace": NAMESPACE, "labels": {"app": NAME}},
            data={CONFIG_KEY: configuration, KUBECONFIG_KEY: kubeconfig},
            opts=in_tenant,
        )

        k8s.apps.v1.DaemonSet(
            f"{name}-kube-proxy",
            metadata={"name": NAME, "namespace": NAMESPACE, "labels": labels},
            spec={
                "selector": {"matchLabels": labels},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {
                    "metadata": {
                        "labels": labels,
                        # kube-proxy reads its files once: a changed config (e.g. a new
                        # API endpoint) rolls the pods.
                        "annotations": {
                            "kamaji-hami-lab.io/config-sha256": kubeconfig.apply(
                                lambda text: config_checksum(configuration, text)
                            )
                        },
                    },
                    "spec": {
                        "priorityClassName": "system-node-critical",
                        "hostNetwork": True,
                        "serviceAccountName": NAME,
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [
                            {
                                "name": NAME,
                                "image": f"{IMAGE_REPOSITORY}:{args.kubernetes_version}",
                                "imagePullPolicy": "IfNotPresent",
                                "command": [
                                    "/usr/local/bin/kube-proxy",
                                    f"--config={CONFIG_DIR}/{CONFIG_KEY}",
                                    "--hostname-override=$(NODE_NAME)",
                                ],
                                "env": [
                                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
                                ],
                                "securityContext": {"privileged": True},
                                "volumeMounts": [
                                    {"name": NAME, "mountPath": CONFIG_DIR},
                                    {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
                                    {"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": True},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": NAME, "configMap": {"name": NAME}},
                            {"name": "xtables-lock", "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}},
                            {"name": "lib-modules", "hostPath": {"path": "/lib/modules"}},
                        ],
                    },
                },
            },
            opts=pulumi.ResourceOptions.merge(
                in_tenant, pulumi.ResourceOptions(depends_on=[account, node_proxier, config])
            ),
        )

        self.register_outputs({})
