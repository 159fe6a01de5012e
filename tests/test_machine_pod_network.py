"""A machine's own pod network interface, set by scripts/join-worker.sh against the loopback sshd (tests/sshd.py).

The tenant's flannel DaemonSet names no interface (tests/test_flannel.py): a machine whose config names
one (flannelInterface, or its nodeIp) gets its address as its own Node's annotation, which flanneld reads
when it starts, and a flannel pod that started before is replaced. A machine that names none is left to
flannel's own choice.
"""

from __future__ import annotations

import re

import pytest

from tests.sshd import machine_fakes
from tests.test_machine_ssh import JOIN, MARK, NODE, RESET, STATE, bound_to, join, joinable, unbound
from tests.test_scripts import ENDPOINT, reply

# flannel-io/flannel pkg/subnet/kube/annotations.go@v0.28.9: the Node annotation flanneld reads at start as the
# address whose interface it takes (kube.go GetStoredPublicIP, main.go), and the one it writes with the address it
# then advertises (kube.go AcquireLease).
NODE_ADDRESS = "flannel.alpha.coreos.com/node-public-ip"
ADVERTISED = "flannel.alpha.coreos.com/public-ip"
# chart/kube-flannel/templates/daemonset.yaml@v0.28.9: the DaemonSet's pods carry app=flannel.
FLANNEL_PODS = "app=flannel"
FLANNEL_NAMESPACE = "kube-flannel"
# What `ip -4 -o addr show` (iproute2) prints on a machine with two NICs: eth0 holds the default route's address
# (DHCP), bond0 the pod network's, and a link-local address on a third interface.
ADDRESSES = (
    "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
    "2: eth0    inet 10.0.0.11/24 brd 10.0.0.255 scope global dynamic eth0\\       valid_lft 3581sec "
    "preferred_lft 3581sec\n"
    "3: bond0    inet 10.1.0.21/24 brd 10.1.0.255 scope global bond0\\       valid_lft forever preferred_lft forever\n"
    "4: ens9    inet 169.254.7.7/16 brd 169.254.255.255 scope link ens9\\       valid_lft forever preferred_lft "
    "forever\n"
)
REGISTERED = r"get node m1 --ignore-not-found -o name"
ANNOTATIONS = r"get node m1 -o jsonpath="
ANNOTATE = r"^--request-timeout=\S+ annotate node m1"
RESTART = r"delete pod"


@pytest.fixture
def machine(tmp_path, sshd):
    return machine_fakes(tmp_path, ("sh", "timeout", "kubectl", "modprobe", "systemctl", "ip"), sshd)


def fresh(machine, ca_pem: str, seen: str = " "):
    """A clean machine with two NICs whose Node appears after the join; `seen`: its flannel annotations."""
    unbound(joinable(machine, ca_pem))
    return flannel_api(machine, seen).on("kubectl", REGISTERED, "node/m1\n")


def flannel_api(machine, seen: str = " "):
    return (machine.on("machine-ip", r"^-4 -o addr show$", ADDRESSES).on("kubectl", ANNOTATIONS, seen)
            .on("kubectl", ANNOTATE, "node/m1 annotated\n").on("kubectl", RESTART, 'pod "kube-flannel-ds-x" deleted\n'))


def join_naming(machine, interface: str, **env):
    return join(machine, FLANNEL_INTERFACE=interface, FLANNEL_NAMESPACE=FLANNEL_NAMESPACE, **env)


def order(machine) -> list[str]:
    """What the join did, in order: the machine's kubeadm join and the API calls about its pod network."""
    steps = {"join": ("machine-sh", JOIN), "annotate": ("kubectl", ANNOTATE), "restart": ("kubectl", RESTART)}
    done = []
    for call in machine.calls():
        argv = " ".join(call["argv"])
        done += [step for step, (tool, match) in steps.items()
                 if call["tool"] == tool and re.search(match, argv)]
    return done


@pytest.mark.parametrize("interface, address", [("bond0", "10.1.0.21"), ("10.1.0.21", "10.1.0.21"),
                                                ("10.0.0.11", "10.0.0.11")],
                         ids=["by-name", "by-address", "default-routes-address"])
def test_a_machine_naming_its_interface_gets_its_address_on_its_node_and_a_flannel_pod_that_reads_it(
        machine, tenant_ca, interface, address):
    fresh(machine, tenant_ca)

    result = join_naming(machine, interface)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE} joined {ENDPOINT}\n"
    (annotated,) = machine.calls("kubectl", ANNOTATE)
    assert f"{NODE_ADDRESS}={address}" in annotated["argv"] and "--overwrite" in annotated["argv"]
    (restarted,) = machine.calls("kubectl", RESTART)
    argv = " ".join(restarted["argv"])
    assert f"-n {FLANNEL_NAMESPACE}" in argv and f"-l {FLANNEL_PODS}" in argv
    assert "--field-selector spec.nodeName=m1" in argv, "only this node's flannel pod"
    # The annotation is in place before the pod that reads it starts.
    assert order(machine) == ["join", "annotate", "restart"]


def test_a_machine_naming_no_interface_is_left_to_flannels_own_choice(machine, tenant_ca):
    fresh(machine, tenant_ca)

    result = join(machine)

    assert result.returncode == 0, result.stderr
    assert machine.calls("machine-ip") == []
    assert machine.calls("kubectl", ANNOTATE) == [] and machine.calls("kubectl", RESTART) == []


