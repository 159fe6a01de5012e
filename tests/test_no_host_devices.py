"""Issue 47, point 2: a privileged pod on a container worker gets none of the node's devices, which are the host's.

The container starts with a script and a containerd drop-in (components/worker_node.py); the script writes
privileged_without_host_devices = true under every runtime of kind's containerd config, and join-worker.sh
proves the running containerd has it before it joins the node. Machines' containerd is their owner's.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.plan import dev_config, plan, reveal
from tests.test_join_worker import bound_to, run_join
from tests.test_machine_ssh import join, joinable, unbound
from tests.test_machines import MOCK_GPU_TENANT, REAL_GPU_TENANT
from tests.test_scripts import (
    CRI_INFO,
    ENDPOINT,
    GUARDED_RUNTIMES,
    ROOT,
    RUNTIMES_TEMPLATE,
    cri_answer,
    cri_runtimes,
    joinable_worker,
    node_booted,
    reply,
    tenant_api,
)

CONTAINER = "docker:index/container:Container"
NODE_SCRIPT = ROOT / "scripts" / "node" / "no-host-devices.sh"


@dataclass(frozen=True)
class ContainerdKey:
    """Where containerd's CRI reads a runtime's setting, in one config layout."""

    config_version: int
    plugin: str
    runtimes: tuple[str, ...]
    key: str
    source: str


# kind's config.toml is version 2 (kubernetes-sigs/kind images/base/files/etc/containerd/config.toml@v0.33.0-alpha);
# containerd 2.x moves the v2 plugin's containerd section, runtimes included, to io.containerd.cri.v1.runtime
# (containerd plugins/cri/runtime/plugin.go@v2.3.4, configMigration), 1.7 reads it where it is
# (pkg/cri/config/config.go@v1.7.29, PluginConfig.ContainerdConfig).
V2_LAYOUT = ContainerdKey(
    2, "io.containerd.grpc.v1.cri", ("containerd", "runtimes"), "privileged_without_host_devices",
    "containerd internal/cri/config/config.go@v2.3.4 and pkg/cri/config/config.go@v1.7.29, Runtime")
# A version 3 config names the runtime plugin itself (containerd internal/cri/config/config.go@v2.3.4, RuntimeConfig).
V3_LAYOUT = ContainerdKey(
    3, "io.containerd.cri.v1.runtime", ("containerd", "runtimes"), "privileged_without_host_devices",
    "containerd internal/cri/config/config.go@v2.3.4, Runtime")
# kind's node runs /usr/local/bin/containerd with no --config from this unit, so containerd reads its default
# /etc/containerd/config.toml (kubernetes-sigs/kind images/base/files/etc/systemd/system/containerd.service
# @v0.33.0-alpha; containerd cmd/containerd/command/main.go@v2.3.4 and defaults/defaults_unix.go@v2.3.4).
KIND_CONTAINERD_UNIT = "/etc/systemd/system/containerd.service"
KIND_CONTAINERD_CONFIG = "/etc/containerd/config.toml"


def kind_shaped_config(layout: ContainerdKey, quote: str = '"', runc_line: str = "") -> str:
    """A containerd config laid out as kind's: two runc runtimes, each with an options table after it, and
    the plugin's own table last. `runc_line` adds a line to the runc table."""
    plugin = f"plugins.{quote}{layout.plugin}{quote}"
    runtimes = f"{plugin}.containerd.runtimes"
    return f"""version = {layout.config_version}

[{plugin}.containerd]
  default_runtime_name = "runc"
[{runtimes}.runc]
  runtime_type = "io.containerd.runc.v2"
  base_runtime_spec = "/etc/containerd/cri-base.json"{runc_line}
  [{runtimes}.runc.options]
    SystemdCgroup = true

[{runtimes}.test-handler] # a runtime for RuntimeClass tests
  runtime_type = "io.containerd.runc.v2"
  [{runtimes}.test-handler.options]
    SystemdCgroup = true

[{plugin}]
  tolerate_missing_hugepages_controller = true
"""


def run_node_script(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(NODE_SCRIPT), str(path)], capture_output=True, text=True, timeout=30)


def runtimes_of(document: dict, layout: ContainerdKey) -> dict:
    table = document["plugins"][layout.plugin]
    for name in layout.runtimes:
        table = table[name]
    return table


@pytest.mark.parametrize(("layout", "quote"), [(V2_LAYOUT, '"'), (V3_LAYOUT, '"'), (V2_LAYOUT, "'")],
                         ids=["kind-v2", "v3", "single-quoted"])
