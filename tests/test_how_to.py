"""docs/how-to.md: each recipe's config change is one the program accepts and does what the recipe says, its
commands exist, and the output it shows is what the lab prints (issue 50)."""

from __future__ import annotations

import datetime
import os
import re
import shlex
import subprocess

import pytest
import yaml

from components.config import parse_settings
from snapshot import core, encryption
from snapshot.__main__ import address
from tests.plan import dev_config
from tests.test_docs import ROOT, section
from tests.test_tenant_sleep import RecordingRunner, stack_dir, tenant_sleep

HOW_TO = ROOT / "docs" / "how-to.md"
MAKEFILE = (ROOT / "Makefile").read_text()
RECIPES = ("Add a tenant", "More GPUs or workers for one tenant", "A tenant on another Kubernetes version",
           "Sleep and wake a tenant", "Snapshot and restore a tenant, encrypted", "See the dashboard",
           "Uninstall everything")
PREFIX = "kamaji-hami-lab:"


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def recipe(heading: str) -> str:
    return section(HOW_TO, heading)


def settings_after(heading: str):
    """The lab's settings once the recipe's YAML change is made to the dev stack, as the program reads them."""
    (change,) = blocks(recipe(heading), "yaml")
    document = yaml.safe_load(change)
    assert set(document) == {"config"}, "a fragment of a stack file"
    assert all(key.startswith(PREFIX) for key in document["config"]), "the project's own keys"
    changed = {key.removeprefix(PREFIX): value for key, value in document["config"].items()}
    return parse_settings(dev_config(**changed))


def status_lines(heading: str) -> dict[str, tuple[str, str, str]]:
    """{tenant: (version, health, address)} of the `make status` rows a recipe shows."""
    rows = re.findall(r"^(tenant-[\w-]+)  (\S+)  (\w+)  https://([\d.]+):6443$", recipe(heading), flags=re.MULTILINE)
    return {name: (version, health, where) for name, version, health, where in rows}


def test_the_readme_links_the_recipes():
    readme = (ROOT / "README.md").read_text()
    assert "(docs/how-to.md)" in readme.split("## Where to go next", 1)[1]


def test_every_recipe_the_newcomer_asks_for_is_there_with_its_change_command_and_output():
    headings = re.findall(r"^## (.+)$", HOW_TO.read_text(), flags=re.MULTILINE)
    assert headings == list(RECIPES)
    for heading in RECIPES:
        text = recipe(heading)
        assert blocks(text, "bash"), f"{heading}: the command"
        assert blocks(text, "text"), f"{heading}: what it prints"
        assert blocks(text, "yaml") or "No config change" in text, f"{heading}: the change"


def test_the_added_tenant_joins_the_dev_tenants_and_leaves_them_as_they_were():
    before = parse_settings(dev_config())
    after = settings_after("Add a tenant")
    assert after.tenants[:len(before.tenants)] == before.tenants
    (added,) = after.tenants[len(before.tenants):]
    assert f"kubeconfigs/{added.name}.kubeconfig" in recipe("Add a tenant")


def test_more_workers_and_gpus_go_to_that_tenant_only_and_status_counts_them():
    before, after = parse_settings(dev_config()), settings_after("More GPUs or workers for one tenant")
    changed = [(old, new) for old, new in zip(before.tenants, after.tenants, strict=True) if old != new]
    ((old, new),) = changed
    assert new.workers > old.workers and new.gpus[0].count > old.gpus[0].count
    text = recipe("More GPUs or workers for one tenant")
    assert f"nodes {new.workers}/{new.workers} Ready; GPUs {new.workers * new.gpus[0].count}," in text
    assert f"the new worker {after.worker_name(new, new.workers)} is created" in text
    assert status_lines("More GPUs or workers for one tenant") == {
        new.name: (after.versions.kubernetes, "healthy", new.api_address)}


def test_the_tenant_on_another_version_runs_it_and_status_shows_it():
    after = settings_after("A tenant on another Kubernetes version")
    (tenant,) = [tenant for tenant in after.tenants if tenant.kubernetes_version != after.versions.kubernetes]
    lab_minor, own_minor = (int(version.split(".")[1]) for version in (after.versions.kubernetes,
                                                                       tenant.kubernetes_version))
    assert own_minor == lab_minor - 1, "the minor below the lab's, as the recipe says"
    assert status_lines("A tenant on another Kubernetes version") == {
        tenant.name: (tenant.kubernetes_version, "healthy", tenant.api_address)}


