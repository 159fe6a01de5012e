"""The Makefile's entry points (dry runs only) and the GitHub workflows' guarantees."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
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
        "-m venv",  # the config check runs on the program's own models
        "scripts/check_config.py --stack dev --mode-json",
        "scripts/preflight.py --stack dev --config-json",  # the mode the check read: no pulumi needed
        "pulumi stack select --create dev",  # only once every check is done
        "pulumi up --yes",
        "-m snapshot.leftovers --stack dev",  # what a finished move left in the old DataStore, before validating
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


def test_live_lab_moves_tenant_b_to_its_own_datastore_and_back_validating_after_each_move():
    (job,) = workflow("live.yml")["jobs"].values()
    runs = [step.get("run", "") for step in job["steps"]]
    move = position(runs, 'tenants[$index].dataStore" "$key"')
    script = runs[move]
    snapshot, down = position(runs, "live-snapshot-round-trip.sh"), position(runs, "make down")
    assert position(runs, "make up") < move < snapshot < down
    # Both directions, each applied by `make up` (which validates), each checked on Kamaji's own status.
    assert "for move in dedicated:etcd-tenant-b shared:default; do" in script
    loop = script.split("; do", 1)[1].split("done", 1)[0]
    assert loop.index("pulumi config set") < loop.index("make up") < loop.index("status.storage.dataStoreName")
    assert "exit 1" in loop.split("make up", 1)[1]
    assert script.rstrip().endswith("make preview PREVIEW_ARGS=--expect-no-changes"), "the key set back changes nothing"


@needs_make
def test_down_checks_every_tool_destroy_runs_before_destroying(tmp_path):
    # Destroy runs scripts/kind-down.sh (kind), removes worker containers (docker), lets workers
    # leave their tenant (kubectl) and machines over SSH (scripts/leave-worker.sh: ssh).
    dry = make("-n", "down", f"VENV={tmp_path / 'venv'}", env_drop=("PULUMI_BACKEND_URL",))
    lines = dry.stdout.splitlines()

    check = position(lines, "preflight.py --tools kind docker kubectl ssh")
    assert check < position(lines, "pulumi destroy --yes")


@needs_make
def test_make_reads_the_stack_it_manages(tmp_path):
    dry = make("-n", "validate", "STACK=staging", f"VENV={tmp_path / 'venv'}")
    assert "-m validation --json validation-report.json --stack staging" in dry.stdout
    assert (
        "write_kubeconfigs.py --dir kubeconfigs --stack staging"
        in make("-n", "kubeconfigs", "STACK=staging", f"VENV={tmp_path / 'venv'}").stdout
    )


# What `pulumi stack select --create` does to the stack file with the passphrase provider: it keeps the file's
# comments and order and appends the new top-level key encryptionsalt at the end (pulumi/pulumi
# sdk/go/common/util/yamlutil/edit.go handleMappingNode, pkg/secrets/passphrase/manager.go @1b5949891b).
FAKE_PULUMI = r"""#!/bin/sh
case "$*" in
  version) echo v3.272.0 ;;
  "stack select --create "*|"stack select "*)
    eval "file=Pulumi.\${$#}.yaml"
    grep -qs '^encryptionsalt: ' "$file" ||
      echo 'encryptionsalt: v1:9WGTZ3BwQ0k=:v1:Zq4Nc0p1cQbYg8vq:v7UOaOq3IrhrV3ZRUxUgqLqD8pcZWw==' >> "$file" ;;
  *) echo "fake pulumi: unexpected $*" >&2; exit 97 ;;
esac
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True, text=True, check=True,
    ).stdout


@pytest.fixture
def user_clone(tmp_path):
    """A git checkout of the project's make entry points and stack files, with a fake pulumi on PATH."""
    repo = tmp_path / "lab"
    for name in ("Makefile", "Pulumi.yaml", "Pulumi.dev.yaml", ".gitattributes", ".gitignore", "scripts/preflight.py",
                 "scripts/stack_file_clean.py"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, repo / name)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "clone")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text(FAKE_PULUMI)
    (bin_dir / "pulumi").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PULUMI_CONFIG_PASSPHRASE": "mine"}
    return repo, env


