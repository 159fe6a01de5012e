"""The pull-request workflow checks what a preview cannot, and hands no secret to PR code."""

import yaml

from tests.plan import ROOT
from tests.test_make_and_workflows import workflow


def steps():
    return workflow("ci.yml")["jobs"]["test"]["steps"]


def test_pull_requests_render_every_pinned_chart_and_check_its_images():
    runs = [step.get("run", "") for step in steps()]
    (render,) = [run for run in runs if "scripts/render_charts.py" in run]
    assert "--stack dev" in render
    uses = [step.get("uses", "") for step in steps()]
    assert any(action.startswith("azure/setup-helm@") for action in uses)


def test_pull_requests_check_the_dev_stacks_config_offline_before_the_pulumi_cli_is_installed():
    runs = [step.get("run", "") for step in steps()]
    uses = [step.get("uses", "") for step in steps()]
    check = next(index for index, run in enumerate(runs) if "make venv check-config STACK=dev" in run.split("\n"))
    assert check < next(index for index, action in enumerate(uses) if action.startswith("pulumi/actions@"))


def test_the_pr_job_uses_no_repository_secret():
    assert "secrets." not in (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    (preview,) = [step for step in steps() if "make preview" in step.get("run", "")]
    assert preview["env"]["PULUMI_CONFIG_PASSPHRASE"], "a fixed throwaway passphrase, not an empty one"


def test_the_dev_stack_carries_no_encryption_salt():
    # A salt from someone's passphrase would make the CI preview fail to decrypt the stack.
    assert "encryptionsalt" not in yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())


def test_pip_and_pulumi_plugins_are_cached():
    (python,) = [step for step in steps() if step.get("uses", "").startswith("actions/setup-python@")]
    assert python["with"]["cache"] == "pip"
    (plugins,) = [step for step in steps() if step.get("uses", "").startswith("actions/cache@")]
    assert plugins["with"]["path"] == "~/.pulumi/plugins"
    assert "hashFiles('requirements.txt')" in plugins["with"]["key"]


def test_the_pr_job_installs_prometheus_before_the_tests_which_fail_without_it_under_ci(ci_guard):
    runs = [step.get("run", "") for step in steps()]
    install = next(i for i, run in enumerate(runs) if "apt-get install" in run and " prometheus " in f"{run} ")
    assert install < next(i for i, run in enumerate(runs) if " test" in run and run.startswith("make "))
    ci_guard(ROOT / "tests" / "test_observability_prometheus.py", "promtool_refuses",
             "CI is set but these are not installed: prometheus, promtool, openssl")
