"""Options of the host-side commands that a user only notices on a live host:
credentials on the console, timeouts that kill a script mid-way, stale reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.plan import ROOT, Registration

SCRIPTS = ROOT / "scripts"
# pulumi-command's Logging enum values that keep stdout off the console
# (pulumi/pulumi-command provider/pkg/provider/local/command.go@v1.2.1).
CONSOLE_SAFE_LOGGING = {"stderr", "none"}
_BOUND = re.compile(r"^# bound:\s+(\d+) s\b", re.MULTILINE)
_DEFAULT_TIMEOUT = re.compile(r"\$\{\w+_TIMEOUT:-(\d+)\}")
_DURATION = re.compile(r"^(\d+)(s|m|h)$")
_SECONDS = {"s": 1, "m": 60, "h": 3600}


def script_of(command: Registration, operation: str) -> Path | None:
    line = command.inputs.get(operation)
    return SCRIPTS / line.rsplit("/", 1)[-1] if line else None


def script_name(command: Registration, operation: str) -> str:
    """The script's file name; empty for an operation that runs nothing (a command with no create step)."""
    script = script_of(command, operation)
    return script.name if script else ""


def declared_bound(script: Path) -> int | None:
    """The longest a script runs, from its `# bound:  N s (...)` header line."""
    match = _BOUND.search(script.read_text())
    return int(match[1]) if match else None


def seconds(duration: str) -> int:
    match = _DURATION.match(duration)
    assert match, f"unexpected Pulumi timeout {duration!r}"
    return int(match[1]) * _SECONDS[match[2]]


def handles_credentials(command: Registration) -> bool:
    return "environment" in command.secret_inputs or "stdout" in command.secret_outputs


def commands(plan) -> list[Registration]:
    return plan.of_type("command:local:Command")


def test_no_command_that_handles_credentials_prints_its_stdout_on_the_console(dev_plan):
    handling = [command for command in commands(dev_plan) if handles_credentials(command)]
    assert len(handling) >= 5  # kind, tenant kubeconfigs, joins, waits with kubeconfigs
    for command in handling:
        assert command.inputs.get("logging") in CONSOLE_SAFE_LOGGING, (command.name, command.inputs.get("logging"))


def test_commands_that_print_credentials_keep_stdout_and_stderr_secret_in_state(up_plan):
    printers = ("kind-kubeconfig.sh", "tenant-kubeconfig.sh")
    printing = [c for c in commands(up_plan) if script_name(c, "create") in printers]
    assert len(printing) == 3  # the kind cluster and two tenants
    for command in printing:
        assert {"stdout", "stderr"} <= set(command.secret_outputs), command.name


@pytest.fixture(params=["containers", "machines"])
def lab_plan(request, up_plan, machine_plan):
    """The dev lab's `up`, and an `up` of machine workers with mock GPUs on an existing cluster."""
    return up_plan if request.param == "containers" else machine_plan("mock", False)


@pytest.mark.parametrize("operation", ["create", "update", "delete"])
def test_every_pulumi_timeout_outlasts_the_script_it_runs(lab_plan, operation):
    timed = [c for c in commands(lab_plan) if operation in c.custom_timeouts and script_of(c, operation)]
    assert timed or operation != "create"
    for command in timed:
        script = script_of(command, operation)
        bound = declared_bound(script)
        assert bound is not None, f"{script.name} runs under a Pulumi timeout but declares no '# bound:  N s' line"
        timeout = seconds(command.custom_timeouts[operation])
        assert timeout > bound, f"{command.name}: Pulumi kills {script.name} after {timeout}s, it may run {bound}s"


def test_timed_commands_include_the_join_and_the_platform_waits(up_plan):
    timed = {script_of(c, "create").name for c in commands(up_plan) if "create" in c.custom_timeouts}
    assert {"kind-up.sh", "wait-metallb.sh", "wait-kamaji.sh", "join-worker.sh", "wait-gpus.sh"} <= timed


def test_the_restarts_after_a_datastore_move_are_timed_where_they_run(lab_plan):
    # They run nothing on creation and their scripts on an update (components/datastore_move.py).
    timed = {script_name(c, "update") for c in commands(lab_plan) if "update" in c.custom_timeouts}
    assert {"restart-kubelet.sh", "restart-tenant-clients.sh"} <= timed


def test_a_delete_script_with_a_bound_runs_under_a_delete_timeout(lab_plan):
    bounded = [c for c in commands(lab_plan) if script_of(c, "delete") and declared_bound(script_of(c, "delete"))]
    assert bounded
    for command in bounded:
        assert "delete" in command.custom_timeouts, command.name


