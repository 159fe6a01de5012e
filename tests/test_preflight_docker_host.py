"""scripts/preflight.py refuses Docker hosts whose containers or addresses the lab cannot use as it runs them."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.test_preflight import DOCKER_DOWN, make_host, only_error, preflight, run_preflight


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

    assert run_preflight(host, capsys) == (1, only_error(
        "Docker runs rootless: its networks live in a user namespace, so the tenant API servers' MetalLB addresses "
        "are unreachable from the host (moby/moby#43625)",
        "use the root Docker daemon: docker context use default (or install Docker Engine: "
        "https://docs.docker.com/engine/install/)"))


# Without a scheme, docker reads DOCKER_HOST as a TCP address (docker/cli opts/hosts.go@v29.7.2,
# parseDockerDaemonHost).
@pytest.mark.parametrize("docker_host", ["tcp://10.0.0.5:2376", "ssh://me@build-box", "10.0.0.5:2376"])
def test_a_remote_docker_host_is_refused(tmp_path, capsys, docker_host):
    host, _ = make_host(tmp_path, env={"DOCKER_HOST": docker_host})

    assert run_preflight(host, capsys) == (1, only_error(
        f"docker talks to a remote daemon ({docker_host}): the lab's docker network kamaji-hami-lab and its MetalLB "
        "addresses (the tenant API servers) would be on that machine, out of this host's reach",
        "run the lab on the Docker host itself: unset DOCKER_HOST, or docker context use default"))


def test_a_docker_without_contexts_talks_to_its_local_daemon(tmp_path, capsys):
    # A docker CLI older than 19.03 has no contexts; with no DOCKER_HOST it uses the local socket.
    host, _ = make_host(tmp_path)
    answers = host.run
    host = dataclasses.replace(host, run=lambda argv: (1, "docker: 'context' is not a docker command.")
                               if argv[1] == "context" else answers(argv))

    assert run_preflight(host, capsys) == (0, "preflight: all good\n")


def test_a_remote_docker_context_is_refused(tmp_path, capsys):
    host, _ = make_host(tmp_path, context="ssh://me@build-box")

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert "remote daemon (ssh://me@build-box)" in out


# An ssh URL's host is what follows its last "@", as Go's net/url reads the URL docker/cli's ssh helper parses
# (docker/cli cli/connhelper/ssh/ssh.go@v29.7.2, ParseURL; golang/go src/net/url/url.go, parseAuthority).
@pytest.mark.parametrize("docker_host", ["unix:///var/run/docker.sock", "tcp://127.0.0.1:2375", "tcp://localhost:2375",
                                         "tcp://[::1]:2375", "ssh://me@localhost", "ssh://me@example.org@localhost",
                                         "localhost:2375", "127.0.0.1:2375"])
def test_a_local_daemon_over_any_transport_passes(tmp_path, capsys, docker_host):
    host, _ = make_host(tmp_path, env={"DOCKER_HOST": docker_host})

    assert run_preflight(host, capsys)[0] == 0


@pytest.mark.parametrize(
    ("driver", "status", "stores_on"),
    # kubernetes-sigs/kind pkg/cluster/internal/providers/docker/util.go (mountDevMapper): these get /dev/mapper.
    # Only overlay2 names a backing filesystem in its status; btrfs and zfs name none (moby/moby
    # daemon/graphdriver/{overlay2/overlay.go,btrfs/btrfs.go,zfs/zfs.go}@v28.5.2, Status).
    [("btrfs", [["Btrfs", ""]], "btrfs"), ("zfs", [["Zpool", "tank"]], "zfs"), ("devicemapper", [], "devicemapper"),
     ("overlay2", [["Backing Filesystem", "xfs"]], "overlay2 over xfs"),
     ("overlay2", [["Backing Filesystem", "btrfs"]], "overlay2 over btrfs")],
)
def test_hosts_where_kind_mounts_dev_mapper_are_refused(tmp_path, capsys, driver, status, stores_on):
    host, _ = make_host(tmp_path, info={"Driver": driver, "DriverStatus": status})

    assert run_preflight(host, capsys) == (1, only_error(
        f"Docker stores containers on {stores_on}; kind mounts /dev/mapper into nodes on such hosts so the kubelet "
        "finds its disk, and the lab's workers do not",
        "use a Docker host whose storage driver is overlay2 on ext4 (docker info -f '{{.Driver}}')"))


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
