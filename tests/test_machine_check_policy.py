"""check-machine.sh against the loopback sshd (tests/sshd.py): the version policy as upstream writes it, and
probes that name the real cause (the CRI's cgroup driver, kubeadm's executables and port, br_netfilter, settings
that a reboot would lose)."""

from __future__ import annotations

import json
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sshd import KUBEADM_EXECUTABLES
from tests.test_machine_ssh import FACTS_OF_A_READY_MACHINE, bound_to, check, unbound
from tests.test_scripts import ENDPOINT, reply, tenant_api

PROBE = r"(?s)^60 sh -c .*kubeadm version"
FAKE_CRICTL = Path(__file__).parent / "fakebin" / "fake_crictl.py"


@dataclass(frozen=True)
class Skew:
    """One minor's distance a tool may have from the tenant's, as upstream words it."""

    tool: str
    oldest_behind: int
    source: str


# kubernetes/website content/en/docs/setup/production-environment/tools/kubeadm/create-cluster-kubeadm.md
# ("kubeadm's skew against kubeadm": the kubeadm of a join matches the cluster's minor; "... against the kubelet":
# kubeadm's minor or three older) and content/en/releases/version-skew-policy.md (a kubelet is never newer than
# its kube-apiserver, and up to three minors older), as indexed.
KUBEADM_JOINS = Skew("kubeadm", 0, "create-cluster-kubeadm.md, kubeadm's skew against kubeadm")
KUBELET = Skew("kubelet", 3, "version-skew-policy.md, kubelet")
# containerd/containerd RELEASES.md @v2.3.4, "Kubernetes Support": Kubernetes 1.36 is listed with 2.3.0+ and 2.2.0+.
OLDEST_CONTAINERD_FOR_1_36 = (2, 2)
TENANT = "v1.36.4"


def facts(kubeadm: str = "v1.36.4", kubelet: str = "Kubernetes v1.36.4", **changes: str) -> str:
    """The probe's answer for a ready machine, with some facts changed."""
    lines = dict(line.split("=", 1) for line in FACTS_OF_A_READY_MACHINE.splitlines())
    lines.update(kubeadm=kubeadm, kubelet=kubelet, **changes)
    return "".join(f"{key}={value}\n" for key, value in lines.items())


def errors(result) -> list[str]:
    return [line.split("] m1: ", 1)[1] for line in result.stderr.splitlines()
            if "] m1: " in line and "WARNING" not in line]


def warnings(result) -> list[str]:
    return [line.split("WARNING: m1: ", 1)[1] for line in result.stderr.splitlines() if "WARNING: m1: " in line]


# --- point 5: version policy ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kubeadm", ["v1.36.0", "v1.36.9"], ids=["first-patch", "later-patch"])
def test_a_kubeadm_of_the_tenants_minor_joins_at_any_patch(machine, kubeadm):
    machine.on("machine-timeout", PROBE, facts(kubeadm=kubeadm))

    result = check(machine, "10.0.0.1:6443")

    assert result.returncode == 0, result.stderr
    assert warnings(result) == []


def test_a_machine_to_be_joined_with_an_older_kubeadm_is_refused(machine, tenant_ca):
    # Not joined at all: its kubelet.conf cannot be read.
    machine.on("machine-timeout", PROBE, facts(kubeadm="v1.35.9", kubelet="Kubernetes v1.35.9"))
    unbound(machine)

    result = check(machine, "10.0.0.1:6443")

    assert result.returncode == 1
    assert errors(result) == ["kubeadm is v1.35.9, but the kubeadm that joins a machine must run the tenant's minor, "
                              "v1.36 (kubeadm's version skew policy; install the v1.36 release)"], KUBEADM_JOINS.source


def test_a_machine_already_joined_to_this_tenant_keeps_an_older_kubeadm_with_a_warning(machine, tenant_ca):
    machine.on("machine-timeout", PROBE, facts(kubeadm="v1.35.2", kubelet="Kubernetes v1.35.2"))
    tenant_api(machine, tenant_ca)
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca)

    result = check(machine, "10.0.0.1:6443")

    assert result.returncode == 0, result.stderr
    assert any(w.startswith("kubeadm is v1.35.2, older than the tenant's v1.36.4; the machine is already joined")
               for w in warnings(result)), result.stderr


