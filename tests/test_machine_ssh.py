"""The worker scripts against a real OpenSSH server on loopback playing a machine (tests/sshd.py).

Joining, re-running, moving between tenants, leaving and the machine check, as
pulumi-command runs them for a machine worker: the same scripts as for containers,
with NODE_TRANSPORT=ssh. What the machine runs is recorded by fake tools there.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.sshd import machine_fakes
from tests.test_scripts import (
    ENDPOINT,
    ROOT,
    SCRIPTS,
    TENANT_KUBECONFIG,
    b64,
    reply,
    spki_sha256,
    tenant_api,
    write_shims,
)

NODE = "m1"
JOIN = r"(?s)^-c .*kubeadm join"
RESET = r"kubeadm reset --force --cri-socket"
STATE = r'found=\$path'
MARK = r"^-c mkdir -p"
BINDING = r"^--kubeconfig=/etc/kubernetes/kubelet.conf config view"
LAB_ID, OTHER_LAB = "kamaji-hami-lab/dev/kamaji", "kamaji-hami-lab/prod/gpu-lab"
# Two stacks' random identities (scripts/lab-identity.sh); the same LAB_ID with another identity is a clone.
IDENTITY, OTHER_IDENTITY = "5f0c3a9e7d21b4c86e93f1a0d7b2c458", "0b7e1d94c3a2f58e6d10c9b7a4e3f2d1"
TENANT = "tenant-a"
FOREIGN = "10.0.0.9:6443"


def bound_to(machine, server: str, ca_pem: str):
    return machine.on("machine-kubectl", BINDING, f"{server} {b64(ca_pem)}")


def unbound(machine):
    """The machine's kubelet is bound to nothing: there is no kubelet.conf for kubectl to read."""
    return machine.on("machine-kubectl", BINDING, reply(exit=1))


def binding(server: str, ca_pem: str) -> str:
    """A binding as the mark holds it: host:port and the CA's pin."""
    return f"{server} sha256:{spki_sha256(ca_pem)}"


def holding(*paths: str, lab: str | None = None, identity: str | None = IDENTITY, tenant: str = "tenant-b",
            bound: str = "") -> str:
    """What the join's look at the machine prints: the lab's mark, if any, and the Kubernetes state found."""
    mark = ""
    if lab:
        mark = f"mark=present\nmark_lab={lab}\n" + (f"mark_id={identity}\n" if identity else "")
        mark += f"mark_tenant={tenant}\n" + (f"mark_binding={bound}\n" if bound else "")
    return mark + "".join(f"found={path}\n" for path in paths)


def joinable(machine, ca_pem: str, *states: str, joins: tuple = ("",), resets: tuple = ("",)):
    tenant_api(machine, ca_pem)
    machine.on("kubectl", r"create -f -", "secret/bootstrap-token created\n")
    machine.on("kubectl", r"delete secret", "")
    machine.on("machine-sh", STATE, *(states or ("",))).on("machine-sh", MARK, "").on("machine-sh", RESET, *resets)
    machine.on("machine-modprobe", "br_netfilter", "")
    return machine.on("machine-sh", JOIN, *joins)


def join(machine, **env):
    return machine.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE=NODE, LAB_ID=LAB_ID,
                       LAB_IDENTITY=IDENTITY, TENANT=TENANT, **machine.transport(**env))


def scripts_run(machine) -> list[str]:
    return [call["argv"][1] for call in machine.calls("machine-sh")]


def the_mark(tenant_ca: str) -> str:
    return f"lab={LAB_ID}\nid={IDENTITY}\ntenant={TENANT}\nbinding={ENDPOINT} sha256:{spki_sha256(tenant_ca)}"


def test_a_machine_joins_over_ssh_with_the_token_only_on_stdin(machine, tenant_ca):
    unbound(joinable(machine, tenant_ca))

    result = join(machine)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE} joined {ENDPOINT}\n"
    (joined,) = machine.calls("machine-sh", JOIN)
    token = next(line.split('"')[1] for line in joined["stdin"].splitlines() if "token:" in line)
    assert "JoinConfiguration" in joined["stdin"] and f'name: "{NODE}"' in joined["stdin"]
    remote_argv = " ".join(" ".join(call["argv"]) for call in machine.calls())
    assert token not in remote_argv and token not in machine.ssh_argv.read_text()
    assert token not in result.stderr
    assert "ADMIN-CLIENT-KEY" not in joined["stdin"] + remote_argv, "admin credentials stay on the host"
    assert list(machine.runtime.iterdir()) == [], "the private key and kubeconfig are gone"
    assert machine.private_key not in machine.ssh_argv.read_text()


def test_a_clean_machine_without_a_mark_is_joined_with_no_reset_at_all(machine, tenant_ca):
    unbound(joinable(machine, tenant_ca))

    result = join(machine)

    assert result.returncode == 0, result.stderr
    assert machine.calls("machine-sh", RESET) == []
    assert "holds no Kubernetes state and no mark; joining it without a reset" in result.stderr
    (mark,) = machine.calls("machine-sh", MARK)
    assert mark["argv"][3:] == ["/etc/kamaji-hami-lab/worker", the_mark(tenant_ca)]


