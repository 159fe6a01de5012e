"""The host layer: the Docker daemon, the node image and the kind management cluster."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.commands import script_command

KIND_NETWORK = "kind"


@dataclass(frozen=True)
class ManagementClusterArgs:
    cluster_name: str
    """kind cluster name; also names the provider's cluster identity."""
    node_image: str
    """kindest/node image shared by the kind cluster and every tenant worker."""
    kind_subnet: str | None
    """IPv4 subnet of the kind network when configured; otherwise read from Docker after kind made it."""
    docker_host: str
    """Address of the daemon the docker CLI uses (components/docker_daemon.py)."""


class ManagementCluster(pulumi.ComponentResource):
    """A kind cluster that hosts cert-manager, MetalLB and Kamaji.

    Outputs: `kubeconfig` (secret), `provider` for the cluster, `docker_provider`
    and `node_image` for containers on the same host, `kind_subnet` of the
    docker network that MetalLB announces on.
    """

    kubeconfig: pulumi.Output[str]
    kind_subnet: pulumi.Output[str]

    def __init__(self, name: str, args: ManagementClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:ManagementCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        # The same daemon the scripts' docker and kind commands use. The provider
        # connects to it in every run, previews included.
        self.docker_provider = docker.Provider(f"{name}-docker", host=args.docker_host, opts=child)

        # Pulled once and kept: kind and every worker share it, and destroy must
        # not remove an image other clusters on this host may use.
        self.node_image = docker.RemoteImage(
            f"{name}-node-image",
            name=args.node_image,
            keep_locally=True,
            opts=pulumi.ResourceOptions(parent=self, provider=self.docker_provider),
        )

        cluster = script_command(
            f"{name}-kind",
            "kind-up.sh",
            {
                "CLUSTER_NAME": args.cluster_name,
                "NODE_IMAGE": args.node_image,
                # Marks the cluster as this stack's: kind-up.sh refuses to adopt any other.
                "LAB_OWNER": f"{pulumi.get_project()}.{pulumi.get_stack()}",
            },
            delete="kind-down.sh",
            # A new name is a new cluster (and, through the provider's identity, new
            # releases on it): delete the old one first rather than orphan it. A new
            # image only re-runs the idempotent create, which keeps the running cluster.
            triggers=[args.cluster_name],
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.node_image],
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create="15m", delete="5m"),
            ),
        )

        # Read in its own step whose inputs leave out the node image: a re-run of
        # kind-up.sh (a nodeImage bump) then keeps this output known in preview, and
        # with it the provider's configuration. ~/.kube/config is never written.
        kubeconfig = script_command(
            f"{name}-kubeconfig",
            "kind-kubeconfig.sh",
            {"CLUSTER_NAME": args.cluster_name},
            secret_output=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]),
        )
        self.kubeconfig = pulumi.Output.secret(kubeconfig.stdout)

        if args.kind_subnet:
            self.kind_subnet = pulumi.Output.from_input(args.kind_subnet)
        else:
            subnet = script_command(
                f"{name}-kind-subnet",
                "kind-subnet.sh",
                {"KIND_NETWORK": KIND_NETWORK},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]),
            )
            self.kind_subnet = subnet.stdout.apply(str.strip)

        self.provider = k8s.Provider(
            f"{name}-kubernetes",
            kubeconfig=self.kubeconfig,
            # Stable identity: a re-read or rotated kubeconfig updates the provider
            # instead of replacing every release and object on the cluster.
            cluster_identifier=f"kind-{args.cluster_name}",
            opts=child,
        )

        self.register_outputs({"kubeconfig": self.kubeconfig, "kindSubnet": self.kind_subnet})
