"""Sleep and wake of one worker, container or machine: the step a sleeping tenant toggles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
from pulumi_command import local

from components.commands import script_command


def worker_power(
    name: str,
    node_name: str,
    transport: Mapping[str, pulumi.Input[str]],
    sleeping: bool,
    *,
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource],
) -> local.Command:
    """Stops (asleep) or starts (awake) the worker; present in both states, so a toggle is an update.

    Runs after `after` (its join, and the control plane reaching the asked state): a tenant
    falls asleep control plane first, and wakes control plane first, so a kubelet never runs
    long without its API server.
    """
    return script_command(
        f"{name}-power",
        "worker-power.sh",
        {**transport, "NODE": node_name, "STATE": "asleep" if sleeping else "awake"},
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=list(after),
            # Above the script's own bound: a 60 s stop, or a start and 180 s for systemd.
            custom_timeouts=pulumi.CustomTimeouts(create="5m", update="5m"),
        ),
    )
