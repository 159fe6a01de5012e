"""The Docker daemon that runs container workers, and the node image they share."""

from __future__ import annotations

from dataclasses import dataclass

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


def docker_host(name: str, node_image: str, network: str, parent: pulumi.Resource) -> DockerHost:
    # The same daemon the scripts' docker and kind commands use. The provider
    # connects to it in every run, previews included.
    provider = docker.Provider(
        f"{name}-docker", host=docker_daemon_address(), opts=pulumi.ResourceOptions(parent=parent)
    )
    # Pulled once and kept: kind and every worker share it, and destroy must
    # not remove an image other clusters on this host may use.
    image = docker.RemoteImage(
        f"{name}-node-image",
        name=node_image,
        keep_locally=True,
        opts=pulumi.ResourceOptions(parent=parent, provider=provider),
    )
    return DockerHost(provider=provider, node_image=image, network=network)
