"""A management cluster the platform team already runs, reached through a kubeconfig from secret config."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.docker_host import DockerHost, docker_host
from components.settings import LabSettings


class ExistingManagementCluster(pulumi.ComponentResource):
    """An existing cluster: nothing is created on it here, and no Docker daemon is touched without workers.

    The same attributes as KindManagementCluster: `provider`, `kubeconfig`
    (secret), `docker` (None unless container workers run on this host's
    Docker) and `network_checked` (None: the Docker network is not the lab's).
    """

    kubeconfig: pulumi.Output[str]
    docker: DockerHost | None
    network_checked: pulumi.Resource | None

    def __init__(self, name: str, lab: LabSettings, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:ExistingManagementCluster", name, None, opts)
        cluster = lab.existing_cluster
        if cluster is None:
            raise ValueError("ExistingManagementCluster needs managementCluster existing")
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig)
        # The Docker network is the platform team's, used as it is.
        self.network_checked = None
        self.docker = (
            docker_host(name, lab.node_image, cluster.docker_network, parent=self) if cluster.docker_network else None
        )
        self.provider = k8s.Provider(
            f"{name}-kubernetes",
            kubeconfig=self.kubeconfig,
            # Stable identity: a rotated kubeconfig updates the provider instead of
            # replacing every release and object on the cluster.
            cluster_identifier=f"existing-{lab.management_cluster_name}",
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"kubeconfig": self.kubeconfig})
