"""scripts/network-filter.sh (and -down.sh) on the host, with a fake docker: how it runs the rules program, and
every way a docker call can fail. The rules themselves run on real iptables in test_network_filter_netns.py."""

from __future__ import annotations

import json
import subprocess

import pytest

from components.kind_management_cluster import KIND_NETWORK
from tests.plan import LAB_IDENTITY, NODE_IMAGE
from tests.test_scripts import ROOT, Fakes, reply

NETWORK_ID = "9b2f3e4d5c6a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e"
TENANTS = ("tenant-a 172.30.200.10 10.244.0.0/16 172.30.64.10 172.30.64.11\n"
           "tenant-b 172.30.200.11 10.244.0.0/16 172.30.64.20\n")
ENV = {"LAB_IDENTITY": LAB_IDENTITY, "NODE_IMAGE": NODE_IMAGE, "KIND_NETWORK": KIND_NETWORK,
       "SUBNET": "172.30.0.0/16", "API_PORTS": "6443,8132", "TENANTS": TENANTS}
INFO, INSPECT, RUN = r"^info ", r"^network inspect ", r"^run "


def docker_info(backend: str | None) -> str:
    # Docker 29 adds FirewallBackend (moby/moby api/types/system/info.go@docker-v29.7.2); Docker 28 has none.
    info = {"ServerVersion": "29.1.0" if backend else "28.5.2", "SecurityOptions": ["name=seccomp,profile=builtin"]}
    return json.dumps(info | ({"FirewallBackend": {"Driver": backend}} if backend else {})) + "\n"


def install(fakes: Fakes, *, backend: str | None = None, bridge_option: str = "", run: str | dict = "",
            info: str | dict | None = None, inspect: str | dict | None = None, **env: str):
    fakes.on("docker", INFO, docker_info(backend) if info is None else info)
    fakes.on("docker", INSPECT, f"{NETWORK_ID} {bridge_option}\n" if inspect is None else inspect)
    fakes.on("docker", RUN, run)
    return fakes.run("network-filter.sh", **(ENV | env))


def passed(call: dict) -> dict[str, str]:
    """The -e NAME=value pairs of a docker run."""
    argv = call["argv"]
    return dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "-e")


def test_the_rules_program_runs_as_root_in_the_hosts_network_from_the_node_image(fakes):
    result = install(fakes)

    assert result.returncode == 0, result.stderr
    (run,) = fakes.calls("docker", RUN)
    argv = run["argv"]
    assert argv[argv.index("--network") + 1] == "host"
    assert argv[argv.index("--userns") + 1] == "host", "a dockerd that remaps user namespaces refuses --network host"
    assert {"NET_ADMIN", "SYS_MODULE"} == {argv[i + 1] for i, arg in enumerate(argv) if arg == "--cap-add"}
    assert argv[argv.index("-v") + 1] == "/lib/modules:/lib/modules:ro"
    assert "--privileged" not in argv and "--rm" in argv
    assert argv[argv.index(NODE_IMAGE) - 2:] == ["--entrypoint", "bash", NODE_IMAGE, "-s"]
    assert run["stdin"] == (ROOT / "scripts" / "network-filter-rules.sh").read_text()
    assert passed(run) == {"FILTER_ACTION": "install", "LAB_IDENTITY": LAB_IDENTITY, "FIREWALL_BACKEND": "",
                           "BRIDGE": f"br-{NETWORK_ID[:12]}", "SUBNET": "172.30.0.0/16", "API_PORTS": "6443,8132",
                           "TENANTS": TENANTS}
    (inspect,) = fakes.calls("docker", INSPECT)
    assert inspect["argv"][-1] == KIND_NETWORK


def test_a_bridge_the_network_names_is_the_one_filtered(fakes):
    result = install(fakes, bridge_option="labbr0")

    assert result.returncode == 0, result.stderr
    assert passed(fakes.calls("docker", RUN)[0])["BRIDGE"] == "labbr0"


@pytest.mark.parametrize("backend", ["iptables", "nftables", "nftables+firewalld"])
def test_dockers_firewall_backend_is_handed_to_the_rules(fakes, backend):
    result = install(fakes, backend=backend)

    assert result.returncode == 0, result.stderr
    assert passed(fakes.calls("docker", RUN)[0])["FIREWALL_BACKEND"] == backend
    said_nftables = "nftables firewall backend, which has no DOCKER-USER chain" in result.stderr
    assert said_nftables == backend.startswith("nftables")


def test_remove_needs_neither_the_network_nor_docker_info(fakes):
    # On destroy the network may be gone already; the chains and jumps follow from the identity alone.
    fakes.on("docker", RUN, "")
    result = fakes.run("network-filter-down.sh", LAB_IDENTITY=LAB_IDENTITY, NODE_IMAGE=NODE_IMAGE)

    assert result.returncode == 0, result.stderr
    assert fakes.calls("docker", INFO) == [] and fakes.calls("docker", INSPECT) == []
    assert passed(fakes.calls("docker", RUN)[0]) == {"FILTER_ACTION": "remove", "LAB_IDENTITY": LAB_IDENTITY}