def test_a_machine_joined_to_another_cluster_at_the_same_address_needs_the_tenants_kubeadm(machine, tenant_ca,
                                                                                        other_tenant_ca):
    # A replaced control plane: same endpoint, another CA; join-worker.sh would reset and join it with this kubeadm.
    machine.on("machine-timeout", PROBE, facts(kubeadm="v1.35.2", kubelet="Kubernetes v1.35.2"))
    tenant_api(machine, tenant_ca)
    bound_to(machine, f"https://{ENDPOINT}", other_tenant_ca)

    result = check(machine, "10.0.0.1:6443")

    assert result.returncode == 1
    assert any(e.startswith("kubeadm is v1.35.2, but the kubeadm that joins") for e in errors(result))


def test_a_kubeadm_newer_than_the_tenant_is_refused(machine):
    machine.on("machine-timeout", PROBE, facts(kubeadm="v1.37.0"))

    result = check(machine, "10.0.0.1:6443")

    assert result.returncode == 1
    assert "kubeadm is v1.37.0, newer than the tenant's API server v1.36.4" in errors(result)[0]


@pytest.mark.parametrize(("behind", "refused"), [(0, False), (1, False), (KUBELET.oldest_behind, False),
                                                 (KUBELET.oldest_behind + 1, True)],
                         ids=["same", "one-older", "oldest-allowed", "one-too-old"])
def test_a_kubelet_may_be_up_to_three_minors_older_than_the_tenant(machine, behind, refused):
    kubelet = f"v1.{36 - behind}.7"
    machine.on("machine-timeout", PROBE, facts(kubelet=f"Kubernetes {kubelet}"))

    result = check(machine, "10.0.0.1:6443")

    assert result.returncode == (1 if refused else 0), result.stderr
    if refused:
        assert errors(result) == [f"kubelet is {kubelet}, older than the v1.{36 - KUBELET.oldest_behind} the tenant's "
                                  "v1.36.4 allows (install the v1.36 release)"], KUBELET.source
    elif behind:
        assert [w for w in warnings(result) if w.startswith(f"kubelet is {kubelet}, older than the tenant's")]


def test_a_kubelet_newer_than_the_tenant_is_refused(machine):
    machine.on("machine-timeout", PROBE, facts(kubelet="Kubernetes v1.37.0"))

    result = check(machine, "10.0.0.1:6443")

    assert result.returncode == 1
    assert errors(result)[0].startswith("kubelet is v1.37.0, newer than the tenant's API server v1.36.4")


def test_a_kubelet_newer_than_its_kubeadm_is_refused_even_on_a_joined_machine(machine, tenant_ca):
    # kubeadm's skew against the kubelet: kubeadm's minor or older; kubeadm is upgraded first.
    machine.on("machine-timeout", PROBE, facts(kubeadm="v1.35.2", kubelet="Kubernetes v1.36.1"))
    tenant_api(machine, tenant_ca)
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca)

    result = check(machine, "10.0.0.1:6443")

    assert result.returncode == 1
    assert errors(result) == ["kubelet is v1.36.1, newer than kubeadm v1.35.2 (kubeadm's version skew policy: upgrade "
                              "kubeadm first, to v1.36)"]


# `containerd --version` prints "containerd <package> <version> <revision>" (cmd/containerd/command/main.go
# @v2.2.7); upstream builds name the Go module and a v-prefixed version, Docker's containerd.io package itself
# and a bare version.
@pytest.mark.parametrize(("version_line", "warned"), [
    ("containerd github.com/containerd/containerd/v2 v2.2.0 1c4457e00facac03ce1d75f7b6777a7a851e5c41", False),
    ("containerd github.com/containerd/containerd/v2 v2.3.4 0123456789abcdef0123456789abcdef01234567", False),
    ("containerd github.com/containerd/containerd/v2 v2.1.5 fcd43222d6b07379a4be9786bda52438f0dd16a1", True),
    ("containerd containerd.io 1.7.28 b98a3aace656320842a23f4a392a33f46af97866", True),
], ids=["2.2.0", "2.3.4", "2.1.5", "docker-1.7.28"])
def test_a_containerd_older_than_upstream_recommends_for_the_tenant_is_a_warning(machine, version_line, warned):
    machine.on("machine-timeout", PROBE, facts(containerd_version=version_line))

    result = check(machine, "10.0.0.1:6443")

    assert result.returncode == 0, result.stderr
    said = [w for w in warnings(result) if w.startswith("containerd is")]
    if warned:
        version = version_line.split()[2]
        oldest = ".".join(map(str, OLDEST_CONTAINERD_FOR_1_36))
        assert said == [f"containerd is {version}, older than {oldest}, the oldest containerd's RELEASES.md "
                        "(Kubernetes Support) recommends for Kubernetes v1.36; "
                        f"upgrade containerd to {oldest} or newer"]
    else:
        assert said == []


