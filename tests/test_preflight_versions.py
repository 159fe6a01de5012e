"""scripts/preflight.py's tool versions, run as make runs it, against fake kind and pulumi binaries;
and the one table of required versions, the same in the README, the preflight and the workflows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.script_module import script_module
from tests.test_scripts import write_shims

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
preflight = script_module("preflight")
# What the tools print (kind's `version` subcommand; the Pulumi CLI prints only its version).
KIND_CURRENT, KIND_OLD = "kind v0.33.0 go1.25.1 linux/amd64\n", "kind v0.32.0 go1.24.6 linux/amd64\n"
PULUMI_CURRENT, PULUMI_OLD = "v3.272.0\n", "v3.150.0\n"
# `kubectl version --client` (kubernetes/kubectl pkg/cmd/version/version.go@v0.36.3).
KUBECTL = "Client Version: {}\nKustomize Version: v5.7.1\n"


def preflight_tools(tmp_path: Path, replies: dict[str, str], *tools: str) -> subprocess.CompletedProcess[str]:
    """`preflight.py --tools ...` with only fake binaries on PATH, each printing its reply to `version`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_shims(bin_dir, replies)
    rules = [
        {"tool": tool, "match": f"^{' '.join(preflight.VERSION_COMMANDS[tool][1:])}$", "replies": [{"stdout": out}]}
        for tool, out in replies.items()
    ]
    env = {"PATH": str(bin_dir), "FAKE_LOG": str(tmp_path / "calls.jsonl"), "FAKE_RULES": json.dumps(rules)}
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "preflight.py"), "--tools", *tools],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_current_kind_and_pulumi_pass_silently(tmp_path):
    run = preflight_tools(tmp_path, {"kind": KIND_CURRENT, "pulumi": PULUMI_CURRENT}, "kind", "pulumi")
    assert (run.returncode, run.stdout) == (0, "")


def test_an_old_kind_is_an_error_naming_both_versions(tmp_path):
    run = preflight_tools(tmp_path, {"kind": KIND_OLD, "pulumi": PULUMI_CURRENT}, "kind", "pulumi")

    assert run.returncode == 1
    assert "kind is v0.32.0; the lab needs v0.33.0 or newer" in run.stdout
    assert "pulumi" not in run.stdout.split("fix:")[0]


def test_an_old_pulumi_cli_is_an_error(tmp_path):
    run = preflight_tools(tmp_path, {"pulumi": PULUMI_OLD}, "pulumi")

    assert run.returncode == 1
    assert "pulumi is v3.150.0; the lab needs v3.272.0 or newer" in run.stdout
    assert "get.pulumi.com" in run.stdout


def test_a_kubectl_in_skew_passes_silently(tmp_path):
    run = preflight_tools(tmp_path, {"kubectl": KUBECTL.format("v1.36.3")}, "kubectl")
    assert (run.returncode, run.stdout) == (0, "")


def test_a_kubectl_more_than_one_minor_older_is_an_error(tmp_path):
    run = preflight_tools(tmp_path, {"kubectl": KUBECTL.format("v1.32.9")}, "kubectl")

    assert run.returncode == 1
    assert "ERROR   kubectl is v1.32.9; the lab needs v1.35 to v1.37" in run.stdout


def test_a_kubectl_more_than_one_minor_newer_is_a_warning(tmp_path):
    run = preflight_tools(tmp_path, {"kubectl": KUBECTL.format("v1.38.0")}, "kubectl")

    assert run.returncode == 0
    assert "WARNING kubectl is v1.38.0, more than one minor newer than the lab's API servers" in run.stdout


def test_a_version_that_cannot_be_read_is_a_warning(tmp_path):
    run = preflight_tools(tmp_path, {"kind": "kind (devel)\n"}, "kind")

    assert run.returncode == 0
    assert "WARNING cannot tell which kind this is" in run.stdout


def test_a_missing_tool_is_reported_once_as_missing(tmp_path):
    run = preflight_tools(tmp_path, {"kind": KIND_CURRENT}, "kind", "pulumi")

    assert run.returncode == 1
    assert "pulumi is not on PATH" in run.stdout and "cannot tell" not in run.stdout


# --- one table of required versions -------------------------------------------------------------


def readme_versions() -> dict[str, str]:
    """tool -> version column of the README's "Required tools" table."""
    section = README.split("### Required tools", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| ([^|]+?) \| `([^`]+)`", section, flags=re.MULTILINE)
    return {tool: version for tool, version in rows}


def workflow(name: str) -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())


def step_with(workflow_document: dict, action: str) -> dict:
    steps = [step for job in workflow_document["jobs"].values() for step in job["steps"]]
    return next(step["with"] for step in steps if step.get("uses", "").startswith(action))


def test_readme_states_the_versions_the_preflight_enforces():
    versions = readme_versions()

    assert versions["kind"] == f"{preflight.version_text(preflight.MIN_VERSIONS['kind'])} or newer"
    assert versions["Pulumi CLI"] == f"{preflight.version_text(preflight.MIN_VERSIONS['pulumi'])} or newer"
    assert versions["Python"] == f"{'.'.join(map(str, preflight.MIN_PYTHON))} or newer"
    assert versions["kubectl"] == preflight.wanted_version("kubectl")


def test_kubectls_range_is_one_minor_either_side_of_the_default_kubernetes_version():
    default = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]["kubernetesVersion"]["default"]
    major, minor = (int(part) for part in default.lstrip("v").split(".")[:2])
    assert preflight.MIN_VERSIONS["kubectl"][:2] == (major, minor - 1)
    assert preflight.NEWEST_MINORS["kubectl"] == (major, minor + 1)


@pytest.mark.parametrize("name", ["ci.yml", "live.yml"])
def test_workflows_install_the_versions_the_readme_states(name):
    versions = readme_versions()
    document = workflow(name)

    assert f"{step_with(document, 'actions/setup-python')['python-version']} or newer" == versions["Python"]
    assert f"v{step_with(document, 'pulumi/actions')['pulumi-version']} or newer" == versions["Pulumi CLI"]
    if name == "live.yml":
        assert f"{document['env']['KIND_VERSION']} or newer" == versions["kind"]
        kubectl = document["env"]["KUBECTL_VERSION"]
        minor = int(kubectl.split(".")[1])
        assert versions["kubectl"] == f"v1.{minor - 1} to v1.{minor + 1}"  # Kubernetes' ±1 minor skew


def test_requirements_pin_the_sdk_of_the_required_cli():
    sdk = re.search(r"^pulumi==(\S+)$", (ROOT / "requirements.txt").read_text(), flags=re.MULTILINE)[1]
    assert readme_versions()["Pulumi CLI"] == f"v{sdk} or newer"


def test_no_other_minimum_versions_are_stated_in_prose():
    # The table is the one place; older statements such as "kind v0.32 or newer" must not linger.
    elsewhere = README.replace(README.split("### Required tools", 1)[1].split("\n#", 1)[0], "")
    assert not re.search(r"kind v0\.\d+ or newer", elsewhere)
