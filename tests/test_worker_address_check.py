"""scripts/check-worker-address.sh: a worker's planned fixed address against every container on the lab's network,
stopped ones included, before the worker's container is created."""

from __future__ import annotations

import pytest

from components.kind_management_cluster import KIND_NETWORK
from tests.test_scripts import Fakes, reply

WORKER, ADDRESS = "kamaji-tenant-a-w1", "172.30.83.17"
LISTED = rf"^ps --all --quiet --filter network={KIND_NETWORK}$"
INSPECTED = r"^inspect --format "
IDS = "3f2a9c1e0b7d\n8c1d2e3f4a5b\n"


def containers(*rows: tuple[str, str, str, str]) -> str:
    """What the script's `docker inspect` prints per container: /name|state|requested address|current address.
    Docker names a container with a leading slash; a stopped one has no current address, one started without a
    fixed address no request (Docker 29: "invalid IP", a netip.Addr's zero value, endpoint.go@docker-v29.7.2)."""
    return "".join(f"/{name}|{state}|{requested}|{current}\n" for name, state, requested, current in rows)


@pytest.fixture
def fakes(tmp_path):
    return Fakes(tmp_path)


def check(fakes: Fakes, listing: str | dict, ids: str | dict = IDS):
    fakes.on("docker", LISTED, ids).on("docker", INSPECTED, listing)
    return fakes.run("check-worker-address.sh", WORKER=WORKER, WORKER_ADDRESS=ADDRESS, KIND_NETWORK=KIND_NETWORK)


def test_a_stopped_container_that_asked_for_the_address_is_a_clash(fakes):
    # Another lab's sleeping worker: stopped, its address released by Docker, and still asking for it.
    result = check(fakes, containers(("lab2-control-plane", "running", "", "172.30.0.2"),
                                     ("lab2-tenant-x-w1", "exited", ADDRESS, "")))

    assert result.returncode != 0
    assert f"cannot give worker {WORKER} its fixed address {ADDRESS} on docker network {KIND_NETWORK}: " \
           f"container lab2-tenant-x-w1 (exited) has it as its fixed address" in result.stderr
    assert "managementClusterName" in result.stderr and "rename the tenant" in result.stderr
    (inspect,) = fakes.calls("docker", INSPECTED)
    assert inspect["argv"][-2:] == IDS.split()
    assert f'index .NetworkSettings.Networks "{KIND_NETWORK}"' in inspect["argv"][2]


def test_a_running_container_that_has_the_address_now_is_a_clash(fakes):
    result = check(fakes, containers(("someone-else", "running", "", ADDRESS)))

    assert result.returncode != 0
    assert "container someone-else (running) has it now" in result.stderr


def test_the_worker_itself_is_no_clash(fakes):
    # A re-run of `up` with the worker already there, asleep or awake.
    result = check(fakes, containers((WORKER, "exited", ADDRESS, ""),
                                     ("kamaji-control-plane", "running", "", "172.30.0.2")))

    assert result.returncode == 0, result.stderr
    assert "ERROR" not in result.stderr


@pytest.mark.parametrize("other", ["172.30.83.1", "172.30.83.170", "172.30.83.17/18", "invalid IP", ""])
def test_other_addresses_are_no_clash(fakes, other):
    # Only the whole address: one that merely starts like it, or that Docker prints for none, is another.
    result = check(fakes, containers(("lab2-tenant-x-w1", "exited", other, ""), ("lab2-y", "running", "invalid IP",
                                                                                other)))

    assert result.returncode == 0, result.stderr


def test_a_similarly_named_container_is_no_exemption(fakes):
    result = check(fakes, containers((f"{WORKER}0", "exited", ADDRESS, "")))

    assert result.returncode != 0 and f"container {WORKER}0 (exited)" in result.stderr


def test_an_empty_network_has_nothing_to_clash_with(fakes):
    result = check(fakes, "", ids="")

    assert result.returncode == 0, result.stderr
    assert fakes.calls("docker", INSPECTED) == []


@pytest.mark.parametrize("failing", ["ps", "inspect"])
def test_a_docker_that_does_not_answer_fails_the_check(fakes, failing):
    # A check that could not look proves nothing: the worker is not created on it.
    down = reply(exit=1, stderr="Cannot connect to the Docker daemon at unix:///var/run/docker.sock")
    result = check(fakes, down if failing == "inspect" else "", ids=down if failing == "ps" else IDS)

    assert result.returncode != 0
    assert f"cannot {'list' if failing == 'ps' else 'inspect'} the containers on docker network {KIND_NETWORK}" \
           in result.stderr
