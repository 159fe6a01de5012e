"""Options of the host-side commands as the plan records them.

Only steps that print credentials are encrypted in state; the rest stay readable.

Pulumi treats everything derived from a secret as secret, so encrypting a public
step (e.g. kind-subnet.sh's Docker subnet, from which the MetalLB pool comes)
would hide values a user reads in `pulumi stack output` and in diffs.
"""

# Steps that print a kubeconfig (kind-kubeconfig.sh, tenant-kubeconfig.sh) or
# handle a join token (join-worker.sh): see each script's header.
# The last two with observability on (the dev stack): a tenant's metrics token, Grafana's admin password.
CREDENTIAL_STEPS = {"kind-kubeconfig.sh", "tenant-kubeconfig.sh", "join-worker.sh", "tenant-metrics-token.sh",
                    "grafana-password.sh"}


def script_of(command) -> str:
    # A command that runs nothing on creation runs its script on an update (components/datastore_move.py).
    return (command.inputs.get("create") or command.inputs["update"]).rsplit("/", 1)[-1]


def test_exactly_the_credential_steps_have_secret_output(up_plan):
    commands = up_plan.of_type("command:local:Command")
    secret = {script_of(c) for c in commands if "stdout" in c.secret_outputs}
    public = {script_of(c) for c in commands if not c.secret_outputs}
    assert secret == CREDENTIAL_STEPS
    assert "kind-subnet.sh" in public and not public & CREDENTIAL_STEPS


def test_a_step_without_a_destroy_script_runs_nothing_on_destroy(up_plan):
    # kind-up.sh is undone by kind-down.sh; check-address-pool.sh only checks and leaves nothing to undo.
    (kind,) = up_plan.commands("kind-up.sh")
    (check,) = up_plan.commands("check-address-pool.sh")
    assert kind.inputs["delete"] == "exec bash scripts/kind-down.sh"
    assert check.inputs.get("delete") is None
