"""The lab's network filter (scripts/network-filter-rules.sh) with real iptables, on a bridge in a private namespace.

The namespace plays the Docker host: a bridge with br_netfilter on (the kernel's default once the module is in, per
network namespace), its address the network's gateway, a listener for the host's own services on it, and Docker's
rules. Every container is a network namespace of its own on the bridge: two workers of tenant-a (with a pod each),
one of tenant-b, and the kind node holding the MetalLB addresses (each tenant's API, Grafana). Behind the host, a
"world" namespace holds an outside address and a stand-in for 169.254.169.254. The rules go in with this
machine's iptables-nft, as the node image's would write them; Docker's rules are what its iptables backend makes
(DOCKER-USER first in FORWARD, then its own chain accepting the bridge's traffic, FORWARD's policy DROP) or, with
its nftables backend, a table of its own with no DOCKER-USER.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from components.network_filter import API_PORTS
from components.tenant_control_plane import API_PORT, KONNECTIVITY_PORT

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "scripts" / "network-filter-rules.sh"
PROBE = Path(__file__).resolve().parent / "netns_probe.py"

IDENTITY = "5f0c3a9e7d21b4c86e93f1a0d7b2c458"
OTHER_LAB = "0123456789abcdef0123456789abcdef"
A1, A2, B1 = "172.30.64.10", "172.30.64.11", "172.30.64.20"
KIND_NODE, GATEWAY = "172.30.0.2", "172.30.0.1"
API_A, API_B, GRAFANA = "172.30.200.10", "172.30.200.11", "172.30.200.50"
POD_A1, POD_A2 = "10.244.0.5", "10.244.1.1"
OUTSIDE, METADATA = "203.0.113.10", "169.254.169.254"
TENANTS = f"tenant-a {API_A} 10.244.0.0/16 {A1} {A2}\ntenant-b {API_B} 10.244.0.0/16 {B1}\n"

TOPOLOGY = r"""
set -eu
scratch=$1
mount -t tmpfs run /run
ip link set lo up
sysctl -qw net.ipv4.ip_forward=1
ip link add br-lab type bridge
ip addr add 172.30.0.1/16 dev br-lab
ip link set br-lab up
container() {
	name=$1
	shift
	ip netns add "$name"
	ip link add "v-$name" type veth peer name eth0 netns "$name"
	ip link set "v-$name" master br-lab up
	ip -n "$name" link set lo up
	ip -n "$name" link set eth0 up
	for address in "$@"; do ip -n "$name" addr add "$address" dev eth0; done
	ip -n "$name" route add default via 172.30.0.1
}
container a1 172.30.64.10/16
container a2 172.30.64.11/16
container b1 172.30.64.20/16
container kind 172.30.0.2/16 172.30.200.10/32 172.30.200.11/32 172.30.200.50/32
# One pod on each of tenant-a's workers, routed through the other worker as kindnet routes them.
ip -n a1 addr add 10.244.0.5/32 dev lo
ip -n a2 addr add 10.244.1.1/32 dev lo
ip -n a1 route add 10.244.1.0/24 via 172.30.64.11
ip -n a2 route add 10.244.0.0/24 via 172.30.64.10
ip netns add world
ip link add v-world type veth peer name eth0 netns world
ip addr add 198.51.100.1/24 dev v-world
ip link set v-world up
ip -n world link set lo up
ip -n world link set eth0 up
ip -n world addr add 198.51.100.2/24 dev eth0
ip -n world addr add 203.0.113.10/32 dev lo
ip -n world addr add 169.254.169.254/32 dev lo
ip -n world route add default via 198.51.100.1
ip route add 203.0.113.10/32 via 198.51.100.2
ip route add 169.254.169.254/32 via 198.51.100.2
listen() {
	where=$1
	shift
	ip netns exec "$where" "$PYTHON" "$PROBE" listen "$scratch/ready-$where" "$@" &
}
listen a1 10250
listen a2 10250 8080
listen b1 10250
listen kind 6443 8132 2379 10250 3000
listen world 443 80
"$PYTHON" "$PROBE" listen "$scratch/ready-host" 22 53 &
for where in a1 a2 b1 kind world host; do
	tries=0
	until [ -e "$scratch/ready-$where" ]; do
		tries=$((tries + 1))
		[ "$tries" -lt 200 ] || { echo "no listener in $where" >&2; exit 1; }
		sleep 0.05
	done
