"""The worker scripts against a real OpenSSH server on loopback playing a machine (tests/sshd.py).

Joining, re-running, moving between tenants, leaving and the machine check, as
pulumi-command runs them for a machine worker: the same scripts as for containers,
with NODE_TRANSPORT=ssh. What the machine runs is recorded by fake tools there.
"""

# The fixture `tenant_ca` is imported from test_scripts, so test arguments "redefine" it.
# ruff: noqa: F811

from __future__ import annotations

import subprocess

import pytest

from tests.sshd import machine_fakes
from tests.test_join_worker import other_tenant_ca  # noqa: F401 (fixture)
from tests.test_scripts import ENDPOINT, TENANT_KUBECONFIG, b64, fakes, reply, tenant_api, tenant_ca  # noqa: F401

NODE = "m1"
JOIN = r"(?s)^-c .*kubeadm join"
RESET_BEFORE_JOIN = r"^-c pkill -x kubeadm"
BINDING = r"^--kubeconfig=/etc/kubernetes/kubelet.conf config view"


@pytest.fixture
def machine(tmp_path):
    fakes = machine_fakes(tmp_path, ("sh", "timeout", "kubectl", "modprobe", "systemctl"))
    yield fakes
    fakes.stop()


@pytest.fixture
def probed(tmp_path):
    """The machine check's probe runs in the machine's real shell; only the node tools are fakes."""
    fakes = machine_fakes(tmp_path, ("kubeadm", "kubelet", "kubectl", "systemctl", "containerd", "nvidia-smi",
                                     "nvidia-ctk", "sysctl", "crictl"))
    yield fakes
    fakes.stop()


def bound_to(machine, server: str, ca_pem: str):
    return machine.on("machine-kubectl", BINDING, f"{server} {b64(ca_pem)}")


def joinable(machine, ca_pem: str):
    tenant_api(machine, ca_pem)
    machine.on("kubectl", r"create -f -", "secret/bootstrap-token created\n")
    machine.on("kubectl", r"delete secret", "")
    machine.on("machine-sh", RESET_BEFORE_JOIN, "").on("machine-modprobe", "br_netfilter", "")
    return machine.on("machine-sh", JOIN, "")


def join(machine, **env):
    return machine.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE=NODE, **machine.transport(**env))


def test_a_machine_joins_over_ssh_with_the_token_only_on_stdin(machine, tenant_ca):
    joinable(machine, tenant_ca).on("machine-kubectl", BINDING, reply(exit=1))

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


def test_re_running_the_join_leaves_a_machine_of_this_tenant_alone(machine, tenant_ca):
    joinable(machine, tenant_ca)
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca)

    result = join(machine)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE} already joined {ENDPOINT}\n"
    assert machine.calls("machine-sh") == [] and machine.calls("kubectl", "create") == []


def test_a_machine_of_another_tenant_is_reset_before_it_joins(machine, tenant_ca, other_tenant_ca):
    joinable(machine, tenant_ca)
    bound_to(machine, "https://10.0.0.9:6443", other_tenant_ca)

    result = join(machine)

    assert result.returncode == 0, result.stderr
    assert "not to this tenant" in result.stderr
    order = [" ".join(call["argv"]) for call in machine.calls("machine-sh")]
    assert order[0].startswith("-c pkill -x kubeadm") and "kubeadm reset --force" in order[0]
    assert "kubeadm join" in order[-1]


def test_a_wrong_host_key_stops_the_join_before_anything_runs_on_the_machine(machine, tenant_ca):
    joinable(machine, tenant_ca)
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherHostKeyOtherHostKeyOtherHostKey0000"

    result = join(machine, SSH_HOST_KEY=other, BOOT_TIMEOUT="1")

    assert result.returncode != 0
    assert "did not answer over ssh" in result.stderr and "127.0.0.1" in result.stderr
    assert machine.calls("machine-sh") == [] and machine.calls("kubectl", "create") == []


def test_without_a_host_key_nothing_reaches_the_machine_and_no_token_is_made(machine, tenant_ca):
    joinable(machine, tenant_ca).on("machine-kubectl", BINDING, reply(exit=1))

    result = join(machine, SSH_HOST_KEY="")

    assert result.returncode == 1
    assert "environment variable SSH_HOST_KEY is required" in result.stderr
    assert not machine.ssh_argv.exists() and machine.calls("kubectl", "create") == []


