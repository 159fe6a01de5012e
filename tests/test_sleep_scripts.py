"""The host-side steps of a tenant's sleep and wake: scripts/worker-power.sh, and what check-tenant-version.sh
and wait-gpus.sh do for a sleeping tenant. Containers against fake docker; machines against a real sshd on
loopback (tests/sshd.py) whose systemctl is a fake.
"""

from __future__ import annotations

import pytest

from tests.sshd import machine_fakes
from tests.test_scripts import (
    BOOTED_LOGS,
    MANAGEMENT_KUBECONFIG,
    TCP_VERSIONS,
    TENANT_KUBECONFIG,
    reply,
)

NODE = "lab-a-w1"
RUNNING = r"^inspect --format \{\{\.State\.Running\}\} "


def power(fakes, state: str, **env: str):
    return fakes.run("worker-power.sh", NODE=NODE, STATE=state, **env)


def container(fakes, running: bool):
    return fakes.on("docker", RUNNING, "true\n" if running else "false\n")


# --- containers ----------------------------------------------------------------------------------------


def test_a_running_container_falls_asleep_by_a_stop_and_is_kept(fakes):
    container(fakes, running=True).on("docker", r"^stop ", f"{NODE}\n")
    result = power(fakes, "asleep")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE}: asleep\n"
    (stop,) = fakes.calls("docker", r"^stop ")
    assert stop["argv"] == ["stop", "--time", "60", NODE]
    assert fakes.calls("docker", r"^(rm|kill|start) ") == []


def test_a_stopped_container_wakes_by_a_start_and_waits_for_systemd(fakes):
    container(fakes, running=False).on("docker", r"^start ", f"{NODE}\n")
    fakes.on("docker", r"^inspect --format \{\{\.State\.StartedAt\}\} ", "2026-01-01T10:00:00.1Z\n")
    fakes.on("docker", r"^logs ", BOOTED_LOGS)
    result = power(fakes, "awake")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE}: awake\n"
    assert [call["argv"] for call in fakes.calls("docker", r"^start ")] == [["start", NODE]]
    assert fakes.calls("docker", r"^logs ")


@pytest.mark.parametrize(("state", "running"), [("asleep", False), ("awake", True)])
def test_a_container_already_in_the_asked_state_is_left_alone(fakes, state, running):
    container(fakes, running)
    result = power(fakes, state)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE}: {state}\n"
    assert fakes.calls("docker", r"^(stop|start) ") == []


@pytest.mark.parametrize("state", ["asleep", "awake"])
def test_a_missing_container_fails_saying_how_to_get_it_back(fakes, state):
    fakes.on("docker", RUNNING, reply(exit=1, stderr=f"Error: No such object: {NODE}\n"))
    result = power(fakes, state)
    assert result.returncode == 1
    assert f"container {NODE} not found" in result.stderr and "awake" in result.stderr


@pytest.mark.parametrize(("state", "running", "verb"), [("asleep", True, "stop"), ("awake", False, "start")])
def test_a_failed_stop_or_start_fails_the_step(fakes, state, running, verb):
    container(fakes, running).on("docker", rf"^{verb} ", reply(exit=1, stderr="Error response from daemon\n"))
    result = power(fakes, state)
    assert result.returncode == 1
    assert f"cannot {verb} container {NODE}" in result.stderr
    assert result.stdout == ""


def test_a_woken_container_whose_systemd_does_not_come_up_fails(fakes):
    container(fakes, running=False).on("docker", r"^start ", f"{NODE}\n")
    fakes.on("docker", r"^inspect --format \{\{\.State\.StartedAt\}\} ", "2026-01-01T10:00:00.1Z\n")
    fakes.on("docker", r"^logs ", "systemd starting\n")
    result = power(fakes, "awake", WAKE_TIMEOUT="0")
    assert result.returncode == 1
    assert "did not reach the multi-user target" in result.stderr


@pytest.mark.parametrize("state", ["", "sleeping", "Asleep"])
def test_an_unknown_state_is_refused_before_anything_runs(fakes, state):
    result = power(fakes, state)
    assert result.returncode == 1
    assert fakes.calls("docker") == []