@pytest.mark.parametrize(("failing", "message"), [
    ("info", "cannot read docker info, to tell Docker's firewall backend"),
    ("inspect", f"cannot inspect docker network {KIND_NETWORK}"),
    ("run", f"could not install the lab's network filter on docker network {KIND_NETWORK}"),
])
def test_every_failing_docker_call_fails_the_install_and_says_which(fakes, failing, message):
    failed = reply(exit=1, stderr="Cannot connect to the Docker daemon")
    result = install(fakes, **{failing: failed})

    assert result.returncode != 0
    assert message in result.stderr
    if failing != "run":
        assert fakes.calls("docker", RUN) == [], "no rules from half-known facts"


def test_docker_info_that_is_not_json_fails_the_install(fakes):
    result = install(fakes, info="WARNING: bridge-nf-call-iptables is disabled\n")

    assert result.returncode != 0
    assert "cannot read Docker's firewall backend from docker info" in result.stderr
    assert fakes.calls("docker", RUN) == []


def test_a_failed_remove_fails_the_destroy(fakes):
    fakes.on("docker", RUN, reply(exit=1))
    result = fakes.run("network-filter-down.sh", LAB_IDENTITY=LAB_IDENTITY, NODE_IMAGE=NODE_IMAGE)

    assert result.returncode != 0
    assert "could not remove the lab's network filter" in result.stderr


@pytest.mark.parametrize("missing", ["LAB_IDENTITY", "NODE_IMAGE", "KIND_NETWORK", "SUBNET", "API_PORTS", "TENANTS"])
def test_a_missing_input_is_named(fakes, missing):
    result = install(fakes, **{missing: ""})

    assert result.returncode != 0
    assert f"environment variable {missing} is required" in result.stderr
    assert fakes.calls("docker") == []


RULES = ROOT / "scripts" / "network-filter-rules.sh"


@pytest.mark.parametrize(("key", "value", "said"), [
    ("FILTER_ACTION", "flush", "FILTER_ACTION must be install or remove, not 'flush'"),
    ("LAB_IDENTITY", LAB_IDENTITY[:-1], f"LAB_IDENTITY must be 32 hex digits, not '{LAB_IDENTITY[:-1]}'"),
    ("LAB_IDENTITY", LAB_IDENTITY.upper(), "LAB_IDENTITY must be 32 hex digits"),
    ("BRIDGE", "br-lab;reboot", "BRIDGE must name a network interface, not 'br-lab;reboot'"),
    ("SUBNET", "172.30.0.0", "SUBNET must be an IPv4 CIDR, not '172.30.0.0'"),
    ("API_PORTS", "6443 8132", "API_PORTS must be ports separated by commas, not '6443 8132'"),
    ("TENANTS", "tenant-a 172.30.200.10 10.244.0.0/16\n", "tenant tenant-a has no worker address"),
    ("TENANTS", "tenant-a api 10.244.0.0/16 172.30.64.10\n",
     "tenant tenant-a: its API address must be an IPv4 address, not 'api'"),
    ("TENANTS", "tenant-a 172.30.200.10 10.244.0.0 172.30.64.10\n",
     "tenant tenant-a: its pod CIDR must be an IPv4 CIDR, not '10.244.0.0'"),
    ("TENANTS", "tenant-a 172.30.200.10 10.244.0.0/16 172.30.64.10 -j\n",
     "tenant tenant-a: a worker address must be an IPv4 address, not '-j'"),
])
def test_the_rules_program_refuses_bad_input_before_it_touches_iptables(tmp_path, key, value, said):
    # Nothing of it reaches iptables: a PATH without iptables would fail any such call differently.
    env = {"PATH": "/usr/bin:/bin", "FILTER_ACTION": "install", "BRIDGE": "br-lab", "FIREWALL_BACKEND": "",
           **{name: ENV[name] for name in ("LAB_IDENTITY", "SUBNET", "API_PORTS", "TENANTS")}, key: value}
    result = subprocess.run(["bash", str(RULES)], env=env, capture_output=True, text=True, timeout=30)

    assert result.returncode == 1
    assert said in result.stderr


def test_the_hosts_iptables_lock_is_shared_when_there_is_one(fakes, tmp_path):
    lock = tmp_path / "xtables.lock"
    lock.write_text("")

    result = install(fakes, XTABLES_LOCK=str(lock))

    assert result.returncode == 0, result.stderr
    argv = fakes.calls("docker", RUN)[0]["argv"]
    assert argv[argv.index("--mount") + 1] == f"type=bind,source={lock},target=/run/xtables.lock"


def test_without_a_lock_on_the_host_none_is_mounted(fakes, tmp_path):
    # docker run -v would create the missing file as a directory, which iptables-legacy then cannot lock.
    result = install(fakes, XTABLES_LOCK=str(tmp_path / "absent.lock"))

    assert result.returncode == 0, result.stderr
    argv = fakes.calls("docker", RUN)[0]["argv"]
    assert "--mount" not in argv and not [arg for arg in argv if "xtables" in arg]