def leave(machine, **env):
    machine.on("kubectl", r"get node m1", "node/m1\n").on("kubectl", r"drain m1", "").on("kubectl", r"delete node", "")
    return machine.run("leave-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE=NODE, **machine.transport(**env))


def test_leaving_resets_a_machine_still_bound_to_this_tenant(machine, tenant_ca):
    tenant_api(machine, tenant_ca)
    bound_to(machine, f"https://{ENDPOINT}", tenant_ca).on("machine-sh", r"kubeadm reset", "")

    result = leave(machine)

    assert result.returncode == 0, result.stderr
    assert machine.calls("kubectl", "delete node m1")
    (reset,) = machine.calls("machine-sh")
    assert "kubeadm reset --force" in reset["argv"][1] and "10-flannel.conflist" in reset["argv"][1]


def test_leaving_does_not_reset_a_machine_that_already_joined_another_tenant(machine, tenant_ca, other_tenant_ca):
    tenant_api(machine, tenant_ca)
    bound_to(machine, "https://10.0.0.9:6443", other_tenant_ca)

    result = leave(machine)

    assert result.returncode == 0, result.stderr
    assert machine.calls("machine-sh") == []
    assert "not bound to this tenant (10.0.0.9:6443" in result.stderr


def test_leaving_an_unreachable_machine_warns_and_lets_destroy_go_on(machine, tenant_ca):
    tenant_api(machine, tenant_ca)
    machine.stop()

    result = leave(machine)

    assert result.returncode == 0, result.stderr
    assert "machine m1 is unreachable over ssh" in result.stderr


def test_unregistering_mock_gpus_removes_the_timer_and_its_files(machine):
    machine.on("machine-sh", r"systemctl disable", "")

    result = machine.run("unregister-gpus.sh", NODE=NODE, **machine.transport())

    assert result.returncode == 0, result.stderr
    (call,) = machine.calls("machine-sh")
    assert call["argv"][3] == "hami-mock-gpu-register"
    assert "/etc/systemd/system/hami-mock-gpu-register.timer" in call["argv"][4:]


def test_registering_gpus_on_a_machine_that_never_joined_says_so(machine):
    # The machine's real filesystem has no kubelet.conf.
    result = machine.run("register-gpus.sh", NODE=NODE, GPU_REGISTER_JSON="[]", GPU_CAPACITY="10",
                         **machine.transport())

    assert result.returncode == 1
    assert "m1 has not joined its tenant" in result.stderr


def check(machine, endpoint: str, konnectivity_port: int = 8132, **env):
    return machine.run("check-machine.sh", NODE=NODE, KUBERNETES_VERSION="v1.36.4", ENDPOINT=endpoint,
                       KONNECTIVITY_PORT=str(konnectivity_port), **machine.transport(**env))


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
    probed.on("machine-kubeadm", "version", "v1.35.2\n").on("machine-kubelet", "--version", "Kubernetes v1.36.9\n")
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
        "kubeadm is v1.35.2, but the tenant runs v1.36.4",
        "kubelet is v1.36.9, newer than the tenant's API server v1.36.4",
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
cri=answers
systemd_cgroup=true
disabled_plugins=[]
cgroup=v2
swap_devices=0
ip_forward=1
bridge_nf_call_iptables=1
br_netfilter=loaded
br_netfilter_persisted=yes
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
        (FACTS_OF_A_READY_MACHINE.replace("br_netfilter_persisted=yes", "br_netfilter_persisted=no"),
         "br_netfilter is not listed in /etc/modules-load.d"),
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
         "containerd's default runtime does not set SystemdCgroup = true (it has 'false')"),
        (FACTS_OF_A_READY_MACHINE.replace("systemd_cgroup=true", "systemd_cgroup=<no value>"),
         "containerd's default runtime does not set SystemdCgroup = true (it has '<no value>')"),
        (FACTS_OF_A_READY_MACHINE.replace("konnectivity=reachable", "konnectivity=unreachable"),
         "cannot reach the tenant's Konnectivity server at 10.0.0.1:8132"),
    ],
    ids=["ready", "cni", "cgroup-v1", "swap", "no-kubeadm", "no-kubectl", "ip-forward", "br-netfilter",
         "br-netfilter-not-persisted", "bridge-nf-call-iptables", "cri-disabled", "no-cri", "cgroupfs",
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


def test_a_user_other_than_root_runs_every_command_through_sudo_without_a_password(fakes):
    # Recorded by a fake ssh: logging in as another user needs an account this test cannot make.
    shim = fakes.bin / "ssh"
    shim.write_text((fakes.bin / "kubectl").read_text().replace(" kubectl ", " ssh "))
    shim.chmod(0o755)
    fakes.on("ssh", r" true$", "").on("ssh", r"systemctl disable", "")

    result = fakes.run("unregister-gpus.sh", NODE=NODE, NODE_TRANSPORT="ssh", SSH_ADDRESS="10.0.0.11",
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
