"""A tenant worker that is a real machine: checked, then joined over SSH with kubeadm."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.commands import script_command
from components.datastore_move import kubelet_restart
from components.flannel import FLANNEL_NAMESPACE
from components.gpu_sharing import REAL_GPU_NODE_LABELS
from components.gpus import GpuSpec
from components.node_join import join_node
from components.settings import Machine
from components.tenant_control_plane import KONNECTIVITY_PORT
from components.worker_power import worker_power


@dataclass(frozen=True)
class MachineWorkerArgs:
    machine: Machine
    lab_id: str
    """"<project>/<stack>/<managementClusterName>": the lab's name in the mark the join leaves (join-worker.sh)."""
    lab_identity: pulumi.Input[str]
    """The stack's random identity (LabIdentity): what the mark proves; names alone could collide."""
    tenant: str
    kubernetes_version: str
    """The tenant's: the machine's kubeadm and kubelet must run its minor, never newer."""
    endpoint: pulumi.Input[str]
    """The tenant API server's URL, which the machine must reach."""
    control_plane_ready: pulumi.Resource
    """Kamaji reports the tenant's version Ready: a kubelet never runs newer than its API server."""
    previous_worker: pulumi.Resource | None
    """The previous worker's last step: an upgrade replaces one worker at a time."""
    tenant_kubeconfig: pulumi.Input[str]
    """Secret; stays on the Pulumi host, where it mints a short-lived bootstrap token."""
    gpus: tuple[GpuSpec, ...]
    """Mock GPUs to register; empty with real GPUs, which HAMi's device plugin finds itself."""
    gpu_slots: int
    real_gpus: bool
    data_store: str
    """The DataStore its tenant runs on: a move to another restarts its kubelet."""
    sleeping: bool = False
    """Its tenant sleeps: the machine's kubelet is stopped; the machine and its join stay."""


class MachineWorker(pulumi.ComponentResource):
    """Joins a machine the same way as a container worker, after checking it can run the tenant's nodes.

    Exposes what WorkerNode does: `joined`, `gpus_registered` (None without mock
    GPUs), `power` (its kubelet stopped or started as its tenant sleeps or wakes),
    `kubelet_restarted` (after a move of its tenant to another DataStore) and `done`.
    The machine itself is neither created nor destroyed: destroy
    removes its node from the tenant and resets it with `kubeadm reset`.
    """

    def __init__(self, name: str, args: MachineWorkerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:MachineWorker", name, None, opts)
        machine = args.machine
        # How every script reaches the machine (scripts/lib.sh node_exec); the key stays a secret in state.
        transport: dict[str, pulumi.Input[str]] = {
            "NODE_TRANSPORT": "ssh",
            "SSH_ADDRESS": machine.address,
            "SSH_PORT": str(machine.port),
            "SSH_USER": machine.user,
            "SSH_PRIVATE_KEY": pulumi.Output.secret(machine.private_key),
            "SSH_HOST_KEY": machine.host_key,
            **({"SSH_PROXY_JUMP": machine.proxy_jump} if machine.proxy_jump else {}),
        }
        endpoint = pulumi.Output.from_input(args.endpoint).apply(lambda url: url.split("://", 1)[-1].split("/", 1)[0])

        # Every problem of the machine at once, before kubeadm touches it.
        checked = script_command(
            f"{name}-check",
            "check-machine.sh",
            {
                **transport,
                "NODE": machine.name,
                "KUBERNETES_VERSION": args.kubernetes_version,
                "ENDPOINT": endpoint,
                # Served beside the API server: logs, exec and HAMi's webhook go through it.
                "KONNECTIVITY_PORT": str(KONNECTIVITY_PORT),
                "REAL_GPUS": "true" if args.real_gpus else "false",
                # Secret; read only to tell whether a machine with an older kubeadm is already joined.
                "KUBECONFIG_DATA": args.tenant_kubeconfig,
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[args.control_plane_ready] + ([args.previous_worker] if args.previous_worker else []),
                # Above the script's own bound (check-machine.sh).
                custom_timeouts=pulumi.CustomTimeouts(create="5m", update="5m"),
            ),
        )

        steps = join_node(
            name,
            machine.name,
            transport,
            args.tenant_kubeconfig,
            args.gpus,
            args.gpu_slots,
            # Another machine behind the name is joined afresh, and so is one whose kubelet
            # must advertise another address or whose pod network takes another interface
            # (named only when set: a machine without either keeps the triggers it had).
            node_identity=[
                machine.address,
                str(machine.port),
                *(f"{key}={value}" for key, value in (("nodeIp", machine.node_ip),
                                                      ("flannelInterface", machine.flannel_interface)) if value),
            ],
            parent=self,
            after=[checked],
            unregister_gpus=True,
            join_env=self._join_env(args),
        )
        self.joined, self.gpus_registered = steps.joined, steps.gpus_registered
        self.power = worker_power(
            name, machine.name, transport, args.sleeping, parent=self, after=[steps.done, args.control_plane_ready]
        )
        self.kubelet_restarted = kubelet_restart(
            name,
            machine.name,
            transport,
            args.data_store,
            args.sleeping,
            parent=self,
            after=[self.power, args.control_plane_ready],
        )
        # Its last step: the next worker waits for this one to be joined, in the asked state and, after a move,
        # restarted, so the tenant's kubelets restart one at a time.
        self.done = self.kubelet_restarted

        self.register_outputs({"nodeName": machine.name})

    @staticmethod
    def _join_env(args: MachineWorkerArgs) -> dict[str, pulumi.Input[str]]:
        # Which machines the join may reset: those this lab marked, or adopts (join-worker.sh).
        env: dict[str, pulumi.Input[str]] = {
            "LAB_ID": args.lab_id,
            "LAB_IDENTITY": args.lab_identity,
            "TENANT": args.tenant,
            "ADOPT": "true" if args.machine.adopt else "false",
        }
        if args.machine.node_ip:
            env["NODE_IP"] = args.machine.node_ip
        if args.machine.flannel_interface:
            # This machine's own: the join names its address to its flanneld alone, never the tenant's.
            env["FLANNEL_INTERFACE"] = args.machine.flannel_interface
            env["FLANNEL_NAMESPACE"] = FLANNEL_NAMESPACE
        if args.real_gpus:
            # The kubelet registers the label HAMi's NVIDIA plugin selects, so a re-joined Node has it at once.
            env["NODE_LABELS"] = ",".join(f"{key}={value}" for key, value in REAL_GPU_NODE_LABELS.items())
        return env