# --- machines --------------------------------------------------------------------------------------------


@pytest.fixture
def machine(tmp_path, sshd):
    return machine_fakes(tmp_path, ("systemctl",), sshd)


@pytest.mark.parametrize(("state", "verb"), [("asleep", "stop"), ("awake", "start")])
def test_a_machine_sleeps_and_wakes_by_its_kubelet_over_ssh(machine, state, verb):
    machine.on("machine-systemctl", rf"^{verb} kubelet$", "")
    result = machine.run("worker-power.sh", NODE="m1", STATE=state, **machine.transport())
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"m1: {state}\n"
    assert [call["argv"] for call in machine.calls("machine-systemctl")] == [[verb, "kubelet"]]
    assert machine.calls("docker") == []


def test_a_machine_whose_kubelet_does_not_stop_fails_the_step(machine):
    machine.on("machine-systemctl", r"^stop kubelet$", reply(exit=5, stderr="Failed to stop kubelet.service\n"))
    result = machine.run("worker-power.sh", NODE="m1", STATE="asleep", **machine.transport())
    assert result.returncode == 1
    assert "machine m1: cannot stop its kubelet" in result.stderr


# --- the version check and the GPU wait of a sleeping tenant ----------------------------------------------

STATE_READ = r"jsonpath=\{\.status\.kubernetesResources\.version\.status\}"


def check(fakes, wanted: str, sleeping: str, state: str | dict = "Ready"):
    fakes.on("kubectl", STATE_READ, state)
    fakes.on("kubectl", TCP_VERSIONS, "v1.35.2 v1.35.2")
    return fakes.run(
        "check-tenant-version.sh",
        KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG,
        TENANT="tenant-a",
        NAMESPACE="tenants",
        KUBERNETES_VERSION=wanted,
        SLEEPING=sleeping,
    )


def test_a_version_change_that_puts_the_tenant_to_sleep_is_refused(fakes):
    result = check(fakes, "v1.36.4", sleeping="true")
    assert result.returncode == 1
    assert "tenant tenant-a runs v1.35.2 and is to sleep" in result.stderr
    assert "kamaji-hami-lab:tenants[].sleeping of tenant tenant-a" in result.stderr


def test_a_version_change_of_a_sleeping_tenant_is_refused_until_it_wakes(fakes):
    result = check(fakes, "v1.36.4", sleeping="false", state="Sleeping")
    assert result.returncode == 1
    assert "tenant tenant-a is asleep at v1.35.2" in result.stderr and "Wake it first" in result.stderr
    (read,) = fakes.calls("kubectl", STATE_READ)
    assert read["argv"][read["argv"].index("-n") + 1] == "tenants" and "tenant-a" in read["argv"]


@pytest.mark.parametrize("state", ["Ready", "NotReady", ""])
def test_a_version_change_of_an_awake_tenant_goes_on(fakes, state):
    result = check(fakes, "v1.36.4", sleeping="false", state=state)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "tenant-a: v1.35.2 -> v1.36.4\n"


@pytest.mark.parametrize("sleeping", ["true", "false"])
def test_falling_asleep_or_waking_at_the_same_version_is_allowed_without_asking_the_state(fakes, sleeping):
    result = check(fakes, "v1.35.2", sleeping=sleeping, state="Sleeping")
    assert result.returncode == 0, result.stderr
    assert fakes.calls("kubectl", STATE_READ) == []


def test_a_state_that_cannot_be_read_stops_the_change(fakes):
    result = check(fakes, "v1.36.4", sleeping="false", state=reply(exit=1, stderr="Unable to connect\n"))
    assert result.returncode == 1
    assert "cannot read the state of its TenantControlPlane" in result.stderr


def test_a_tenant_cannot_be_created_asleep(fakes):
    fakes.on("kubectl", TCP_VERSIONS, "")
    result = fakes.run(
        "check-tenant-version.sh",
        KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG,
        TENANT="tenant-a",
        NAMESPACE="tenants",
        KUBERNETES_VERSION="v1.36.4",
        SLEEPING="true",
    )
    assert result.returncode == 1
    assert "tenant tenant-a does not exist yet and cannot be created asleep: create it awake" in result.stderr


