"""scripts/preflight.py on recorded host values (a fake /proc, /sys and /lib under tmp_path)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.script_module import script_module

preflight = script_module("preflight")

SWAPS_HEADER = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
# /proc/net/route as Linux prints it (torvalds/linux net/ipv4/fib_trie.c, fib_route_seq_show, as indexed): a header,
# then per route tab-separated hex fields, the addresses in the host's byte order (these: a little-endian host's),
# every line padded to 127 characters. The host's routes, from the kernel's table.
ROUTES_HEADER = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"


def route_line(device: str, network: str, gateway: str = "0.0.0.0", flags: int = 0x0001, metric: int = 0) -> str:
    """One /proc/net/route line of a little-endian host; flags 0x0001 up, 0x0002 via a gateway, 0x0200 rejecting."""
    import ipaddress

    def hex_of(address) -> str:
        return f"{int.from_bytes(ipaddress.IPv4Address(address).packed, 'little'):08X}"

    net = ipaddress.IPv4Network(network)
    fields = [device, hex_of(net.network_address), hex_of(gateway), f"{flags:04X}", "0", "0", str(metric),
              hex_of(net.netmask), "0", "0", "0"]
    return "\t".join(fields).ljust(127) + "\n"


# A home LAN's host, shaped like an Ubuntu 24.04 desktop with Docker (docker0): its default route, the LAN
# (192.168.1.0/24), and systemd-resolved's stub in resolv.conf, which forwards to the router.
HOST_NETWORK_FILES = {
    "proc/net/route": ROUTES_HEADER.ljust(127) + "\n"
    + route_line("wlp2s0", "0.0.0.0/0", "192.168.1.1", flags=0x0003, metric=600)
    + route_line("wlp2s0", "192.168.1.0/24", metric=600)
    + route_line("docker0", "172.17.0.0/16"),
    "etc/resolv.conf": "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n",
    "run/systemd/resolve/resolv.conf": "nameserver 192.168.1.1\nsearch .\n",
}
# A host already tuned for the lab: the values `make preflight` asks for.
TUNED = {
    "proc/sys/fs/inotify/max_user_watches": "524288\n",
    "proc/sys/fs/inotify/max_user_instances": "512\n",
    "proc/swaps": SWAPS_HEADER,
    "sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n",
    "lib/modules/6.8.0-84-generic/modules.dep": "",
    **HOST_NETWORK_FILES,
}
KERNEL = "6.8.0-84-generic"
DOCKER_ENGINE = (0, "Ubuntu 24.04.3 LTS")
# `kubectl version --client` (kubernetes/kubectl pkg/cmd/version/version.go@v0.36.3 prints these two lines).
KUBECTL = (0, "Client Version: v1.36.3\nKustomize Version: v5.7.1")  # docker info --format {{.OperatingSystem}}
# `docker info --format '{{json .}}'` of a root Docker Engine on overlay2/ext4 (the fields the checks read).
ENGINE_INFO = {
    "OperatingSystem": "Ubuntu 24.04.3 LTS",
    "Driver": "overlay2",
    "DriverStatus": [["Backing Filesystem", "extfs"], ["Supports d_type", "true"]],
    "SecurityOptions": ["name=apparmor", "name=seccomp,profile=builtin", "name=cgroupns"],
    "DockerRootDir": "/var/lib/docker",
}
LOCAL_SOCKET = "unix:///var/run/docker.sock"
DOCKER_DOWN = (
    1,
    "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
)


def make_host(
    tmp_path: Path,
    overrides=None,
    *,
    missing_tools=(),
    docker=DOCKER_ENGINE,
    kernel=KERNEL,
    python=(3, 12),
    info=None,
    context=LOCAL_SOCKET,
    env=None,
    stack_config=(0, "{}"),
    free_bytes=None,
):
    files = {**TUNED, **(overrides or {})}
    for relative, content in files.items():
        if content is not None:
            path = tmp_path / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
    docker_calls = []
    # What current kind, Pulumi and kubectl CLIs print for their version commands.
    versions = {"kind": (0, "kind v0.33.0 go1.25.1 linux/amd64"), "pulumi": (0, "v3.272.0"), "kubectl": KUBECTL}

    def run(argv):
        if argv[0] in versions and tuple(argv) == preflight.VERSION_COMMANDS[argv[0]]:
            return versions[argv[0]]
        docker_calls.append(list(argv))
        if list(argv[:3]) == ["pulumi", "config", "--json"]:
            return stack_config
        if docker[0] != 0:
            return docker
        if argv[:3] == ["docker", "info", "--format"] and argv[3] == "{{json .}}":
            return 0, json.dumps({**ENGINE_INFO, **(info or {})})
        if argv[:3] == ["docker", "context", "inspect"]:
            return 0, context
        if argv[:4] == ["docker", "info", "--format", "{{.DockerRootDir}}"]:
            return 0, {**ENGINE_INFO, **(info or {})}["DockerRootDir"]
        return docker

    host = preflight.Host(
        root=tmp_path,
        which=lambda tool: None if tool in missing_tools else f"/usr/bin/{tool}",
        env={"HOME": "/home/user", **(env or {})},
        run=run,
        kernel_release=kernel,
        python=python,
        free_bytes=free_bytes or (lambda path: None),
    )
    return host, docker_calls


def run_preflight(host, capsys, *args):
    code = preflight.main(list(args), host=host)
    return code, capsys.readouterr().out


def only_error(problem: str, fix: str) -> str:
    """What the preflight prints, whole, for a host whose one problem is this error."""
    return f"ERROR   {problem}\n        fix: {fix}\npreflight: 1 error(s), 0 warning(s)\n"


def test_a_tuned_host_passes(tmp_path, capsys):
    host, docker_calls = make_host(tmp_path)

    code, out = run_preflight(host, capsys)

    assert code == 0
    assert out.strip() == "preflight: all good"
    assert ["docker", "info", "--format", "{{.OperatingSystem}}"] in docker_calls


def test_distribution_inotify_defaults_are_errors_with_the_exact_fix(tmp_path, capsys):
    host, _ = make_host(
        tmp_path,
        {"proc/sys/fs/inotify/max_user_watches": "65536\n", "proc/sys/fs/inotify/max_user_instances": "128\n"},
    )

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert "fix: sudo sysctl -w fs.inotify.max_user_watches=524288" in out
    assert "fix: sudo sysctl -w fs.inotify.max_user_instances=512" in out
    assert "/etc/sysctl.d/" in out  # how to make it stick


def test_conntrack_settings_no_longer_matter(tmp_path, capsys):
    # kube-proxy in the workers never writes them (maxPerCore: 0), so a distribution default on a big host passes.
    host, _ = make_host(
        tmp_path,
        {
            "proc/sys/net/netfilter/nf_conntrack_max": "65536\n",
            "sys/module/nf_conntrack/parameters/hashsize": "16384\n",
        },
    )

    assert run_preflight(host, capsys) == (0, "preflight: all good\n")


def test_swap_is_a_warning_that_mentions_the_kubelet_setting(tmp_path, capsys):
    swaps = SWAPS_HEADER + "/swap.img                               file\t\t4194300\t\t0\t\t-2\n"
    host, _ = make_host(tmp_path, {"proc/swaps": swaps})

    code, out = run_preflight(host, capsys)

    assert code == 0
    assert "WARNING" in out and "failSwapOn=false" in out and "sudo swapoff -a" in out


def test_modules_of_another_kernel_do_not_count(tmp_path, capsys):
    # The usual case: a kernel upgrade installed new modules and removed the running kernel's.
    host, _ = make_host(
        tmp_path, {"lib/modules/6.8.0-84-generic/modules.dep": None, "lib/modules/6.8.0-90-generic/modules.dep": ""}
    )

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert "ERROR   /lib/modules/6.8.0-84-generic is missing" in out and "reboot" in out


def test_cgroup_v1_is_an_error_naming_the_kubelet_setting(tmp_path, capsys):
    host, _ = make_host(tmp_path, {"sys/fs/cgroup/cgroup.controllers": None})

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert "ERROR   the host uses cgroup v1" in out and "failCgroupV1" in out
    assert "systemd.unified_cgroup_hierarchy=1" in out


def test_python_older_than_3_11_is_an_error(tmp_path, capsys):
    host, _ = make_host(tmp_path, python=(3, 10))

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert "Python 3.10" in out and ">= 3.11" in out and "PYTHON=python3.11" in out


def test_missing_openssl_is_an_error(tmp_path, capsys):
    host, _ = make_host(tmp_path, missing_tools=("openssl",))

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert "openssl is not on PATH" in out


def test_docker_desktop_is_an_error_explaining_the_unreachable_addresses(tmp_path, capsys):
    host, _ = make_host(tmp_path, docker=(0, "Docker Desktop"))

    assert run_preflight(host, capsys) == (1, only_error(
        "docker talks to Docker Desktop, which runs containers in a VM: the tenant API servers' MetalLB addresses on "
        "the lab's docker network kamaji-hami-lab would be unreachable from this host",
        "use Docker Engine on Linux (https://docs.docker.com/engine/install/); if it is installed next to Docker "
        "Desktop, switch to it with: docker context use default"))


def test_missing_tools_say_what_to_install_and_skip_the_daemon_check(tmp_path, capsys):
    host, docker_calls = make_host(tmp_path, missing_tools=("docker", "kind"))

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert "docker is not on PATH" in out and "docs.docker.com/engine/install" in out
    assert "kind is not on PATH" in out and "kind.sigs.k8s.io" in out
    assert docker_calls == []


# What docker said; a docker that failed without a word is said to have given no answer.
@pytest.mark.parametrize(("docker", "said"), [(DOCKER_DOWN, DOCKER_DOWN[1]), ((1, ""), "no answer")])
def test_unreachable_docker_daemon_is_an_error(tmp_path, capsys, docker, said):
    host, _ = make_host(tmp_path, docker=docker)

    assert run_preflight(host, capsys) == (1, only_error(
        f"the Docker daemon is not reachable: {said}",
        "start it (sudo systemctl start docker) and let your user use it (sudo usermod -aG docker $USER, then log in "
        "again)"))


def test_tools_mode_checks_only_the_named_programs(tmp_path, capsys):
    host, docker_calls = make_host(
        tmp_path, {"proc/sys/fs/inotify/max_user_instances": "128\n"}, missing_tools=("pulumi",), docker=DOCKER_DOWN
    )

    code, out = run_preflight(host, capsys, "--tools", "pulumi", "kubectl")

    assert code == 1
    assert "pulumi is not on PATH" in out and "get.pulumi.com" in out
    assert "inotify" not in out and "kubectl" not in out and docker_calls == []


def test_tools_mode_is_silent_when_the_tools_are_there(tmp_path, capsys):
    host, _ = make_host(tmp_path, {"proc/sys/fs/inotify/max_user_instances": "128\n"})

    assert run_preflight(host, capsys, "--tools", "pulumi") == (0, "")


def test_docker_warnings_on_stderr_do_not_hide_its_answer():
    # `docker info` prints warnings such as "WARNING: bridge-nf-call-iptables is disabled" on stderr.
    fake_docker_info = "import sys; print('Docker Desktop'); print('WARNING: No swap limit support', file=sys.stderr)"

    assert preflight._run([sys.executable, "-c", fake_docker_info]) == (0, "Docker Desktop")
