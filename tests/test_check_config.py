"""`make check-config`: a stack file checked offline with the program's own models (issue 50, point 4), and
`make up` reporting every config and host problem in one pass before it creates or selects a stack (point 3)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from components.config import MORE_MAY_FOLLOW
from tests.script_module import script_module

ROOT = Path(__file__).resolve().parent.parent
check_config = script_module("check_config")

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def checked(tmp_path: Path, stack_text: str, *args: str, stack: str = "mine") -> subprocess.CompletedProcess:
    """scripts/check_config.py's main on a project holding Pulumi.<stack>.yaml, in this process (its `root`): a
    new interpreter would spend a second importing the models. The script itself runs in ran_as_make_runs_it."""
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(stack_text)
    argv = ["--stack", stack, *args]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = check_config.main(argv, root=tmp_path)
    return subprocess.CompletedProcess(argv, code, stdout.getvalue(), stderr.getvalue())


def ran_as_make_runs_it(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """scripts/check_config.py run as `make check-config` runs it, on the project checked() wrote."""
    script = tmp_path / "scripts" / "check_config.py"
    # The script finds the project beside it; the program's components come from this checkout.
    script.parent.mkdir()
    (tmp_path / "components").symlink_to(ROOT / "components")
    shutil.copy(ROOT / "scripts" / "check_config.py", script)
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=False,
                          cwd=tmp_path)


# Problems in the order of the file: tenants are written before workersPerTenant, which the program checks first.
BROKEN = """\
config:
  kamaji-hami-lab:tenants:
    - name: tenant-a
      gpus:
        - model: NVIDIA L4 24GB
          count: many
    - name: tenant-b
      workers: 0
  kamaji-hami-lab:workersPerTenant: none
"""


def test_the_dev_stack_as_shipped_is_valid(tmp_path):
    checked(tmp_path, (ROOT / "Pulumi.dev.yaml").read_text(), stack="dev")
    run = ran_as_make_runs_it(tmp_path, "--stack", "dev")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout == "check-config: Pulumi.dev.yaml is valid\n"


def test_problems_are_named_by_tenant_in_the_order_of_the_file(tmp_path):
    run = checked(tmp_path, BROKEN)
    assert run.returncode == 1
    assert run.stdout.splitlines() == [
        "check-config: Pulumi.mine.yaml is invalid:",
        "  kamaji-hami-lab:tenants[tenant-a].gpus[0].count: expected a positive integer, got 'many'",
        "  kamaji-hami-lab:tenants[tenant-b].workers: expected a positive integer, got 0",
        "  kamaji-hami-lab:workersPerTenant: expected a positive integer, got 'none'",
        "  More problems may follow: rules that join a key to other keys run once the problems above are fixed.",
    ]


def test_tenants_that_share_a_name_are_told_apart_by_their_place(tmp_path):
    twins = "config:\n  kamaji-hami-lab:tenants:\n    - name: twin\n    - name: twin\n      workers: x\n"
    run = checked(tmp_path, twins)
    assert run.returncode == 1
    assert "  kamaji-hami-lab:tenants[1].workers: expected a positive integer, got 'x'" in run.stdout.splitlines()


def test_tenants_set_as_json_text_are_named_by_name_too(tmp_path):
    tenants = json.dumps([{"name": "tenant-a"}, {"name": "tenant-b", "workers": "x"}])
    run = checked(tmp_path, f"config:\n  kamaji-hami-lab:tenants: '{tenants}'\n")
    assert run.returncode == 1
    assert "  kamaji-hami-lab:tenants[tenant-b].workers: expected a positive integer, got 'x'" in run.stdout


def test_a_key_written_as_true_is_checked_as_the_text_the_cli_hands_over(tmp_path):
    # The CLI hands `dockerNetwork: true` to the program as the network name "true", not as a boolean.
    run = checked(tmp_path, "config:\n  kamaji-hami-lab:dockerNetwork: true\n"
                            "  kamaji-hami-lab:tenants:\n    - name: tenant-a\n")
    assert run.returncode == 1
    assert run.stdout.splitlines()[1].startswith(
        "  kamaji-hami-lab:dockerNetwork: only used with managementCluster existing")


SECURE_KUBECONFIG = """\
config:
  kamaji-hami-lab:managementCluster: existing
  kamaji-hami-lab:loadBalancer: provided
  kamaji-hami-lab:dockerNetwork: lab
  kamaji-hami-lab:managementKubeconfig:
    secure: v1:AAAA:BBBB
  kamaji-hami-lab:tenants:
    - name: tenant-a
      workers: 2