def test_each_retry_checks_the_mark_again_right_before_it_resets(machine, tenant_ca):
    # Clean at first; after the failed attempt it holds this join's mark and a half-written /etc/kubernetes.
    joinable(machine, tenant_ca, "", holding("/etc/kubernetes/pki/ca.crt", lab=LAB_ID, tenant=TENANT,
                                             bound=binding(ENDPOINT, tenant_ca)), joins=(reply(exit=1), reply()))
    unbound(machine)

    result = join(machine)

    assert result.returncode == 0, result.stderr
    scripts = scripts_run(machine)
    kinds = ["state" if "found=$path" in s else "reset" if "kubeadm reset" in s else "join" if "kubeadm join" in s
             else "mark" for s in scripts]
    assert kinds == ["state", "mark", "join", "state", "reset", "mark", "join"]


def test_a_reset_that_fails_keeps_the_mark_and_fails_the_join(machine, tenant_ca):
    joinable(machine, tenant_ca, holding("/etc/kubernetes/bootstrap-kubelet.conf", lab=LAB_ID, tenant=TENANT),
             resets=(reply(stderr="kubeadm: reset timed out\n", exit=1),))
    unbound(machine)

    result = join(machine)

    assert result.returncode == 1 and result.stdout == ""
    assert "resetting m1 failed (see above); it keeps the lab's mark" in result.stderr
    assert machine.calls("machine-sh", JOIN) == [] and machine.calls("kubectl", "create") == []


@pytest.mark.parametrize(("env", "extra_args"), [
    ({}, None),
    ({"NODE_LABELS": "gpu=on"}, [{"name": "node-labels", "value": "gpu=on"}]),
    ({"NODE_LABELS": "gpu=on", "NODE_IP": "10.1.0.7"},
     [{"name": "node-labels", "value": "gpu=on"}, {"name": "node-ip", "value": "10.1.0.7"}]),
], ids=["none", "labels", "labels-and-ip"])
def test_the_kubelet_registers_its_labels_and_address_itself(machine, tenant_ca, env, extra_args):
    unbound(joinable(machine, tenant_ca))

    assert join(machine, **env).returncode == 0
    (joined,) = machine.calls("machine-sh", JOIN)
    registration = yaml.safe_load(joined["stdin"])["nodeRegistration"]
    # kubeadm.k8s.io/v1beta4 takes kubelet flags as a list of {name, value} (cmd/kubeadm/app/apis/kubeadm/v1beta4).
    assert registration.get("kubeletExtraArgs") == extra_args
    assert registration["criSocket"] == "unix:///run/containerd/containerd.sock"


def test_re_running_the_join_leaves_a_machine_of_this_tenant_alone(machine, tenant_ca):
    joinable(machine, tenant_ca).on("kubectl", "get node m1", "node/m1\n")
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca)

    result = join(machine)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE} already joined {ENDPOINT}\n"
    assert machine.calls("kubectl", "create") == []
    # Nothing is reset; a machine joined before the lab marked its machines (or with an older mark) is marked now.
    (mark,) = machine.calls("machine-sh")
    assert mark["argv"][3:] == ["/etc/kamaji-hami-lab/worker", the_mark(tenant_ca)]


def test_a_joined_machine_whose_node_is_gone_restarts_its_kubelet_to_register_it(machine, tenant_ca):
    joinable(machine, tenant_ca).on("kubectl", "get node m1", "", "", "node/m1\n")
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca).on("machine-systemctl", "restart kubelet", "")

    result = join(machine)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE} already joined {ENDPOINT}\n"
    assert len(machine.calls("machine-systemctl", "restart kubelet")) == 1
    assert machine.calls("machine-sh", RESET) == [] and machine.calls("kubectl", "create") == []


def test_a_restarted_kubelet_that_registers_no_node_fails_the_join_saying_so(machine, tenant_ca):
    joinable(machine, tenant_ca).on("kubectl", "get node m1", "")
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca).on("machine-systemctl", "restart kubelet", "")

    result = join(machine, NODE_TIMEOUT="0")

    assert result.returncode == 1
    assert "m1: its kubelet did not register a Node within 0s of a restart" in result.stderr


def test_a_machine_of_another_tenant_of_this_lab_is_reset_then_marked_then_joined(machine, tenant_ca, other_tenant_ca):
    joinable(machine, tenant_ca, holding("/etc/kubernetes/kubelet.conf", lab=LAB_ID,
                                         bound=binding(FOREIGN, other_tenant_ca)))
    bound_to(machine, f"https://{FOREIGN}", other_tenant_ca)

    result = join(machine)

    assert result.returncode == 0, result.stderr
    assert "not to this tenant" in result.stderr and "carries this lab's mark (tenant tenant-b)" in result.stderr
    scripts = scripts_run(machine)
    assert ["found=$path" in scripts[0], "kubeadm reset" in scripts[1], "kubeadm join" in scripts[-1]] == [True] * 3
    (mark,) = machine.calls("machine-sh", MARK)
    assert mark["argv"][3:] == ["/etc/kamaji-hami-lab/worker", the_mark(tenant_ca)]
    assert scripts.index(mark["argv"][1]) == len(scripts) - 2, "marked right before kubeadm join"


