"""The management cluster as kind makes it on this host, with the Docker host its workers share."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.addresses import dynamic_range
from components.commands import script_command
from components.docker_host import DockerHost, docker_host
from components.settings import LabSettings

# The lab's own docker network for the kind node, the container workers and the MetalLB pools, which
# kind-up.sh lays out with room for fixed addresses; on kind's own `kind` network Docker picked the IPv4
# subnet, and it pins no address on such a subnet (docs/architecture.md).
KIND_NETWORK = "kamaji-hami-lab"


class KindManagementCluster(pulumi.ComponentResource):
    """A kind cluster that hosts cert-manager, MetalLB and Kamaji.

    The same attributes as ExistingManagementCluster: `provider` for the cluster,
    its `kubeconfig` (secret) and `docker` where container workers run (here: the
    lab's network on this host). `network_checked` completes once the real network
    is known to have the subnet everything is planned in (kindSubnet, else the
    default kind-up.sh creates it with).
    """

    kubeconfig: pulumi.Output[str]
    docker: DockerHost | None
    network_checked: pulumi.Resource | None

    def __init__(self, name: str, lab: LabSettings, opts: pulumi.ResourceOptions | None = None):
        # The type keeps its first name: a new one would change every URN below it.
        super().__init__("kamaji-hami-lab:index:ManagementCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.docker = docker_host(name, lab.node_image, KIND_NETWORK, parent=self)
        subnet = lab.network_subnet
        if subnet is None:
            raise ValueError("KindManagementCluster needs managementCluster kind")

        cluster = script_command(
            f"{name}-kind",
            "kind-up.sh",
            {
                "CLUSTER_NAME": lab.management_cluster_name,
                "NODE_IMAGE": lab.node_image,
                # Marks the cluster as this stack's: kind-up.sh refuses to adopt any other.
                "LAB_OWNER": f"{pulumi.get_project()}.{pulumi.get_stack()}",
                "KIND_NETWORK": KIND_NETWORK,
                # The network, created with this layout when it does not exist yet.
                "KIND_SUBNET": str(subnet),
                "KIND_IP_RANGE": str(dynamic_range(subnet)),
            },
            delete="kind-down.sh",
            # A new name is a new cluster (and, through the provider's identity, new
            # releases on it): delete the old one first rather than orphan it. A new
            # image only re-runs the idempotent create, which keeps the running cluster.
            triggers=[lab.management_cluster_name],
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.docker.node_image],
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create="15m", delete="5m"),
            ),
        )

        # The subnet everything is planned with is known before any resource exists (preview-safe);
        # this step compares it with the real network once the cluster is up, and nothing goes onto
        # the cluster (its provider's kubeconfig is read after it) before they agree.
        self.network_checked = script_command(
            f"{name}-kind-subnet",
            "kind-subnet.sh",
            {"KIND_NETWORK": KIND_NETWORK, "EXPECTED_SUBNET": str(subnet)},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]),
        )

        # Read in its own step whose inputs leave out the node image: a re-run of
        # kind-up.sh (a nodeImage bump) then keeps this output known in preview, and
        # with it the provider's configuration. ~/.kube/config is never written.
        kubeconfig = script_command(
            f"{name}-kubeconfig",
            "kind-kubeconfig.sh",
            {"CLUSTER_NAME": lab.management_cluster_name},
            secret_output=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster, self.network_checked]),
        )
        self.kubeconfig = pulumi.Output.secret(kubeconfig.stdout)

        self.provider = k8s.Provider(
            f"{name}-kubernetes",
            kubeconfig=self.kubeconfig,
            # Stable identity: a re-read or rotated kubeconfig updates the provider
            # instead of replacing every release and object on the cluster.
            cluster_identifier=f"kind-{lab.management_cluster_name}",
            opts=child,
        )

        self.register_outputs({"kubeconfig": self.kubeconfig, "kindSubnet": str(subnet)})
