"""The steps every worker takes, whatever it runs on: kubeadm join, then mock-GPU registration.

Container workers and machines differ only in the transport the scripts use
(`NODE_TRANSPORT` and its variables, scripts/lib.sh), so both run these same steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
from pulumi_command import local

from components.commands import script_command
from components.gpus import GpuSpec, node_gpu_count, register_annotation
from components.tenant_control_plane import kubeconfig_ca_fingerprint


@dataclass(frozen=True)
class JoinedNode:
    joined: local.Command
    """The kubelet is registered with the tenant."""
    gpus_registered: local.Command | None
    """HAMi's mock registration is in place; None for a node without mock GPUs."""

    @property
    def done(self) -> local.Command:
        return self.gpus_registered or self.joined


def join_node(
    name: str,
    node_name: str,
    transport: Mapping[str, pulumi.Input[str]],
    tenant_kubeconfig: pulumi.Input[str],
    gpus: tuple[GpuSpec, ...],
    gpu_slots: int,
    *,
    node_identity: Sequence[pulumi.Input],
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource] = (),
    unregister_gpus: bool = False,
    join_env: Mapping[str, pulumi.Input[str]] | None = None,
) -> JoinedNode:
    """Joins `node_name` to its tenant and registers its mock GPUs.

    The join re-runs when `node_identity` changes (a new container or machine) or
    the tenant gets a new CA (a replaced control plane); the script resets a node
    bound to another CA or endpoint and leaves one joined to this tenant alone. On
    destroy or before a replacement the node is drained and leaves the tenant (and a
    machine is reset, scripts/leave-worker.sh). `unregister_gpus` removes the mock
    registration on destroy: a machine outlives its worker, a container does not.
    `join_env` adds variables only the join and leave scripts read.
    """
    tenant_ca = pulumi.Output.unsecret(pulumi.Output.from_input(tenant_kubeconfig).apply(kubeconfig_ca_fingerprint))
    joined = script_command(
        f"{name}-join",
        "join-worker.sh",
        {**transport, **(join_env or {}), "KUBECONFIG_DATA": tenant_kubeconfig, "NODE": node_name},
        delete="leave-worker.sh",
        secret_output=True,
        triggers=[*node_identity, tenant_ca],
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=list(after),
            # The node keeps its name: the old node object must leave before the new one joins.
            delete_before_replace=True,
            # Above the script's own bound (join-worker.sh): boot wait, the first reset, a stale
            # cluster-info written again and the three bounded kubeadm attempts, each with its reset;
            # the drain and reset on delete are bounded by their own timeouts (leave-worker.sh).
            custom_timeouts=pulumi.CustomTimeouts(create="27m", delete="8m"),
        ),
    )
    if not gpus:
        return JoinedNode(joined, None)
    # Uses the node's own kubelet credentials on the node and keeps re-applying,
    # because kubelet resets the GPU capacity when it restarts.
    gpus_registered = script_command(
        f"{name}-gpus",
        "register-gpus.sh",
        {
            **transport,
            "NODE": node_name,
            "GPU_REGISTER_JSON": register_annotation(node_name, gpus, gpu_slots),
            "GPU_CAPACITY": str(node_gpu_count(gpus) * gpu_slots),
            # unregister-gpus.sh leaves a machine alone that another tenant has by now.
            **({"KUBECONFIG_DATA": tenant_kubeconfig} if unregister_gpus else {}),
        },
        delete="unregister-gpus.sh" if unregister_gpus else None,
        triggers=list(node_identity),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[joined]),
    )
    return JoinedNode(joined, gpus_registered)