# Which machines a join may reset, case by case: tests/test_reset_policy.py. Here: what the machine printed, and
# the binding its kubelet has, reach that decision, and a refusal stops the join before anything changes.
def test_a_machine_of_another_cluster_is_refused_naming_what_was_found(machine, tenant_ca, other_tenant_ca):
    joinable(machine, tenant_ca, holding("/etc/kubernetes/kubelet.conf", "/var/lib/etcd/member", lab=OTHER_LAB,
                                         identity=OTHER_IDENTITY, bound=binding(FOREIGN, other_tenant_ca)))
    bound_to(machine, f"https://{FOREIGN}", other_tenant_ca)

    result = join(machine)

    assert result.returncode == 1
    (refusal,) = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert "m1 holds Kubernetes state that is not this lab's" in refusal
    assert "found /etc/kubernetes/kubelet.conf, /var/lib/etcd/member" in refusal
    assert f"bound to {FOREIGN} sha256:{spki_sha256(other_tenant_ca)}" in refusal
    assert f"lab mark: {OTHER_LAB} {OTHER_IDENTITY} (this lab is {LAB_ID} {IDENTITY})" in refusal
    assert "set adopt: true" in refusal
    assert machine.calls("machine-sh", RESET) == [] and machine.calls("machine-sh", JOIN) == []
    assert machine.calls("kubectl", "create") == [], "no token is made for a machine that is refused"


def test_an_adopted_machine_of_another_cluster_is_reset_with_a_warning(machine, tenant_ca, other_tenant_ca):
    joinable(machine, tenant_ca, holding("/etc/kubernetes/kubelet.conf"))
    bound_to(machine, f"https://{FOREIGN}", other_tenant_ca)

    result = join(machine, ADOPT="true")

    assert result.returncode == 0, result.stderr
    assert "WARNING: m1 holds Kubernetes state (/etc/kubernetes/kubelet.conf) that is not provably this lab's" \
           in result.stderr and "adopt: true, so resetting it" in result.stderr
    assert len(machine.calls("machine-sh", RESET)) == 1


def test_a_machine_whose_reset_could_not_be_decided_is_left_as_it_is(machine, tenant_ca):
    # This lab's mark: the policy would reset it, had it answered.
    joinable(machine, tenant_ca, holding("/etc/kubernetes/kubelet.conf", lab=LAB_ID, tenant=TENANT))
    unbound(machine)
    write_shims(machine.bin, ("python3",))
    machine.on("python3", "reset_policy.py", reply(stderr="python3: No module named encodings\n", exit=1))

    result = join(machine)

    assert result.returncode == 1
    assert "m1: could not decide whether it may be reset" in result.stderr
    assert "No module named encodings" in result.stderr
    assert machine.calls("machine-sh", RESET) == [] and machine.calls("machine-sh", JOIN) == []
    assert machine.calls("kubectl", "create") == []


@pytest.fixture
def looked_at(tmp_path, sshd):
    """The join's look at the machine runs in its real shell; the node tools it asks are fakes."""
    return machine_fakes(tmp_path, ("kubectl", "systemctl", "crictl", "ip", "timeout"), sshd)


def test_the_look_at_the_machine_sees_a_kubelet_that_kubeadm_did_not_set_up(looked_at, tenant_ca):
    # No kubeadm file on this machine (the test host's filesystem), but a running kubelet, pods in the CRI
    # (crictl pods -q prints one sandbox ID per line, kubernetes-sigs/cri-tools cmd/crictl/sandbox.go @v1.36.0)
    # and flannel's bridge.
    unbound(tenant_api(looked_at, tenant_ca))
    looked_at.on("machine-systemctl", "is-active kubelet", "active\n")
    looked_at.on("machine-timeout", "crictl", "5c3e0f2a91d4\n8b1d77e0c2a9\n")
    looked_at.on("machine-ip", "link show cni0", "4: cni0: <BROADCAST,MULTICAST,UP> mtu 1450\n")
    looked_at.on("machine-ip", "link show flannel.1", reply(stderr='Device "flannel.1" does not exist.\n', exit=1))

    result = join(looked_at)

    assert result.returncode == 1
    assert ("found a running kubelet service, 2 pod sandbox(es) in the CRI, the cni0 link; bound to no API server; "
            "lab mark:") in result.stderr
    (crictl,) = looked_at.calls("machine-timeout", "crictl")
    assert crictl["argv"][1:] == ["crictl", "--runtime-endpoint", "unix:///run/containerd/containerd.sock", "pods",
                                  "-q"]