def test_the_containerd_recommendation_is_only_applied_to_the_tenant_minor_it_was_read_for(machine):
    machine.on("machine-timeout", PROBE, facts(
        kubeadm="v1.35.2", kubelet="Kubernetes v1.35.2",
        containerd_version="containerd github.com/containerd/containerd/v2 v2.1.5 fcd43222d6b0"))

    result = check(machine, "10.0.0.1:6443", KUBERNETES_VERSION="v1.35.2")

    assert result.returncode == 0, result.stderr
    assert not [w for w in warnings(result) if w.startswith("containerd is")]


def test_the_probe_reads_containerds_version_from_the_machine(probed):
    probed.on("machine-containerd", "--version",
              "containerd github.com/containerd/containerd/v2 v2.1.5 fcd43222d6b07379a4be9786bda52438f0dd16a1\n")

    result = check(probed, f"127.0.0.1:{probed.port}", probed.port)

    assert any(w.startswith("containerd is v2.1.5, older than 2.2") for w in warnings(result)), result.stderr


# --- point 6: probes that name the cause ----------------------------------------------------------------------


def containerd_status(options: dict | None, runtime: str = "runc") -> dict:
    """crictl info's view of containerd 2.x: the CRI config under "config" (internal/cri/server/status.go and
    the json tags of internal/cri/config/config.go @v2.2.7), as crictl v1.36.0 re-decodes it."""
    runtimes = {runtime: {"runtimeType": "io.containerd.runc.v2", "runtimePath": "", "podAnnotations": None,
                          "containerAnnotations": None, "options": options, "privileged_without_host_devices": False,
                          "sandboxer": "podsandbox"}}
    return {"status": {"conditions": [{"type": "RuntimeReady", "status": True}]}, "golang": "go1.25.9",
            "config": {"containerd": {"defaultRuntimeName": runtime, "runtimes": runtimes,
                                      "ignoreBlockIONotEnabledErrors": False},
                       "cni": {"binDirs": ["/opt/cni/bin"], "confDir": "/etc/cni/net.d"}}}


def crictl_renders(fakes, status: dict) -> None:
    """The machine's crictl renders templates as crictl v1.36.0 does, over `status` (tests/fakebin/fake_crictl.py)."""
    status_file = fakes.bin.parent / "crictl-status.json"
    status_file.write_text(json.dumps(status))
    shim = fakes.bin.parent / "machine-bin" / "crictl"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_CRICTL}" "{status_file}" "$@"\n')


def ready_tools(fakes):
    fakes.on("machine-kubeadm", "version", "v1.36.4\n").on("machine-kubelet", "--version", "Kubernetes v1.36.4\n")
    fakes.on("machine-systemctl", "is-active containerd", "active\n")
    fakes.on("machine-sysctl", "net.ipv4.ip_forward", "1\n").on("machine-sysctl", "bridge-nf-call", "1\n")
    return fakes.on("machine-containerd", "config dump", "version = 3\ndisabled_plugins = []\n")


@pytest.mark.parametrize(("options", "said"), [
    # A runtime of the user's own, whose options were written without the key.
    ({"BinaryName": "/usr/bin/crun"}, "has no SystemdCgroup option, so the systemd cgroup driver is not set"),
    (None, "has no SystemdCgroup option, so the systemd cgroup driver is not set"),
    ({"BinaryName": "", "SystemdCgroup": False}, "sets SystemdCgroup = false"),
    ({"BinaryName": "", "SystemdCgroup": True}, None),
], ids=["key-missing", "no-options", "false", "true"])
def test_the_cgroup_driver_is_read_from_crictl_info_whatever_keys_the_options_have(probed, options, said):
    ready_tools(probed)
    crictl_renders(probed, containerd_status(options, runtime="crun"))

    result = check(probed, f"127.0.0.1:{probed.port}", probed.port)

    cri = [e for e in errors(result) if "CRI" in e or "SystemdCgroup" in e]
    if said is None:
        assert cri == [], result.stderr
    else:
        assert cri == [f"containerd's default runtime {said}, but the kubelet uses the systemd cgroup driver; fix: set "
                       "SystemdCgroup = true in the options of containerd's default runtime in "
                       "/etc/containerd/config.toml, then systemctl restart containerd"], result.stderr