"""


def test_a_secure_value_is_taken_as_present_and_said_to_be_unchecked(tmp_path):
    run = checked(tmp_path, SECURE_KUBECONFIG)
    assert run.returncode == 0, run.stdout
    assert run.stdout.splitlines() == [
        "NOTE    kamaji-hami-lab:managementKubeconfig: secure, so taken as present and not checked offline "
        "(`pulumi up` decrypts it)",
        "check-config: Pulumi.mine.yaml is valid (secure values not checked)",
    ]


def test_private_keys_set_one_by_one_as_secrets_are_taken_as_present_and_their_rules_said_to_wait(tmp_path):
    secure_keys = ("  kamaji-hami-lab:sshPrivateKeys:\n    default:\n      secure: v1:CCCC\n"
                   "    spare:\n      secure: v1:DDDD\n")
    run = checked(tmp_path, SECURE_KUBECONFIG + secure_keys)
    assert run.returncode == 0, run.stdout
    assert run.stdout.splitlines()[1:] == [
        "NOTE    kamaji-hami-lab:sshPrivateKeys.default: secure, so taken as present and not checked offline "
        "(`pulumi up` decrypts it)",
        "NOTE    kamaji-hami-lab:sshPrivateKeys.spare: secure, so taken as present and not checked offline "
        "(`pulumi up` decrypts it)",
        "NOTE    the rules that join the secure values to other keys (an sshKey against sshPrivateKeys) run only "
        "when `pulumi up` decrypts them",
        "check-config: Pulumi.mine.yaml is valid (secure values not checked)",
    ]


def test_a_kubeconfig_written_in_plain_text_is_refused_as_the_program_refuses_it(tmp_path):
    run = checked(tmp_path, SECURE_KUBECONFIG.replace("\n    secure: v1:AAAA:BBBB", " 'apiVersion: v1'"))
    assert run.returncode == 1
    assert "  kamaji-hami-lab:managementKubeconfig: must be a secret (the value is not shown)" in run.stdout


@pytest.mark.parametrize(("text", "said"), [
    ("config: [unclosed", "check-config: Pulumi.mine.yaml is not valid YAML: "),
    ("encryptionsalt: v1:x\n", "check-config: Pulumi.mine.yaml has no config: mapping"),
    ("config: 3\n", "check-config: Pulumi.mine.yaml: config is not a mapping of key: value"),
])
def test_a_stack_file_that_is_no_config_is_an_error_naming_it(tmp_path, text, said):
    run = checked(tmp_path, text)
    assert run.returncode == 1
    assert run.stderr.startswith(said)


def test_a_missing_stack_file_is_an_error_naming_it(tmp_path):
    checked(tmp_path, BROKEN)
    run = ran_as_make_runs_it(tmp_path, "--stack", "gone")
    assert run.returncode == 1
    assert run.stderr.startswith("check-config: cannot read Pulumi.gone.yaml (No such file or directory)")


def test_the_mode_it_hands_the_preflight_is_what_pulumi_config_json_shows(tmp_path):
    mode = tmp_path / "mode.json"
    checked(tmp_path, SECURE_KUBECONFIG.replace("workers: 2", "workers: 3"), "--mode-json", str(mode))
    shown = json.loads(mode.read_text())
    assert shown["kamaji-hami-lab:managementKubeconfig"] == {"secret": True}, "no secret's value, not even encrypted"
    assert shown["kamaji-hami-lab:managementCluster"] == {"value": "existing", "secret": False}
    assert json.loads(shown["kamaji-hami-lab:tenants"]["value"]) == [{"name": "tenant-a", "workers": 3}]
    assert shown["kamaji-hami-lab:workersPerTenant"]["value"] == "1", "Pulumi.yaml's defaults merged in"
    preflight = script_module("preflight")
    (read, notes) = preflight.stack_mode(preflight.Host(which=lambda tool: None), "mine", str(mode))
    assert notes == []
    assert (read.kind, read.docker, read.container_workers) == (False, True, 3)


# `make up` in one pass (point 3): a user's checkout, its venv ready, with a broken stack file.
@pytest.fixture
def clone(tmp_path):
    repo = tmp_path / "lab"
    repo.mkdir()
    (repo / "scripts").mkdir()
    for name in ("Makefile", "Pulumi.yaml", "requirements.txt", "scripts/check_config.py", "scripts/preflight.py"):
        shutil.copy2(ROOT / name, repo / name)  # requirements.txt keeps its time: the venv is up to date
    (repo / "components").symlink_to(ROOT / "components")
    (repo / "Pulumi.dev.yaml").write_text(BROKEN)
    return repo


def make_up(repo: Path, path: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path, "PULUMI_CONFIG_PASSPHRASE": "mine"}
    return subprocess.run(["make", "--no-print-directory", "-C", str(repo), "up", f"VENV={ROOT / '.venv'}"],
                          env=env, capture_output=True, text=True, check=False)


def path_without_pulumi() -> str:
    return os.pathsep.join(place for place in os.environ["PATH"].split(os.pathsep)
                           if place and not (Path(place) / "pulumi").exists())


@needs_make
def test_make_up_reports_the_config_and_every_host_problem_in_one_pass(clone):
    run = make_up(clone, path_without_pulumi())
    assert run.returncode != 0
    out = run.stdout.splitlines()
    assert "  kamaji-hami-lab:tenants[tenant-b].workers: expected a positive integer, got 0" in out
    # The whole preflight, not its first missing tool: pulumi is one error among the host's others.
    assert "ERROR   pulumi is not on PATH" in out
    assert any(line.startswith("preflight: ") and "error(s)" in line for line in out)


FAKE_PULUMI = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls"
case "$*" in version) echo v3.272.0 ;; esac
"""