done
sh -c "$DOCKER"
filter() { FILTER_ACTION=$1 bash "$RULES"; }
probe() {
	from=$1
	shift
	inside=""
	[ "$from" = host ] || inside="ip netns exec $from"
	$inside "$PYTHON" "$PROBE" probe "$@" | sed "s/^/$from /"
}
saved() { iptables-nft-save -t filter | grep -v '^#' | sed 's/ \[[0-9]*:[0-9]*\]$//'; }
eval "$STEPS"
"""

# Docker's iptables backend as moby/moby makes it (daemon/libnetwork/firewall_linux.go@docker-v29.7.2: DOCKER-USER,
# jumped to from FORWARD; its bridge driver's own chain after it), with a second lab's filter already in
# DOCKER-USER and INPUT, and another program's rule in INPUT.
DOCKER_IPTABLES = rf"""
set -eu
iptables-nft -P FORWARD DROP
iptables-nft -N DOCKER-USER
iptables-nft -N DOCKER-FORWARD
iptables-nft -A FORWARD -j DOCKER-USER
iptables-nft -A FORWARD -j DOCKER-FORWARD
iptables-nft -A DOCKER-FORWARD -o br-lab -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
iptables-nft -A DOCKER-FORWARD -i br-lab -j ACCEPT
iptables-nft -N KHL-{OTHER_LAB[:16]}-FWD
iptables-nft -A KHL-{OTHER_LAB[:16]}-FWD -s 172.30.64.99 -d 172.30.0.0/16 -j DROP
iptables-nft -A DOCKER-USER -m comment --comment "kamaji-hami-lab {OTHER_LAB}: container workers' filter" \
	-j KHL-{OTHER_LAB[:16]}-FWD
iptables-nft -N KHL-{OTHER_LAB[:16]}-IN
iptables-nft -A INPUT -m comment --comment "kamaji-hami-lab {OTHER_LAB}: container workers' filter" \
	-j KHL-{OTHER_LAB[:16]}-IN
