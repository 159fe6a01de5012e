"""The tests' own etcd (tests/real_etcd.py) starts even when another process took its port first: the suite runs
on several workers at once, and a port free a moment ago may not be free any more."""

from __future__ import annotations

import shutil
import socket
import tempfile
from pathlib import Path

from tests.real_etcd import LOWEST_TEST_PORT, RealEtcd, free_port


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
