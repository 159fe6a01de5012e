"""scripts/preflight.py refuses Docker hosts whose containers or addresses the lab cannot use as it runs them."""

from __future__ import annotations

import json

import pytest

from tests.test_preflight import make_host, run_preflight


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