def test_a_wrong_host_key_stops_the_join_before_anything_runs_on_the_machine(machine, tenant_ca):
    joinable(machine, tenant_ca)
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherHostKeyOtherHostKeyOtherHostKey0000"

    result = join(machine, SSH_HOST_KEY=other, BOOT_TIMEOUT="1")

    assert result.returncode != 0
    assert "did not answer over ssh" in result.stderr and "127.0.0.1" in result.stderr
    assert machine.calls("machine-sh") == [] and machine.calls("kubectl", "create") == []


def needs_root():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("plays the user's ~/.ssh/config in a mount namespace: needs root (as .ci/run runs)")


def test_a_hostile_ssh_config_cannot_make_a_wrong_host_key_pass_or_share_a_connection(machine, tenant_ca, tmp_path):
    needs_root()
    # A user's config that would trust any key the machine shows (a KnownHostsCommand printing it for every
    # host, ssh_config(5)), keep connections open to be reused without a new host key check, and forward the agent.
    accept_all = tmp_path / "accept-all"
    accept_all.write_text(f"* {machine.host_key}\n")
    control = tmp_path / "cm"
    machine.with_ssh_config(f"Host *\n  KnownHostsCommand /bin/cat {accept_all}\n  StrictHostKeyChecking no\n"
                            f"  ControlMaster auto\n  ControlPath {control}-%C\n  ControlPersist 5\n"
                            "  ForwardAgent yes\n  UpdateHostKeys yes\n")
    joinable(machine, tenant_ca).on("kubectl", "get node m1", "node/m1\n")
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca)
    wrong = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherHostKeyOtherHostKeyOtherHostKey0000"

    refused = join(machine, SSH_HOST_KEY=wrong, BOOT_TIMEOUT="0")

    assert refused.returncode != 0 and "did not answer over ssh" in refused.stderr
    assert machine.calls("machine-sh") == [] and machine.connections() == 0
    refused_runs = machine.ssh_runs()
    joined = join(machine)
    assert joined.returncode == 0, joined.stderr
    assert list(tmp_path.glob("cm-*")) == [], "no connection was left for another ssh to reuse"
    assert machine.connections() == machine.ssh_runs() - refused_runs > 0, "one connection of its own per ssh"


@pytest.mark.parametrize("configured", ["per-machine", "ssh-config"])
def test_a_machine_behind_a_bastion_is_reached_through_it(machine, tenant_ca, tmp_path, configured):
    needs_root()
    # The loopback sshd plays the bastion too; the user's config says how to reach and trust it.
    bastion_known = tmp_path / "bastion_known_hosts"
    bastion_known.write_text(f"[127.0.0.1]:{machine.port} {machine.host_key}\n")
    user_config = (f"Host bastion\n  HostName 127.0.0.1\n  Port {machine.port}\n  User {getpass.getuser()}\n"
                   f"  IdentityFile {machine.key_file}\n  UserKnownHostsFile {bastion_known}\n"
                   "  StrictHostKeyChecking yes\n  BatchMode yes\n")
    if configured == "ssh-config":
        user_config = "Host 127.0.0.1\n  ProxyJump bastion\n" + user_config
    machine.with_ssh_config(user_config)
    joinable(machine, tenant_ca).on("kubectl", "get node m1", "node/m1\n")
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca)

    result = join(machine, **({"SSH_PROXY_JUMP": "bastion"} if configured == "per-machine" else {}))

    assert result.returncode == 0, result.stderr
    assert machine.connections() == 2 * machine.ssh_runs() > 0, "each ssh went through the bastion"


def test_without_a_host_key_nothing_reaches_the_machine_and_no_token_is_made(machine, tenant_ca):
    unbound(joinable(machine, tenant_ca))

    result = join(machine, SSH_HOST_KEY="")

    assert result.returncode == 1
    assert "environment variable SSH_HOST_KEY is required" in result.stderr
    assert not machine.ssh_argv.exists() and machine.calls("kubectl", "create") == []


