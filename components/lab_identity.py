"""The lab's identity: random, made once per stack and kept in its state, written into every machine's mark."""

from __future__ import annotations

import pulumi

from components.commands import script_command


class LabIdentity(pulumi.ComponentResource):
    """`value`: 32 hex digits (scripts/lab-identity.sh), the same for every later `pulumi up` of the stack.

    Names can collide (two clones of the repository with default names sharing a machine
    pool); this cannot. The command has no triggers and no update step, so it never runs
    again while the stack exists.
    """

    value: pulumi.Output[str]

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:LabIdentity", name, None, opts)
        made = script_command(f"{name}-identity", "lab-identity.sh", {}, opts=pulumi.ResourceOptions(parent=self))
        self.value = made.stdout.apply(str.strip)
        self.register_outputs({"value": self.value})
