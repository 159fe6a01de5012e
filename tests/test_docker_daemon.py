"""The pulumi-docker provider talks to the daemon the docker CLI uses, found without asking any daemon."""

from __future__ import annotations

import hashlib
import json

import pytest

from components.docker_daemon import docker_daemon_address
from tests.plan import dev_config, plan


def write_context(docker_dir, name, host):
    # docker/cli cli/context/store: contexts/meta/<sha256 of the name>/meta.json.
    meta = docker_dir / "contexts" / "meta" / hashlib.sha256(name.encode()).hexdigest() / "meta.json"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"Name": name, "Endpoints": {"docker": {"Host": host, "SkipTLSVerify": False}}}))


def test_docker_host_wins(tmp_path):
    env = {"DOCKER_HOST": "unix:///srv/docker.sock", "HOME": str(tmp_path)}
    assert docker_daemon_address(env) == "unix:///srv/docker.sock"


def test_without_host_or_context_it_is_the_local_socket(tmp_path):
    assert docker_daemon_address({"HOME": str(tmp_path)}) == "unix:///var/run/docker.sock"


def test_the_clis_current_context_is_followed(tmp_path):
    docker_dir = tmp_path / ".docker"
    docker_dir.mkdir()
    (docker_dir / "config.json").write_text(json.dumps({"currentContext": "engine"}))
    write_context(docker_dir, "engine", "unix:///run/engine/docker.sock")

    assert docker_daemon_address({"HOME": str(tmp_path)}) == "unix:///run/engine/docker.sock"


def test_docker_context_variable_and_docker_config_are_followed(tmp_path):
    write_context(tmp_path, "other", "unix:///run/other.sock")

    env = {"DOCKER_CONFIG": str(tmp_path), "DOCKER_CONTEXT": "other", "HOME": "/nowhere"}
    assert docker_daemon_address(env) == "unix:///run/other.sock"


def test_a_context_without_an_endpoint_is_an_error_naming_it_and_the_fix(tmp_path):
    with pytest.raises(ValueError) as refused:
        docker_daemon_address({"DOCKER_CONFIG": str(tmp_path), "DOCKER_CONTEXT": "gone"})
    assert str(refused.value) == (
        f"docker context 'gone' (from DOCKER_CONTEXT or {tmp_path}/config.json) has no Docker endpoint; "
        "run `docker context use default` or set DOCKER_HOST"
    )


def test_the_default_context_is_the_local_socket_without_any_context_files(tmp_path):
    # docker/cli: "default" is built in and has no metadata directory.
    assert docker_daemon_address({"DOCKER_CONFIG": str(tmp_path), "DOCKER_CONTEXT": "default"}) == (
        "unix:///var/run/docker.sock"
    )


def test_without_home_in_the_environment_the_users_home_is_read(tmp_path, monkeypatch):
    (tmp_path / ".docker").mkdir()
    (tmp_path / ".docker" / "config.json").write_text(json.dumps({"currentContext": "engine"}))
    write_context(tmp_path / ".docker", "engine", "unix:///run/engine/docker.sock")
    monkeypatch.setenv("HOME", str(tmp_path))  # what expanding ~ reads
    assert docker_daemon_address({}) == "unix:///run/engine/docker.sock"


def test_a_config_file_that_is_not_an_object_is_ignored(tmp_path):
    (tmp_path / "config.json").write_text("[]")
    assert docker_daemon_address({"DOCKER_CONFIG": str(tmp_path)}) == "unix:///var/run/docker.sock"


def test_the_provider_gets_that_daemon_in_a_first_preview(monkeypatch, tmp_path):
    # From a context: pulumi-docker's SDK would fill in DOCKER_HOST by itself, but not follow a context.
    write_context(tmp_path, "engine", "unix:///srv/docker.sock")
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.setenv("DOCKER_CONTEXT", "engine")
    (provider,) = plan(dev_config(), preview=True).of_type("pulumi:providers:docker")
    assert provider.inputs["host"] == "unix:///srv/docker.sock"
