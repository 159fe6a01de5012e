"""The Docker daemon that runs container workers, and the node image they share."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pulumi
import pulumi_docker as docker

from components.docker_daemon import docker_daemon_address


@dataclass(frozen=True)
class DockerHost:
    """What container workers need: the provider, the pulled node image and the network they join."""

    provider: docker.Provider
    node_image: docker.RemoteImage
    network: str
    """Docker network from which the tenant API servers' LoadBalancer addresses are reachable."""

    def with_node_image(self, name: str, image: str, parent: pulumi.Resource, *after: pulumi.Resource) -> DockerHost:
        """This host with another node image, pulled (after `after`) for one tenant."""
        return replace(self, node_image=_pull(name, image, self.provider, parent, *after))


def docker_host(name: str, node_image: str, network: str, parent: pulumi.Resource) -> DockerHost:
    # The same daemon the scripts' docker and kind commands use. The provider
    # connects to it in every run, previews included.
    provider = docker.Provider(
        f"{name}-docker", host=docker_daemon_address(), opts=pulumi.ResourceOptions(parent=parent)
    )
    return DockerHost(provider, _pull(name, node_image, provider, parent), network)


def _pull(name: str, image: str, provider: docker.Provider, parent: pulumi.Resource, *after: pulumi.Resource):
    # Pulled once and kept: destroy must not remove an image other clusters on this host may use.
    return docker.RemoteImage(
        f"{name}-node-image",
        name=image,
        keep_locally=True,
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=list(after)),
    )