MANDATORY, OPTIONAL = KUBEADM_EXECUTABLES[:4], KUBEADM_EXECUTABLES[4:]


@pytest.mark.parametrize(("missing", "refused"), [
    ({"exec_missing": "nsenter"}, "kubeadm join needs nsenter in root's PATH"),
    ({"exec_optional_missing": "socat"}, None),
], ids=["mandatory", "optional"])
def test_kubeadms_executables_missing_refuse_or_warn_as_kubeadm_does(machine, missing, refused):
    machine.on("machine-timeout", PROBE, facts(**missing))

    result = check(machine, "10.0.0.1:6443")

    if refused:
        assert result.returncode == 1 and errors(result)[0].startswith(refused)
    else:
        assert result.returncode == 0, result.stderr
        assert any(w.startswith("kubeadm join will warn that socat are not in root's PATH") for w in warnings(result))


@pytest.fixture
def bare(tmp_path, sshd):
    """A machine whose PATH holds the node tools and, of kubeadm's executables, only what the test host has."""
    from tests.sshd import machine_fakes

    return machine_fakes(tmp_path, ("kubeadm", "kubelet", "kubectl", "systemctl", "containerd", "sysctl", "crictl"),
                         sshd)


def test_the_probe_names_each_executable_kubeadm_looks_for_that_the_machine_lacks(bare):
    ready_tools(bare)
    session_path = "/usr/local/bin:/usr/bin:/bin"  # tests/sshd.py: the session's PATH after the fakes
    absent = [tool for tool in KUBEADM_EXECUTABLES if not shutil.which(tool, path=session_path)]

    result = check(bare, f"127.0.0.1:{bare.port}", bare.port)

    needed = [e for e in errors(result) if e.startswith("kubeadm join needs")]
    optional = [w for w in warnings(result) if w.startswith("kubeadm join will warn")]
    mandatory_absent = [tool for tool in absent if tool in MANDATORY]
    optional_absent = [tool for tool in absent if tool in OPTIONAL]
    assert needed == ([f"kubeadm join needs {' '.join(mandatory_absent)} in root's PATH, and the machine has none "
                       "(install iproute2, iptables, mount, util-linux as missing)"] if mandatory_absent else [])
    assert optional == ([f"kubeadm join will warn that {' '.join(optional_absent)} are not in root's PATH; pods that "
                         "need them (e.g. kubectl port-forward: socat) may fail"] if optional_absent else [])


@pytest.mark.parametrize(("kubelet_service", "refused"), [("inactive", True), ("active", False)])
def test_port_10250_taken_by_anything_but_a_kubelet_is_refused(machine, kubelet_service, refused):
    machine.on("machine-timeout", PROBE, facts(port_10250="in-use", kubelet_service=kubelet_service))

    result = check(machine, "10.0.0.1:6443")

    assert result.returncode == (1 if refused else 0), result.stderr
    assert any(e.startswith("port 10250, the kubelet's, is in use") for e in errors(result)) == refused


def test_the_probe_sees_a_listener_on_port_10250(probed, host_port_10250):
    host_port_10250.take()  # no other worker's probe runs while this listens
    ready_tools(probed).on("machine-systemctl", "is-active kubelet", reply("inactive\n", exit=3))
    listener = socket.socket(socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET)
    try:
        listener.bind(("::" if socket.has_ipv6 else "0.0.0.0", 10250))
    except OSError:
        pytest.skip("port 10250 is taken on this host")
    with listener:
        listener.listen()
        taken = check(probed, f"127.0.0.1:{probed.port}", probed.port)
    free = check(probed, f"127.0.0.1:{probed.port}", probed.port)

    assert any(e.startswith("port 10250, the kubelet's, is in use") for e in errors(taken)), taken.stderr
    assert not any(e.startswith("port 10250") for e in errors(free)), free.stderr


def test_a_br_netfilter_built_into_the_kernel_counts_as_loaded_and_needs_no_modules_load_entry(machine):
    # modules.builtin lists it as kernel/net/bridge/br_netfilter.ko; /sys/module has no directory for it.
    machine.on("machine-timeout", PROBE, facts(br_netfilter="builtin", br_netfilter_persisted="no"))

    result = check(machine, "10.0.0.1:6443")

    assert result.returncode == 0, result.stderr
    assert not [w for w in warnings(result) if "br_netfilter" in w]


