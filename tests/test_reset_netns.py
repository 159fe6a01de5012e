"""The real reset (scripts/lib.sh reset_node) on a node played by a private network, mount and PID namespace.

Debian's iptables and ip6tables (nf_tables and legacy, both installed) hold the rules that kube-proxy,
the kubelet, flannel and kindnet leave, beside other software's; /etc, /var/lib and /run are overlays
whose writes vanish with the namespace, so the CNI files are real files at their real paths. Only
kubeadm is a fake (it records its call). The reset runs as it does on the node: node_exec runs it as
root, here; the ssh and docker transports around it are tested in test_machine_ssh.py and test_scripts.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Made in the namespace before the reset. The lab's chains and jumps are as kube-proxy's iptables mode
# (kubernetes/kubernetes pkg/proxy/iptables/proxier.go), the kubelet (KUBE-FIREWALL, KUBE-KUBELET-CANARY),
# flannel (flannel-io/flannel pkg/trafficmngr/iptables/iptables.go@v0.28.9) and kindnetd
# (kubernetes-sigs/kind images/kindnetd/cmd/kindnetd/masq.go@v0.32.0) create them; Docker's embedded DNS
# chains are those of every kind node (DOCKER_OUTPUT, DOCKER_POSTROUTING).
SETUP = r"""
set -eu
for tool in iptables ip6tables; do
	$tool -t nat -N KUBE-SERVICES
	$tool -t nat -N KUBE-SVC-ABCDEF
	$tool -t nat -A KUBE-SERVICES -m comment --comment "default/kubernetes:https cluster IP" -j KUBE-SVC-ABCDEF
	$tool -t nat -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
	$tool -t nat -A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
	$tool -t nat -N FLANNEL-POSTRTG
	$tool -t nat -A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG
	$tool -t nat -N KIND-MASQ-AGENT
	$tool -t nat -A KIND-MASQ-AGENT -j MASQUERADE
	$tool -t nat -A POSTROUTING -m addrtype ! --dst-type LOCAL -m comment --comment "kind-masq-agent: all" \
		-j KIND-MASQ-AGENT
	$tool -t nat -N DOCKER_OUTPUT
	$tool -t nat -N DOCKER_POSTROUTING
	$tool -t nat -A OUTPUT -j DOCKER_OUTPUT
	$tool -t nat -A POSTROUTING -j DOCKER_POSTROUTING
	$tool -t nat -A DOCKER_OUTPUT -p udp --dport 53 -j RETURN
	$tool -t filter -N KUBE-FORWARD
	$tool -t filter -N FLANNEL-FWD
	$tool -t filter -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
	$tool -t filter -A FORWARD -m comment --comment 'flanneld "forward"' -j FLANNEL-FWD
	$tool -t filter -A FLANNEL-FWD -m comment --comment "flanneld forward" -j ACCEPT
	$tool -t filter -N KUBE-FIREWALL
	$tool -t filter -A INPUT -j KUBE-FIREWALL
	$tool -t mangle -N KUBE-KUBELET-CANARY
	$tool -t filter -N ufw-user-input
	$tool -t filter -A INPUT -j ufw-user-input
	$tool -t filter -A ufw-user-input -p tcp --dport 22 -m comment --comment "admin: ssh, not -j KUBE-FORWARD" -j ACCEPT
done
iptables-legacy -t nat -N KUBE-POSTROUTING
iptables-legacy -t nat -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
iptables-legacy -t nat -A POSTROUTING -s 192.168.122.0/24 -j MASQUERADE
ip link add cni0 type bridge
ip link add flannel.1 type vxlan id 1 dstport 8472
ip link add podman0 type bridge
mkdir -p /etc/cni/net.d /var/lib/cni/networks/cbr0 /var/lib/cni/networks/podman /var/lib/cni/flannel /run/flannel \
	/run/cni-ipam-state/kindnet /etc/kamaji-hami-lab
for file in /etc/cni/net.d/10-flannel.conflist /etc/cni/net.d/10-kindnet.conflist \
	/etc/cni/net.d/87-podman-bridge.conflist /etc/cni/net.d/nerdctl-bridge.conflist \
	/var/lib/cni/networks/cbr0/10.244.1.2 /var/lib/cni/networks/podman/10.88.0.2 /var/lib/cni/flannel/0123abcd \
	/run/flannel/subnet.env /run/cni-ipam-state/kindnet/10.244.2.2 /etc/kamaji-hami-lab/worker; do
	echo lab-test >"$file"
done
"""

# What the node shows after the reset, one section per source.
REPORT = r"""
for tool in iptables-nft ip6tables-nft iptables-legacy; do echo "== $tool"; $tool-save | grep -v '^#'; done
echo "== links"; ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1
echo "== files"; find /etc/cni /var/lib/cni /run/flannel /run/cni-ipam-state /etc/kamaji-hami-lab -type f | sort
"""

# Runs in the namespaces: writable overlays on the directories the reset touches, the node's state,
# the reset itself (the real lib.sh), then the report.
DRIVER = r"""
set -eu
scratch=$1 transport=$2 kubeadm_exit=$3
mount -t tmpfs scratch "$scratch"
for dir in etc var/lib run; do
	mkdir -p "$scratch/upper/$dir" "$scratch/work/$dir"
	mount -t overlay overlay -o "lowerdir=/$dir,upperdir=$scratch/upper/$dir,workdir=$scratch/work/$dir" "/$dir"
