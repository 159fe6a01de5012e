"""Host-side steps run by pulumi-command: one bash script in ./scripts each.

The scripts take their inputs from environment variables and print only their
declared result on stdout; see the header of each script.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
from pulumi_command import local

SCRIPTS_DIR = "scripts"


def script(name: str) -> str:
    # A relative path: Pulumi runs commands from the project directory, and an
    # absolute one would differ between checkouts and re-run every command.
    # pulumi-command runs `/bin/sh -c "<create>"` and signals only that shell on a
    # timeout or cancel; `exec` makes the script that process, so it is the one stopped.
    return f"exec bash {SCRIPTS_DIR}/{name}"


def script_command(
    resource_name: str,
    create: str | None,
    environment: Mapping[str, pulumi.Input[str]],
    opts: pulumi.ResourceOptions,
    *,
    delete: str | None = None,
    update: str | None = None,
    secret_output: bool = False,
    triggers: Sequence[pulumi.Input] | None = None,
) -> local.Command:
    """A Command that runs scripts/<create> (and scripts/<delete> on destroy).

    With `update`, a change of its inputs runs scripts/<update> instead of <create>; a change of `triggers`
    replaces the command, which runs <create> (pulumi/pulumi-command provider/pkg/provider/common/inputs.go and
    local/commandController.go@v1.2.1). Without `create`, its creation runs nothing.

    With secret_output, stdout and stderr are encrypted in state: such commands
    print kubeconfigs or handle join tokens. stderr still streams to the console,
    so the scripts keep credentials off it.
    """
    secret_opts = pulumi.ResourceOptions(additional_secret_outputs=["stdout", "stderr"]) if secret_output else None
    return local.Command(
        resource_name,
        create=script(create) if create else None,
        update=script(update) if update else None,
        delete=script(delete) if delete else None,
        environment=dict(environment),
        triggers=list(triggers) if triggers else None,
        # stderr carries progress only (the scripts keep secrets off it); stdout may not.
        logging=local.Logging.STDERR,
        # Never hand a previous run's (possibly secret) output to the next run.
        add_previous_output_in_env=False,
        opts=pulumi.ResourceOptions.merge(opts, secret_opts),
    )