@needs_make
def test_make_up_creates_or_selects_no_stack_while_a_problem_remains(clone, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text(FAKE_PULUMI)
    (bin_dir / "pulumi").chmod(0o755)
    run = make_up(clone, f"{bin_dir}{os.pathsep}{path_without_pulumi()}")
    assert run.returncode != 0
    calls = (bin_dir / "calls").read_text().splitlines() if (bin_dir / "calls").exists() else []
    assert [call for call in calls if call != "version"] == [], "nothing but the version check before the verdict"
    assert (clone / "Pulumi.dev.yaml").read_text() == BROKEN, "no stack, so no salt written"


KEY = st.from_regex(r"[a-zA-Z][a-zA-Z0-9-]{0,12}", fullmatch=True)


@given(st.lists(st.one_of(KEY, st.integers(min_value=0, max_value=999)), min_size=1, max_size=6).filter(
    lambda parts: isinstance(parts[0], str)))
def test_a_key_path_reads_back_as_the_path_the_program_wrote(parts):
    from components.config.messages import key_path

    assert check_config.parsed_path(key_path(tuple(parts)).removeprefix("kamaji-hami-lab:")) == tuple(parts)


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8), st.floats(allow_nan=False))
TENANT = st.dictionaries(st.sampled_from(["name", "workers", "podCidr", "gpus", "bogus"]),
                         st.one_of(SCALARS, st.lists(SCALARS, max_size=2)), max_size=4)


@settings(max_examples=60, deadline=None)
@given(st.lists(TENANT, max_size=4), st.dictionaries(st.sampled_from(["workersPerTenant", "kindSubnet", "gpuSlots",
                                                                      "observability", "nope"]), SCALARS, max_size=3))
def test_any_stack_file_gets_a_verdict_with_every_problem_keyed_and_tenants_named_by_a_unique_name(tenants, keys):
    config = {"kamaji-hami-lab:tenants": tenants, **{f"kamaji-hami-lab:{key}": value for key, value in keys.items()}}
    stack = check_config.StackFile(yaml.safe_dump({"config": config}), "Pulumi.fuzz.yaml")
    errors, _, _ = check_config.check(stack, check_config.project_defaults())
    names = [tenant.get("name") for tenant in tenants]
    for line in errors:
        assert line.startswith("kamaji-hami-lab:") or line == MORE_MAY_FOLLOW, line
        for index, name in enumerate(names):
            if isinstance(name, str) and re.fullmatch(r"[a-z0-9][-a-z0-9]{0,62}", name) and names.count(name) == 1:
                assert not line.startswith(f"kamaji-hami-lab:tenants[{index}]"), line


def test_a_mode_file_the_preflight_cannot_read_leaves_it_checking_for_the_kind_lab_with_a_warning(tmp_path):
    preflight = script_module("preflight")
    gone = str(tmp_path / "gone.json")
    mode, (note,) = preflight.stack_mode(preflight.Host(which=lambda tool: None), "mine", gone)
    assert mode == preflight.Mode()
    assert note.severity == "warning"
    assert note.problem.startswith(f"cannot read the config of stack mine (cannot read {gone}: No such file")
