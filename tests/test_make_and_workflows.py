"""The Makefile's entry points (dry runs only) and the GitHub workflows' guarantees."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def make(*args: str, env_drop=("PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE", "PULUMI_BACKEND_URL")):
    env = {key: value for key, value in os.environ.items() if key not in env_drop}
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def position(lines: list[str], fragment: str) -> int:
    return next(index for index, line in enumerate(lines) if fragment in line)


@needs_make
def test_dry_run_of_up_shows_every_step_in_order(tmp_path):
    dry = make("-n", "up", f"VENV={tmp_path / 'venv'}")

    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    steps = [
        "PULUMI_CONFIG_PASSPHRASE+set",
        "pulumi stack select --create dev",  # first: the preflight reads the stack's mode
        "scripts/preflight.py --stack dev",  # before the venv: it checks the Python that builds it
        "-m venv",
        "pulumi up --yes",
        "scripts/write_kubeconfigs.py",
        "-m validation",
    ]
    assert [position(lines, step) for step in steps] == sorted(position(lines, step) for step in steps)
    assert not any("pulumi login" in line for line in lines), "a global login would change the user's backend"
    assert not (tmp_path / "venv").exists()


@needs_make
def test_state_is_local_unless_a_backend_is_chosen(tmp_path):
    local = make("-n", "--print-data-base", "preview", f"VENV={tmp_path / 'venv'}")
    assert "PULUMI_BACKEND_URL = file://~" in local.stdout
    chosen = make("-n", "--print-data-base", "preview", "PULUMI_BACKEND_URL=s3://bucket", f"VENV={tmp_path / 'v'}")
    assert "PULUMI_BACKEND_URL = s3://bucket" in chosen.stdout


@needs_make
def test_targets_that_read_a_lab_do_not_create_an_empty_stack(tmp_path):
    for target in ("validate", "kubeconfigs", "down"):
        dry = make("-n", target, f"VENV={tmp_path / 'venv'}", env_drop=("PULUMI_BACKEND_URL",))
        assert "pulumi stack select dev" in dry.stdout, target
        assert "--create" not in dry.stdout, target


@needs_make
def test_up_without_a_passphrase_says_how_to_set_one_and_does_nothing_else(tmp_path):
    run = make("up", f"VENV={tmp_path / 'venv'}")

    assert run.returncode != 0
    assert "export PULUMI_CONFIG_PASSPHRASE=" in run.stderr
    assert not (tmp_path / "venv").exists()


@needs_make
def test_venv_is_rebuilt_only_when_requirements_change(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    stamp = venv / ".requirements-installed"
    stamp.touch()
    requirements_time = (ROOT / "requirements.txt").stat().st_mtime

    os.utime(stamp, (requirements_time + 60, requirements_time + 60))
    assert "pip install" not in make("-n", "venv", f"VENV={venv}").stdout

    os.utime(stamp, (requirements_time - 60, requirements_time - 60))
    assert "-r requirements.txt" in make("-n", "venv", f"VENV={venv}").stdout


def workflow(name: str) -> dict:
    document = yaml.safe_load((WORKFLOWS / name).read_text())
    document["on"] = document.pop(True, document.get("on"))  # YAML 1.1 reads a bare `on` as true
    return document


@pytest.mark.parametrize("name", ["ci.yml", "live.yml"])
def test_every_action_is_pinned_to_a_commit_with_its_version_named(name):
    # A tag can be moved to other code; a full commit SHA cannot. YAML drops comments, so read the text.
    uses_lines = [line for line in (WORKFLOWS / name).read_text().splitlines() if re.search(r"^\s*(- )?uses:", line)]
    assert uses_lines
    for line in uses_lines:
        assert re.search(r"uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+", line), line


def test_ci_runs_on_pull_requests_and_main_with_the_make_targets_users_run():
    ci = workflow("ci.yml")

    assert set(ci["on"]) == {"pull_request", "push"} and ci["on"]["push"]["branches"] == ["main"]
    commands = "\n".join(step.get("run", "") for step in ci["jobs"]["test"]["steps"])
    assert "make venv lint test" in commands and "make preview" in commands


def test_live_lab_is_opt_in_and_always_torn_down_after_the_report_is_kept():
    live = workflow("live.yml")
    (job,) = live["jobs"].values()
    steps = job["steps"]

    assert set(live["on"]) == {"workflow_dispatch", "schedule"}
    names = [step.get("run", step.get("uses", "")) for step in steps]
    up, upload, down = (
        position(names, "make up"),
        position(names, "actions/upload-artifact"),
        position(names, "make down"),
    )
    assert up < upload < down
    assert steps[upload]["if"] == "always()" and steps[down]["if"] == "always()"
    assert steps[upload]["with"]["path"] == "validation-report.json"


@needs_make
def test_down_checks_every_tool_destroy_runs_before_destroying(tmp_path):
    # Destroy runs scripts/kind-down.sh (kind), removes worker containers (docker) and
    # lets workers leave their tenant (kubectl).
    dry = make("-n", "down", f"VENV={tmp_path / 'venv'}", env_drop=("PULUMI_BACKEND_URL",))
    lines = dry.stdout.splitlines()

    check = position(lines, "preflight.py --tools kind docker kubectl")
    assert check < position(lines, "pulumi destroy --yes")


@needs_make
def test_make_reads_the_stack_it_manages(tmp_path):
    dry = make("-n", "validate", "STACK=staging", f"VENV={tmp_path / 'venv'}")
    assert "-m validation --json validation-report.json --stack staging" in dry.stdout
    assert (
        "write_kubeconfigs.py --dir kubeconfigs --stack staging"
        in make("-n", "kubeconfigs", "STACK=staging", f"VENV={tmp_path / 'venv'}").stdout
    )