def leave(machine, **env):
    machine.on("kubectl", r"get node m1", "node/m1\n").on("kubectl", r"drain m1", "").on("kubectl", r"delete node", "")
    return machine.run("leave-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE=NODE, **machine.transport(**env))


def test_leaving_resets_a_machine_still_bound_to_this_tenant_as_a_join_does(machine, tenant_ca, other_tenant_ca):
    joinable(machine, tenant_ca, holding("/etc/kubernetes/kubelet.conf", lab=LAB_ID,
                                         bound=binding(FOREIGN, other_tenant_ca)))
    # Bound to another tenant when it joins, to this one when it leaves.
    machine.on("machine-kubectl", BINDING, f"https://10.0.0.9:6443 {b64(other_tenant_ca)}",
               f"https://{ENDPOINT} {b64(tenant_ca)}")
    assert join(machine).returncode == 0

    result = leave(machine)

    assert result.returncode == 0, result.stderr
    assert machine.calls("kubectl", "delete node m1")
    before_join, left = machine.calls("machine-sh", RESET)
    assert left["argv"][3:] == ["60", "unix:///run/containerd/containerd.sock", "/run/kamaji-hami-lab-join.yaml",
                                "/etc/kamaji-hami-lab/worker", "flannel"]
    assert before_join["argv"][1] == left["argv"][1], "one reset helper for join and leave"


# What the reset removes, and keeps, is shown on real iptables in a namespace (test_reset_netns.py).


def test_a_leave_whose_reset_fails_fails_loudly_and_the_machine_keeps_the_mark(machine, tenant_ca):
    tenant_api(machine, tenant_ca)
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca)
    machine.on("machine-sh", RESET, reply(stderr="kubeadm reset: timed out\n", exit=1))

    result = leave(machine)

    assert result.returncode == 1
    assert "resetting machine m1 failed (see above); it keeps the lab's mark" in result.stderr
    assert "machine m1 reset" not in result.stderr


def test_leaving_does_not_reset_a_machine_that_already_joined_another_tenant(machine, tenant_ca, other_tenant_ca):
    tenant_api(machine, tenant_ca)
    bound_to(machine, "https://10.0.0.9:6443", other_tenant_ca)

    result = leave(machine)

    assert result.returncode == 0, result.stderr
    assert machine.calls("machine-sh") == []
    assert "not bound to this tenant (10.0.0.9:6443" in result.stderr


@pytest.fixture
def stoppable(tmp_path):
    """A machine behind an sshd of its own, for a test that stops it."""
    fakes = machine_fakes(tmp_path, ("sh", "timeout", "kubectl", "modprobe", "systemctl"))
    yield fakes
    fakes.stop()


def test_leaving_an_unreachable_machine_warns_and_lets_destroy_go_on(stoppable, tenant_ca):
    tenant_api(stoppable, tenant_ca)
    stoppable.stop()

    result = leave(stoppable)

    assert result.returncode == 0, result.stderr
    assert "machine m1 is unreachable over ssh" in result.stderr


