"""What follows a tenant's move to another DataStore: its kubelets and the lab's in-cluster clients restarted.

Kamaji's guide asks for the kubelets (clastix/kamaji docs/content/guides/datastore-migration.md@26.8.2-edge, "Post
migration"); why, and why the lab's clients too: docs/architecture.md, "Moving a datastore, step by step".

Each step is a command that runs nothing when it is created and its script when one of its inputs changes: the
DataStore the tenant names is one of them, so a move runs it once, and a tenant's first `up` and every `up` after
never do. (A trigger would not do: pulumi-command replaces a command whose triggers change, which runs its create
step, pulumi/pulumi-command provider/pkg/provider/common/inputs.go@v1.2.1.) While the tenant sleeps, changes of its
inputs are ignored: its workers are stopped, and the change runs once it wakes. A run that failed runs again on
the next `up`: either its state kept the old inputs, or it was saved with initialization errors, which the engine
updates again (pulumi/pulumi pkg/resource/deploy/step_generator.go, generateSteps).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
from pulumi_command import local

from components.commands import script_command
from components.pod_security import EXEMPT_NAMESPACES


def _after_move(sleeping: bool, after: Sequence[pulumi.Resource], timeout: str) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(
        depends_on=list(after),
        # Asleep, the state keeps the DataStore the tenant last ran on while awake: the wake then runs the step.
        ignore_changes=["environment"] if sleeping else None,
        custom_timeouts=pulumi.CustomTimeouts(update=timeout),
    )


def kubelet_restart(
    name: str,
    node_name: str,
    transport: Mapping[str, pulumi.Input[str]],
    data_store: str,
    sleeping: bool,
    *,
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource],
) -> local.Command:
    """Restarts the worker's kubelet once its tenant runs on another DataStore.

    Runs after `after`: Kamaji reporting the move done, and the worker joined and awake.
    """
    return script_command(
        f"{name}-kubelet-restart",
        None,
        {**transport, "NODE": node_name, "DATASTORE": data_store},
        update="restart-kubelet.sh",
        opts=pulumi.ResourceOptions.merge(
            pulumi.ResourceOptions(parent=parent),
            # Above the script's own bound (restart-kubelet.sh).
            _after_move(sleeping, after, "6m"),
        ),
    )


def clients_restart(
    name: str,
    tenant: str,
    kubeconfig: pulumi.Input[str],
    data_store: str,
    sleeping: bool,
    *,
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource],
) -> local.Command:
    """Restarts every Deployment and DaemonSet in the tenant's namespaces that are the lab's, and waits until they
    are rolled out, once the tenant runs on another DataStore and its kubelets restarted (`after`)."""
    return script_command(
        f"{name}-clients-restart",
        None,
        {
            "KUBECONFIG_DATA": kubeconfig,
            "TENANT": tenant,
            "DATASTORE": data_store,
            "NAMESPACES": " ".join(EXEMPT_NAMESPACES),
        },
        update="restart-tenant-clients.sh",
        opts=pulumi.ResourceOptions.merge(
            pulumi.ResourceOptions(parent=parent),
            # Above the script's own bound (restart-tenant-clients.sh).
            _after_move(sleeping, after, "15m"),
        ),
    )
