"""The pod network of a tenant whose workers are machines: flannel, installed from the cluster side.

Container workers get kindnet from their node image (install-cni.sh reads it through
Docker); machines have no such image, and the Pulumi host may have no Docker at all.
flannel's maintained chart needs only the tenant's API: its DaemonSet copies the flannel
CNI binary onto each node and routes each node's podCIDR, which Kamaji's controller
manager allocates (--allocate-node-cidrs, clastix/kamaji
internal/builders/controlplane/deployment.go).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

FLANNEL_REPO = "https://flannel-io.github.io/flannel/"
# flannel-io/flannel chart/kube-flannel/Chart.yaml@v0.28.9 (chart and app version alike).
FLANNEL_CHART_VERSION = "v0.28.9"
# The namespace flannel's README installs into, labelled privileged for Pod Security
# admission: its pods use the host network and write /opt/cni/bin and /etc/cni/net.d.
FLANNEL_NAMESPACE = "kube-flannel"


@dataclass(frozen=True)
class FlannelArgs:
    provider: k8s.Provider
    """The tenant's own provider."""
    pod_cidr: str


class Flannel(pulumi.ComponentResource):
    """flannel with VXLAN in one tenant; `ready` is its Helm release, deployed."""

    def __init__(self, name: str, args: FlannelArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:Flannel", name, None, opts)
        in_tenant = pulumi.ResourceOptions(parent=self, provider=args.provider)

        namespace = k8s.core.v1.Namespace(
            f"{name}-flannel-namespace",
            metadata={
                "name": FLANNEL_NAMESPACE,
                "labels": {"pod-security.kubernetes.io/enforce": "privileged"},
            },
            opts=in_tenant,
        )
        self.ready = k8s.helm.v3.Release(
            f"{name}-flannel",
            name="flannel",
            chart="flannel",
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=FLANNEL_REPO),
            version=FLANNEL_CHART_VERSION,
            namespace=namespace.metadata.name,
            values=flannel_values(args.pod_cidr),
            opts=in_tenant,
        )

        self.register_outputs({})


def flannel_values(pod_cidr: str) -> dict:
    """The chart has no values schema: every key here exists in its values.yaml (a test checks).

    The same for every tenant, whatever its machines name: the DaemonSet's arguments apply to every
    node, so no interface is chosen here. Each machine that names one gets it as its own Node's
    annotation instead (scripts/join-worker.sh). Without --iface, --iface-regex or --iface-can-reach,
    flanneld takes the interface holding that annotation's address, or else the default route's;
    any of those flags would decide the interface on every node and keep the annotation only as
    the advertised address (flannel-io/flannel main.go@v0.28.9).
    """
    # VXLAN needs nothing between machines but UDP 8472. podCidr must equal the tenant's pod
    # CIDR, from which the controller manager hands out node podCIDRs.
    return {"podCidr": pod_cidr, "flannel": {"backend": "vxlan"}}