def unregister(machine):
    return machine.run("unregister-gpus.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE=NODE, **machine.transport())


@pytest.mark.parametrize("bound", ["this-tenant", "nothing"])
def test_unregistering_mock_gpus_removes_the_timer_and_its_files(machine, tenant_ca, bound):
    tenant_api(machine, tenant_ca).on("machine-sh", r"systemctl disable", "")
    if bound == "this-tenant":
        bound_to(machine, f"https://{ENDPOINT}", tenant_ca)
    else:
        unbound(machine)

    result = unregister(machine)

    assert result.returncode == 0, result.stderr
    (call,) = machine.calls("machine-sh")
    assert call["argv"][3] == "hami-mock-gpu-register"
    assert "/etc/systemd/system/hami-mock-gpu-register.timer" in call["argv"][4:]


def test_unregistering_leaves_the_gpus_of_a_machine_another_tenant_has_by_now_alone(machine, tenant_ca,
                                                                                    other_tenant_ca):
    tenant_api(machine, tenant_ca).on("machine-sh", r"systemctl disable", "")
    bound_to(machine, "https://10.0.0.9:6443", other_tenant_ca)

    result = unregister(machine)

    assert result.returncode == 0, result.stderr
    assert machine.calls("machine-sh") == []
    assert "m1 is bound to another tenant by now (10.0.0.9:6443" in result.stderr


def test_registering_gpus_on_a_machine_that_never_joined_says_so(machine):
    # The machine's real filesystem has no kubelet.conf.
    result = machine.run("register-gpus.sh", NODE=NODE, GPU_REGISTER_JSON="[]", GPU_CAPACITY="10",
                         **machine.transport())

    assert result.returncode == 1
    assert "m1 has not joined its tenant" in result.stderr


def check(machine, endpoint: str, konnectivity_port: int = 8132, **env):
    return machine.run("check-machine.sh", NODE=NODE, KUBERNETES_VERSION=env.pop("KUBERNETES_VERSION", "v1.36.4"),
                       ENDPOINT=endpoint, KONNECTIVITY_PORT=str(konnectivity_port), KUBECONFIG_DATA=TENANT_KUBECONFIG,
                       **machine.transport(**env))


# crictl info renders containerd's CRI config under .config (kubernetes-sigs/cri-tools cmd/crictl/util.go
# outputStatusData @v1.36.0); the probe's go-template prints the default runtime's options.SystemdCgroup as Go
# prints a bool. A containerd whose cri plugin is off does not serve the CRI's RuntimeService; crictl then
# exits 1 with "getting status of runtime: <grpc error>" (cmd/crictl/info.go @v1.36.0).
CRI_SERVICE_MISSING = reply(stderr='time="2026-12-04T10:00:00Z" level=fatal msg="getting status of runtime: rpc error: '
                                  'code = Unimplemented desc = unknown service runtime.v1.RuntimeService"\n', exit=1)


# procps sysctl -n prints the bare value; a key whose /proc/sys file is missing (net.bridge.* without
# br_netfilter) fails with "cannot stat" (procps-ng sysctl.c ReadSetting).
NO_BRIDGE_SYSCTL = reply(stderr="sysctl: cannot stat /proc/sys/net/bridge/bridge-nf-call-iptables: No such file or "
                                "directory\n", exit=255)


def test_the_machine_check_reports_every_problem_at_once_naming_the_machine(probed):
    probed.on("machine-sysctl", "net.ipv4.ip_forward", "0\n").on("machine-sysctl", "bridge-nf-call", NO_BRIDGE_SYSCTL)
    probed.on("machine-kubeadm", "version", "v1.34.2\n").on("machine-kubelet", "--version", "Kubernetes v1.37.0\n")
    probed.on("machine-systemctl", "is-active containerd", reply("inactive\n", exit=3))
    probed.on("machine-nvidia-smi", "-L", "No devices were found\n")
    probed.on("machine-crictl", "--runtime-endpoint unix:///run/containerd/containerd.sock info", CRI_SERVICE_MISSING)
    # containerd 1.7 prints TOML strings in double quotes.
    probed.on("machine-containerd", "config dump", 'disabled_plugins = ["cri"]\n    default_runtime_name = "runc"\n')
    closed_port = probed.port + 1 if probed.port < 65535 else probed.port - 1

    result = check(probed, f"127.0.0.1:{closed_port}", closed_port, REAL_GPUS="true")

    assert result.returncode == 1 and result.stdout == ""
    problems = [line.split("] ", 1)[1] for line in result.stderr.splitlines() if "] m1: " in line]
    expected = [
        "kubeadm is v1.34.2, but the kubeadm that joins a machine must run the tenant's minor, v1.36",
        "kubelet is v1.37.0, newer than the tenant's API server v1.36.4",
        "containerd is not running",
        f"cannot reach the tenant API server at 127.0.0.1:{closed_port}",
        "nvidia-smi lists no GPU",
        "the NVIDIA container toolkit is not installed",
        "containerd's default runtime is 'runc', not nvidia",
        "net.ipv4.ip_forward is '0', not 1 (kubeadm join's preflight refuses the machine); fix: echo "
        "net.ipv4.ip_forward=1 >/etc/sysctl.d/90-kubernetes-forward.conf && sysctl --system",
        "net.bridge.bridge-nf-call-iptables is '', not 1",
        "containerd's cri plugin is disabled (disabled_plugins = [\"cri\"]); fix: remove cri from disabled_plugins",
        f"cannot reach the tenant's Konnectivity server at 127.0.0.1:{closed_port}",
    ]
    assert all(any(problem.startswith(f"m1: {want}") for problem in problems) for want in expected), problems
    assert "m1 cannot join its tenant" in result.stderr


def test_the_machine_check_says_what_crictl_said_when_no_cri_answers(probed):
    probed.on("machine-kubeadm", "version", "v1.36.4\n").on("machine-kubelet", "--version", "Kubernetes v1.36.4\n")
    probed.on("machine-systemctl", "is-active containerd", "active\n")
    probed.on("machine-sysctl", "net.ipv4.ip_forward", "1\n").on("machine-sysctl", "bridge-nf-call", "1\n")
    probed.on("machine-crictl", "--runtime-endpoint unix:///run/containerd/containerd.sock info", CRI_SERVICE_MISSING)
    probed.on("machine-containerd", "config dump", "version = 3\ndisabled_plugins = []\n")

    result = check(probed, f"127.0.0.1:{probed.port}", probed.port)

    assert result.returncode == 1
    assert ("m1: no CRI answers on unix:///run/containerd/containerd.sock, the socket the join uses (crictl info: "
            'time="2026-12-04T10:00:00Z" level=fatal msg="getting status of runtime: rpc error: code = Unimplemented '
            'desc = unknown service runtime.v1.RuntimeService")') in result.stderr


def test_the_machine_check_finds_what_a_ready_machine_has(probed):
    probed.on("machine-sysctl", "net.ipv4.ip_forward", "1\n").on("machine-sysctl", "bridge-nf-call", "1\n")
    probed.on("machine-kubeadm", "version", "v1.36.4\n").on("machine-kubelet", "--version", "Kubernetes v1.36.1\n")
    probed.on("machine-systemctl", "is-active containerd", "active\n")
    probed.on("machine-nvidia-smi", "-L", "GPU 0: NVIDIA L4 (UUID: GPU-1)\n")
    probed.on("machine-nvidia-ctk", "--version", "NVIDIA Container Toolkit CLI version 1.18.0\n")
    # containerd 2.x prints TOML strings in single quotes.
    probed.on("machine-containerd", "config dump", "disabled_plugins = []\n    default_runtime_name = 'nvidia'\n")
    probed.on("machine-crictl", "--runtime-endpoint unix:///run/containerd/containerd.sock info -o go-template",
              "true\n")

    result = check(probed, f"127.0.0.1:{probed.port}", probed.port, REAL_GPUS="true")

    # The test host's own CNI plugins, cgroups and swap are what they are; the rest is the fakes'.
    host_facts = ("CNI plugins", "cgroup v1", "swap is on", "br_netfilter")
    problems = [line for line in result.stderr.splitlines()
                if "] m1: " in line and not any(fact in line for fact in host_facts)]
    assert problems == []
    if result.returncode == 0:
        assert result.stdout == f"m1 can join v1.36.4 at 127.0.0.1:{probed.port}\n"


FACTS_OF_A_READY_MACHINE = """kubeadm=v1.36.4
kubelet=Kubernetes v1.36.4
kubectl=/usr/bin/kubectl
containerd=active
containerd_version=containerd github.com/containerd/containerd/v2 v2.2.7 4b6e3c1a9d0f
cri=answers
systemd_cgroup=true
disabled_plugins=[]
kubelet_service=inactive
cgroup=v2
swap_devices=0
ip_forward=1
bridge_nf_call_iptables=1
br_netfilter=loaded
br_netfilter_persisted=yes
ip_forward_persisted=yes
bridge_nf_call_iptables_persisted=yes
endpoint=reachable
konnectivity=reachable
"""


@pytest.mark.parametrize(
    ("facts", "problem"),
    [
        (FACTS_OF_A_READY_MACHINE, None),
        (FACTS_OF_A_READY_MACHINE + "cni_missing=bridge\ncni_missing=portmap\n",
         "CNI plugins missing from /opt/cni/bin: bridge portmap"),
        (FACTS_OF_A_READY_MACHINE.replace("cgroup=v2", "cgroup=v1"), "runs cgroup v1"),
        (FACTS_OF_A_READY_MACHINE.replace("swap_devices=0", "swap_devices=1"), "swap is on"),
        (FACTS_OF_A_READY_MACHINE.replace("kubeadm=v1.36.4", "kubeadm="), "kubeadm is not installed"),
        (FACTS_OF_A_READY_MACHINE.replace("kubectl=/usr/bin/kubectl", "kubectl="), "kubectl is not installed"),
        (FACTS_OF_A_READY_MACHINE.replace("ip_forward=1", "ip_forward=0"), "net.ipv4.ip_forward is '0', not 1"),
        (FACTS_OF_A_READY_MACHINE.replace("br_netfilter=loaded", "br_netfilter=absent"),
         "the br_netfilter kernel module is not loaded; fix: modprobe br_netfilter"),
        (FACTS_OF_A_READY_MACHINE.replace("bridge_nf_call_iptables=1", "bridge_nf_call_iptables=0"),
         "net.bridge.bridge-nf-call-iptables is '0', not 1"),
        # containerd 2.x shows a disabled "cri" by its full ID, single-quoted
        # (cmd/containerd/server/config/config.go v1MigratePluginName @v2.2.7).
        (FACTS_OF_A_READY_MACHINE.replace("disabled_plugins=[]", "disabled_plugins=['io.containerd.grpc.v1.cri']"),
         "containerd's cri plugin is disabled (disabled_plugins = ['io.containerd.grpc.v1.cri']); fix: remove cri "
         "from disabled_plugins in /etc/containerd/config.toml, then systemctl restart containerd"),
        (FACTS_OF_A_READY_MACHINE.replace("cri=answers", "cri_error=connect: no such file or directory"),
         "no CRI answers on unix:///run/containerd/containerd.sock, the socket the join uses (crictl info: connect: "
         "no such file or directory)"),
        (FACTS_OF_A_READY_MACHINE.replace("systemd_cgroup=true", "systemd_cgroup=false"),
         "containerd's default runtime sets SystemdCgroup = false, but the kubelet uses the systemd cgroup driver"),
        (FACTS_OF_A_READY_MACHINE.replace("systemd_cgroup=true", "systemd_cgroup=<no value>"),
         "containerd's default runtime has no SystemdCgroup option, so the systemd cgroup driver is not set"),
        (FACTS_OF_A_READY_MACHINE.replace("konnectivity=reachable", "konnectivity=unreachable"),
         "cannot reach the tenant's Konnectivity server at 10.0.0.1:8132"),
    ],
    ids=["ready", "cni", "cgroup-v1", "swap", "no-kubeadm", "no-kubectl", "ip-forward", "br-netfilter",
         "bridge-nf-call-iptables", "cri-disabled", "no-cri", "cgroupfs",
         "no-systemd-cgroup-key", "konnectivity"],
)
def test_the_machine_check_judges_each_fact_the_probe_reports(machine, facts, problem):
    machine.on("machine-timeout", r"(?s)^60 sh -c .*kubeadm version", facts)

    result = check(machine, "10.0.0.1:6443")

    if problem is None:
        assert (result.returncode, result.stdout) == (0, "m1 can join v1.36.4 at 10.0.0.1:6443\n"), result.stderr
    else:
        assert result.returncode == 1
        assert f"m1: {problem}" in result.stderr


# The version policy, the CRI's cgroup driver, kubeadm's executables and port, and persisted settings:
# tests/test_machine_check_policy.py.


def test_without_a_runtime_directory_the_private_key_goes_to_dev_shm_never_to_tmp(machine, tenant_ca):
    joinable(machine, tenant_ca).on("kubectl", "get node m1", "node/m1\n")
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca)

    result = join(machine, XDG_RUNTIME_DIR="")

    assert result.returncode == 0, result.stderr
    key_files = set(re.findall(r"(?:^| )-i (\S+)", machine.ssh_argv.read_text()))
    assert len(key_files) == 1 and next(iter(key_files)).startswith("/dev/shm/")
    assert not any(Path(path).exists() for path in key_files)