iptables-nft -A INPUT -p tcp --dport 2222 -m comment --comment "someone else's" -j ACCEPT
"""

# Docker's nftables backend: a table of its own, a forward chain that accepts the bridge's traffic, no DOCKER-USER
# (moby/moby daemon/libnetwork/firewall_linux.go@docker-v29.7.2, setupUserChains).
DOCKER_NFTABLES = r"""
set -eu
nft -f - <<'EOF'
table ip docker-bridges {
	chain filter-FORWARD {
		type filter hook forward priority filter; policy drop;
		oifname "br-lab" ct state established,related accept
		iifname "br-lab" accept
	}
}
EOF
"""

# Docker's iptables backend on a host whose iptables is the legacy one: the filter goes where DOCKER-USER is.
BACKENDS = {"iptables": ("", DOCKER_IPTABLES), "nftables": ("nftables", DOCKER_NFTABLES),
            "iptables-legacy": ("iptables", DOCKER_IPTABLES.replace("iptables-nft", "iptables-legacy"))}


def run(tmp_path: Path, steps: str, backend: str = "iptables", tenants: str = TENANTS) -> dict[str, list[str]]:
    """The steps' output by section (`echo "== name"` starts one) on the lab's network with Docker's rules."""
    firewall, docker = BACKENDS[backend]
    if backend == "nftables" and not shutil.which("nft"):
        pytest.skip("Docker's nftables backend is played by nft (.ci/run installs nftables)")
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "PYTHON": sys.executable,
           "PROBE": str(PROBE), "RULES": str(RULES), "DOCKER": docker, "STEPS": steps,
           "LAB_IDENTITY": IDENTITY, "FIREWALL_BACKEND": firewall, "BRIDGE": "br-lab", "SUBNET": "172.30.0.0/16",
           "API_PORTS": API_PORTS, "TENANTS": tenants}
    result = subprocess.run(
        ["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private",
         "bash", "-c", TOPOLOGY, "driver", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sections: dict[str, list[str]] = {"stderr": result.stderr.splitlines()}
    current = sections.setdefault("", [])
    for line in result.stdout.splitlines():
        if line.startswith("== "):
            current = sections.setdefault(line[3:], [])
        else:
            current.append(line)
    return sections


# How many jumps to the lab's chains each iptables backend holds.
JUMPS = ('echo "== ours"\nfor tool in iptables-nft iptables-legacy; do\n'
         f'\techo "$tool $($tool-save -t filter 2>/dev/null | grep -c -- "-j KHL-{IDENTITY[:16]}-" || true)"\ndone')


# (from, HOST:PORT, whether it must answer). From tenant-a's first worker unless said otherwise.
PATHS = [
    ("a1", f"{A2}:10250", True),  # its tenant's other worker
    ("a1", f"{API_A}:{API_PORT}", True),  # its API server
    ("a1", f"{API_A}:{KONNECTIVITY_PORT}", True),  # its Konnectivity server
    ("a1", f"{GATEWAY}:53", True),  # DNS on the host
    ("a1", f"{OUTSIDE}:443", True),  # the outside world
    ("a1", f"{API_A}:2379", False),  # another port of its own API address
    ("a1", f"{B1}:10250", False),  # the other tenant's kubelet
    ("a1", f"{API_B}:{API_PORT}", False),  # the other tenant's API server
    ("a1", f"{API_B}:{KONNECTIVITY_PORT}", False),
    ("a1", f"{KIND_NODE}:6443", False),  # the management cluster's own ports
    ("a1", f"{KIND_NODE}:2379", False),
    ("a1", f"{KIND_NODE}:10250", False),
    ("a1", f"{GRAFANA}:3000", False),
    ("a1", f"{GATEWAY}:22", False),  # the host's services
    ("a1", f"{METADATA}:80", False),
    ("b1", f"{API_B}:{API_PORT}", True),
    ("b1", f"{A1}:10250", False),
    ("b1", f"{A2}:10250", False),
    ("b1", f"{API_A}:{API_PORT}", False),
    ("kind", f"{A1}:10250", True),  # the lab itself reaches its workers
    ("host", f"{A1}:10250", True),
]


def probes(paths) -> str:
    lines = []
    for source in dict.fromkeys(source for source, _, _ in paths):
        targets = " ".join(target for where, target, _ in paths if where == source)
        lines.append(f"probe {source} {targets}")
    return "\n".join(lines)


def answers(output: list[str]) -> dict[tuple[str, str], bool]:
    results = {}
    for line in output:
        source, target, result = line.split(" ", 2)
        assert result in ("open", "timeout"), line  # dropped, never refused: nothing answers for the filter
        results[(source, target)] = result == "open"
    return results


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_a_worker_reaches_what_its_tenant_needs_and_nothing_else(namespaces, tmp_path, backend):
    network = run(tmp_path, f'echo "== before"\n{probes(PATHS)}\nfilter install\necho "== after"\n{probes(PATHS)}\n'
                            f'echo "== pods"\nprobe a1 --from {POD_A1} {POD_A2}:8080\n{JUMPS}', backend)

    assert set(answers(network["before"]).values()) == {True}, "the model: without the filter, every path is open"
    after = answers(network["after"])
    assert {path: after[path[:2]] for path in ((s, t) for s, t, _ in PATHS)} == {
        (source, target): must for source, target, must in PATHS}
    assert network["pods"] == [f"a1 {POD_A2}:8080 open"], "pod to pod across a tenant's workers"
    used = "iptables-legacy" if backend == "iptables-legacy" else "iptables-nft"
    assert network["ours"] == [f"{tool} {2 if tool == used else 0}" for tool in ("iptables-nft", "iptables-legacy")]


PUBLISHED = 8443


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_a_port_another_container_publishes_on_the_host_is_not_a_way_around_the_filter(namespaces, tmp_path,
                                                                                        backend):
    # A port published on the host is a DNAT in the host's nat table (moby/moby daemon/libnetwork/drivers/bridge/
    # internal/iptabler/port.go@docker-v29.7.2, setPerPortNAT: `! -i <its own bridge>`, so from any other): here the
    # gateway's port 8443 sent to the world's 443, as for a container on another network. Reached through the
    # host, it would otherwise pass as traffic to the outside world.
    nat = "iptables-legacy" if backend == "iptables-legacy" else "iptables-nft"
    published = f"{GATEWAY}:{PUBLISHED}"
    steps = (f"{nat} -t nat -A PREROUTING -i br-lab -d {GATEWAY} -p tcp --dport {PUBLISHED} "
             f"-j DNAT --to-destination {OUTSIDE}:443\nip route add 10.244.0.0/24 via {A1}\n"
             f'echo "== before"\nprobe a1 {published}\nprobe b1 {published}\nprobe a1 --from {POD_A1} {published}\n'
             "filter install\n"
             f'echo "== after"\nprobe a1 {published} {OUTSIDE}:443\nprobe b1 {published}\n'
             f"probe a1 --from {POD_A1} {published}\nprobe kind {published}")
    network = run(tmp_path, steps, backend)

    assert network["before"] == [f"a1 {published} open", f"b1 {published} open", f"a1 {published} open"], (
        "the model: DNAT passes, from a worker and from a pod (answered through its worker)")
    assert network["after"] == [f"a1 {published} timeout", f"a1 {OUTSIDE}:443 open", f"b1 {published} timeout",
                                f"a1 {published} timeout", f"kind {published} open"]


def test_a_worker_of_another_lab_on_the_network_is_not_this_labs_to_judge(namespaces, tmp_path):
    # Its own lab's filter judges it; here only a second lab's (left as it was) names it.
    steps = (f"filter install\nip -n b1 addr add 172.30.64.98/16 dev eth0\n"
             f'echo "== probes"\nprobe b1 --from 172.30.64.98 {A1}:10250 {KIND_NODE}:6443')
    network = run(tmp_path, steps)

    assert network["probes"] == [f"b1 {A1}:10250 open", f"b1 {KIND_NODE}:6443 open"]


def test_a_second_install_changes_nothing_and_a_new_plan_replaces_the_rules(namespaces, tmp_path):
    moved = f"tenant-a {API_A} 10.244.0.0/16 {A1}\ntenant-b {API_B} 10.244.0.0/16 {B1} {A2}\n"
    steps = (f'filter install\necho "== first"\nsaved\nfilter install\necho "== second"\nsaved\n'
             f'TENANTS="{moved}" filter install\necho "== moved"\nsaved\n'
             f'echo "== probes"\nprobe a2 {B1}:10250 {A1}:10250 {API_B}:{API_PORT} {API_A}:{API_PORT}')
    network = run(tmp_path, steps)

    assert network["second"] == network["first"]
    assert sum(f"-j KHL-{IDENTITY[:16]}-FWD" in line for line in network["second"]) == 1
    assert sum(f"-j KHL-{IDENTITY[:16]}-IN" in line for line in network["second"]) == 1
    assert network["moved"] != network["first"]
    # Worker a2 now belongs to tenant-b: it reaches tenant-b, and tenant-a no more.
    assert network["probes"] == [f"a2 {B1}:10250 open", f"a2 {A1}:10250 timeout",
                                 f"a2 {API_B}:{API_PORT} open", f"a2 {API_A}:{API_PORT} timeout"]


def test_remove_takes_exactly_the_labs_own_rules_away(namespaces, tmp_path):
    steps = ('echo "== before"\nsaved\nfilter install\necho "== installed"\nsaved\nfilter remove\n'
             'echo "== removed"\nsaved\nfilter remove\necho "== again"\nsaved\n'
             f'echo "== probes"\nprobe a1 {B1}:10250 {GATEWAY}:22')
    network = run(tmp_path, steps)

    assert any(IDENTITY in line for line in network["installed"])
    assert network["removed"] == network["before"], "the second lab's chains, Docker's and the rest stay"
    assert any(OTHER_LAB in line for line in network["removed"])
    assert network["again"] == network["before"], "a second remove finds nothing and fails on nothing"
    assert network["probes"] == [f"a1 {B1}:10250 open", f"a1 {GATEWAY}:22 open"]


def test_remove_after_the_nftables_backend_leaves_dockers_table_alone(namespaces, tmp_path):
    steps = ('echo "== before"\nnft list table ip docker-bridges\nfilter install\nfilter remove\n'
             'echo "== removed"\nnft list table ip docker-bridges\necho "== ours"\nsaved | grep -c KHL- || true')
    network = run(tmp_path, steps, backend="nftables")

    assert network["removed"] == network["before"]
    assert network["ours"] == ["0"]


def test_without_bridge_filtering_the_install_refuses_and_installs_nothing(namespaces, tmp_path):
    steps = ('sysctl -qw net.bridge.bridge-nf-call-iptables=0\necho "== status"\n'
             'filter install 2>"$1/said" && echo 0 || echo $?\necho "== said"\ncat "$1/said"\n'
             'echo "== rules"\nsaved | grep -c KHL-' + IDENTITY[:16] + ' || true')
    network = run(tmp_path, steps)

    assert network["status"] == ["1"]
    assert "bridge-nf-call-iptables is 0" in network["said"][0]
    assert "sudo sysctl -w net.bridge.bridge-nf-call-iptables=1" in network["said"][0]
    assert network["rules"] == ["0"]


def test_without_dockers_iptables_rules_the_install_says_why(namespaces, tmp_path):
    steps = 'iptables-nft -F DOCKER-USER\niptables-nft -D FORWARD -j DOCKER-USER\niptables-nft -X DOCKER-USER\n' \
            'echo "== status"\nfilter install 2>"$1/said" && echo 0 || echo $?\necho "== said"\ncat "$1/said"'
    network = run(tmp_path, steps)

    assert network["status"] == ["1"]
    assert "no DOCKER-USER chain" in network["said"][0] and "--iptables=false" in network["said"][0]


@pytest.mark.parametrize(("leftover", "used"),
                         [("iptables-legacy", "iptables-nft"), ("iptables-nft", "iptables-legacy")])
def test_with_docker_user_in_both_backends_the_one_holding_dockers_rules_gets_the_filter(namespaces, tmp_path,
                                                                                        leftover, used):
    # A host that switched iptables backends keeps an empty DOCKER-USER in the old one; Docker's rules, the most,
    # are in the other (as kind's node entrypoint weighs them).
    steps = f"{leftover} -N DOCKER-USER\nfilter install\n{JUMPS}"
    network = run(tmp_path, steps, "iptables-legacy" if used == "iptables-legacy" else "iptables")

    assert network["ours"] == [f"{tool} {2 if tool == used else 0}" for tool in ("iptables-nft", "iptables-legacy")]
