"""scripts/preflight.py refuses Docker hosts whose containers or addresses the lab cannot use as it runs them."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.test_preflight import DOCKER_DOWN, make_host, preflight, run_preflight


def test_a_local_root_engine_on_overlay2_passes(tmp_path, capsys):
    host, calls = make_host(tmp_path)

    assert run_preflight(host, capsys) == (0, "preflight: all good\n")
    assert ["docker", "context", "inspect", "--format", "{{.Endpoints.docker.Host}}"] in calls


def test_rootless_docker_is_refused_with_the_reason(tmp_path, capsys):
    # docker info of a rootless daemon lists "name=rootless" among its security options.
    host, _ = make_host(
        tmp_path,
        info={"SecurityOptions": ["name=seccomp,profile=builtin", "name=rootless", "name=cgroupns"]},
        context="unix:///run/user/1000/docker.sock",
    )

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert "ERROR   Docker runs rootless" in out and "unreachable from the host" in out
    assert "docker context use default" in out


@pytest.mark.parametrize("docker_host", ["tcp://10.0.0.5:2376", "ssh://me@build-box"])
def test_a_remote_docker_host_is_refused(tmp_path, capsys, docker_host):
    host, _ = make_host(tmp_path, env={"DOCKER_HOST": docker_host})

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert f"remote daemon ({docker_host})" in out and "out of this host's reach" in out
    assert "unset DOCKER_HOST" in out


def test_a_remote_docker_context_is_refused(tmp_path, capsys):
    host, _ = make_host(tmp_path, context="ssh://me@build-box")

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert "remote daemon (ssh://me@build-box)" in out


@pytest.mark.parametrize("docker_host", ["unix:///var/run/docker.sock", "tcp://127.0.0.1:2375", "tcp://localhost:2375"])
def test_a_local_daemon_over_any_transport_passes(tmp_path, capsys, docker_host):
    host, _ = make_host(tmp_path, env={"DOCKER_HOST": docker_host})

    assert run_preflight(host, capsys)[0] == 0


@pytest.mark.parametrize(
    ("driver", "backing"),
    # kubernetes-sigs/kind pkg/cluster/internal/providers/docker/util.go (mountDevMapper): these get /dev/mapper.
    [("btrfs", None), ("zfs", None), ("devicemapper", None), ("overlay2", "xfs"), ("overlay2", "btrfs")],
)
def test_hosts_where_kind_mounts_dev_mapper_are_refused(tmp_path, capsys, driver, backing):
    status = [["Backing Filesystem", backing]] if backing else []
    host, _ = make_host(tmp_path, info={"Driver": driver, "DriverStatus": status})

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert f"Docker stores containers on {driver}" in out and "/dev/mapper" in out


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "http_proxy"])
def test_a_proxy_in_the_environment_is_refused(tmp_path, capsys, variable):
    host, _ = make_host(tmp_path, env={variable: "http://proxy.example:3128"})

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert f"a proxy is configured ({variable})" in out and "could not pull their images" in out


def test_a_proxy_in_the_docker_client_config_is_refused(tmp_path, capsys):
    config = {"proxies": {"default": {"httpsProxy": "http://proxy.example:3128"}}}
    host, _ = make_host(tmp_path, {"home/user/.docker/config.json": json.dumps(config)})

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert "config.json httpsProxy" in out


def test_userns_remap_is_not_refused_because_workers_run_with_the_host_user_namespace(tmp_path, capsys):
    # kind adds --userns=host under userns-remap; the workers always run that way (components/worker_node.py).
    host, _ = make_host(tmp_path, info={"SecurityOptions": ["name=seccomp,profile=builtin", "name=userns"]})

    assert run_preflight(host, capsys)[0] == 0


# Each of the four refusals at once: a rootless daemon on another machine, on btrfs, behind a proxy.
EVERY_REFUSAL = {"info": {"SecurityOptions": ["name=rootless"], "Driver": "btrfs", "DriverStatus": []},
                 "env": {"DOCKER_HOST": "tcp://10.0.0.5:2376", "HTTPS_PROXY": "http://proxy.example:3128"}}
REFUSALS_IN_ORDER = ("docker talks to a remote daemon", "Docker runs rootless", "Docker stores containers on btrfs",
                     "a proxy is configured")


def test_every_docker_host_refusal_is_reported_at_once_in_the_same_order(tmp_path):
    host, _ = make_host(tmp_path, **EVERY_REFUSAL)

    problems = [finding.problem for finding in preflight.preflight(host)]

    refusals = [problem for problem in problems if problem.startswith(REFUSALS_IN_ORDER)]
    assert [next(start for start in REFUSALS_IN_ORDER if refusal.startswith(start)) for refusal in refusals] == list(
        REFUSALS_IN_ORDER)
    assert problems.index(refusals[0]) == problems.index(refusals[-1]) - 3, "one block, nothing in between"


def test_a_docker_info_that_is_no_json_skips_the_docker_host_checks_with_a_warning(tmp_path):
    host, _ = make_host(tmp_path, **EVERY_REFUSAL)
    answers = host.run
    host = dataclasses.replace(host, run=lambda argv: (0, "<html>proxy login</html>") if argv[-1] == "{{json .}}"
                               else answers(argv))

    findings = preflight.preflight(host)

    assert [finding for finding in findings if finding.problem.startswith(REFUSALS_IN_ORDER)] == []
    (warning,) = [finding for finding in findings if "docker info" in finding.problem]
    assert (warning.severity, warning.problem) == (
        "warning", "could not read `docker info`; the Docker host checks were skipped")


def test_a_daemon_that_does_not_answer_is_reported_once_not_as_a_docker_host_problem(tmp_path):
    host, _ = make_host(tmp_path, docker=DOCKER_DOWN, env=EVERY_REFUSAL["env"])

    problems = [finding.problem for finding in preflight.preflight(host)]

    assert [problem for problem in problems if problem.startswith(REFUSALS_IN_ORDER)] == []
    assert [problem for problem in problems if "docker" in problem.lower()] == [
        f"the Docker daemon is not reachable: {DOCKER_DOWN[1]}"]
