"""make snapshot / make restore: their arguments checked before anything else, and what they run; and the live
workflow's round trip, run here on fake make and kubectl, relying on the re-created tenant's pinned address."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from snapshot.__main__ import address
from tests.test_make_and_workflows import make, needs_make, workflow
from tests.test_scripts import SCRIPTS, reply, write_shims


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


@needs_make
def test_datastore_clean_names_the_tenant_first_then_cleans_only_that_tenant_on_the_existing_stack(tmp_path):
    done = make("datastore-clean", f"VENV={tmp_path / 'venv'}")
    assert done.returncode != 0 and "make datastore-clean TENANT=<name>" in done.stderr
    dry = make("-n", "datastore-clean", "TENANT=tenant-b", f"VENV={tmp_path / 'venv'}")
    assert "-m snapshot.leftovers --stack dev tenant-b" in dry.stdout
    assert "pulumi stack select dev" in dry.stdout and "--create" not in dry.stdout


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


PINNED, OTHER = "https://172.30.255.2:6443", "https://172.30.255.20:6443"  # a prefix is no match


def round_trip(tmp_path: Path, before: str, now: str, restore_says: str) -> tuple[subprocess.CompletedProcess, list]:
    """scripts/live-snapshot-round-trip.sh with make and kubectl faked: the tenant's kubeconfig names `before`
    until `make up`, then `now`; the second `make restore` prints restore_says."""
    repo, scratch, bin_dir, log = tmp_path / "repo", tmp_path / "scratch", tmp_path / "bin", tmp_path / "calls.jsonl"
    for directory in (repo / "kubeconfigs", scratch, bin_dir):
        directory.mkdir(parents=True)
    (repo / "kubeconfigs" / "tenant-a.kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    write_shims(bin_dir, ("make", "kubectl"))
    view = r"config view --minify -o jsonpath=\{.clusters\[0\].cluster.server\}"
    rules = [
        {"tool": "kubectl", "match": "get configmap after-snapshot", "replies": [reply(exit=1, stderr="NotFound")]},
        {"tool": "kubectl", "match": f"before-rebuild.kubeconfig {view}", "replies": [reply(before)]},
        {"tool": "kubectl", "match": f"kubeconfigs/tenant-a.kubeconfig {view}", "replies": [reply(now)]},
        {"tool": "kubectl", "match": "", "replies": [reply()]},
        {"tool": "make", "match": "^restore", "replies": [reply("restored\n"), reply(restore_says + "\n")]},
        {"tool": "make", "match": "", "replies": [reply()]},
    ]
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path), "RETRY_INTERVAL": "0",
        "FAKE_LOG": str(log), "FAKE_RULES": json.dumps(rules), "TENANT": "tenant-a", "SCRATCH": str(scratch),
    }  # fmt: skip
    done = subprocess.run(
        ["bash", str(SCRIPTS / "live-snapshot-round-trip.sh")], cwd=repo, env=env, capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=60, check=False,
    )  # fmt: skip
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done, [" ".join([call["tool"], *call["argv"]]) for call in calls]


def test_the_round_trip_uses_the_kubeconfig_from_before_the_rebuild_as_it_is(tmp_path):
    done, calls = round_trip(tmp_path, PINNED, PINNED, address(PINNED, PINNED, "tenant-a", True))
    assert done.returncode == 0, done.stderr
    assert not [call for call in calls if "set-cluster" in call]
    old = [call for call in calls if "before-rebuild.kubeconfig -n default get configmap before-snapshot" in call]
    assert old and calls.index(old[0]) < calls.index("make rejoin TENANT=tenant-a")


@pytest.mark.parametrize(
    ("now", "says", "words"),
    [
        (OTHER, address(PINNED, OTHER, "tenant-a", True), f"is at {OTHER}, not at {PINNED} as before the rebuild"),
        (PINNED, address(None, PINNED, "tenant-a", True), "make restore did not say"),
        (PINNED, address(PINNED, PINNED, "tenant-a", False), "make restore did not say"),  # Kamaji renewed the CA
    ],
)
def test_the_round_trip_fails_clearly_when_the_tenant_came_back_elsewhere_or_the_restore_says_otherwise(
    tmp_path, now, says, words
):
    done, calls = round_trip(tmp_path, PINNED, now, says)
    assert done.returncode != 0 and words in done.stderr
    assert not [call for call in calls if "before-rebuild.kubeconfig -n default get" in call]
    assert "make rejoin TENANT=tenant-a" not in calls