def test_every_runtime_gets_no_host_devices_and_nothing_else_changes(tmp_path, layout, quote):
    config = tmp_path / "config.toml"
    config.write_text(kind_shaped_config(layout, quote))
    before = tomllib.loads(config.read_text())

    result = run_node_script(config)

    assert result.returncode == 0, result.stderr
    after = tomllib.loads(config.read_text())
    runtimes = runtimes_of(after, layout)
    assert {name: runtime[layout.key] for name, runtime in runtimes.items()} == {"runc": True, "test-handler": True}
    # Everything else as it was, the options tables included.
    for runtime in runtimes.values():
        del runtime[layout.key]
    assert after == before


def test_a_second_start_leaves_the_config_as_the_first_made_it(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(kind_shaped_config(V2_LAYOUT))
    assert run_node_script(config).returncode == 0
    once = config.read_text()

    assert run_node_script(config).returncode == 0

    assert config.read_text() == once


@pytest.mark.parametrize("earlier", ["false", "true"])
def test_a_runtime_that_already_names_the_key_ends_with_it_true_and_once(tmp_path, earlier):
    config = tmp_path / "config.toml"
    config.write_text(kind_shaped_config(V2_LAYOUT, runc_line=f"\n  privileged_without_host_devices = {earlier}"
                                         "\n  privileged_without_host_devices_all_devices_allowed = false"))

    assert run_node_script(config).returncode == 0

    # tomllib refuses a key written twice in one table.
    runc = runtimes_of(tomllib.loads(config.read_text()), V2_LAYOUT)["runc"]
    assert runc["privileged_without_host_devices"] is True
    # The neighbouring key that would let a privileged container use all devices again is not this script's.
    assert runc["privileged_without_host_devices_all_devices_allowed"] is False


def test_a_config_the_script_cannot_write_fails_it(tmp_path):
    result = run_node_script(tmp_path / "missing.toml")

    assert result.returncode != 0


def test_the_node_script_is_posix_sh_shellcheck_finds_clean():
    # Outside scripts/*.sh, which `make lint` and tests/test_scripts.py check: it runs in the node, not on the host.
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if not shellcheck:
        pytest.skip("shellcheck is not installed")
    assert NODE_SCRIPT.read_text().startswith("#!/bin/sh\n")
    result = subprocess.run([shellcheck, "--shell=sh", str(NODE_SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# --- the plan: container workers carry it, machines do not -----------------------------------------------


def uploads_of(container) -> dict[str, dict]:
    return {upload["file"]: upload for upload in reveal(container.inputs["uploads"])}


def drop_in_directives(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) of a systemd unit file, in order."""
    section, directives = "", []
    for line in text.splitlines():
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            directives.append((section, key, value))
    return directives


def test_every_container_worker_starts_with_the_script_run_before_its_containerd(dev_plan):
    workers = dev_plan.of_type(CONTAINER)
    assert workers
    for worker in workers:
        uploads = uploads_of(worker)
        (drop_in,) = [upload for path, upload in uploads.items() if path.endswith(".conf")]
        # systemd reads <unit file>.d/*.conf beside a unit in /etc/systemd/system (systemd.unit(5), "drop-in").
        assert re.fullmatch(re.escape(KIND_CONTAINERD_UNIT) + r"\.d/[^/]+\.conf", drop_in["file"])
        directives = drop_in_directives(drop_in["content"])
        # Before every start, and without "-": containerd does not start unguarded when the script fails.
        (pre,) = [value for section, key, value in directives if (section, key) == ("Service", "ExecStartPre")]
        script = uploads[pre]
        assert script["content"] == NODE_SCRIPT.read_text()
        assert int(script["permissions"], 8) & 0o111 == 0o111
        # The script edits containerd's default config when given no argument, as the unit runs it.
        assert re.search(r"config=\$\{1:-" + re.escape(KIND_CONTAINERD_CONFIG) + r"\}", script["content"])
        # Only ExecStartPre is added: kind's ExecStart and everything else stay the unit's own.
        assert [key for _, key, _ in directives] == ["ExecStartPre"]


def test_machine_workers_containerd_is_left_to_their_owners(shared):
    # One lab with a container tenant and machine tenants: only the containers carry the guard.
    from tests.test_machines import SECRETS

    secrets = {"sshPrivateKeys": SECRETS["sshPrivateKeys"]}
    lab = shared("no-host-devices-mixed", lambda: plan(
        dev_config(tenants=[{"name": "tenant-a"}, MOCK_GPU_TENANT, REAL_GPU_TENANT]), preview=False,
        secrets=secrets))
    containers = lab.of_type(CONTAINER)
    assert sorted(c.inputs["name"] for c in containers) == ["kamaji-tenant-a-w1"]
    assert all(uploads_of(c) for c in containers)
    machine_steps = [c for c in lab.of_type("command:local:Command")
                     if c.inputs.get("environment", {}).get("NODE_TRANSPORT") == "ssh"]
    assert machine_steps
    for step in machine_steps:
        said = str(reveal(step.inputs))
        assert "no-host-devices" not in said and "privileged_without_host_devices" not in said


# --- the join proves it on the running containerd -----------------------------------------------------------


def test_the_join_reads_every_runtime_the_cri_runs_before_anything_else_in_the_node(fakes, tenant_ca):
    joinable_worker(fakes, tenant_ca)

    result = run_join(fakes)

    assert result.returncode == 0, result.stderr
    (probe,) = fakes.calls("docker", CRI_INFO)
    assert probe["argv"][-1] == RUNTIMES_TEMPLATE
    execs = [" ".join(c["argv"]) for c in fakes.calls("docker", "^exec")]
    assert re.search(CRI_INFO, execs[0]), "the first command run in the node is the probe"


@pytest.mark.parametrize(("runtimes", "named"), [
    ({"runc": True, "test-handler": False}, "test-handler"),
    ({"runc": False, "test-handler": True}, "runc"),
    ({"runc": False, "test-handler": False}, "runc test-handler"),
], ids=["test-handler", "runc", "both"])
def test_a_runtime_that_would_hand_out_host_devices_stops_the_join_naming_it(fakes, tenant_ca, runtimes, named):
    cri_runtimes(fakes, runtimes)
    joinable_worker(fakes, tenant_ca)

    result = run_join(fakes)

    assert result.returncode == 1
    assert (f"w1: containerd gives privileged pods the host's devices through runtime(s) {named} "
            "(privileged_without_host_devices is not true)") in result.stderr
    assert fakes.calls("kubectl", "create") == [], "no bootstrap token was made"
    assert fakes.calls("docker", "kubeadm") == []


def test_a_node_already_joined_is_not_left_as_it_is_when_its_containerd_hands_out_host_devices(fakes, tenant_ca):
    cri_runtimes(fakes, {"runc": False, "test-handler": True})
    tenant_api(node_booted(fakes), tenant_ca)
    bound_to(fakes, f"https://{ENDPOINT}", tenant_ca).on("kubectl", "get node w1", "node/w1\n")

    result = run_join(fakes)

    assert result.returncode == 1
    assert "already joined" not in result.stdout + result.stderr
    assert "through runtime(s) runc " in result.stderr


@pytest.mark.parametrize("answers", [
    # crictl fails on a runtime without the key (missingkey=error, cri-tools cmd/crictl/templates.go@v1.36.0),
    # and when containerd does not answer at all.
    pytest.param("missing-key", id="a-runtime-without-the-key"),
    pytest.param(reply(exit=1, stderr='level=fatal msg="validate service connection: connection refused"\n'),
                 id="no-answer"),
])
def test_a_cri_that_cannot_say_stops_the_join_within_its_timeout(fakes, tenant_ca, answers):
    if answers == "missing-key":
        from tests.fakebin.fake_crictl import TemplateError

        with pytest.raises(TemplateError):
            cri_answer({"runc": True, "test-handler": None})
        answers = reply(exit=1, stderr='level=fatal msg="getting status of runtime: execute template"\n')
    fakes.on("docker", CRI_INFO, answers)
    joinable_worker(fakes, tenant_ca)

    result = run_join(fakes, CRI_TIMEOUT="1")

    assert result.returncode == 1
    assert "w1: its containerd did not answer crictl info within 1s, so nothing proves that privileged pods " \
           "there get no host devices" in result.stderr
    assert fakes.calls("kubectl", "create") == []


def test_a_cri_that_lists_no_runtime_proves_nothing(fakes, tenant_ca):
    cri_runtimes(fakes, {})
    joinable_worker(fakes, tenant_ca)

    result = run_join(fakes)

    assert result.returncode == 1
    assert "w1: containerd's CRI lists no runtime, so nothing proves that privileged pods there get no host " \
           "devices" in result.stderr


def test_a_slow_cri_is_waited_for(fakes, tenant_ca):
    fakes.on("docker", CRI_INFO, reply(exit=1, stderr='level=fatal msg="connection refused"\n'),
             cri_answer(GUARDED_RUNTIMES))
    joinable_worker(fakes, tenant_ca)

    result = run_join(fakes)

    assert result.returncode == 0, result.stderr
    assert len(fakes.calls("docker", CRI_INFO)) == 2


def test_a_machines_containerd_is_neither_probed_nor_changed(machine, tenant_ca):
    unbound(joinable(machine, tenant_ca))

    result = join(machine)

    # The join asks the machine's CRI nothing about its runtimes, and writes nothing of containerd's.
    assert result.returncode == 0, result.stderr
    sent = machine.ssh_argv.read_text() + "".join(" ".join(c["argv"]) + c["stdin"] for c in machine.calls())
    assert "info -o go-template" not in sent
    assert "privileged_without_host_devices" not in sent and "/etc/containerd" not in sent
