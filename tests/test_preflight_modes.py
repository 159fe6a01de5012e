"""scripts/preflight.py --stack: a lab on an existing management cluster is checked for what it uses."""

from __future__ import annotations

import json

import yaml

from tests.test_preflight import make_host, preflight, run_preflight
from tests.test_scripts import ROOT

# A host that could not run the kind lab: no kind, no Docker, distribution inotify limits, cgroup v1.
BARE_HOST = {
    "proc/sys/fs/inotify/max_user_watches": "8192\n",
    "proc/sys/fs/inotify/max_user_instances": "128\n",
    "sys/fs/cgroup/cgroup.controllers": None,
}


def config_json(tenants=(), **values) -> tuple[int, str]:
    """What `pulumi config --json --stack S` prints: a secret's value is left out without --show-secrets."""
    document = {"kamaji-hami-lab:managementKubeconfig": {"secret": True}}
    document |= {f"kamaji-hami-lab:{key}": {"value": value, "secret": False} for key, value in values.items()}
    document["kamaji-hami-lab:tenants"] = {"value": json.dumps(tenants), "objectValue": tenants, "secret": False}
    return 0, json.dumps(document)


def bare_host(tmp_path, stack_config, missing=("kind", "docker")):
    return make_host(tmp_path, BARE_HOST, missing_tools=missing, stack_config=stack_config)


def test_an_existing_cluster_without_container_workers_needs_no_kind_docker_or_host_settings(tmp_path, capsys):
    host, calls = bare_host(tmp_path, config_json(managementCluster="existing"))

    code, out = run_preflight(host, capsys, "--stack", "lab")

    assert (code, out) == (0, "preflight: all good\n")
    (read,) = [argv for argv in calls if argv[0] == "pulumi"]
    assert read[-2:] == ["--stack", "lab"] and "--show-secrets" not in read
    assert not [argv for argv in calls if argv[0] == "docker"]


def test_an_existing_cluster_still_needs_kubectl(tmp_path, capsys):
    host, _ = bare_host(tmp_path, config_json(managementCluster="existing"), missing=("kind", "docker", "kubectl"))

    code, out = run_preflight(host, capsys, "--stack", "lab")

    assert code == 1
    assert "kubectl is not on PATH" in out
    assert "kind is not on PATH" not in out and "docker is not on PATH" not in out


def test_container_workers_on_an_existing_cluster_need_docker_and_its_host_settings_but_not_kind(tmp_path, capsys):
    host, _ = bare_host(tmp_path, config_json(managementCluster="existing", dockerNetwork="lab-net"))

    code, out = run_preflight(host, capsys, "--stack", "lab")

    assert code == 1
    assert "docker is not on PATH" in out and "fs.inotify.max_user_watches" in out and "cgroup v1" in out
    assert "kind is not on PATH" not in out


def test_a_kind_stack_is_checked_as_before(tmp_path, capsys):
    host, _ = bare_host(tmp_path, config_json(managementClusterName="lab"))

    code, out = run_preflight(host, capsys, "--stack", "lab")

    assert code == 1
    assert "kind is not on PATH" in out and "docker is not on PATH" in out and "fs.inotify" in out


def test_an_unreadable_stack_config_is_a_warning_and_the_kind_lab_is_checked(tmp_path, capsys):
    missing_stack = (255, "error: no stack named 'lab' found")
    host, _ = bare_host(tmp_path, missing_stack, missing=())

    code, out = run_preflight(host, capsys, "--stack", "lab")

    assert "WARNING cannot read the config of stack lab (error: no stack named 'lab' found)" in out
    assert "fs.inotify.max_user_watches" in out and code == 1


def test_tool_checks_leave_out_what_the_stack_does_not_use(tmp_path, capsys):
    # make down checks the tools destroy may run; an existing cluster without container workers runs neither.
    host, _ = bare_host(tmp_path, config_json(managementCluster="existing"))
    assert run_preflight(host, capsys, "--tools", "kind", "docker", "kubectl", "--stack", "lab") == (0, "")

    with_workers, _ = bare_host(tmp_path, config_json(managementCluster="existing", dockerNetwork="lab-net"))
    code, out = run_preflight(with_workers, capsys, "--tools", "kind", "docker", "kubectl", "--stack", "lab")
    assert code == 1 and "docker is not on PATH" in out and "kind" not in out


def test_without_a_stack_the_kind_lab_is_checked(tmp_path, capsys):
    host, calls = bare_host(tmp_path, config_json(managementCluster="existing"))
    code, out = run_preflight(host, capsys)
    assert code == 1 and "kind is not on PATH" in out
    assert not [argv for argv in calls if argv[0] == "pulumi"], "no stack is read unless one is named"


def test_the_mode_is_read_from_this_projects_config_keys():
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == preflight.PROJECT
    assert {"managementCluster", "dockerNetwork"} <= set(project["config"]), "the keys the preflight reads"


MACHINE_TENANT = {"name": "research", "machines": [{"name": "gpu-1", "address": "10.0.0.11",
                                                          "hostKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKey"}]}


def test_machine_workers_need_the_ssh_client(tmp_path, capsys):
    host, _ = bare_host(tmp_path, config_json([MACHINE_TENANT], managementCluster="existing"),
                        missing=("kind", "docker", "ssh"))

    code, out = run_preflight(host, capsys, "--stack", "lab")

    assert code == 1
    assert "ssh is not on PATH" in out and "openssh-client" in out
    assert "docker is not on PATH" not in out


def test_a_lab_without_machines_does_not_ask_for_ssh(tmp_path, capsys):
    host, _ = bare_host(tmp_path, config_json([{"name": "web"}], managementCluster="existing"),
                        missing=("kind", "docker", "ssh"))

    assert run_preflight(host, capsys, "--stack", "lab") == (0, "preflight: all good\n")