def test_a_user_other_than_root_runs_every_command_through_sudo_without_a_password(fakes):
    # Recorded by a fake ssh: logging in as another user needs an account this test cannot make.
    shim = fakes.bin / "ssh"
    shim.write_text((fakes.bin / "kubectl").read_text().replace(" kubectl ", " ssh "))
    shim.chmod(0o755)
    fakes.on("ssh", r" true$", "").on("ssh", r"systemctl disable", "").on("ssh", r"config view", reply(exit=1))

    result = fakes.run("unregister-gpus.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE=NODE, NODE_TRANSPORT="ssh",
                       SSH_ADDRESS="10.0.0.11",
                       SSH_USER="ops", SSH_PRIVATE_KEY="key text", SSH_HOST_KEY="ssh-ed25519 AAAAC3Nza")

    assert result.returncode == 0, result.stderr
    (call,) = fakes.calls("ssh", "systemctl disable")
    assert call["argv"][-2] == "10.0.0.11" and "-n" in call["argv"]
    assert tuple(call["argv"][call["argv"].index("-l"):][:2]) == ("-l", "ops")
    remote = call["argv"][-1]
    assert remote.startswith("sudo -n ")
    # The machine's login shell may be dash: the words must come back whole from a POSIX sh.
    words = subprocess.run(["sh", "-c", "printf '%s\\0' " + remote.removeprefix("sudo -n ")],
                           capture_output=True, check=True).stdout.decode().split("\0")[:-1]
    assert words[:2] == ["sh", "-c"] and 'systemctl disable --now "$unit.timer"' in words[2]
    assert words[3:5] == ["unregister", "hami-mock-gpu-register"]
    assert "key text" not in " ".join(call["argv"])


