"""A tenant worker: a kindest/node container that joins its tenant with kubeadm."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_docker as docker

from components.commands import script_command
from components.docker_host import DockerHost
from components.gpus import GpuSpec, node_gpu_count, register_annotation
from components.tenant_control_plane import kubeconfig_ca_fingerprint

LABEL_PREFIX = "kamaji-hami-lab.io"


@dataclass(frozen=True)
class WorkerNodeArgs:
    node_name: str
    """Container name, hostname and Kubernetes node name."""
    tenant: str
    cluster_name: str
    docker: DockerHost
    platform: pulumi.Resource
    """Created after and destroyed before it; a kind cluster also made the `kind` docker network."""
    control_plane_ready: pulumi.Resource
    """Kamaji reports the tenant's version Ready: a kubelet never runs newer than its API server."""
    previous_worker: pulumi.Resource | None
    """The previous worker's last step: an upgrade replaces one worker at a time."""
    tenant_kubeconfig: pulumi.Input[str]
    """Secret; used on the host to mint a short-lived bootstrap token and to remove the node."""
    gpus: tuple[GpuSpec, ...]
    gpu_slots: int


class WorkerNode(pulumi.ComponentResource):
    """Runs a node container the way kind runs its own, joins it and registers its mock GPUs.

    `joined` completes once the kubelet is registered with the tenant; `gpus_registered`
    (None for a worker without GPUs) once HAMi's node registration is in place; `done`
    once both are. A replaced container is first drained and leaves the tenant (the
    join's delete step, scripts/leave-worker.sh).
    """

    def __init__(self, name: str, args: WorkerNodeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:WorkerNode", name, None, opts)

        container = docker.Container(
            f"{name}-container",
            name=args.node_name,
            hostname=args.node_name,
            image=args.docker.node_image.image_id,
            # systemd, containerd and kubelet inside a container need all of these (as kind sets them).
            privileged=True,
            # label=disable is what Docker adds to privileged containers anyway; stating
            # it keeps the read-back equal to the plan, so a second `up` replaces nothing.
            security_opts=["seccomp=unconfined", "apparmor=unconfined", "label=disable"],
            cgroupns_mode="private",
            # kind adds this when dockerd remaps user namespaces (kubernetes-sigs/kind
            # pkg/cluster/internal/providers/docker/provision.go); without remapping it
            # is what Docker does anyway, so it is always set.
            userns_mode="host",
            init=False,
            tty=True,
            tmpfs={"/tmp": "", "/run": ""},
            volumes=[
                # Anonymous volume: containerd's overlayfs cannot sit on the container's own overlay.
                docker.ContainerVolumeArgs(container_path="/var"),
                docker.ContainerVolumeArgs(host_path="/lib/modules", container_path="/lib/modules", read_only=True),
            ],
            # The network reaches the LoadBalancer addresses of the tenant API servers.
            networks_advanced=[docker.ContainerNetworksAdvancedArgs(name=args.docker.network)],
            # Come back after a host reboot, like kind's nodes.
            restart="on-failure",
            max_retry_count=1,
            # Our own labels only: kind's cluster label would let `kind delete cluster` take this node.
            labels=[
                docker.ContainerLabelArgs(label=f"{LABEL_PREFIX}/cluster", value=args.cluster_name),
                docker.ContainerLabelArgs(label=f"{LABEL_PREFIX}/tenant", value=args.tenant),
                docker.ContainerLabelArgs(label=f"{LABEL_PREFIX}/role", value="worker"),
            ],
            remove_volumes=True,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.docker.provider,
                depends_on=[args.platform, args.control_plane_ready]
                + ([args.previous_worker] if args.previous_worker else []),
                # The fixed name can only exist once: remove the old container before the new one.
                delete_before_replace=True,
            ),
        )

        # Re-runs when the container is replaced or the tenant gets a new CA (a
        # replaced control plane); the script resets a node bound to another CA or
        # endpoint and leaves one joined to this tenant alone. On destroy or before a
        # replacement the node is drained and its object leaves the tenant.
        tenant_ca = pulumi.Output.unsecret(
            pulumi.Output.from_input(args.tenant_kubeconfig).apply(kubeconfig_ca_fingerprint)
        )
        self.joined = script_command(
            f"{name}-join",
            "join-worker.sh",
            {"KUBECONFIG_DATA": args.tenant_kubeconfig, "NODE": args.node_name},
            delete="leave-worker.sh",
            secret_output=True,
            triggers=[container.id, tenant_ca],
            opts=pulumi.ResourceOptions(
                parent=self,
                # The node keeps its name: the old node object must leave before the new one joins.
                delete_before_replace=True,
                # Above the script's own bound: boot wait (90 s) plus the bootstrap token's
                # lifetime, which covers the three bounded kubeadm attempts (15 min); the
                # drain is bounded by its own timeout (leave-worker.sh).
                custom_timeouts=pulumi.CustomTimeouts(create="20m", delete="5m"),
            ),
        )

        self.gpus_registered = None
        if args.gpus:
            # Uses the node's own kubelet credentials inside the container and keeps
            # re-applying, because kubelet resets the GPU capacity when it restarts.
            self.gpus_registered = script_command(
                f"{name}-gpus",
                "register-gpus.sh",
                {
                    "NODE": args.node_name,
                    "GPU_REGISTER_JSON": register_annotation(args.node_name, args.gpus, args.gpu_slots),
                    "GPU_CAPACITY": str(node_gpu_count(args.gpus) * args.gpu_slots),
                },
                triggers=[container.id],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.joined]),
            )

        self.done = self.gpus_registered or self.joined

        self.register_outputs({"nodeName": args.node_name})