@needs_make
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("target", ["stack", "existing-stack"])
def test_the_salt_pulumi_writes_leaves_git_status_clean(user_clone, target):
    repo, env = user_clone

    run = subprocess.run(["make", "--no-print-directory", "-C", str(repo), target], env=env, capture_output=True,
                         text=True, check=False)

    assert run.returncode == 0, run.stderr
    assert "\nencryptionsalt: v1:" in (repo / "Pulumi.dev.yaml").read_text(), "Pulumi reads the salt from the file"
    assert git(repo, "status", "--porcelain") == ""


@needs_make
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_your_own_config_edits_still_show_and_commit_without_the_salt(user_clone):
    repo, env = user_clone
    subprocess.run(["make", "-C", str(repo), "stack"], env=env, capture_output=True, check=True)
    stack_file = repo / "Pulumi.dev.yaml"
    stack_file.write_text(stack_file.read_text().replace("count: 2", "count: 1"))  # as pulumi config set would

    assert git(repo, "status", "--porcelain") == " M Pulumi.dev.yaml\n"
    git(repo, "commit", "-qam", "one L4")
    committed = git(repo, "show", "HEAD:Pulumi.dev.yaml")
    assert "count: 1" in committed and "encryptionsalt" not in committed


@needs_make
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_new_stack_file_of_yours_is_left_untracked(user_clone):
    repo, env = user_clone
    subprocess.run(["make", "-C", str(repo), "stack", "STACK=mine"], env=env, capture_output=True, check=True)

    assert (repo / "Pulumi.mine.yaml").read_text().startswith("encryptionsalt: ")
    assert git(repo, "status", "--porcelain") == "?? Pulumi.mine.yaml\n"


@needs_make
def test_make_audit_passes_each_filter_given_and_never_the_login_name_as_user(tmp_path, monkeypatch):
    # make inherits USER, the login name, from the environment: it must not become a filter.
    monkeypatch.setenv("USER", "someone-logged-in")

    def command(*variables: str) -> str:
        dry = make("-n", "audit", "TENANT=tenant-a", *variables, f"VENV={tmp_path / 'venv'}")
        (line,) = [line for line in dry.stdout.splitlines() if "-m validation.audit" in line]
        return line.split("-m validation.audit ", 1)[1]

    assert command() == "tenant-a --stack dev"
    assert command("SINCE=30m", "USER=system:node:w1", "VERB=delete", "JSON=1") == (
        'tenant-a --stack dev --since "30m" --user "system:node:w1" --verb "delete" --json'
    )


def team_isolation_step() -> tuple[list[str], int, str]:
    (job,) = workflow("live.yml")["jobs"].values()
    runs = [step.get("run", "") for step in job["steps"]]
    (position_,) = [i for i, run in enumerate(runs) if "--only team-isolation" in run]
    return runs, position_, runs[position_]


def test_the_live_lab_proves_each_team_is_held_to_its_tenant_while_every_tenant_is_awake():
    runs, step, _ = team_isolation_step()
    assert position(runs, "make up") < step < position(runs, "make sleep TENANT=tenant-b")


@pytest.mark.parametrize(
    ("statuses", "passes"),
    [(["pass", "pass"], True), (["pass", "skip"], False), (["unproven", "pass"], False), ([], False)],
)
def test_the_live_team_isolation_step_accepts_only_a_pass_for_every_tenant(tmp_path, statuses, passes):
    _, _, run = team_isolation_step()
    # The gate after the check: a skip (no team credential, an opted-out tenant) or an unproven result fails it.
    (gate,) = re.findall(r"python -c '([^']+)'", run)
    report = tmp_path / "team-isolation.json"
    results = [{"check": "team-isolation", "target": f"tenant-{i}", "status": status, "evidence": "", "reason": "r"}
               for i, status in enumerate(statuses)]
    report.write_text(json.dumps({"results": results}))
    done = subprocess.run([sys.executable, "-c", gate, str(report)], capture_output=True, text=True)
    assert (done.returncode == 0) is passes
    assert done.stdout.count("::error::team-isolation") == sum(status != "pass" for status in statuses)