@pytest.mark.parametrize(("fact", "said", "fix"), [
    ("br_netfilter_persisted", "br_netfilter is loaded now",
     "echo br_netfilter >/etc/modules-load.d/br_netfilter.conf"),
    ("ip_forward_persisted", "net.ipv4.ip_forward is 1 now",
     "echo net.ipv4.ip_forward=1 >/etc/sysctl.d/90-kubernetes-forward.conf && sysctl --system"),
    ("bridge_nf_call_iptables_persisted", "net.bridge.bridge-nf-call-iptables is 1 now",
     "echo net.bridge.bridge-nf-call-iptables=1 >/etc/sysctl.d/90-kubernetes-bridge.conf && sysctl --system"),
], ids=["br_netfilter", "ip_forward", "bridge-nf-call-iptables"])
def test_a_setting_live_but_not_persisted_is_a_warning_naming_its_fix(machine, fact, said, fix):
    machine.on("machine-timeout", PROBE, facts(**{fact: "no"}))

    result = check(machine, "10.0.0.1:6443")

    assert result.returncode == 0, result.stderr
    assert [w for w in warnings(result) if w.startswith(said)] == [
        f"{said}, but no modules-load.d or sysctl.d file under /etc, /run, /usr/local/lib, /usr/lib or /lib sets it, "
        f"so a reboot loses it; fix: {fix}"]


SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")
MODULES_DIRS = tuple(path.replace("sysctl.d", "modules-load.d") for path in SYSCTL_DIRS)


@pytest.fixture
def booted_with(tmp_path):
    """Makes a probed machine whose modules-load.d and sysctl.d directories hold only the given files: its sshd
    runs in a mount namespace of its own, with an empty tmpfs over each such directory the test host has."""
    import os

    from tests.sshd import machine_fakes

    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("mounts over /etc and /usr/lib directories in a namespace: needs root (as .ci/run runs)")
    made = []

    def make(files: dict[str, str]):
        present = sorted({os.path.realpath(d) for d in SYSCTL_DIRS + MODULES_DIRS if os.path.isdir(d)})
        layout = tmp_path / "layout"
        for path, text in files.items():
            if os.path.realpath(os.path.dirname(path)) not in present:
                pytest.skip(f"this host has no {os.path.dirname(path)} to cover")
            target = layout / os.path.realpath(path).lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        script = ('while [ "$1" != -- ]; do mount -t tmpfs tmpfs "$1" || exit 1; '
                  f'[ ! -d "{layout}$1" ] || cp "{layout}$1"/* "$1"/; shift; done; shift; exec "$@"')
        fakes = machine_fakes(tmp_path, ("kubeadm", "kubelet", "kubectl", "systemctl", "containerd", "sysctl",
                                         "crictl", *KUBEADM_EXECUTABLES),
                              wrap=("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "booted",
                                    *present, "--"))
        made.append(fakes)
        return ready_tools(fakes)

    yield make
    for fakes in made:
        fakes.stop()


@pytest.mark.parametrize("persisted", [True, False], ids=["persisted-in-any-directory", "nowhere"])
def test_the_probe_looks_for_persisted_settings_in_every_directory_systemd_reads(booted_with, persisted):
    # sysctl.d(5): "key = value", a key with dots or slashes, "-" to ignore a failure; modules-load.d(5): a name a line.
    files = {"/usr/lib/sysctl.d/60-forward.conf": "# the lab's\nnet.ipv4.ip_forward = 1\n",
             "/etc/sysctl.d/70-bridge.conf": "-net/bridge/bridge-nf-call-iptables=1\n",
             "/usr/lib/modules-load.d/br.conf": "; bridge\nbr_netfilter\n"}
    machine = booted_with(files if persisted else {})

    result = check(machine, f"127.0.0.1:{machine.port}", machine.port)

    lost = [w.split(" now,", 1)[0] for w in warnings(result) if "a reboot loses it" in w]
    expected = [] if persisted else ["net.ipv4.ip_forward is 1", "net.bridge.bridge-nf-call-iptables is 1"]
    # br_netfilter counts only where this host has it loaded (the probe reads the real /sys/module).
    if not persisted and Path("/sys/module/br_netfilter").is_dir():
        expected.insert(0, "br_netfilter is loaded")
    assert lost == expected, result.stderr