def test_every_setting_the_machine_check_probes_is_in_the_docs_with_its_fix(machine):
    # Every `unmet` of the check fails in one of the first two (the CRI's come one at a time); every
    # `not_persisted` warns in the third: live now, in no file read at boot.
    broken = FACTS_OF_A_READY_MACHINE
    for fact, bad in (("cgroup=v2", "cgroup=v1"), ("swap_devices=0", "swap_devices=2"),
                      ("ip_forward=1", "ip_forward=0"), ("br_netfilter=loaded", "br_netfilter=absent"),
                      ("bridge_nf_call_iptables=1", "bridge_nf_call_iptables=0"),
                      ("disabled_plugins=[]", "disabled_plugins=['io.containerd.grpc.v1.cri']")):
        broken = broken.replace(fact, bad)
    cgroupfs = FACTS_OF_A_READY_MACHINE.replace("systemd_cgroup=true", "systemd_cgroup=false")
    unpersisted = FACTS_OF_A_READY_MACHINE.replace("persisted=yes", "persisted=no")
    machine.on("machine-timeout", r"(?s)^60 sh -c .*kubeadm version", broken, cgroupfs, unpersisted)

    refused, warned = set(), set()
    for _ in range(3):
        result = check(machine, "10.0.0.1:6443")
        refused |= set(re.findall(r"\] m1: .*?; fix: (.*)$", result.stderr, re.M))
        warned |= set(re.findall(r"\] WARNING: m1: .*?; fix: (.*)$", result.stderr, re.M))
    assert result.returncode == 0, "a setting that is only not persisted is no refusal"

    script = (SCRIPTS / "check-machine.sh").read_text()
    assert len(refused) == len(re.findall(r"^\s*unmet ", script, re.M)), "a probed setting is missing from this test"
    assert len(warned) == len(re.findall(r"^\s*not_persisted ", script, re.M)), "a persisted one is missing"
    doc = (ROOT / "docs" / "beyond-one-host.md").read_text()
    prerequisites = doc.split("\n## Machine prerequisites\n", 1)[1].split("\n## ", 1)[0]
    assert [fix for fix in sorted(refused | warned) if f"`{fix}`" not in prerequisites] == []
    assert "\n## Upgrading machines\n" in doc
