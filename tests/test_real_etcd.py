"""The tests' own etcd (tests/real_etcd.py) starts even when another process took its port first: the suite runs
on several workers at once, and a port free a moment ago may not be free any more. A server the tests of a module
share is handed to each as a fresh start leaves it, or is a fresh one."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import tempfile
from pathlib import Path

import pytest

from tests.real_etcd import (
    LOG,
    LOWEST_TEST_PORT,
    PIPE_BUFFER,
    ROOT,
    RealEtcd,
    SharedServers,
    free_port,
    issue,
)


def test_etcd_starts_on_other_ports_when_its_client_port_was_taken_meanwhile():
    directory = Path(tempfile.mkdtemp(prefix="real-etcd-"))
    server = RealEtcd(directory)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
        taken.listen()
        try:
            server.start()
            assert server.url.rsplit(":", 1)[1] != str(taken.getsockname()[1])
            assert server.etcdctl(server.root, "endpoint", "health").returncode == 0
        finally:
            server.stop()
            shutil.rmtree(directory, ignore_errors=True)


def test_a_test_servers_port_is_free_and_below_the_range_outgoing_connections_take_theirs():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(LOWEST_TEST_PORT <= port < low for port in ports)
    assert len(ports) > 1  # random, so two workers seldom pick the same one
    with socket.socket() as server:
        server.bind(("127.0.0.1", ports.pop()))


def seen(server: RealEtcd) -> dict:
    """What a test could find of an earlier one: keys, users, roles, auth, leases, alarms and the server's files."""
    return {
        "keys": server.admin("get", "", "--from-key", "--keys-only"),
        "users": server.admin("user", "list"),
        "roles": server.admin("role", "list"),
        "auth": json.loads(server.admin("auth", "status", "-w", "json")).get("enabled", False),
        "leases": server.admin("lease", "list"),
        "alarms": server.admin("alarm", "list"),
        "files": {
            path.name: path.read_bytes() for path in server.directory.iterdir() if path.is_file() and path.name != LOG
        },
        "directories": sorted(path.name for path in server.directory.iterdir() if path.is_dir()),
    }


def a_test_was_here(server: RealEtcd) -> None:
    """All a test may leave behind: tenants and root as Kamaji makes them with auth on, a leased key, a certificate
    of its own and a file beside the server's."""
    server.provision_tenant("uid-a", "tenants_tenant_a")
    server.put("/tenants_tenant_a/configmaps/kube-system/kube-root-ca.crt")
    lease = json.loads(server.admin("lease", "grant", "600", "-w", "json"))["ID"]
    server.admin("put", f"--lease={lease:x}", "/tenants_tenant_a/events/default/e.1", "an event")
    server.put("\x01", "the lowest key etcdctl can write")
    server.client("stranger")
    (server.directory / "scratch").mkdir()
    server.provision_root_and_enable_auth()


REFUSAL_LOGGED = 1000  # bytes at least etcd 3.5.1 logs of a refused read: a line and its stack trace


def test_a_server_keeps_answering_after_it_said_more_than_a_pipe_holds(servers):
    # etcd 3.5.1 logs each refused request with its stack trace, and a module's tests make many: unread, its
    # stderr would stop the server mid-request once the pipe is full.
    server = servers.get("default")
    server.provision_root_and_enable_auth()
    stranger = server.client("stranger")
    for _ in range(PIPE_BUFFER // REFUSAL_LOGGED + 1):
        assert server.etcdctl(stranger, "get", "/", "--prefix").returncode != 0

    assert (server.directory / LOG).stat().st_size > PIPE_BUFFER
    assert server.etcdctl(server.root, "endpoint", "health").returncode == 0
    assert servers.get("default") is server  # and the reset still works on it


@pytest.fixture
def servers():
    kept = SharedServers()
    yield kept
    kept.stop()


def test_a_shared_server_is_handed_to_the_next_test_as_a_fresh_start_leaves_it(servers):
    server = servers.get("default")
    fresh, root_files = seen(server), (server.root.cert.read_bytes(), server.root.key.read_bytes())
    a_test_was_here(server)
    assert seen(server) != fresh

    again = servers.get("default")

    assert again is server and again.process.poll() is None  # reset, not started again
    assert seen(again) == fresh
    assert (server.root.cert.read_bytes(), server.root.key.read_bytes()) == root_files
    # The CA and root's certificate still do what they did on the fresh server: a new tenant is provisioned.
    again.provision_tenant("uid-b", "tenants_tenant_b")
    assert again.etcdctl(again.client("uid-b"), "get", "/tenants_tenant_b/", "--prefix").returncode == 0


def test_each_role_is_its_own_server_reset_on_its_own(servers):
    default, dedicated = servers.get("default"), servers.get("dedicated")
    assert default.url != dedicated.url and default.ca.read_bytes() != dedicated.ca.read_bytes()
    default.put("/only-in-default")
    assert servers.get("dedicated").admin("get", "/only-in-default") == ""
    assert servers.get("default").admin("get", "/only-in-default") == ""


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_a_server_a_test_stopped_is_replaced_by_a_fresh_one(servers, how):
    broken = servers.get("default")
    broken.put("/left-behind")
    broken.process.send_signal(how)
    broken.process.wait(timeout=10)

    fresh = servers.get("default")

    assert fresh is not broken and not broken.directory.exists()
    assert fresh.etcdctl(fresh.root, "endpoint", "health").returncode == 0
    assert fresh.admin("get", "", "--from-key", "--keys-only") == ""


def test_a_server_that_refuses_the_reset_is_replaced_by_a_fresh_one(servers):
    broken = servers.get("default")
    # Root's certificate made untrusted: every call of the reset is refused, as when the server cannot be reached.
    server_only, _ = issue(broken.directory, "other", ROOT, "extendedKeyUsage=serverAuth\n")
    broken.root.cert.write_bytes(server_only.read_bytes())

    fresh = servers.get("default")

    assert fresh is not broken and broken.process.poll() is not None and not broken.directory.exists()
    assert fresh.etcdctl(fresh.root, "endpoint", "health").returncode == 0


def test_a_server_a_test_filled_is_replaced_by_a_fresh_one(servers):
    # etcd raises NOSPACE once its database passes --quota-backend-bytes, and keeps it after the keys are deleted
    # (etcd-io/etcd server/etcdserver/quota.go and server.go@v3.5.1): only a fresh server is as a start leaves it.
    full = RealEtcd(Path(tempfile.mkdtemp(prefix="real-etcd-")), flags=("--quota-backend-bytes=65536",))
    full.start()
    servers.servers["default"] = full
    for index in range(20):
        if full.etcdctl(full.root, "put", f"/filler/{index}", "x" * 16384).returncode:
            break
    assert "NOSPACE" in full.admin("alarm", "list")

    fresh = servers.get("default")

    assert fresh is not full and full.process.poll() is not None and not full.directory.exists()
    assert fresh.admin("alarm", "list") == ""
    fresh.put("/room-again")
