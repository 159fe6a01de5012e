"""`make sleep TENANT=` and `make wake TENANT=`: scripts/tenant_sleep.py sets or removes the tenant's `sleeping`
key through `pulumi config --path` (which stores "true" as a boolean: pulumi/pulumi sdk/go/common/resource/config,
adjustObjectValue), then `make up` runs."""

from __future__ import annotations

import importlib.util
import os
import subprocess

import pytest

from tests.plan import ROOT
from tests.render_charts_module import stack_config
from validation.host import CommandResult

STACK_FILE = (ROOT / "Pulumi.dev.yaml").read_text()


class RecordingRunner:
    def __init__(self, returncode: int = 0, stderr: str = ""):
        self.calls: list[tuple[str, ...]] = []
        self.returncode, self.stderr = returncode, stderr

    def run(self, argv, stdin=None, timeout=60, env=None) -> CommandResult:
        self.calls.append(tuple(argv))
        return CommandResult(tuple(argv), self.returncode, "", self.stderr)


def load_script():
    spec = importlib.util.spec_from_file_location("tenant_sleep", ROOT / "scripts" / "tenant_sleep.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tenant_sleep = load_script()


def stack_dir(tmp_path, text: str = STACK_FILE):
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    return tmp_path


def test_the_dev_stack_names_the_tenants_the_tests_use():
    assert [tenant["name"] for tenant in stack_config("dev")["tenants"]] == ["tenant-a", "tenant-b"]


def test_sleep_sets_the_key_of_that_tenant_by_its_position(tmp_path, capsys):
    runner = RecordingRunner()
    code = tenant_sleep.main(["sleep", "--tenant", "tenant-b", "--stack", "dev"], runner, stack_dir(tmp_path))
    assert code == 0
    assert runner.calls == [("pulumi", "config", "set", "--path", "--stack", "dev", "tenants[1].sleeping", "true")]
    assert "tenant-b: asleep" in capsys.readouterr().out


def test_wake_removes_the_key_it_set(tmp_path):
    asleep = STACK_FILE.replace("    - name: tenant-b\n", "    - name: tenant-b\n      sleeping: true\n")
    runner = RecordingRunner()
    code = tenant_sleep.main(["wake", "--tenant", "tenant-b"], runner, stack_dir(tmp_path, asleep))
    assert code == 0
    assert runner.calls == [("pulumi", "config", "rm", "--path", "--stack", "dev", "tenants[1].sleeping")]


@pytest.mark.parametrize(
    ("action", "line"), [("sleep", "      sleeping: true\n"), ("wake", ""), ("wake", "      sleeping: false\n")]
)
def test_a_tenant_already_in_the_asked_state_is_left_alone(tmp_path, capsys, action, line):
    text = STACK_FILE.replace("    - name: tenant-a\n", f"    - name: tenant-a\n{line}")
    runner = RecordingRunner()
    assert tenant_sleep.main([action, "--tenant", "tenant-a"], runner, stack_dir(tmp_path, text)) == 0
    assert runner.calls == []
    assert "already" in capsys.readouterr().out


def test_an_unknown_tenant_is_refused_naming_the_known_ones(tmp_path, capsys):
    runner = RecordingRunner()
    assert tenant_sleep.main(["sleep", "--tenant", "tenant-z"], runner, stack_dir(tmp_path)) == 64
    error = capsys.readouterr().err
    assert "no tenant 'tenant-z'" in error and "tenant-a, tenant-b" in error
    assert runner.calls == []


def test_a_stack_without_its_file_is_refused(tmp_path, capsys):
    assert tenant_sleep.main(["sleep", "--tenant", "tenant-a"], RecordingRunner(), tmp_path) == 64
    assert "cannot read" in capsys.readouterr().err


def test_a_failed_pulumi_config_fails_with_its_reason(tmp_path, capsys):
    runner = RecordingRunner(returncode=255, stderr="error: passphrase must be set\n")
    assert tenant_sleep.main(["sleep", "--tenant", "tenant-a"], runner, stack_dir(tmp_path)) == 1
    assert "passphrase must be set" in capsys.readouterr().err


def dry_run(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "PULUMI_BACKEND_URL"}
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "-n", *args, f"VENV={tmp_path / 'venv'}"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("action", ["sleep", "wake"])
def test_make_sets_the_key_on_the_existing_stack_then_runs_up(tmp_path, action):
    dry = dry_run(tmp_path, action, "TENANT=tenant-b")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert "pulumi stack select dev" in lines and not any("--create" in line for line in lines[:20])
    toggle = next(
        i for i, line in enumerate(lines) if f"tenant_sleep.py {action} --tenant tenant-b --stack dev" in line
    )
    up = next(i for i, line in enumerate(lines) if line == "pulumi up --yes --stack dev")
    validate = next(i for i, line in enumerate(lines) if line.endswith("-m validation --json validation-report.json "
                                                                         "--stack dev"))
    assert toggle < up < validate
    if action == "sleep":
        assert validate == len(lines) - 1
    else:
        # A woken worker's kubelet refuses the GPU pods it had: the wake ends bringing them back.
        assert lines[-1].endswith("scripts/tenant_sleep.py recover --tenant tenant-b --stack dev "
                                  "--kubeconfig-dir kubeconfigs")


def test_make_sleep_without_a_tenant_does_nothing_but_say_so(tmp_path):
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "sleep", f"VENV={tmp_path / 'venv'}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "name the tenant: make sleep TENANT=<name>" in done.stderr
    assert not (tmp_path / "venv").exists()


def test_the_live_lab_sleeps_and_wakes_a_tenant_checks_its_gpu_workload_and_reports_the_wake_time():
    from tests.test_make_and_workflows import position, workflow

    (job,) = workflow("live.yml")["jobs"].values()
    names = [step.get("run", step.get("uses", "")) for step in job["steps"]]
    up, cycle, down = position(names, "make up"), position(names, "make sleep TENANT="), position(names, "make down")
    assert up < cycle < down
    script = names[cycle].splitlines()
    order = [
        "kube create deployment slept",
        "make sleep TENANT=tenant-b",
        "make preview PREVIEW_ARGS=--expect-no-changes",
        "make wake TENANT=tenant-b",
        "kube wait deployment slept --for=condition=Available",
        "hami\\.io/vgpu-devices-allocated",
        "kube delete deployment slept",
    ]
    assert [position(script, fragment) for fragment in order] == sorted(position(script, f) for f in order)
    # The pod placed before sleep may be refused by the woken kubelet and replaced: its UID proves nothing.
    assert ".metadata.uid" not in names[cycle]
    # The whole `make wake` is timed, and the time lands in the run's summary.
    started, woke = position(script, "started=$(date +%s)"), position(script, "woke=$(($(date +%s) - started))")
    assert started < position(script, "make wake TENANT=tenant-b") < woke
    assert "GITHUB_STEP_SUMMARY" in names[cycle] and "${woke} s" in names[cycle]
    assert "always()" not in str(job["steps"][cycle].get("if", ""))