def test_the_gpu_wait_of_a_sleeping_tenant_asks_nothing(fakes):
    result = fakes.run(
        "wait-gpus.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODES="w1", EXPECTED_GPUMEM="1", SLEEPING="true"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and fakes.calls("kubectl") == []


# --- observability turned on or off while a tenant sleeps (issue 49) -----------------------------------------

READER_READ = r"-n lab-monitoring get secret tenant-a-reader --ignore-not-found -o name$"


def observability_check(fakes, turned: str, observed: bool | dict, sleeping: str = "false",
                        state: str | dict = "Ready"):
    """The check at the running version: only observability may change. `observed`: the reader's Secret is
    there, or the reply to reading it."""
    fakes.on("kubectl", STATE_READ, state)
    fakes.on("kubectl", TCP_VERSIONS, "v1.35.2 v1.35.2")
    fakes.on("kubectl", READER_READ, observed if isinstance(observed, dict) else
             "secret/tenant-a-reader\n" if observed else "")
    return fakes.run(
        "check-tenant-version.sh",
        KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG,
        TENANT="tenant-a",
        NAMESPACE="tenants",
        KUBERNETES_VERSION="v1.35.2",
        SLEEPING=sleeping,
        OBSERVABILITY=turned,
        MONITORING_NAMESPACE="lab-monitoring",
        READER_SECRET="tenant-a-reader",
    )


@pytest.mark.parametrize(("turned", "observed", "back"), [("true", False, "false"), ("false", True, "true")])
def test_observability_turned_on_or_off_while_the_tenant_sleeps_is_refused_until_it_wakes(fakes, turned, observed,
                                                                                          back):
    result = observability_check(fakes, turned, observed, state="Sleeping")
    assert result.returncode == 1
    direction = "on" if turned == "true" else "off"
    assert f"tenant tenant-a is asleep, and turning observability {direction} installs or removes its metrics " \
           "reader in tenant tenant-a" in result.stderr
    assert "Wake tenant tenant-a first (kamaji-hami-lab:tenants[].sleeping of tenant tenant-a: false)" in result.stderr
    assert f"or set it back to {back}" in result.stderr


def test_observability_turned_on_as_the_tenant_is_put_to_sleep_is_refused(fakes):
    result = observability_check(fakes, "true", observed=False, sleeping="true")
    assert result.returncode == 1
    assert "tenant tenant-a is to sleep while turning observability on" in result.stderr
    assert "or set kamaji-hami-lab:observability back to false" in result.stderr
    assert fakes.calls("kubectl", STATE_READ) == [], "the config alone says it is to sleep"


@pytest.mark.parametrize(("turned", "observed"), [("true", True), ("false", False)])
@pytest.mark.parametrize("sleeping", ["true", "false"])
def test_a_sleeping_tenant_with_observability_unchanged_goes_on_without_asking_its_state(fakes, turned, observed,
                                                                                        sleeping):
    result = observability_check(fakes, turned, observed, sleeping=sleeping, state="Sleeping")
    assert result.returncode == 0, result.stderr
    assert fakes.calls("kubectl", STATE_READ) == []


@pytest.mark.parametrize(("turned", "observed"), [("true", False), ("false", True)])
def test_observability_turned_on_or_off_for_an_awake_tenant_goes_on(fakes, turned, observed):
    result = observability_check(fakes, turned, observed, state="Ready")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "tenant-a: v1.35.2 -> v1.35.2\n"


def test_observability_whose_state_cannot_be_read_stops_the_change(fakes):
    result = observability_check(fakes, "true", observed=reply(exit=1, stderr="Unable to connect\n"))
    assert result.returncode == 1
    assert "tenant tenant-a: cannot read from the management cluster whether observability reads it" in result.stderr


def test_a_state_that_cannot_be_read_stops_observability_turning_on(fakes):
    result = observability_check(fakes, "true", observed=False, state=reply(exit=1, stderr="Unable to connect\n"))
    assert result.returncode == 1
    assert "cannot read the state of its TenantControlPlane" in result.stderr