def test_every_custom_timeout_is_a_duration_the_engine_parses(lab_plan):
    # The engine reads them with Go's time.ParseDuration: lower-case units only.
    timeouts = [value for command in commands(lab_plan) for value in command.custom_timeouts.values()]
    assert timeouts and all(re.fullmatch(r"(\d+(h|m|s|ms))+", value) for value in timeouts), timeouts


def test_a_machine_check_is_timed_whenever_it_runs(lab_plan):
    checks = [c for c in commands(lab_plan) if script_name(c, "create") == "check-machine.sh"]
    assert bool(checks) == any(r.type.endswith(":MachineWorker") for r in lab_plan.registrations)
    for check in checks:  # created, and run again when the machine or the tenant's version changes
        assert {"create", "update"} <= set(check.custom_timeouts), check.name


@pytest.mark.parametrize("script", sorted(p.name for p in SCRIPTS.glob("*.sh") if declared_bound(p)), ids=str)
def test_a_declared_bound_covers_the_scripts_own_default_waits(script):
    path = SCRIPTS / script
    bound = declared_bound(path)
    waits = sum(int(default) for default in _DEFAULT_TIMEOUT.findall(path.read_text()))
    assert bound >= waits, f"{script}: its timeout variables add up to {waits}s, more than its bound {bound}s"


def test_join_bound_matches_a_worst_case_of_three_kubeadm_attempts():
    # kubeadm v1beta4 JoinConfiguration timeouts.discovery defaults to 5m
    # (kubernetes cmd/kubeadm/app/apis/kubeadm/v1beta4/defaults.go); plus the 90 s boot wait.
    assert declared_bound(SCRIPTS / "join-worker.sh") >= 90 + 3 * 300


def test_a_replaced_control_plane_makes_the_tenant_kubeconfig_be_read_again(up_plan):
    for tenant in ("tenant-a", "tenant-b"):
        read = up_plan.named(f"{tenant}-admin-kubeconfig")
        # The mock engine gives every Kubernetes object the uid "uid-<resource name>"; a
        # replacement gets a new uid, which re-runs the command.
        assert read.inputs.get("triggers") == [f"uid-{tenant}-control-plane"]


def test_a_replaced_worker_container_is_joined_and_registered_again(up_plan):
    for step in ("join", "gpus"):
        command = up_plan.named(f"kamaji-tenant-a-w1-{step}")
        # The join also re-runs for a new tenant CA (tests/test_workers.py); both re-run for a new container.
        assert command.inputs.get("triggers")[0] == "kamaji-tenant-a-w1-container-id"


# lib.sh's ssh transport: what it reads, and what it insists on (_ssh_setup).
SSH_VARIABLES = {"SSH_ADDRESS", "SSH_PORT", "SSH_USER", "SSH_PRIVATE_KEY", "SSH_HOST_KEY"}
SSH_REQUIRED = {"SSH_ADDRESS", "SSH_PRIVATE_KEY", "SSH_HOST_KEY"}
_ENV_LINE = re.compile(r"^#(?: env:)?( +)([A-Z][A-Z0-9_]*) ")
_REQUIRE_ENV = re.compile(r"^require_env ([A-Z0-9_ ]+)$", re.MULTILINE)


def script_variables(script: Path) -> tuple[set[str], set[str]]:
    """(the variables a script's `# env:` header names, those its top-level require_env insists on)."""
    text, names, column, in_block = script.read_text(), set(), None, False
    for line in text.splitlines():
        in_block = line.startswith("# env:") or (in_block and line.startswith("#  "))
        match = _ENV_LINE.match(line) if in_block else None
        # Names sit in one column; a wrapped description further right is not one.
        if match and column in (None, match.start(2)):
            names.add(match[2])
            column = match.start(2)
    required = _REQUIRE_ENV.search(text)
    return names, set(required[1].split()) if required else set()


def test_every_command_gets_exactly_the_variables_its_scripts_read(lab_plan):
    assert_variables_match_scripts(lab_plan)


def assert_variables_match_scripts(plan) -> None:
    """Each command sets what its scripts insist on, and nothing they do not read (a misspelt name)."""
    for command in commands(plan):
        scripts = [script for op in ("create", "update", "delete") if (script := script_of(command, op))]
        declared = set().union(*(script_variables(script)[0] for script in scripts))
        required = set().union(*(script_variables(script)[1] for script in scripts))
        given = command.inputs.get("environment", {})
        if given.get("NODE_TRANSPORT") == "ssh":
            declared, required = declared | SSH_VARIABLES, required | SSH_REQUIRED
        assert required <= set(given) <= declared, (command.name, sorted(given))