@pytest.mark.parametrize("interface, lacks", [
    ("bond1", "an interface bond1 (its flannelInterface) with a global IPv4 address"),
    ("ens9", "an interface ens9 (its flannelInterface) with a global IPv4 address"),  # link-local only
    ("lo", "an interface lo (its flannelInterface) with a global IPv4 address"),
    ("10.1.0.99", "an interface with the address 10.1.0.99 (its flannelInterface, or its nodeIp)"),
    ("10.1.0.2", "an interface with the address 10.1.0.2 (its flannelInterface, or its nodeIp)"),  # a prefix of one
])
def test_an_interface_the_machine_lacks_stops_the_join_before_the_machine_is_touched(machine, tenant_ca, interface,
                                                                                     lacks):
    fresh(machine, tenant_ca)

    result = join_naming(machine, interface)

    assert result.returncode == 1 and result.stdout == ""
    assert f"{NODE} has no {lacks}, so flannel could not carry its pods' traffic" in result.stderr
    assert "its IPv4 addresses: lo 127.0.0.1, eth0 10.0.0.11, bond0 10.1.0.21, ens9 169.254.7.7" in result.stderr
    assert [c["argv"][1] for c in machine.calls("machine-sh")] == [], "no state read, mark, reset or join"
    assert machine.calls("kubectl", "create") == [] and machine.calls("kubectl", ANNOTATE) == []


def test_a_machine_whose_addresses_cannot_be_listed_is_not_joined(machine, tenant_ca):
    fresh(machine, tenant_ca)
    machine.rules.insert(0, {"tool": "machine-ip", "match": "addr",
                             "replies": [reply(stderr="ip: command not found\n", exit=127)]})

    result = join_naming(machine, "bond0")

    assert result.returncode == 1
    assert f"{NODE}: could not list its IPv4 addresses (ip -4 -o addr show)" in result.stderr
    assert machine.calls("machine-sh", JOIN) == [] and machine.calls("machine-sh", STATE) == []


def test_a_node_that_never_appears_after_the_join_fails_it_saying_its_network_is_not_set(machine, tenant_ca):
    unbound(joinable(machine, tenant_ca))
    flannel_api(machine).on("kubectl", REGISTERED, "")

    result = join_naming(machine, "bond0", NODE_TIMEOUT="0")

    assert result.returncode == 1 and result.stdout == ""
    assert "m1: its Node did not appear within 0s of the join, so its pod network address could not be set" in (
        result.stderr)
    assert machine.calls("kubectl", ANNOTATE) == []


@pytest.mark.parametrize("failing, said", [
    (ANNOTATE, f"m1: could not annotate its Node with {NODE_ADDRESS}=10.1.0.21; flannel would pick its default "
               "route's interface"),
    (RESTART, "m1: could not restart its flannel pod, which may use another interface; delete it: kubectl -n "
              f"{FLANNEL_NAMESPACE} delete pod -l {FLANNEL_PODS} --field-selector spec.nodeName=m1"),
    (ANNOTATIONS, "m1: could not read its Node's annotations"),
])
def test_a_failed_api_call_about_the_pod_network_fails_the_join_loudly(machine, tenant_ca, failing, said):
    fresh(machine, tenant_ca)
    machine.rules.insert(0, {"tool": "kubectl", "match": failing, "replies": [reply(stderr="Unable to connect\n",
                                                                                      exit=1)]})

    result = join_naming(machine, "bond0")

    assert result.returncode == 1 and result.stdout == ""
    assert said in result.stderr


def test_a_joined_machine_whose_flannel_uses_another_address_gets_it_set_and_its_flannel_pod_replaced(
        machine, tenant_ca):
    # Joined when the tenant's flannel still had an --iface list, or before this machine named bond0.
    joinable(machine, tenant_ca)
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca)
    flannel_api(machine, " 10.0.0.11").on("kubectl", REGISTERED, "node/m1\n").on("kubectl", "get node m1", "node/m1\n")

    result = join_naming(machine, "bond0")

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE} already joined {ENDPOINT}\n"
    assert order(machine) == ["annotate", "restart"]
    assert machine.calls("machine-sh", RESET) == [] and machine.calls("kubectl", "create") == []
    assert len(machine.calls("machine-sh", MARK)) == 1


def test_a_joined_machine_whose_flannel_already_uses_its_address_is_left_alone(machine, tenant_ca):
    joinable(machine, tenant_ca)
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca)
    flannel_api(machine, "10.1.0.21 10.1.0.21").on("kubectl", REGISTERED, "node/m1\n").on("kubectl", "get node m1",
                                                                                         "node/m1\n")

    result = join_naming(machine, "bond0")

    assert result.returncode == 0, result.stderr
    assert order(machine) == []
    assert "flannel already carries its pods' traffic on 10.1.0.21" in result.stderr


def test_the_annotations_read_are_flannels_own(machine, tenant_ca):
    fresh(machine, tenant_ca)

    assert join_naming(machine, "bond0").returncode == 0
    (read,) = machine.calls("kubectl", ANNOTATIONS)
    jsonpath = next(arg for arg in read["argv"] if arg.startswith("jsonpath="))
    escaped = [f"{{.metadata.annotations.{key.replace('.', chr(92) + '.')}}}" for key in (NODE_ADDRESS, ADVERTISED)]
    assert jsonpath == "jsonpath=" + " ".join(escaped)
