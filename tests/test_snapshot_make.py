"""make snapshot / make restore: their arguments checked before anything else, and what they run."""

from __future__ import annotations

import pytest

from tests.test_make_and_workflows import make, needs_make, workflow


@needs_make
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("snapshot",), "make snapshot TENANT=<name>"),
        (("restore",), "make restore TENANT=<name>"),
        (("restore", "TENANT=tenant-a"), "make restore TENANT=<name> SNAPSHOT=snapshots/<file>.tar.gz"),
    ],
)
def test_a_missing_argument_is_named_before_any_venv_or_stack(tmp_path, args, words):
    done = make(*args, f"VENV={tmp_path / 'venv'}")
    assert done.returncode != 0 and words in done.stderr
    assert not (tmp_path / "venv").exists() and "pulumi" not in done.stdout


@needs_make
@pytest.mark.parametrize(
    ("args", "command"),
    [
        (("snapshot", "TENANT=tenant-b"), "-m snapshot --stack dev take tenant-b"),
        (
            ("restore", "TENANT=tenant-b", "SNAPSHOT=snapshots/a b.tar.gz"),
            '--stack dev restore tenant-b "snapshots/a b.tar.gz"',
        ),
        (("snapshot", "TENANT=tenant-b", "STACK=lab2"), "-m snapshot --stack lab2 take tenant-b"),
    ],
)
def test_they_run_python_m_snapshot_on_the_existing_stack(tmp_path, args, command):
    dry = make("-n", *args, f"VENV={tmp_path / 'venv'}")
    assert command in dry.stdout
    assert "pulumi stack select" in dry.stdout and "--create" not in dry.stdout


def test_the_live_workflow_restores_after_the_drift_check_and_before_the_teardown():
    steps = [step.get("run", "") for step in workflow("live.yml")["jobs"]["lab"]["steps"]]
    runs = [index for index, run in enumerate(steps) if "live-snapshot-round-trip.sh" in run]
    drift = next(index for index, run in enumerate(steps) if "--expect-no-changes" in run)
    assert runs and drift < runs[0] < steps.index("make down")


@needs_make
def test_rejoin_names_the_tenant_first_then_replaces_its_admin_kubeconfig_step_and_validates(tmp_path):
    done = make("rejoin", f"VENV={tmp_path / 'venv'}")
    assert done.returncode != 0 and "make rejoin TENANT=<name>" in done.stderr
    dry = make("-n", "rejoin", "TENANT=tenant-b", "STACK=lab2", f"VENV={tmp_path / 'venv'}")
    assert "pulumi stack export --stack lab2" in dry.stdout
    assert "-m snapshot.urn tenant-b-admin-kubeconfig" in dry.stdout
    assert 'pulumi up --yes --stack lab2 --replace "$urn"' in dry.stdout
    # Then kubeconfigs/ from the new outputs, and the lab validated.
    assert dry.stdout.index("--replace") < dry.stdout.index("write_kubeconfigs.py") < dry.stdout.index("-m validation")