done
ip link set lo up
sh -c "$SETUP"
status=0
bash -c '
set -euo pipefail
source "$LIB"
node_exec() { "$@"; }
NODE_TRANSPORT=$1 reset_node 10
' reset "$transport" || status=$?
echo "== status"; echo "$status"
sh -c "$REPORT"
"""


def in_a_node(tmp_path: Path, transport: str, kubeadm_exit: int = 0) -> dict[str, list[str]]:
    """The node's iptables, links and files after reset_node, by section."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "kubeadm.log"
    (bin_dir / "kubeadm").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >>"{calls}"\nexit {kubeadm_exit}\n')
    (bin_dir / "kubeadm").chmod(0o755)
    scratch = tmp_path / "overlay"
    scratch.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "LIB": str(ROOT / "scripts" / "lib.sh"), "SETUP": SETUP, "REPORT": REPORT, "NODE": "w1",
           "RETRY_INTERVAL": "0"}
    result = subprocess.run(
        ["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private",
         "sh", "-c", DRIVER, "driver", str(scratch), transport, str(kubeadm_exit)],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    sections: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        if line.startswith("== "):
            sections[line[3:]] = []
            current = sections[line[3:]]
        else:
            current.append(line)
    sections["kubeadm"] = calls.read_text().splitlines() if calls.exists() else []
    sections["stderr"] = result.stderr.splitlines()
    return sections


def lab_lines(lines: list[str], *names: str) -> list[str]:
    return [line for line in lines if any(name in line for name in names)]


FOREIGN_RULES = [
    "-A INPUT -j ufw-user-input",
    '-A ufw-user-input -p tcp -m tcp --dport 22 -m comment --comment "admin: ssh, not -j KUBE-FORWARD" -j ACCEPT',
    "-A OUTPUT -j DOCKER_OUTPUT",
    "-A POSTROUTING -j DOCKER_POSTROUTING",
    "-A DOCKER_OUTPUT -p udp -m udp --dport 53 -j RETURN",
]
FOREIGN_CHAINS = [":ufw-user-input - [0:0]", ":DOCKER_OUTPUT - [0:0]", ":DOCKER_POSTROUTING - [0:0]"]
FOREIGN_FILES = ["/etc/cni/net.d/87-podman-bridge.conflist", "/etc/cni/net.d/nerdctl-bridge.conflist",
                 "/var/lib/cni/networks/podman/10.88.0.2"]


@pytest.mark.parametrize("transport", ["ssh", "docker"], ids=["machine-flannel", "container-kindnet"])
def test_the_reset_removes_the_labs_chains_in_iptables_and_ip6tables_and_keeps_everything_else(
        namespaces, tmp_path, transport):
    node = in_a_node(tmp_path, transport)

    assert node["status"] == ["0"], node["stderr"]
    assert node["kubeadm"] == ["reset --force --cri-socket unix:///run/containerd/containerd.sock"]
    for family in ("iptables-nft", "ip6tables-nft"):
        rules = node[family]
        assert lab_lines(rules, "KUBE-", "FLANNEL-") == [FOREIGN_RULES[1]], family
        assert [line for line in FOREIGN_RULES + FOREIGN_CHAINS if line not in rules] == [], family
    legacy = node["iptables-legacy"]
    assert lab_lines(legacy, "KUBE-") == [] and "-A POSTROUTING -s 192.168.122.0/24 -j MASQUERADE" in legacy
    assert "podman0" in node["links"]
    assert [line for line in FOREIGN_FILES if line not in node["files"]] == []
    assert "/etc/kamaji-hami-lab/worker" not in node["files"], "the mark goes last, once everything else went"


def test_a_machine_reset_removes_flannels_network_and_leaves_kindnets_own_alone(namespaces, tmp_path):
    node = in_a_node(tmp_path, "ssh")

    assert [link for link in ("cni0", "flannel.1") if link in node["links"]] == []
    assert lab_lines(node["files"], "flannel", "cbr0") == []
    # A machine never had kindnet: what looks like it is someone else's.
    assert ":KIND-MASQ-AGENT - [0:0]" in node["iptables-nft"]
    assert "/etc/cni/net.d/10-kindnet.conflist" in node["files"]
    assert "/run/cni-ipam-state/kindnet/10.244.2.2" in node["files"]


def test_a_container_reset_clears_kindnets_masquerade_chain_and_files(namespaces, tmp_path):
    node = in_a_node(tmp_path, "docker")

    assert lab_lines(node["iptables-nft"] + node["ip6tables-nft"], "KIND-MASQ-AGENT") == []
    assert lab_lines(node["files"], "kindnet") == []


def test_a_failed_kubeadm_reset_keeps_the_mark_and_every_rule(namespaces, tmp_path):
    node = in_a_node(tmp_path, "ssh", kubeadm_exit=1)

    assert node["status"] == ["1"]
    assert "/etc/kamaji-hami-lab/worker" in node["files"]
    assert lab_lines(node["iptables-nft"], ":KUBE-SERVICES")
