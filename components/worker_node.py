"""A tenant worker: a kindest/node container that joins its tenant with kubeadm."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_docker as docker

from components.commands import script_command
from components.datastore_move import kubelet_restart
from components.docker_host import DockerHost
from components.gpus import GpuSpec
from components.node_join import join_node
from components.worker_power import worker_power

LABEL_PREFIX = "kamaji-hami-lab.io"

# A privileged pod gets every device of its node from containerd's CRI unless its runtime sets
# privileged_without_host_devices (containerd internal/cri/server/container_create.go@v2.3.4), and a
# container worker's devices are the host's. The script sets it in kind's config before every start of
# containerd, through a drop-in for kind's own unit (kubernetes-sigs/kind images/base/files/etc/systemd/
# system/containerd.service@v0.33.0-alpha); join-worker.sh proves it through the CRI.
NO_HOST_DEVICES_SCRIPT = "/usr/local/bin/kamaji-hami-lab-no-host-devices"
NO_HOST_DEVICES_SOURCE = Path(__file__).resolve().parent.parent / "scripts/node/no-host-devices.sh"
CONTAINERD_DROP_IN = "/etc/systemd/system/containerd.service.d/10-kamaji-hami-lab-no-host-devices.conf"
# Without the leading "-", a failed script keeps containerd from starting: no worker runs without the guard.
CONTAINERD_DROP_IN_TEXT = f"[Service]\nExecStartPre={NO_HOST_DEVICES_SCRIPT}\n"


def no_host_devices_uploads() -> list[docker.ContainerUploadArgs]:
    """The files that make a container worker's containerd give privileged pods no host devices."""
    return [
        docker.ContainerUploadArgs(
            file=NO_HOST_DEVICES_SCRIPT, content=NO_HOST_DEVICES_SOURCE.read_text(), permissions="0755"
        ),
        docker.ContainerUploadArgs(file=CONTAINERD_DROP_IN, content=CONTAINERD_DROP_IN_TEXT, permissions="0644"),
    ]


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
    data_store: str
    """The DataStore its tenant runs on: a move to another restarts its kubelet."""
    sleeping: bool = False
    """Its tenant sleeps: the container is stopped and kept."""
    address: str | None = None
    """Its fixed IPv4 address on the network (the kind network's worker part); None: Docker picks one."""
    network_filter: pulumi.Resource | None = None
    """The lab's filter on the network, which the container starts only after; None where there is none."""


class WorkerNode(pulumi.ComponentResource):
    """Runs a node container the way kind runs its own, joins it and registers its mock GPUs.

    `joined` completes once the kubelet is registered with the tenant; `gpus_registered`
    (None for a worker without GPUs) once HAMi's node registration is in place; `done`
    once both are, the worker is asleep or awake as its tenant (`power`) and, after a move of
    its tenant to another DataStore, its kubelet restarted (`kubelet_restarted`). A replaced
    container is first drained and leaves the tenant (the
    join's delete step, scripts/leave-worker.sh).
    """

    def __init__(self, name: str, args: WorkerNodeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:WorkerNode", name, None, opts)

        # A fixed address another container on the network has, running or stopped (another lab's sleeping
        # worker), is refused before the container is made: Docker would let whichever starts second fail.
        address_checked = [
            script_command(
                f"{name}-address-check",
                "check-worker-address.sh",
                {"WORKER": args.node_name, "WORKER_ADDRESS": args.address, "KIND_NETWORK": args.docker.network},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[args.platform]),
            )
        ] if args.address else []

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
            # In place before systemd first starts containerd (uploads happen before the container starts).
            uploads=no_host_devices_uploads(),
            volumes=[
                # Anonymous volume: containerd's overlayfs cannot sit on the container's own overlay.
                docker.ContainerVolumeArgs(container_path="/var"),
                docker.ContainerVolumeArgs(host_path="/lib/modules", container_path="/lib/modules", read_only=True),
            ],
            # The network reaches the LoadBalancer addresses of the tenant API servers. A fixed address:
            # Docker gives a stopped and restarted container a new one otherwise (kubernetes-sigs/kind#2045),
            # and a worker wakes from sleep with the node address it had.
            networks_advanced=[
                docker.ContainerNetworksAdvancedArgs(name=args.docker.network, ipv4_address=args.address)
            ],
            # Come back after a host reboot, like kind's nodes.
            restart="on-failure",
            max_retry_count=1,
            # Asleep it is stopped on purpose: the provider must neither count that as drift nor
            # start it on a later up (kreuzwerker/terraform-provider-docker
            # internal/provider/resource_docker_container_funcs.go@v4.5.0: a read of a stopped
            # container with must_run sets must_run false; an update to true starts it). An
            # in-place update, not a replacement: must_run is not ForceNew (resource_docker_container.go).
            must_run=not args.sleeping,
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
                depends_on=[args.platform, args.control_plane_ready, *address_checked]
                + ([args.previous_worker] if args.previous_worker else [])
                + ([args.network_filter] if args.network_filter else []),
                # The fixed name can only exist once: remove the old container before the new one.
                delete_before_replace=True,
            ),
        )

        steps = join_node(
            name,
            args.node_name,
            {},  # docker exec, the scripts' default transport
            args.tenant_kubeconfig,
            args.gpus,
            args.gpu_slots,
            node_identity=[container.id],
            parent=self,
        )
        self.joined, self.gpus_registered = steps.joined, steps.gpus_registered
        self.power = worker_power(
            name, args.node_name, {}, args.sleeping, parent=self, after=[steps.done, args.control_plane_ready]
        )
        self.kubelet_restarted = kubelet_restart(
            name,
            args.node_name,
            {},
            args.data_store,
            args.sleeping,
            parent=self,
            after=[self.power, args.control_plane_ready],
        )
        # Its last step: the next worker waits for this one to be joined, in the asked state and, after a move,
        # restarted, so the tenant's kubelets restart one at a time.
        self.done = self.kubelet_restarted

        self.register_outputs({"nodeName": args.node_name})