def test_the_sleep_recipe_shows_the_key_make_sleep_sets_and_what_it_prints(tmp_path, capsys):
    after = settings_after("Sleep and wake a tenant")
    (sleeper,) = [tenant for tenant in after.tenants if tenant.sleeping]
    text = " ".join(recipe("Sleep and wake a tenant").split())
    assert f"make sleep TENANT={sleeper.name}" in text and f"make wake TENANT={sleeper.name}" in text

    stack = (ROOT / "Pulumi.dev.yaml").read_text()
    assert tenant_sleep.main(["sleep", "--tenant", sleeper.name], RecordingRunner(), stack_dir(tmp_path, stack)) == 0
    assert capsys.readouterr().out.strip() in text
    asleep = stack.replace(f"- name: {sleeper.name}\n", f"- name: {sleeper.name}\n      sleeping: true\n")
    assert tenant_sleep.main(["wake", "--tenant", sleeper.name], RecordingRunner(), stack_dir(tmp_path, asleep)) == 0
    assert capsys.readouterr().out.strip() in text
    assert status_lines("Sleep and wake a tenant") == {
        sleeper.name: (after.versions.kubernetes, "asleep", sleeper.api_address)}
    assert f"holds address {sleeper.api_address}," in text


def test_the_snapshot_recipe_encrypts_and_restores_with_the_make_variables_and_names_what_it_prints():
    text = recipe("Snapshot and restore a tenant, encrypted")
    commands = blocks(text, "bash")[0]
    assert re.search(r"^make snapshot TENANT=(\S+) RECIPIENT=age1", commands, flags=re.MULTILINE)
    restore = re.search(r"^make restore TENANT=(\S+) SNAPSHOT=(\S+) IDENTITY=", commands, flags=re.MULTILINE)
    tenant, file = restore[1], restore[2]
    assert file.endswith(encryption.SUFFIX), "the encrypted file"
    assert f"wrote {file} (mode 0600; encrypted to age1" in text, "the file the snapshot wrote is the one restored"
    assert re.fullmatch(rf"snapshots/{tenant}-\d{{8}}T\d{{6}}Z\.tar\.gz{re.escape(encryption.SUFFIX)}", file)
    stamp = re.search(r"(\d{8}T\d{6}Z)", file)[1]
    created = f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:15]}+00:00"
    assert f"restored tenant {tenant} to etcd revision " in text and f" of {created}: " in text
    assert file.endswith(core.file_name(tenant, datetime.datetime.fromisoformat(created)) + encryption.SUFFIX)
    (restored,) = [each for each in parse_settings(dev_config()).tenants if each.name == tenant]
    endpoint = f"https://{restored.api_address}:6443"
    assert address(endpoint, endpoint, tenant, ca_of_then=True) in text


def test_the_dashboard_recipe_prints_what_make_dashboard_prints_at_the_dev_stacks_grafana_address(tmp_path):
    settings = settings_after("See the dashboard")
    assert settings.grafana_address
    fake = tmp_path / "pulumi"
    # `pulumi stack output grafanaUrl` prints the output's value: http://<Grafana's LoadBalancer address>.
    fake.write_text(f"#!/usr/bin/env bash\necho http://{settings.grafana_address}\n")
    fake.chmod(0o755)
    done = subprocess.run(["bash", str(ROOT / "scripts" / "dashboard.sh")], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "STACK": "dev"}, timeout=30)
    assert done.returncode == 0, done.stderr
    (shown,) = blocks(recipe("See the dashboard"), "text")
    assert shown == done.stdout


@pytest.mark.parametrize("heading", RECIPES)
def test_every_make_command_of_a_recipe_is_a_target_with_the_variables_it_is_given(heading):
    targets = set(re.findall(r"^([a-z][\w-]*):", MAKEFILE, flags=re.MULTILINE))
    variables = set(re.findall(r"^([A-Z_]+) \?=", MAKEFILE, flags=re.MULTILINE))
    for block in blocks(recipe(heading), "bash"):
        for line in block.splitlines():
            if not line.startswith("make "):
                continue
            words = shlex.split(line, comments=True)[1:]
            for word in words:
                if "=" in word:
                    assert word.split("=", 1)[0] in variables, f"{heading}: {line}"
                else:
                    assert word in targets, f"{heading}: {line}"


# Where a page cites an upstream source: a repository of the components the lab drives, a Go file, or a pinned tag.
UPSTREAM_SOURCE = re.compile(r"\b(?:clastix|kubernetes-sigs|kubernetes|pulumi|etcd-io|moby|Project-HAMi)/[\w.-]+ "
                             r"|\b[\w/]+\.go\b|@v?\d+\.\d+(?:\.\d+)?\b|@[0-9a-f]{7,}\b")


def test_operations_reads_as_tasks_and_the_internals_it_links_are_in_architecture():
    operations = (ROOT / "docs" / "operations.md").read_text()
    architecture = (ROOT / "docs" / "architecture.md").read_text()
    assert not UPSTREAM_SOURCE.findall(" ".join(operations.split())), "upstream sources belong in architecture.md"
    assert UPSTREAM_SOURCE.findall(" ".join(architecture.split())), "where they went"
    linked = re.findall(r"\(architecture\.md#([\w-]+)\)", operations)
    for heading in ("sleep-and-wake-step-by-step", "how-prometheus-reaches-each-tenant", "leases",
                    "snapshots-inside", "a-restore-into-a-re-created-tenant"):
        assert heading in linked, heading
