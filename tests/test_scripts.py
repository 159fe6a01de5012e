"""Offline tests for scripts/*.sh.

Each script runs under bash with fake docker/kind/kubectl/hostname first on
PATH (tests/fakebin/fake_tool.py): the fakes record argv, stdin and the active
kubeconfig, and replay canned replies chosen by argv. Real coreutils and
openssl do the rest.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from components.kind_management_cluster import KIND_NETWORK

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
FAKE_TOOL = Path(__file__).resolve().parent / "fakebin" / "fake_tool.py"
FAKED_TOOLS = ("docker", "kind", "kubectl", "hostname")

ENDPOINT = "172.18.255.200:6443"
ADMIN_KEY_MARKER = "ADMIN-CLIENT-KEY-DO-NOT-LEAK"
MANAGEMENT_KUBECONFIG = "apiVersion: v1\nkind: Config\n# management cluster\n"
TENANT_KUBECONFIG = f"""apiVersion: v1
kind: Config
clusters:
- name: tenant-a
  cluster:
    server: https://{ENDPOINT}
users:
- name: kubernetes-admin
  user:
    client-key-data: {ADMIN_KEY_MARKER}
"""
BOOTED_LOGS = "systemd 257 running in system mode\n[  OK  ] Reached target multi-user.target - Multi-User System.\n"


def reply(stdout: str = "", *, exit: int = 0, stderr: str = "") -> dict:
    return {"stdout": stdout, "stderr": stderr, "exit": exit}


def write_shims(directory: Path, tools, label: str = "") -> None:
    """One executable per tool in `directory` that runs fake_tool.py, recording it as `<label><tool>`."""
    for tool in tools:
        shim = directory / tool
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_TOOL}" {label}{tool} "$@"\n')
        shim.chmod(0o755)


class Fakes:
    """Fake tools for one test: declare replies with `on`, run a script, inspect `calls`."""

    def __init__(self, tmp_path: Path):
        self.bin = tmp_path / "bin"
        self.home = tmp_path / "home"
        self.log = tmp_path / "calls.jsonl"
        self.rules: list[dict] = []
        self.bin.mkdir()
        self.home.mkdir()
        write_shims(self.bin, FAKED_TOOLS)

    def on(
        self, tool: str, match: str, *replies: str | dict, steps_on: str | None = None, after: str | None = None
    ) -> Fakes:
        """Reply to calls of `tool` whose joined argv matches regex `match`; a str reply is stdout with exit 0.

        Replies follow one another call by call; with `steps_on`, by how many earlier calls of `tool` matched it.
        With `after`, only once an earlier call ("<tool> <argv>") matched that regex."""
        rule = {"tool": tool, "match": match, "replies": [r if isinstance(r, dict) else reply(r) for r in replies]}
        rule |= {"steps_on": steps_on} if steps_on else {}
        rule |= {"after": after} if after else {}
        self.rules.append(rule)
        return self

    def run(self, script: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
        full_env = {
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(self.home),
            "RETRY_INTERVAL": "0",
            "FAKE_LOG": str(self.log),
            "FAKE_RULES": json.dumps(self.rules),
            **env,
        }
        path = SCRIPTS / script if isinstance(script, str) else script
        return subprocess.run(
            ["bash", str(path)],
            env=full_env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def calls(self, tool: str | None = None, match: str = "") -> list[dict]:
        if not self.log.exists():
            return []
        records = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [r for r in records if (tool is None or r["tool"] == tool) and re.search(match, " ".join(r["argv"]))]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def spki_sha256(cert_pem: str) -> str:
    """SHA-256 of the certificate's SubjectPublicKeyInfo, read straight from the DER (independent of openssl)."""
    der = base64.b64decode("".join(line for line in cert_pem.splitlines() if not line.startswith("-----")))

    def element(offset: int) -> tuple[int, int, int]:
        """(tag, content start, end) of the DER element at offset."""
        tag, length, header = der[offset], der[offset + 1], 2
        if length & 0x80:
            size = length & 0x7F
            length = int.from_bytes(der[offset + 2 : offset + 2 + size], "big")
            header += size
        return tag, offset + header, offset + header + length

    _, certificate_start, _ = element(0)
    _, position, tbs_end = element(certificate_start)
    fields = []
    while position < tbs_end:
        tag, _, end = element(position)
        fields.append((tag, position, end))
        position = end
    if fields[0][0] == 0xA0:  # optional [0] version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo
    _, spki_start, spki_end = fields[5]
    return hashlib.sha256(der[spki_start:spki_end]).hexdigest()


# The runtimes kind's containerd config declares (kubernetes-sigs/kind images/base/files/etc/containerd/
# config.toml@v0.33.0-alpha: runc and test-handler), each as the lab's script leaves it
# (scripts/node/no-host-devices.sh).
GUARDED_RUNTIMES = {"runc": True, "test-handler": True}
# join-worker.sh's probe of them, as the script sends it to crictl.
RUNTIMES_TEMPLATE = re.search(r"runtimes_template='([^']*)'", (SCRIPTS / "join-worker.sh").read_text()).group(1)
CRI_INFO = r"^exec \S+ crictl --runtime-endpoint unix:///run/containerd/containerd.sock info -o go-template --template "


def cri_status(runtimes: dict[str, bool | None]) -> dict:
    """crictl info's view of containerd 2.x: the CRI config under "config", each runtime with its
    privileged_without_host_devices (containerd internal/cri/server/status.go and the json tags of
    internal/cri/config/config.go@v2.3.4), as crictl v1.36.0 re-decodes it. None: a runtime without the key."""
    declared = {name: {"runtimeType": "io.containerd.runc.v2", "runtimePath": "", "options": {"SystemdCgroup": True},
                       "sandboxer": "podsandbox"} | ({} if on is None else {"privileged_without_host_devices": on})
                for name, on in runtimes.items()}
    return {"status": {"conditions": [{"type": "RuntimeReady", "status": True}]},
            "config": {"containerd": {"defaultRuntimeName": "runc", "runtimes": declared}}}


def cri_answer(runtimes: dict[str, bool | None]) -> str:
    """What crictl v1.36.0 prints for join-worker.sh's probe over cri_status(runtimes) (fakebin/fake_crictl.py)."""
    from tests.fakebin.fake_crictl import parse, render

    status = cri_status(runtimes)
    return render(parse(RUNTIMES_TEMPLATE), status, status)


def cri_runtimes(fakes: Fakes, runtimes: dict[str, bool | None]) -> Fakes:
    """The container's crictl answers join-worker.sh's probe over cri_status(runtimes)."""
    return fakes.on("docker", CRI_INFO, cri_answer(runtimes))


def node_booted(fakes: Fakes, logs: str = BOOTED_LOGS) -> Fakes:
    """A container that booted, whose containerd gives privileged pods no host devices (an earlier rule
    may say otherwise)."""
    fakes.on("docker", r"^inspect ", "2026-01-01T10:00:00.123456789Z\n").on("docker", r"^logs ", logs)
    return cri_runtimes(fakes, GUARDED_RUNTIMES)


def node_joined(fakes: Fakes, joined: bool) -> Fakes:
    return fakes.on("docker", r"^exec \S+ test -e /etc/kubernetes/kubelet.conf$", reply(exit=0 if joined else 1))


def node_takes_files_and_units(fakes: Fakes) -> Fakes:
    """Writing files into the node (stdin) and systemctl there succeed; add specific rules first."""
    return fakes.on("docker", r"^exec -i \S+ sh -c ", "").on("docker", r"^exec \S+ systemctl ", "")


CLUSTER_INFO = r"-n kube-public get configmap cluster-info -o jsonpath=\{\.data\.kubeconfig\}"


def cluster_info_at(endpoint: str) -> str:
    # The kubeconfig in kube-public/cluster-info as Kamaji writes it with client-go's clientcmd.Write
    # (clastix/kamaji internal/kubeadm/bootstraptoken.go@26.8.2-edge: one cluster named "", server and CA).
    return (f"apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: Q0E=\n    server: https://{endpoint}\n"
            "  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {}\nusers: null\n")


def tenant_api(fakes: Fakes, ca_pem: str = "") -> Fakes:
    return fakes.on("kubectl", r"config view .*cluster\.server", f"https://{ENDPOINT}").on(
        "kubectl", r"config view .*certificate-authority-data", b64(ca_pem)
    ).on("kubectl", CLUSTER_INFO, cluster_info_at(ENDPOINT))


# --- kind-up / kind-down ---------------------------------------------------------------------------


OWNER_JSONPATH = r"get nodes -o jsonpath=\{.items\[0\].metadata.labels.kamaji-hami-lab\\.io/owner\}"
# The layout the program hands kind-up.sh for kindSubnet 172.18.0.0/16 (components/addresses.py).
KIND_LAYOUT = {"KIND_NETWORK": KIND_NETWORK, "KIND_SUBNET": "172.18.0.0/16", "KIND_IP_RANGE": "172.18.0.0/18"}
# kind-up.sh's own inspect of the lab's network: "<its label>|<subnet>=<ip-range> ..."; see
# tests/test_preflight_modes.py for the shapes (ours, one without a layout, missing).
NETWORK_INSPECT = rf"^network inspect --format .*\|.* {KIND_NETWORK}$"
OUR_NETWORK = "quarters|172.18.0.0/16=172.18.0.0/18 \n"
# One with the lab's name that Docker laid out itself (no --ip-range), as kind makes its own `kind`.
UNLAID_NETWORK = "|172.18.0.0/16= fc00:f853:ccd:e793::/64= \n"
# What `docker network inspect` of a missing network says depends on the client: 20.10 words it itself (moby/moby
# client/errors.go@v20.10.24, wrapResponseError), newer ones pass on the daemon's (libnetwork/error.go@v28.5.2,
# ErrNoSuchNetwork). The scripts ask `docker network ls` instead, whose name filter is a regular expression
# matched anywhere in a name (api/types/filters/parse.go@v28.5.2 and @v20.10.24, Match): it lists lookalikes too.
NO_NETWORK = reply(exit=1, stderr=f"Error response from daemon: network {KIND_NETWORK} not found\n")
NO_NETWORK_20_10 = reply(exit=1, stderr=f"Error: No such network: {KIND_NETWORK}\n")
NETWORK_LS = rf"^network ls --filter name=\^{KIND_NETWORK}\$ --format \{{\{{\.Name\}}\}}$"
LISTED = f"{KIND_NETWORK}\n"
LOOKALIKES = f"{KIND_NETWORK}-old\nold-{KIND_NETWORK}\n"  # what the filter lets through when only these exist
CREATED = r"^docker network create "
# kind-up.sh's inspect of an adopted cluster's node container (kind names it <cluster>-control-plane):
# "yes" when it is on the lab's network.
NODE_ON_NETWORK = r"^inspect --format .* mgmt-control-plane$"


def missing_network(fakes: Fakes, inspected: dict = NO_NETWORK, listed: str = "") -> Fakes:
    """A docker without the lab's network until `docker network create` makes it, as kind-up.sh does: inspected
    and listed as a client says it is missing, then as OUR_NETWORK."""
    fakes.on("docker", NETWORK_INSPECT, OUR_NETWORK, after=CREATED).on("docker", NETWORK_LS, LISTED, after=CREATED)
    return fakes.on("docker", NETWORK_INSPECT, inspected).on("docker", NETWORK_LS, listed)


def recorded_host(directory: Path, files: dict[str, str] | None = None) -> Path:
    """A directory of the host files preflight.py reads (PREFLIGHT_ROOT): a home LAN's, unless `files` says."""
    from tests.test_preflight import HOST_NETWORK_FILES

    for relative, content in {**HOST_NETWORK_FILES, **(files or {})}.items():
        (directory / relative).parent.mkdir(parents=True, exist_ok=True)
        (directory / relative).write_text(content)
    return directory


def run_kind_up(fakes, network: str | dict = OUR_NETWORK, **env: str):
    """kind-up.sh on a docker where the lab's network is listed and inspected as `network` (unless the test said
    otherwise first: the first rule that matches answers), on a host whose own networks are a home LAN's."""
    fakes.on("docker", NETWORK_LS, LISTED).on("docker", NETWORK_INSPECT, network)
    host = fakes.home.parent / "host"
    if not host.exists():
        recorded_host(host)
    return fakes.run("kind-up.sh", CLUSTER_NAME="mgmt", NODE_IMAGE="kindest/node:v1.36.4", LAB_OWNER="lab.dev",
                     **{**KIND_LAYOUT, "PREFLIGHT_ROOT": str(host), **env})


def ours_and_running(fakes: Fakes) -> Fakes:
    """A cluster named mgmt whose node carries this lab's mark."""
    fakes.on("kind", r"^get clusters$", "other\nmgmt\n")
    fakes.on("kind", r"^get kubeconfig --name mgmt$", "KUBECONFIG-TEXT\n")
    return fakes.on("kubectl", OWNER_JSONPATH, "lab.dev")


def test_kind_up_adopts_a_cluster_this_lab_created_on_the_labs_network(fakes):
    ours_and_running(fakes).on("docker", NODE_ON_NETWORK, "yes\n")

    result = run_kind_up(fakes)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "", "the kubeconfig is kind-kubeconfig.sh's output"
    assert "adopting" in result.stderr
    assert fakes.calls("kind", "create") == []
    assert not (fakes.home / ".kube").exists()
    (inspect,) = fakes.calls("docker", NODE_ON_NETWORK)
    assert f'index .NetworkSettings.Networks "{KIND_NETWORK}"' in " ".join(inspect["argv"])


def test_kind_up_refuses_to_adopt_its_cluster_whose_node_is_not_on_the_labs_network(fakes):
    # Made by a version that put kind's node on kind's own `kind` network: the workers could not reach it.
    ours_and_running(fakes).on("docker", NODE_ON_NETWORK, "\n")

    result = run_kind_up(fakes)

    assert result.returncode != 0 and result.stdout == ""
    assert f"kind cluster mgmt belongs to this lab but its node is not on docker network {KIND_NETWORK}," \
        in result.stderr
    assert "make down, then make up" in result.stderr
    assert "adopting" not in result.stderr
    assert fakes.calls("kind", "(create|delete)") == [] and fakes.calls("docker", "^network (create|rm)") == []


def test_kind_up_stops_when_docker_cannot_inspect_the_node_it_would_adopt(fakes):
    ours_and_running(fakes).on("docker", NODE_ON_NETWORK, reply(exit=1, stderr="Error: No such object: "
                                                                       "mgmt-control-plane\n"))

    result = run_kind_up(fakes)

    assert result.returncode != 0 and result.stdout == ""
    assert "cannot inspect the node container mgmt-control-plane of kind cluster mgmt" in result.stderr
    assert "adopting" not in result.stderr
    assert fakes.calls("kind", "(create|delete)") == []


def test_kind_up_refuses_a_same_named_cluster_it_did_not_create(fakes):
    fakes.on("kind", r"^get clusters$", "mgmt\n").on("kind", r"^get kubeconfig --name mgmt$", "KUBECONFIG-TEXT\n")
    fakes.on("kubectl", OWNER_JSONPATH, "")

    result = run_kind_up(fakes)

    assert result.returncode != 0
    assert result.stdout == ""
    assert "a kind cluster named mgmt already exists and was not created by this lab (lab.dev)" in result.stderr
    assert fakes.calls("kind", "create") == [] and fakes.calls("kind", "delete") == []


def test_kind_up_creates_a_missing_cluster_marked_as_ours_without_touching_the_users_kubeconfig(fakes):
    # A cluster whose name merely starts with the wanted one must not count.
    fakes.on("kind", r"^get clusters$", "mgmt-old\n").on("kind", r"^get kubeconfig", "KUBECONFIG-TEXT\n")
    fakes.on("kind", r"^create cluster ", "")

    result = run_kind_up(fakes)

    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    (create,) = fakes.calls("kind", "^create cluster")
    argv = create["argv"]
    assert " ".join(argv[:9]) == "create cluster --name mgmt --image kindest/node:v1.36.4 --wait 120s --kubeconfig"
    throwaway = Path(argv[9])
    assert fakes.home not in throwaway.parents
    assert not throwaway.exists()
    assert not (fakes.home / ".kube").exists()
    assert argv[10] == "--config"
    assert yaml.safe_load(create["files"][argv[11]]) == {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "nodes": [{"role": "control-plane", "labels": {"kamaji-hami-lab.io/owner": "lab.dev"}}],
    }


def test_kind_up_hands_kind_its_admin_kubeconfig_on_the_runtime_tmpfs(fakes, tmp_path):
    runtime = tmp_path / "runtime"  # stands in for XDG_RUNTIME_DIR, a per-user tmpfs
    runtime.mkdir(mode=0o700)
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")

    result = run_kind_up(fakes, XDG_RUNTIME_DIR=str(runtime))

    assert result.returncode == 0, result.stderr
    (create,) = fakes.calls("kind", "^create cluster")
    assert Path(create["argv"][9]).parent == runtime
    assert list(runtime.iterdir()) == []


def test_kind_up_creates_the_missing_labs_network_with_room_for_fixed_addresses(fakes):
    # Missing at first; once created, the inspect reads what `docker network create` made of the arguments.
    missing_network(fakes)
    fakes.on("docker", r"^network inspect bridge ", "1400\n").on("docker", r"^network create ", "network-id\n")
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")

    result = run_kind_up(fakes)

    assert result.returncode == 0, result.stderr
    (create,) = fakes.calls("docker", "^network create")
    argv = create["argv"]
    options = {flag: value for flag, value in zip(argv, argv[1:], strict=False) if flag.startswith("--")}
    assert argv[-1] == KIND_NETWORK
    assert (options["--subnet"], options["--ip-range"]) == ("172.18.0.0/16", "172.18.0.0/18")
    assert options["--label"].startswith("kamaji-hami-lab.io/")
    # As kind creates it (pkg/cluster/internal/providers/docker/network.go@v0.33.0-alpha, createNetwork).
    assert "-d=bridge" in argv
    assert "com.docker.network.bridge.enable_ip_masquerade=true" in argv
    assert "com.docker.network.driver.mtu=1400" in argv, "the default bridge's MTU"
    # The network exists before kind looks for it: kind reuses it as it is.
    order = [(call["tool"], call["argv"][0]) for call in fakes.calls()]
    assert order.index(("docker", "network")) < order.index(("kind", "create"))


def test_kind_up_leaves_out_an_mtu_the_default_bridge_does_not_set(fakes):
    missing_network(fakes)
    fakes.on("docker", r"^network inspect bridge ", "\n").on("docker", r"^network create ", "network-id\n")
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")

    assert run_kind_up(fakes).returncode == 0
    (create,) = fakes.calls("docker", "^network create")
    assert not any("mtu" in arg for arg in create["argv"])


def test_kind_up_reuses_the_labs_own_network_without_a_word(fakes):
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")

    result = run_kind_up(fakes, OUR_NETWORK)

    assert result.returncode == 0, result.stderr
    assert fakes.calls("docker", "^network (create|rm)") == []
    assert "WARNING" not in result.stderr
    assert fakes.calls("kind", "^create cluster")


@pytest.mark.parametrize("network", [UNLAID_NETWORK, "|172.18.0.0/16=172.18.0.0/17 \n",
                                     "quarters|172.18.0.0/16=172.18.64.0/18 \n"])
def test_kind_up_refuses_a_network_that_lets_docker_take_the_workers_addresses(fakes, network):
    # No --ip-range, or a range beyond the first quarter: Docker could give a sleeping worker's address to
    # another container.
    fakes.on("kind", r"^get clusters$", "")

    result = run_kind_up(fakes, network)

    assert result.returncode != 0
    assert f"docker network inspect {KIND_NETWORK}" in result.stderr
    assert f"docker network rm {KIND_NETWORK}" in result.stderr
    assert "not created by kamaji-hami-lab" in result.stderr or "labelled" in result.stderr
    assert fakes.calls("docker", "^network (create|rm)") == [] and fakes.calls("kind") == []


def test_kind_up_uses_a_foreign_network_whose_range_is_exactly_the_first_quarter_and_says_so(fakes):
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")

    result = run_kind_up(fakes, "|172.18.0.0/16=172.18.0.0/18 fc00:f853:ccd:e793::/64= \n")

    assert result.returncode == 0, result.stderr
    assert f"WARNING: docker network {KIND_NETWORK} was not created by kamaji-hami-lab" in result.stderr
    assert fakes.calls("docker", "^network (create|rm)") == []


def test_kind_up_names_kind_subnet_when_docker_cannot_create_the_network(fakes):
    fakes.on("docker", r"^network inspect bridge ", "\n")
    fakes.on("docker", r"^network create ", reply(exit=1, stderr="Error response from daemon: Pool overlaps with "
                                                          "other one on this address space\n"))
    fakes.on("kind", r"^get clusters$", "")
    # Still missing after the failed create.
    fakes.on("docker", NETWORK_LS, "").on("docker", NETWORK_INSPECT, NO_NETWORK)

    result = run_kind_up(fakes)

    assert result.returncode != 0
    assert "Pool overlaps with other one" in result.stderr and "kamaji-hami-lab:kindSubnet" in result.stderr
    assert fakes.calls("kind") == []


def test_kind_up_checks_a_network_another_lab_created_meanwhile(fakes):
    # Two labs coming up side by side: the other one's create won.
    missing_network(fakes).on("docker", r"^network inspect bridge ", "\n")
    fakes.on("docker", r"^network create ", reply(exit=1, stderr="Error response from daemon: network with name "
                                                          f"{KIND_NETWORK} already exists\n"))
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")

    assert run_kind_up(fakes).returncode == 0
    assert fakes.calls("kind", "^create cluster")


@pytest.mark.parametrize("failing", [NETWORK_LS, NETWORK_INSPECT], ids=["ls", "inspect"])
def test_kind_up_stops_when_docker_cannot_say_whether_the_network_exists(fakes, failing):
    fakes.on("docker", failing, reply(exit=1, stderr="Cannot connect to the Docker daemon at unix:///var/run/docker.sock"))

    result = run_kind_up(fakes)

    assert result.returncode != 0
    assert re.search(f"ERROR: cannot [a-z ]+ docker network {KIND_NETWORK}( exists)?: Cannot connect to the Docker "
                     "daemon", result.stderr)
    assert fakes.calls("docker", "^network create") == [] and fakes.calls("kind") == []


@pytest.mark.parametrize("missing", [NO_NETWORK, NO_NETWORK_20_10], ids=["daemon-wording", "client-20.10-wording"])
@pytest.mark.parametrize("listed", ["", LOOKALIKES], ids=["none", "lookalikes"])
def test_kind_up_creates_the_missing_network_whatever_the_client_says_of_it(fakes, missing, listed):
    # README: Docker Engine 20.10 or newer. Networks whose names merely contain the lab's are not it.
    missing_network(fakes, missing, listed).on("docker", r"^network inspect bridge ", "\n")
    fakes.on("docker", r"^network create ", "network-id\n")
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")

    result = run_kind_up(fakes)

    assert result.returncode == 0, result.stderr
    (create,) = fakes.calls("docker", "^network create")
    assert create["argv"][-1] == KIND_NETWORK
    assert fakes.calls("kind", "^create cluster")


# Docker 29 holds a network's --ip-range as a netip.Prefix: without one, the inspect template prints its zero value,
# "invalid Prefix" (moby/moby api/types/network/ipam.go@docker-v29.7.2, IPAMConfig.IPRange; Go's net/netip).
UNLAID_NETWORK_29 = "|172.18.0.0/16=invalid Prefix fc00:f853:ccd:e793::/64=invalid Prefix \n"


def test_kind_up_reads_docker_29s_empty_ip_range_as_none(fakes):
    fakes.on("kind", r"^get clusters$", "")

    result = run_kind_up(fakes, UNLAID_NETWORK_29)

    assert result.returncode != 0
    assert f"docker network {KIND_NETWORK} (not created by kamaji-hami-lab) lets Docker give any address of " \
           "172.18.0.0/16 to containers" in result.stderr
    assert "invalid" not in result.stderr
    assert fakes.calls("docker", "^network (create|rm)") == [] and fakes.calls("kind") == []


def test_kind_up_uses_its_network_whose_ipv6_part_docker_29_lists_without_a_range(fakes):
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")

    result = run_kind_up(fakes, "quarters|172.18.0.0/16=172.18.0.0/18 fc00:f853:ccd:e793::/64=invalid Prefix \n")

    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr


def run_kind_up_on_host(fakes: Fakes, host_files: dict[str, str], subnet: str = "192.168.0.0/16"):
    """kind-up.sh on a host with the given own network files, where the lab's network is missing."""
    missing_network(fakes).on("docker", r"^network inspect bridge ", "\n")
    fakes.on("docker", r"^network create ", "network-id\n")
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")
    host = recorded_host(fakes.home.parent / "host", host_files)
    network = ipaddress.IPv4Network(subnet)
    return run_kind_up(fakes, PREFLIGHT_ROOT=str(host), KIND_SUBNET=subnet,
                       KIND_IP_RANGE=str(next(network.subnets(prefixlen_diff=2))))


def test_kind_up_refuses_to_create_the_network_over_the_hosts_own_lan(fakes):
    # The recorded host is on 192.168.1.0/24: Docker would create a bridge over it without a word.
    result = run_kind_up_on_host(fakes, {})

    assert result.returncode != 0
    assert "192.168.0.0/16" in result.stderr and "route 192.168.1.0/24 dev wlp2s0" in result.stderr
    assert "nameserver 192.168.1.1 of /run/systemd/resolve/resolv.conf" in result.stderr
    spare = re.findall(r"pulumi config set kamaji-hami-lab:kindSubnet (\S+)", result.stderr)
    assert spare and all(not ipaddress.IPv4Network(s).overlaps(ipaddress.IPv4Network("192.168.1.0/24")) for s in spare)
    assert fakes.calls("docker", "^network create") == [] and fakes.calls("kind") == []


def test_kind_up_creates_the_network_beside_the_hosts_own(fakes):
    result = run_kind_up_on_host(fakes, {}, subnet="172.30.0.0/16")

    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr
    assert fakes.calls("docker", "^network create")


def test_kind_up_warns_of_a_vpn_route_it_would_shadow_and_goes_on(fakes):
    from tests.test_preflight import HOST_NETWORK_FILES, route_line

    routes = HOST_NETWORK_FILES["proc/net/route"] + route_line("tun0", "172.16.0.0/12", "10.8.0.1", flags=0x0003)
    result = run_kind_up_on_host(fakes, {"proc/net/route": routes}, subnet="172.30.0.0/16")

    assert result.returncode == 0, result.stderr
    assert "WARNING" in result.stderr and "route 172.16.0.0/12 dev tun0 via 10.8.0.1" in result.stderr
    assert fakes.calls("docker", "^network create")


@pytest.mark.parametrize("routes", ["", "garbage\n"], ids=["empty", "malformed"])
def test_kind_up_says_it_could_not_compare_routes_it_cannot_read(fakes, routes):
    result = run_kind_up_on_host(fakes, {"proc/net/route": routes}, subnet="172.30.0.0/16")

    assert result.returncode == 0, result.stderr
    assert "WARNING" in result.stderr and "cannot read this host's routes (/proc/net/route)" in result.stderr


def test_kind_up_leaves_the_host_check_to_a_network_that_exists(fakes):
    # Once it exists its own bridge is one of the host's routes; kind-up.sh only checks what it finds.
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")
    host = recorded_host(fakes.home.parent / "host", {"proc/net/route": "garbage\n"})

    result = run_kind_up(fakes, OUR_NETWORK, PREFLIGHT_ROOT=str(host))

    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr


def test_kind_kubeconfig_prints_the_clusters_kubeconfig(fakes):
    fakes.on("kind", r"^get kubeconfig --name mgmt$", "KUBECONFIG-TEXT\n")

    result = fakes.run("kind-kubeconfig.sh", CLUSTER_NAME="mgmt")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "KUBECONFIG-TEXT\n"
    assert not (fakes.home / ".kube").exists()


def test_kind_kubeconfig_fails_clearly_when_the_cluster_is_missing(fakes):
    fakes.on("kind", r"^get kubeconfig", reply(exit=1, stderr="ERROR: could not locate any control plane nodes\n"))

    result = fakes.run("kind-kubeconfig.sh", CLUSTER_NAME="mgmt")

    assert result.returncode != 0 and result.stdout == ""
    assert "cannot read the kubeconfig of kind cluster mgmt" in result.stderr


# kind-down.sh's look at the lab's network once the cluster is gone: whether it exists (NETWORK_LS), its layout label
# (empty on a network the lab did not make) and every container on it, stopped ones included.
NETWORK_LABEL = rf'^network inspect --format \{{\{{index \.Labels "kamaji-hami-lab\.io/layout"\}}\}} {KIND_NETWORK}$'
CONTAINERS_ON_NETWORK = rf"^ps --all --filter network={KIND_NETWORK} --format \{{\{{\.Names\}}\}}$"
# An inspect's count of the containers on it, `{{len .Containers}}`: the network's endpoints, which only running
# containers have (moby/moby daemon/network.go@v28.5.2, buildContainerAttachments).
RUNNING_COUNT = r"^network inspect --format .*\{\{len \.Containers\}\}"
NETWORK_RM = rf"^network rm {KIND_NETWORK}$"


def run_kind_down(fakes: Fakes, label: str | dict = "quarters\n", containers: str | dict = "",
                  listed: str | dict = LISTED, **env: str) -> subprocess.CompletedProcess[str]:
    """kind-down.sh of a stack that hands it the lab's network: listed as `listed`, its label and containers as
    given (unless the test said otherwise first)."""
    fakes.on("docker", NETWORK_LS, listed).on("docker", NETWORK_LABEL, label)
    fakes.on("docker", CONTAINERS_ON_NETWORK, containers)
    return fakes.run("kind-down.sh", CLUSTER_NAME="mgmt", **{"KIND_NETWORK": KIND_NETWORK, **env})


def test_kind_down_succeeds_when_the_cluster_is_already_gone(fakes):
    fakes.on("kind", r"^get clusters$", reply(stderr="No kind clusters found.\n"))
    fakes.on("docker", NETWORK_RM, "")

    result = run_kind_down(fakes)

    assert result.returncode == 0, result.stderr
    assert fakes.calls("kind", "delete") == []
    # A destroy that stopped after the cluster was deleted still removes the network on its re-run.
    assert len(fakes.calls("docker", NETWORK_RM)) == 1


def test_kind_down_deletes_without_touching_the_users_kubeconfig(fakes):
    fakes.on("kind", r"^get clusters$", "mgmt\n").on("kind", r"^delete cluster ", "")
    fakes.on("docker", NETWORK_RM, "")

    result = run_kind_down(fakes)

    assert result.returncode == 0, result.stderr
    (delete,) = fakes.calls("kind", "^delete cluster")
    assert delete["argv"][:5] == ["delete", "cluster", "--name", "mgmt", "--kubeconfig"]
    assert fakes.home not in Path(delete["argv"][5]).parents
    assert result.stdout == ""


def test_kind_down_removes_the_labs_network_once_no_container_is_left_on_it(fakes):
    fakes.on("kind", r"^get clusters$", "mgmt\n").on("kind", r"^delete cluster ", "")
    fakes.on("docker", NETWORK_RM, f"{KIND_NETWORK}\n")

    result = run_kind_down(fakes)

    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr and result.stdout == ""
    # Counted after the cluster's node container is gone, so it does not keep the network.
    order = [(call["tool"], call["argv"][:2]) for call in fakes.calls()]
    assert order[0] == ("kind", ["get", "clusters"]) and order[1] == ("kind", ["delete", "cluster"])
    assert order.index(("docker", ["ps", "--all"])) < order.index(("docker", ["network", "rm"])) == len(order) - 1


def test_kind_down_leaves_the_network_to_the_last_lab_on_it(fakes):
    # Another lab's kind node and workers are still on the shared network.
    fakes.on("kind", r"^get clusters$", "mgmt\nother-lab\n").on("kind", r"^delete cluster ", "")

    result = run_kind_down(fakes, containers="other-control-plane\nother-a-w1\nother-a-w2\nother-b-w1\n")

    assert result.returncode == 0, result.stderr
    assert fakes.calls("docker", "^network rm") == []
    assert f"docker network {KIND_NETWORK} still has 4 containers" in result.stderr
    assert "other-control-plane, other-a-w1, other-a-w2, other-b-w1" in result.stderr
    assert "WARNING" not in result.stderr


def test_kind_down_leaves_the_network_to_a_lab_whose_containers_are_all_stopped(fakes):
    # Another lab's tenant sleeps: its worker is a stopped container, not among the network's endpoints, so an
    # inspect counts none; removing the network would leave that worker nothing to wake up on.
    fakes.on("kind", r"^get clusters$", "mgmt\n").on("kind", r"^delete cluster ", "")
    fakes.on("docker", RUNNING_COUNT, "quarters|0\n").on("docker", NETWORK_RM, "")

    result = run_kind_down(fakes, containers="other-a-w1\n")

    assert result.returncode == 0, result.stderr
    assert fakes.calls("docker", "^network rm") == []
    assert f"docker network {KIND_NETWORK} still has 1 containers of other labs, running or stopped (other-a-w1)" \
        in result.stderr


def test_kind_down_leaves_a_network_the_lab_did_not_make(fakes):
    # Someone made a network of that name (no layout label) before the lab used it: it stays theirs.
    fakes.on("kind", r"^get clusters$", "mgmt\n").on("kind", r"^delete cluster ", "")

    result = run_kind_down(fakes, label="\n")

    assert result.returncode == 0, result.stderr
    assert fakes.calls("docker", "^network rm") == []
    assert f"docker network {KIND_NETWORK} was not made by kamaji-hami-lab" in result.stderr


@pytest.mark.parametrize("missing", [NO_NETWORK, NO_NETWORK_20_10], ids=["daemon-wording", "client-20.10-wording"])
@pytest.mark.parametrize("listed", ["", LOOKALIKES], ids=["none", "lookalikes"])
def test_kind_down_is_quiet_when_the_network_is_already_gone(fakes, missing, listed):
    # Whatever a client says when asked to inspect it, and whatever names only look like it.
    fakes.on("kind", r"^get clusters$", "mgmt\n").on("kind", r"^delete cluster ", "")
    fakes.on("docker", r"^network inspect ", missing).on("docker", r"^ps ", "")

    result = run_kind_down(fakes, listed=listed)

    assert result.returncode == 0, result.stderr
    assert fakes.calls("docker", "^network rm") == []
    assert "WARNING" not in result.stderr


@pytest.mark.parametrize("failing", [NETWORK_LS, NETWORK_LABEL, CONTAINERS_ON_NETWORK], ids=["ls", "inspect", "ps"])
def test_kind_down_never_fails_destroy_when_docker_cannot_say_who_uses_the_network(fakes, failing):
    fakes.on("kind", r"^get clusters$", "mgmt\n").on("kind", r"^delete cluster ", "")
    fakes.on("docker", failing, reply(exit=1, stderr="Cannot connect to the Docker daemon at unix:///var/run/docker.sock"))

    result = run_kind_down(fakes)

    assert result.returncode == 0, result.stderr
    assert fakes.calls("docker", "^network rm") == []
    assert re.search(f"WARNING: cannot [a-z ]+ docker network {KIND_NETWORK}.*, left as it is: Cannot connect",
                     result.stderr)


def test_kind_down_leaves_the_network_to_a_lab_that_joined_it_meanwhile(fakes):
    # Docker refuses to remove a network with a container on it: that lab's kind-down removes it later.
    fakes.on("kind", r"^get clusters$", "mgmt\n").on("kind", r"^delete cluster ", "")
    fakes.on("docker", NETWORK_RM, reply(exit=1, stderr=f"Error response from daemon: error while removing network: "
                                                        f"network {KIND_NETWORK} id 3f2a has active endpoints\n"))

    result = run_kind_down(fakes)

    assert result.returncode == 0, result.stderr
    assert len(fakes.calls("docker", NETWORK_RM)) == 1
    assert f"WARNING: docker network {KIND_NETWORK} was not removed: Error response from daemon" in result.stderr
    assert "has active endpoints" in result.stderr


def test_kind_down_of_a_stack_made_before_the_labs_network_leaves_docker_networks_alone(fakes):
    # Its delete step keeps the environment it was created with, which has no KIND_NETWORK: its cluster sat on
    # kind's own `kind` network, which other kind clusters use.
    fakes.on("kind", r"^get clusters$", "mgmt\n").on("kind", r"^delete cluster ", "")

    result = fakes.run("kind-down.sh", CLUSTER_NAME="mgmt")

    assert result.returncode == 0, result.stderr
    assert len(fakes.calls("kind", "^delete cluster")) == 1
    assert fakes.calls("docker") == []


# --- kind-subnet ------------------------------------------------------------------------------------


def test_kind_subnet_picks_ipv4_out_of_a_dual_stack_network(fakes):
    fakes.on("docker", r"^network inspect", "fc00:f853:ccd:e793::/64 172.18.0.0/16 \n")

    result = fakes.run("kind-subnet.sh", KIND_NETWORK=KIND_NETWORK)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "172.18.0.0/16\n"
    assert fakes.calls("docker")[0]["argv"][-1] == KIND_NETWORK


def test_kind_subnet_passes_the_subnet_the_lab_plans_with(fakes):
    fakes.on("docker", r"^network inspect", "172.18.0.0/16 \n")

    result = fakes.run("kind-subnet.sh", KIND_NETWORK=KIND_NETWORK, EXPECTED_SUBNET="172.18.0.0/16")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "172.18.0.0/16\n"


def test_kind_subnet_refuses_a_network_other_than_the_one_the_lab_plans_with(fakes):
    fakes.on("docker", r"^network inspect", "fc00:f853:ccd:e793::/64 172.19.0.0/16 \n")

    result = fakes.run("kind-subnet.sh", KIND_NETWORK=KIND_NETWORK, EXPECTED_SUBNET="172.18.0.0/16")

    assert result.returncode != 0 and result.stdout == ""
    assert "kamaji-hami-lab:kindSubnet" in result.stderr
    assert "plans its addresses in 172.18.0.0/16" in result.stderr and "has the subnet 172.19.0.0/16" in result.stderr
    assert "pulumi config set kamaji-hami-lab:kindSubnet 172.19.0.0/16" in result.stderr


def test_kind_subnet_fails_clearly_when_the_network_is_missing(fakes):
    fakes.on("docker", r"^network inspect", NO_NETWORK)

    result = fakes.run("kind-subnet.sh", KIND_NETWORK=KIND_NETWORK, EXPECTED_SUBNET="172.18.0.0/16")

    assert result.returncode != 0 and result.stdout == ""
    assert f"cannot inspect docker network {KIND_NETWORK}" in result.stderr


def test_kind_subnet_fails_clearly_without_an_ipv4_subnet(fakes):
    fakes.on("docker", r"^network inspect", "fc00:f853:ccd:e793::/64 \n")

    result = fakes.run("kind-subnet.sh", KIND_NETWORK="lab-net")

    assert result.returncode != 0
    assert result.stdout == ""
    assert "lab-net has no IPv4 subnet" in result.stderr
    assert fakes.calls("docker")[0]["argv"][-1] == "lab-net"


# --- wait-kamaji ------------------------------------------------------------------------------------


DATASTORE_STATE = r"get datastores\.kamaji\.clastix\.io default --ignore-not-found"
RELEASE_RECORD = r"-n kamaji-system get secret -l owner=helm,name=kamaji,status=deployed"
# Shaped like `helm get manifest` of clastix/kamaji 0.0.0+latest: the DataStore comes from the
# kamaji-etcd subchart (clastix/kamaji-etcd charts/kamaji-etcd/templates/etcd_datastore.yaml).
DATASTORE_DOCUMENT = """# Source: kamaji/charts/kamaji-etcd/templates/etcd_datastore.yaml
apiVersion: kamaji.clastix.io/v1alpha1
kind: DataStore
metadata:
  name: default
  labels:
    app.kubernetes.io/name: kamaji-etcd
spec:
  driver: etcd
  endpoints:
    - kamaji-etcd-0.kamaji-etcd.kamaji-system.svc.cluster.local:2379
"""
KAMAJI_MANIFEST = f"""---
# Source: kamaji/templates/controller.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: kamaji
  namespace: kamaji-system
---
{DATASTORE_DOCUMENT}---
# Source: kamaji/charts/kamaji-etcd/templates/etcd_sts.yaml
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: default
"""


def helm_release_secret_data(manifest: str) -> str:
    """`.data.release` of a Helm release Secret: Kubernetes' base64 of Helm's base64 of gzipped JSON
    (helm/helm pkg/storage/driver/util.go encodeRelease)."""
    import gzip

    record = {"name": "kamaji", "namespace": "kamaji-system", "manifest": manifest}
    helm_encoded = base64.b64encode(gzip.compress(json.dumps(record).encode()))
    return base64.b64encode(helm_encoded).decode()


def test_wait_kamaji_waits_for_the_deployment_and_the_datastore(fakes):
    fakes.on("kubectl", r"get deployment kamaji", "False", "True")
    fakes.on("kubectl", DATASTORE_STATE, "|", "|false", "|true")

    result = fakes.run("wait-kamaji.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG)

    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert len(fakes.calls("kubectl", "get datastores")) == 3
    assert fakes.calls("kubectl", "create") == []
    assert all(c["kubeconfig"]["content"] == MANAGEMENT_KUBECONFIG for c in fakes.calls("kubectl"))


def test_wait_kamaji_times_out_naming_what_it_waited_for(fakes):
    fakes.on("kubectl", r"get deployment kamaji", "True")
    fakes.on("kubectl", DATASTORE_STATE, "|false")

    result = fakes.run("wait-kamaji.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG, WAIT_TIMEOUT="0")

    assert result.returncode != 0
    assert "timed out after 0s waiting for DataStore default" in result.stderr


def test_wait_kamaji_restores_a_datastore_an_interrupted_destroy_deleted(fakes):
    fakes.on("kubectl", r"get deployment kamaji", "True")
    # Still terminating when `up` starts, then gone, then restored and ready.
    fakes.on("kubectl", DATASTORE_STATE, "2026-12-03T06:00:00Z|true", "", "|false", "|true")
    fakes.on("kubectl", RELEASE_RECORD, helm_release_secret_data(KAMAJI_MANIFEST))
    fakes.on("kubectl", r"create -f -", "datastore.kamaji.clastix.io/default created\n")

    result = fakes.run("wait-kamaji.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG)

    assert result.returncode == 0, result.stderr
    assert "DataStore default to finish its deletion" in result.stderr
    (create,) = fakes.calls("kubectl", r"create -f -")
    restored = yaml.safe_load(create["stdin"])
    # Owned by the release as Helm marks what it installs, so later upgrades adopt it.
    assert restored["metadata"].pop("annotations") == {
        "meta.helm.sh/release-name": "kamaji",
        "meta.helm.sh/release-namespace": "kamaji-system",
    }
    assert restored == yaml.safe_load(DATASTORE_DOCUMENT), "only the DataStore, as recorded"
    assert fakes.calls("kubectl", "apply|delete|patch") == []


def test_wait_kamaji_reports_the_restore_command_at_once_when_it_cannot_restore(fakes):
    fakes.on("kubectl", r"get deployment kamaji", "True")
    fakes.on("kubectl", DATASTORE_STATE, "")
    fakes.on("kubectl", RELEASE_RECORD, "")  # no deployed release record

    result = fakes.run("wait-kamaji.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG)  # default 600 s timeout

    assert result.returncode != 0
    assert "helm -n kamaji-system get manifest kamaji | kubectl apply -f -" in result.stderr
    assert len(fakes.calls("kubectl", "get datastores")) == 1, "fails on the first look, not after ten minutes"


DATASTORE_PRESENT = r"get datastores\.kamaji\.clastix\.io/default --ignore-not-found -o name"
DATASTORE_FINALIZERS = r"get datastores\.kamaji\.clastix\.io/default -o jsonpath=\{range \.metadata\.finalizers"
DATASTORE_USERS = r"get tenantcontrolplanes\.kamaji\.clastix\.io --all-namespaces"
DATASTORE_DELETE = r"delete datastores\.kamaji\.clastix\.io/default --ignore-not-found --wait=false$"


def test_delete_datastore_deletes_the_default_datastore_and_waits(fakes):
    fakes.on("kubectl", DATASTORE_DELETE, 'datastore.kamaji.clastix.io "default" deleted\n')
    fakes.on("kubectl", DATASTORE_PRESENT, "datastore.kamaji.clastix.io/default\n", "")

    result = fakes.run("delete-datastore.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG)

    assert result.returncode == 0, result.stderr
    (delete,) = fakes.calls("kubectl", r"delete datastores\.kamaji\.clastix\.io/default")
    assert "--ignore-not-found" in delete["argv"]
    assert len(fakes.calls("kubectl", DATASTORE_PRESENT)) == 2
    assert fakes.calls("kubectl", "patch") == [], "the controller released it"


def test_delete_datastore_never_blocks_destroy(fakes):
    fakes.on("kubectl", r"delete datastores", reply(exit=1, stderr="Unable to connect to the server\n"))

    result = fakes.run("delete-datastore.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG)

    assert result.returncode == 0
    assert "could not delete DataStore default" in result.stderr


def test_delete_datastore_releases_an_unused_datastore_stuck_in_terminating(fakes):
    fakes.on("kubectl", DATASTORE_DELETE, 'datastore.kamaji.clastix.io "default" deleted\n')
    fakes.on("kubectl", DATASTORE_PRESENT, "datastore.kamaji.clastix.io/default\n", "")
    fakes.on("kubectl", DATASTORE_USERS, "")
    fakes.on("kubectl", DATASTORE_FINALIZERS, "kamaji.clastix.io/TenantControlPlane\nexample.com/keep\n")
    fakes.on("kubectl", r"patch datastores", "datastore.kamaji.clastix.io/default patched\n")

    result = fakes.run("delete-datastore.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG, DELETE_TIMEOUT="0")

    assert result.returncode == 0, result.stderr
    (patch,) = fakes.calls("kubectl", "patch")
    # Only Kamaji's finalizer (clastix/kamaji api/v1alpha1/datastore_types.go) goes; others stay.
    body = json.loads(patch["argv"][patch["argv"].index("-p") + 1])
    assert body == {"metadata": {"finalizers": ["example.com/keep"]}}
    assert "DataStore default deleted" in result.stderr


def test_delete_datastore_leaves_a_datastore_that_a_control_plane_still_uses(fakes):
    fakes.on("kubectl", DATASTORE_DELETE, 'datastore.kamaji.clastix.io "default" deleted\n')
    fakes.on("kubectl", DATASTORE_PRESENT, "datastore.kamaji.clastix.io/default\n")
    fakes.on("kubectl", DATASTORE_USERS, "tenants/tenant-a ")

    result = fakes.run("delete-datastore.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG, DELETE_TIMEOUT="0")

    assert result.returncode == 0
    assert fakes.calls("kubectl", "patch") == []
    assert "still used by: tenants/tenant-a" in result.stderr


# --- wait-metallb -----------------------------------------------------------------------------------


def test_wait_metallb_retries_until_the_webhook_admits_a_pool(fakes):
    refused = reply(
        exit=1,
        stderr='Error from server (InternalError): failed calling webhook "ipaddresspoolvalidationwebhook"\n',
    )
    fakes.on("kubectl", r"apply --dry-run=server", refused, refused, "ipaddresspool created (server dry run)\n")

    result = fakes.run("wait-metallb.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG, NAMESPACE="metallb-system")

    assert result.returncode == 0, result.stderr
    probes = fakes.calls("kubectl", r"apply --dry-run=server")
    assert len(probes) == 3
    probe = yaml.safe_load(probes[0]["stdin"])
    assert (probe["kind"], probe["metadata"]["namespace"]) == ("IPAddressPool", "metallb-system")
    assert "failed calling webhook" in result.stderr


def test_wait_metallb_times_out_clearly(fakes):
    fakes.on("kubectl", r"apply --dry-run=server", reply(exit=1, stderr="webhook not ready\n"))

    result = fakes.run(
        "wait-metallb.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG, NAMESPACE="metallb-system", WAIT_TIMEOUT="0"
    )

    assert result.returncode != 0
    assert "waiting for MetalLB's webhook to admit an IPAddressPool in metallb-system" in result.stderr


# --- tenant-kubeconfig ------------------------------------------------------------------------------


def test_tenant_kubeconfig_prints_only_the_decoded_kubeconfig_once_authorised(fakes):
    fakes.on(
        "kubectl",
        r"-n tenants get secret tenant-a-admin-kubeconfig -o jsonpath=\{\.data\.admin\\\.conf\}",
        reply(exit=1, stderr='Error from server (NotFound): secrets "tenant-a-admin-kubeconfig" not found\n'),
        b64(TENANT_KUBECONFIG),
    )
    forbidden = reply("no\n", exit=1)
    fakes.on("kubectl", r"auth can-i create secrets -n kube-system", forbidden, forbidden, "yes\n")

    result = fakes.run(
        "tenant-kubeconfig.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG, TENANT="tenant-a", NAMESPACE="tenants"
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == TENANT_KUBECONFIG
    assert ADMIN_KEY_MARKER not in result.stderr
    secret_reads = fakes.calls("kubectl", "get secret")
    assert len(secret_reads) == 2
    assert all(c["kubeconfig"]["content"] == MANAGEMENT_KUBECONFIG for c in secret_reads)
    auth_checks = fakes.calls("kubectl", "auth can-i")
    assert len(auth_checks) == 3
    # The decoded kubeconfig went through $(...), which drops the final newline.
    assert all(c["kubeconfig"]["content"] == TENANT_KUBECONFIG.rstrip("\n") for c in auth_checks)
    # Both kubeconfigs were private scratch files, gone after the run.
    for call in fakes.calls("kubectl"):
        assert call["kubeconfig"]["mode"] == 0o600
        assert not Path(call["kubeconfig"]["path"]).exists()


def test_tenant_kubeconfig_gives_up_when_never_authorised(fakes):
    fakes.on("kubectl", r"get secret", b64(TENANT_KUBECONFIG))
    fakes.on("kubectl", r"auth can-i", reply("no\n", exit=1))

    result = fakes.run(
        "tenant-kubeconfig.sh",
        KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG,
        TENANT="tenant-a",
        NAMESPACE="tenants",
        AUTH_TIMEOUT="0",
    )

    assert result.returncode != 0
    assert result.stdout == ""
    assert "waiting for tenant tenant-a to authorise admin.conf" in result.stderr


def kubeconfig_at(address: str) -> str:
    return TENANT_KUBECONFIG.replace(ENDPOINT, f"{address}:6443")


SERVICE_ADDRESSES = r"-n tenants get service tenant-a -o jsonpath=\{\.status\.loadBalancer\.ingress\[\*\]\.ip\}"
# What `kubectl config view --minify -o jsonpath={...server}` prints (no newline).
SERVER_OF_ADMIN_CONF = r"config view --raw --minify -o jsonpath=\{\.clusters\[0\]\.cluster\.server\}"


# The same Secret's super-admin.conf, which Kamaji writes kube-public/cluster-info from.
SUPER_ADMIN_CONF = r"-n tenants get secret tenant-a-admin-kubeconfig -o jsonpath=\{\.data\.super-admin\\\.conf\}"
SUPER_ADMIN_KEY_MARKER = "SUPER-ADMIN-CLIENT-KEY-DO-NOT-LEAK"


def super_admin_conf_at(address: str) -> str:
    return b64(kubeconfig_at(address).replace(ADMIN_KEY_MARKER, SUPER_ADMIN_KEY_MARKER))


def pinned_run(fakes: Fakes, **env: str) -> subprocess.CompletedProcess[str]:
    return fakes.run("tenant-kubeconfig.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG, TENANT="tenant-a",
                     NAMESPACE="tenants", API_ADDRESS="172.30.255.2", **env)


def test_tenant_kubeconfig_waits_for_metallb_then_for_kamaji_at_the_pinned_address(fakes):
    # 172.30.255.20 starts with 172.30.255.2: only the whole address counts, in the Service and in admin.conf.
    fakes.on("kubectl", SUPER_ADMIN_CONF, super_admin_conf_at("172.30.255.2"))
    fakes.on("kubectl", r"get secret", b64(kubeconfig_at("172.30.255.20")), b64(kubeconfig_at("172.30.255.20")),
             b64(kubeconfig_at("172.30.255.2")))
    fakes.on("kubectl", SERVICE_ADDRESSES, "", "172.30.255.20", "172.30.255.2")
    fakes.on("kubectl", SERVER_OF_ADMIN_CONF, "https://172.30.255.2:6443")
    fakes.on("kubectl", r"auth can-i", "yes\n")

    result = pinned_run(fakes)

    assert result.returncode == 0, result.stderr
    assert result.stdout == kubeconfig_at("172.30.255.2")
    assert "waiting for MetalLB to give tenant tenant-a's Service 172.30.255.2 (it has no address)" in result.stderr
    assert "(it has 172.30.255.20)" in result.stderr
    # admin.conf is read for its server only once the Service holds the address, from a private scratch file.
    (view,) = fakes.calls("kubectl", "config view")
    assert view["kubeconfig"]["content"] == kubeconfig_at("172.30.255.2").rstrip("\n")
    assert view["kubeconfig"]["mode"] == 0o600 and not Path(view["kubeconfig"]["path"]).exists()
    assert len(fakes.calls("kubectl", "auth can-i")) == 1


@pytest.mark.parametrize("annotated", [reply("service/tenant-a annotated\n"), reply(exit=1, stderr="forbidden\n")])
def test_tenant_kubeconfig_has_metallb_try_again_while_the_address_does_not_come(fakes, annotated):
    # MetalLB retries a Service only when it changes (go.universe.tf/metallb controller/main.go@v0.16.1).
    fakes.on("kubectl", SUPER_ADMIN_CONF, super_admin_conf_at("172.30.255.2"))
    fakes.on("kubectl", r"get secret", b64(kubeconfig_at("172.30.255.2")))
    fakes.on("kubectl", SERVICE_ADDRESSES, "172.30.255.20", "172.30.255.20", "172.30.255.2")
    fakes.on("kubectl", r"annotate service tenant-a", annotated)
    fakes.on("kubectl", SERVER_OF_ADMIN_CONF, "https://172.30.255.2:6443")
    fakes.on("kubectl", r"auth can-i", "yes\n")

    result = pinned_run(fakes, ASK_AGAIN_EVERY="0")

    assert result.returncode == 0, result.stderr
    nudges = fakes.calls("kubectl", "annotate")
    assert len(nudges) == 2
    assert all(re.search(r"-n tenants annotate service tenant-a --overwrite "
                         r"kamaji-hami-lab\.io/address-asked-at=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$",
                         " ".join(call["argv"])) for call in nudges)
    assert all(call["kubeconfig"]["content"] == MANAGEMENT_KUBECONFIG for call in nudges)
    assert ("could not annotate Service tenants/tenant-a to have MetalLB try 172.30.255.2 again: forbidden"
            in result.stderr) == (annotated["exit"] != 0)


def test_tenant_kubeconfig_refuses_a_nudge_interval_that_is_no_number(fakes):
    result = pinned_run(fakes, ASK_AGAIN_EVERY="30s")
    assert result.returncode != 0
    assert "ASK_AGAIN_EVERY must be a number of seconds, not '30s'" in result.stderr
    assert not fakes.calls("kubectl")


def test_tenant_kubeconfig_says_the_certificate_is_not_trusted_yet_rather_than_unreachable(fakes):
    # What kubectl prints when the API server's certificate names only the tenant's old address (Go's crypto/x509).
    untrusted = ("Unable to connect to the server: tls: failed to verify certificate: x509: certificate is valid "
                 "for 172.30.255.20, 10.96.0.1, not 172.30.255.2")
    fakes.on("kubectl", SUPER_ADMIN_CONF, super_admin_conf_at("172.30.255.2"))
    fakes.on("kubectl", r"get secret", b64(kubeconfig_at("172.30.255.2")))
    fakes.on("kubectl", SERVICE_ADDRESSES, "172.30.255.2")
    fakes.on("kubectl", SERVER_OF_ADMIN_CONF, "https://172.30.255.2:6443")
    fakes.on("kubectl", r"auth can-i", reply(exit=1, stderr=untrusted + "\n"))

    result = pinned_run(fakes, AUTH_TIMEOUT="0")

    assert result.returncode != 0
    assert "still presents a certificate admin.conf does not trust after 0s" in result.stderr
    assert "x509: certificate is valid for 172.30.255.20" in result.stderr
    assert "unreachable" not in result.stderr


def test_tenant_kubeconfig_waits_until_kamaji_issues_admin_conf_for_the_pinned_address(fakes):
    fakes.on("kubectl", SUPER_ADMIN_CONF, super_admin_conf_at("172.30.255.2"))
    fakes.on("kubectl", r"get secret", b64(kubeconfig_at("172.30.255.20")), b64(kubeconfig_at("172.30.255.2")))
    fakes.on("kubectl", SERVICE_ADDRESSES, "172.30.255.2")
    fakes.on("kubectl", SERVER_OF_ADMIN_CONF, "https://172.30.255.20:6443", "https://172.30.255.2:6443")
    fakes.on("kubectl", r"auth can-i", "yes\n")

    result = pinned_run(fakes)

    assert result.returncode == 0, result.stderr
    assert result.stdout == kubeconfig_at("172.30.255.2")
    assert "admin kubeconfig for 172.30.255.2 (it names 172.30.255.20:6443)" in result.stderr
    views = fakes.calls("kubectl", "config view")
    assert [call["kubeconfig"]["content"] for call in views] == [kubeconfig_at("172.30.255.20").rstrip("\n"),
                                                                  kubeconfig_at("172.30.255.2").rstrip("\n")]
    # One scratch file for every poll: the admin credentials are written to one place.
    assert len({call["kubeconfig"]["path"] for call in views}) == 1


def test_tenant_kubeconfig_waits_until_super_admin_conf_names_the_pinned_address_too(fakes):
    # admin.conf moved first; Kamaji would write cluster-info from super-admin.conf, which still names the
    # old address, so workers would be sent there (clastix/kamaji internal/kubeadm/bootstraptoken.go@26.8.2-edge).
    fakes.on("kubectl", SUPER_ADMIN_CONF, super_admin_conf_at("172.30.255.20"), super_admin_conf_at("172.30.255.20"),
             super_admin_conf_at("172.30.255.2"))
    fakes.on("kubectl", r"get secret", b64(kubeconfig_at("172.30.255.2")))
    fakes.on("kubectl", SERVICE_ADDRESSES, "172.30.255.2")
    fakes.on("kubectl", SERVER_OF_ADMIN_CONF, "https://172.30.255.2:6443")
    fakes.on("kubectl", r"auth can-i", "yes\n")

    result = pinned_run(fakes)

    assert result.returncode == 0, result.stderr
    assert result.stdout == kubeconfig_at("172.30.255.2")
    assert "super-admin kubeconfig for 172.30.255.2, from which it writes the cluster-info workers join through " \
        "(it names 172.30.255.20:6443)" in result.stderr
    assert len(fakes.calls("kubectl", "super-admin")) == 3
    auth = fakes.calls("kubectl", "auth can-i")
    assert len(auth) == 1 and fakes.calls()[-1] == auth[0], "authorised only once both name the address"
    # Read for its server only: the system:masters credential reaches no file, no output, no log.
    assert SUPER_ADMIN_KEY_MARKER not in result.stdout + result.stderr
    assert all(SUPER_ADMIN_KEY_MARKER not in (call["kubeconfig"] or {}).get("content", "")
               and SUPER_ADMIN_KEY_MARKER not in json.dumps(call["files"]) for call in fakes.calls())


@pytest.mark.parametrize(("super_admin", "said"), [(super_admin_conf_at("172.30.255.20"), "172.30.255.20:6443"),
                                                   (reply(exit=1, stderr="NotFound\n"), "no server")])
def test_tenant_kubeconfig_says_when_kamaji_never_issues_super_admin_conf_for_the_address(fakes, super_admin, said):
    fakes.on("kubectl", SUPER_ADMIN_CONF, super_admin)
    fakes.on("kubectl", r"get secret", b64(kubeconfig_at("172.30.255.2")))
    fakes.on("kubectl", SERVICE_ADDRESSES, "172.30.255.2")
    fakes.on("kubectl", SERVER_OF_ADMIN_CONF, "https://172.30.255.2:6443")

    result = pinned_run(fakes, SECRET_TIMEOUT="0")

    assert result.returncode != 0 and result.stdout == ""
    assert "Kamaji did not issue tenant tenant-a's super-admin kubeconfig (key super-admin.conf of Secret " \
        f"tenants/tenant-a-admin-kubeconfig) for 172.30.255.2 within 0s (it names {said});" in result.stderr
    assert SUPER_ADMIN_KEY_MARKER not in result.stderr and ADMIN_KEY_MARKER not in result.stderr
    assert not fakes.calls("kubectl", "auth can-i")


@pytest.mark.parametrize(("addresses", "said"), [("172.30.255.20", "(it has 172.30.255.20)"),
                                                 ("", "(it has no address)")])
def test_tenant_kubeconfig_names_what_metallb_gave_when_the_pinned_address_never_comes(fakes, addresses, said):
    fakes.on("kubectl", r"get secret", b64(kubeconfig_at("172.30.255.20")))
    fakes.on("kubectl", SERVICE_ADDRESSES, addresses)

    result = pinned_run(fakes, SECRET_TIMEOUT="0")

    assert result.returncode != 0
    assert result.stdout == ""
    assert "MetalLB did not give tenant tenant-a's Service 172.30.255.2 within 0s " + said in result.stderr
    assert "kubectl -n tenants describe service tenant-a" in result.stderr
    assert "docs/architecture.md" in result.stderr
    assert ADMIN_KEY_MARKER not in result.stderr
    assert not fakes.calls("kubectl", "config view") and not fakes.calls("kubectl", "auth can-i")


def test_tenant_kubeconfig_says_when_kamaji_never_issues_admin_conf_for_the_address(fakes):
    fakes.on("kubectl", r"get secret", b64(kubeconfig_at("172.30.255.20")))
    fakes.on("kubectl", SERVICE_ADDRESSES, "172.30.255.2")
    fakes.on("kubectl", SERVER_OF_ADMIN_CONF, "https://172.30.255.20:6443")

    result = pinned_run(fakes, SECRET_TIMEOUT="0")

    assert result.returncode != 0
    assert "Kamaji did not issue tenant tenant-a's admin kubeconfig for 172.30.255.2 within 0s (it names " \
        "172.30.255.20:6443)" in result.stderr
    assert ADMIN_KEY_MARKER not in result.stderr
    assert not fakes.calls("kubectl", "auth can-i")


def test_tenant_kubeconfig_with_a_pinned_address_still_waits_for_the_secret_first(fakes):
    fakes.on("kubectl", r"get secret", reply(exit=1, stderr="NotFound\n"))

    result = pinned_run(fakes, SECRET_TIMEOUT="0")

    assert result.returncode != 0
    assert "waiting for Secret tenants/tenant-a-admin-kubeconfig with key admin.conf" in result.stderr
    assert not fakes.calls("kubectl", "get service")


def test_tenant_kubeconfig_without_a_pinned_address_takes_the_one_kamaji_wrote(fakes):
    fakes.on("kubectl", r"get secret", b64(kubeconfig_at("172.30.255.20")))
    fakes.on("kubectl", r"auth can-i", "yes\n")

    result = fakes.run("tenant-kubeconfig.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG, TENANT="tenant-a",
                       NAMESPACE="tenants", API_ADDRESS="")

    assert result.returncode == 0, result.stderr
    assert result.stdout == kubeconfig_at("172.30.255.20")
    assert not fakes.calls("kubectl", "config view") and not fakes.calls("kubectl", "get service")


# --- join-worker / leave-worker ---------------------------------------------------------------------


def joinable_worker(fakes: Fakes, ca_pem: str, *join_replies: dict) -> Fakes:
    node_joined(tenant_api(node_booted(fakes), ca_pem), joined=False)
    fakes.on("kubectl", r"create -f -", "secret/bootstrap-token created\n")
    fakes.on("docker", r"(?s)^exec w1 sh -c .*kubeadm reset --force", "")  # lib.sh reset_node
    return fakes.on("docker", r"^exec -i w1 sh -c", *(join_replies or (reply(),)))


def issued_tokens(fakes: Fakes) -> list[tuple[str, str]]:
    """Each bootstrap token the join created, in order: (id, secret)."""
    return [(re.search(r'token-id: "([a-z0-9]{6})"', create["stdin"]).group(1),
             re.search(r'token-secret: "([a-z0-9]{16})"', create["stdin"]).group(1))
            for create in fakes.calls("kubectl", "create -f -")]


def issued_token(fakes: Fakes) -> tuple[str, str]:
    (token,) = issued_tokens(fakes)
    return token


def token_deletion(token_id: str) -> str:
    return f"-n kube-system delete secret bootstrap-token-{token_id} --ignore-not-found"


def test_join_worker_has_a_cluster_info_that_names_another_address_written_again_before_joining(fakes, tenant_ca):
    # The tenant moved to ENDPOINT (172.18.255.200) from 172.18.255.20, which its prefix would match.
    fakes.on("kubectl", CLUSTER_INFO, cluster_info_at("172.18.255.20:6443"), reply(exit=1, stderr="NotFound\n"),
             cluster_info_at(ENDPOINT))
    fakes.on("kubectl", r"-n kube-public delete configmap cluster-info --ignore-not-found",
             'configmap "cluster-info" deleted\n')
    joinable_worker(fakes, tenant_ca)

    result = fakes.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE="w1")

    assert result.returncode == 0, result.stderr
    assert "cluster-info names 172.18.255.20:6443, not 172.18.255.200:6443" in result.stderr
    calls = [" ".join(call["argv"]) for call in fakes.calls()]
    deleted = next(i for i, call in enumerate(calls) if "delete configmap cluster-info" in call)
    joined = next(i for i, call in enumerate(calls) if call.startswith("exec -i w1 sh -c"))
    assert deleted < joined
    assert len(fakes.calls("kubectl", "get configmap cluster-info")) == 3


def test_join_worker_deletes_cluster_info_again_while_kamaji_writes_the_old_address_back(fakes, tenant_ca):
    # Kamaji re-creates a deleted cluster-info from super-admin.conf, which it issues after admin.conf
    # (clastix/kamaji controllers/resources.go, internal/utilities/tenant_client.go @26.8.2-edge), and then
    # leaves it as it wrote it: what the API answers changes only with each delete.
    fakes.on("kubectl", CLUSTER_INFO, cluster_info_at("172.18.255.20:6443"), cluster_info_at("172.18.255.20:6443"),
             cluster_info_at(ENDPOINT), steps_on="delete configmap cluster-info")
    fakes.on("kubectl", r"-n kube-public delete configmap cluster-info --ignore-not-found",
             'configmap "cluster-info" deleted\n')
    joinable_worker(fakes, tenant_ca)

    result = fakes.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE="w1")

    assert result.returncode == 0, result.stderr
    assert len(fakes.calls("kubectl", "delete configmap cluster-info")) == 2
    assert "Kamaji wrote kube-public/cluster-info for 172.18.255.20:6443 again" in result.stderr
    calls = [" ".join(call["argv"]) for call in fakes.calls()]
    last_delete = max(i for i, call in enumerate(calls) if "delete configmap cluster-info" in call)
    joined = next(i for i, call in enumerate(calls) if call.startswith("exec -i w1 sh -c"))
    assert last_delete < joined
    (join,) = fakes.calls("docker", "^exec -i w1 sh -c")
    assert f'apiServerEndpoint: "{ENDPOINT}"' in join["stdin"]


@pytest.mark.parametrize("present", [cluster_info_at(ENDPOINT), reply(exit=1, stderr="NotFound\n")],
                         ids=["naming-the-endpoint", "not-there-yet"])
def test_join_worker_leaves_a_current_or_missing_cluster_info_to_kamaji(fakes, tenant_ca, present):
    fakes.on("kubectl", CLUSTER_INFO, present)
    joinable_worker(fakes, tenant_ca)

    result = fakes.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE="w1")

    assert result.returncode == 0, result.stderr
    assert not fakes.calls("kubectl", "delete configmap")


def test_join_worker_stops_before_joining_when_kamaji_does_not_write_cluster_info_again(fakes, tenant_ca):
    fakes.on("kubectl", CLUSTER_INFO, cluster_info_at("172.18.255.20:6443"))
    fakes.on("kubectl", r"delete configmap cluster-info", 'configmap "cluster-info" deleted\n')
    joinable_worker(fakes, tenant_ca)

    result = fakes.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE="w1", CLUSTER_INFO_TIMEOUT="0")

    assert result.returncode != 0
    assert "Kamaji did not write kube-public/cluster-info for 172.18.255.200:6443 within 0s (it names " \
        "172.18.255.20:6443)" in result.stderr
    assert not fakes.calls("docker", "^exec -i w1 sh -c")


def test_join_worker_stops_when_a_stale_cluster_info_cannot_be_deleted(fakes, tenant_ca):
    fakes.on("kubectl", CLUSTER_INFO, cluster_info_at("172.18.255.20:6443"))
    fakes.on("kubectl", r"delete configmap cluster-info", reply(exit=1, stderr="forbidden\n"))
    joinable_worker(fakes, tenant_ca)

    result = fakes.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE="w1")

    assert result.returncode != 0
    assert "could not delete kube-public/cluster-info, which names 172.18.255.20:6443" in result.stderr
    assert not fakes.calls("docker", "^exec -i w1 sh -c")


def test_join_worker_joins_with_a_token_passed_only_on_stdin(fakes, tenant_ca):
    joinable_worker(fakes, tenant_ca)

    result = fakes.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE="w1")

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"w1 joined {ENDPOINT}\n"
    token_id, token_secret = issued_token(fakes)
    (create,) = fakes.calls("kubectl", "create -f -")
    manifest = create["stdin"]
    assert "type: bootstrap.kubernetes.io/token" in manifest
    assert f"name: bootstrap-token-{token_id}\n  namespace: kube-system" in manifest
    assert 'usage-bootstrap-authentication: "true"' in manifest
    assert 'usage-bootstrap-signing: "true"' in manifest
    assert "auth-extra-groups: system:bootstrappers:kubeadm:default-node-token" in manifest
    (join,) = fakes.calls("docker", "^exec -i w1 sh -c")
    # It outlives the attempt (cut off inside the node after the seconds it is given) and little more: whoever
    # reads it could join a machine of their own.
    expiration = datetime.strptime(re.search(r'expiration: "(.+)"', manifest).group(1), "%Y-%m-%dT%H:%M:%SZ")
    attempt = timedelta(seconds=int(join["argv"][8]))
    assert attempt < expiration.replace(tzinfo=UTC) - datetime.now(UTC) <= attempt + timedelta(minutes=2)
    config = join["stdin"]
    assert "kind: JoinConfiguration" in config
    assert f'apiServerEndpoint: "{ENDPOINT}"' in config
    assert f'token: "{token_id}.{token_secret}"' in config
    assert f'caCertHashes: ["sha256:{spki_sha256(tenant_ca)}"]' in config
    assert 'name: "w1"' in config
    assert "ignorePreflightErrors: [SystemVerification, Swap]" in config
    assert "kubeadm join --config" in join["argv"][5]

    # The secret half of the token appears in no command line, no output, and the admin credential stays home.
    for call in fakes.calls():
        assert token_secret not in " ".join(call["argv"])
    assert token_secret not in result.stderr + result.stdout
    for call in fakes.calls("docker"):
        assert ADMIN_KEY_MARKER not in call["stdin"] + " ".join(call["argv"])

    # Order: boot seen before any exec, br_netfilter before the join, token deleted right after it.
    calls = [" ".join(c["argv"]) for c in fakes.calls()]
    first_exec = next(i for i, call in enumerate(calls) if call.startswith("exec "))
    assert any(call.startswith("logs ") for call in calls[:first_exec])
    join_index = next(i for i, call in enumerate(calls) if call.startswith("exec -i w1 sh -c"))
    assert calls.index("exec w1 modprobe br_netfilter") < join_index
    assert calls[join_index + 1].endswith(token_deletion(token_id))
    assert [call for call in calls if "delete secret" in call] == [calls[join_index + 1]], "deleted once"


def test_join_worker_deletes_the_token_even_when_join_fails(fakes, tenant_ca):
    joinable_worker(fakes, tenant_ca, reply(exit=1, stderr="error execution phase preflight\n"))

    result = fakes.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE="w1", JOIN_ATTEMPTS="2")

    assert result.returncode != 0
    assert "kubeadm join of w1 to 172.18.255.200:6443 failed 2 times" in result.stderr
    assert len(fakes.calls("docker", "^exec -i w1 sh -c")) == 2
    # Once before the first attempt, then after each failure.
    assert len(fakes.calls("docker", "kubeadm reset --force")) == 3
    # A token per attempt, each deleted as its attempt ends, before the reset and the next attempt.
    (first, _), (second, _) = issued_tokens(fakes)
    assert first != second
    calls = [" ".join(c["argv"]) for c in fakes.calls()]
    joins = [i for i, call in enumerate(calls) if call.startswith("exec -i w1 sh -c")]
    for join, token_id in zip(joins, (first, second), strict=True):
        assert calls[join + 1].endswith(token_deletion(token_id))
    assert [call for call in calls if "delete secret" in call] == [calls[join + 1] for join in joins]
    for delete in fakes.calls("kubectl", "delete secret"):
        assert delete["kubeconfig"]["content"] == TENANT_KUBECONFIG


def test_join_worker_resets_and_retries_while_the_tenant_finishes_bootstrap_rbac(fakes, tenant_ca):
    joinable_worker(fakes, tenant_ca, reply(exit=1, stderr="forbidden\n"), reply())

    result = fakes.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE="w1")

    assert result.returncode == 0, result.stderr
    assert len(fakes.calls("docker", "^exec -i w1 sh -c")) == 2
    assert len(fakes.calls("docker", "kubeadm reset")) == 2  # before the first attempt and after the refusal
    assert len(issued_tokens(fakes)) == len(fakes.calls("kubectl", "delete secret")) == 2, "one per attempt"


def test_join_worker_fails_naming_the_node_when_systemd_never_boots(fakes):
    node_booted(fakes, logs="INFO: ensuring we can execute mount/umount even with userns-remap\n")

    result = fakes.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE="w1", BOOT_TIMEOUT="0")

    assert result.returncode != 0
    assert "container w1: systemd did not reach the multi-user target within 0s" in result.stderr
    assert fakes.calls("docker", "^exec") == []
    (logs,) = fakes.calls("docker", "^logs")
    assert logs["argv"] == ["logs", "--since", "2026-01-01T10:00:00.123456789Z", "w1"]


def leave(fakes: Fakes, **env: str) -> subprocess.CompletedProcess[str]:
    return fakes.run("leave-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE="w1", **env)


def node_present(fakes: Fakes, present: bool = True) -> Fakes:
    return fakes.on("kubectl", r"get node w1 --ignore-not-found -o name$", "node/w1\n" if present else "")


def test_leave_worker_drains_the_node_by_eviction_then_deletes_it(fakes):
    node_present(fakes).on("kubectl", r" drain w1 ", "node/w1 drained\n").on("kubectl", r" delete node w1 ", "")

    result = leave(fakes)

    assert result.returncode == 0, result.stderr
    steps = [call["argv"] for call in fakes.calls("kubectl")]
    assert [argv[1] for argv in steps] == ["get", "drain", "delete"]
    drain = steps[1]
    # Evictions honour PodDisruptionBudgets; DaemonSet pods (kube-proxy, kindnet, HAMi's plugin) stay.
    assert "--disable-eviction" not in drain and "--ignore-daemonsets" in drain
    assert "--timeout=120s" in drain
    assert "--ignore-not-found" in steps[2]
    assert all("--request-timeout=10s" in argv for argv in steps)


def test_leave_worker_removes_a_node_that_did_not_drain_in_time(fakes):
    node_present(fakes).on("kubectl", r" delete node w1 ", "")
    fakes.on(
        "kubectl",
        r" drain w1 ",
        reply(exit=1, stderr='error: unable to drain node "w1" due to error: global timeout reached: 5s\n'),
    )

    result = leave(fakes, DRAIN_TIMEOUT="5")

    assert result.returncode == 0, result.stderr
    assert "--timeout=5s" in fakes.calls("kubectl", " drain ")[0]["argv"]
    assert "WARNING: node w1 did not drain within 5s" in result.stderr
    assert len(fakes.calls("kubectl", " delete node w1 ")) == 1


def test_leave_worker_leaves_a_node_that_is_already_gone_alone(fakes):
    node_present(fakes, present=False)

    result = leave(fakes)

    assert result.returncode == 0, result.stderr
    assert "already gone" in result.stderr
    assert [call["argv"][1] for call in fakes.calls("kubectl")] == ["get"]


def test_leave_worker_succeeds_when_the_tenant_api_is_unreachable(fakes):
    unreachable = reply(exit=1, stderr="Unable to connect to the server: dial tcp: i/o timeout\n")
    fakes.on("kubectl", r"get node w1", unreachable)

    result = leave(fakes)

    assert result.returncode == 0
    assert "WARNING: could not read node w1" in result.stderr
    assert fakes.calls("kubectl", " drain ") == []


def test_leave_worker_succeeds_when_the_node_cannot_be_deleted(fakes):
    node_present(fakes).on("kubectl", r" drain w1 ", "")
    fakes.on("kubectl", r" delete node w1 ", reply(exit=1, stderr="Error from server (Forbidden)\n"))

    result = leave(fakes)

    assert result.returncode == 0
    assert "WARNING: could not delete node w1" in result.stderr


# --- check-tenant-version ---------------------------------------------------------------------------

TCP_VERSIONS = r"get tenantcontrolplanes\.kamaji\.clastix\.io tenant-a "


def check_version(fakes: Fakes, running: str, wanted: str) -> subprocess.CompletedProcess[str]:
    """`running` is what kubectl prints: '<spec version> <status version>', or nothing for a new tenant."""
    fakes.on("kubectl", TCP_VERSIONS, running)
    return fakes.run(
        "check-tenant-version.sh",
        KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG,
        TENANT="tenant-a",
        NAMESPACE="tenants",
        KUBERNETES_VERSION=wanted,
    )


def test_version_check_reads_the_spec_and_the_running_version_of_its_own_tenant(fakes):
    result = check_version(fakes, "v1.35.2 v1.35.2", "v1.36.4")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "tenant-a: v1.35.2 -> v1.36.4\n"
    read, _state = fakes.calls("kubectl")  # then whether it sleeps, as the version changes
    assert read["argv"][read["argv"].index("-n") + 1] == "tenants"
    jsonpath = next(arg for arg in read["argv"] if arg.startswith("jsonpath="))
    assert "{.spec.kubernetes.version}" in jsonpath and "{.status.kubernetesResources.version.version}" in jsonpath
    assert read["kubeconfig"]["content"] == MANAGEMENT_KUBECONFIG


@pytest.mark.parametrize(
    ("running", "wanted"),
    [
        ("", "v1.36.4"),  # a new tenant
        ("v1.36.4 v1.36.4", "v1.36.4"),
        ("v1.36.1 v1.36.1", "v1.36.4"),
        ("v1.36.4 v1.36.4", "v1.36.1"),  # Kamaji compares minors: a patch may go back
        ("v1.36.0 ", "v1.37.0"),  # not Ready yet: only the spec is known
    ],
)
def test_version_check_allows_what_kamaji_allows(fakes, running, wanted):
    result = check_version(fakes, running, wanted)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("running", "wanted", "why"),
    [
        ("v1.36.4 v1.36.4", "v1.35.9", "v1.35.9 would be a downgrade"),
        ("v1.34.2 v1.34.2", "v1.36.4", "v1.36.4 would skip a minor"),
        # An earlier upgrade's spec is in place but not yet running: the running version counts too.
        ("v1.36.0 v1.35.4", "v1.37.0", "v1.37.0 would skip a minor"),
        ("v1.36.0 v1.35.4", "v1.35.9", "v1.35.9 would be a downgrade"),
    ],
)
def test_version_check_refuses_what_kamaji_would_refuse_naming_tenant_and_key(fakes, running, wanted, why):
    result = check_version(fakes, running, wanted)

    assert result.returncode == 1
    assert why in result.stderr
    assert "tenant tenant-a" in result.stderr and "kubernetesVersion" in result.stderr


def test_version_check_fails_when_the_management_cluster_cannot_say(fakes):
    fakes.on("kubectl", TCP_VERSIONS, reply(exit=1, stderr="Unable to connect to the server\n"))
    result = fakes.run(
        "check-tenant-version.sh",
        KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG,
        TENANT="tenant-a",
        NAMESPACE="tenants",
        KUBERNETES_VERSION="v1.36.4",
    )
    assert result.returncode == 1
    assert "cannot read its TenantControlPlane" in result.stderr


# --- install-cni ------------------------------------------------------------------------------------

# Shaped like kind's templated kindnet manifest (markers, placeholder, env list); not a copy of it.
KINDNET_TEMPLATE = """# kindnet for tests
# would you kindly template this file
# would you kindly patch this file
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kindnet
  namespace: kube-system
spec:
  template:
    spec:
      containers:
      - name: kindnet-cni
        image: example.invalid/kindnetd:test
        env:
        - name: HOST_IP
          valueFrom:
            fieldRef:
              fieldPath: status.hostIP
        - name: POD_SUBNET
          value: {{ .PodSubnet }}
        volumeMounts:
        - name: cni-cfg
          mountPath: /etc/cni/net.d
"""


def test_install_cni_fills_in_the_tenant_pod_cidr_and_api_endpoint(fakes):
    tenant_api(fakes).on("docker", r"^run ", KINDNET_TEMPLATE).on("kubectl", r" apply --server-side ", "")

    result = fakes.run(
        "install-cni.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, POD_CIDR="10.20.0.0/16", NODE_IMAGE="kindest/node:v1.36.4"
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    (read,) = fakes.calls("docker", "^run ")
    assert read["argv"][-2:] == ["kindest/node:v1.36.4", "/kind/manifests/default-cni.yaml"]
    assert read["argv"][read["argv"].index("--entrypoint") + 1] == "cat"
    (apply,) = fakes.calls("kubectl", "apply")
    assert "--server-side" in apply["argv"]
    assert apply["kubeconfig"]["content"] == TENANT_KUBECONFIG
    expected_env = f"""        - name: POD_SUBNET
          value: 10.20.0.0/16
        - name: CONTROL_PLANE_ENDPOINT
          value: "{ENDPOINT}"
        volumeMounts:
"""
    assert expected_env in apply["stdin"]
    assert "{{" not in apply["stdin"]


def test_install_cni_refuses_a_manifest_without_the_pod_subnet_placeholder(fakes):
    tenant_api(fakes).on("docker", r"^run ", KINDNET_TEMPLATE.replace("{{ .PodSubnet }}", "10.244.0.0/16"))

    result = fakes.run(
        "install-cni.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, POD_CIDR="10.20.0.0/16", NODE_IMAGE="kindest/node:v1.36.4"
    )

    assert result.returncode != 0
    assert "placeholder" in result.stderr
    assert fakes.calls("kubectl", "apply") == []


# --- register-gpus ----------------------------------------------------------------------------------

# Includes characters a shell or YAML round trip could mangle.
REGISTER_JSON = (
    '[{"id":"GPU-0000a1000","index":0,"count":10,"devmem":81920,"devcore":100,'
    '"type":"NVIDIA A100 80GB $HOME \\"x\\" =","numa":0,"mode":"hami-core","health":true}]'
)


def installed_files(fakes: Fakes) -> dict[str, tuple[str, str]]:
    """Path -> (mode, content) of everything register-gpus.sh wrote into the worker."""
    return {c["argv"][-2]: (c["argv"][-1], c["stdin"]) for c in fakes.calls("docker", "^exec -i w1 sh -c")}


def test_register_gpus_installs_a_timer_that_uses_the_kubelet_identity(fakes):
    node_joined(node_booted(fakes), joined=True)
    fakes.on("docker", r"^exec w1 systemctl start", reply(exit=1, stderr="Job failed\n"), reply())
    node_takes_files_and_units(fakes)

    result = fakes.run("register-gpus.sh", NODE="w1", GPU_REGISTER_JSON=REGISTER_JSON, GPU_CAPACITY="10")

    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    files = installed_files(fakes)
    assert files["/etc/hami-mock-gpu/node-nvidia-register.json"] == ("0644", REGISTER_JSON + "\n")
    assert files["/etc/hami-mock-gpu/gpu-capacity"] == ("0644", "10\n")
    mode, service = files["/etc/systemd/system/hami-mock-gpu-register.service"]
    assert "Type=oneshot" in service
    assert "ExecStart=/usr/local/bin/hami-mock-gpu-register" in service
    _, timer = files["/etc/systemd/system/hami-mock-gpu-register.timer"]
    assert "OnBootSec=" in timer
    assert "OnUnitActiveSec=20s" in timer
    assert "WantedBy=timers.target" in timer
    mode, script = files["/usr/local/bin/hami-mock-gpu-register"]
    assert mode == "0755"
    assert "--kubeconfig=/etc/kubernetes/kubelet.conf" in script
    assert "--subresource=status" in script
    assert all("node-handshake" not in content for _, content in files.values())

    systemctl = [" ".join(c["argv"][2:]) for c in fakes.calls("docker", "^exec w1 systemctl")]
    assert systemctl == [
        "systemctl daemon-reload",
        "systemctl enable --now hami-mock-gpu-register.timer",
        "systemctl start hami-mock-gpu-register.service",
        "systemctl start hami-mock-gpu-register.service",
    ]


def installed_register_script(fakes, tmp_path) -> Path:
    """register-gpus.sh run on a joined node, and the node script it installs, to run here with its config
    directory moved into tmp_path; the fake tools' log is cleared for what that script calls."""
    node_takes_files_and_units(node_joined(node_booted(fakes), joined=True))
    assert fakes.run("register-gpus.sh", NODE="w1", GPU_REGISTER_JSON=REGISTER_JSON, GPU_CAPACITY="10").returncode == 0
    files = installed_files(fakes)
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    for name in ("node-name", "node-nvidia-register.json", "gpu-capacity"):
        (config_dir / name).write_text(files[f"/etc/hami-mock-gpu/{name}"][1])
    node_script = tmp_path / "hami-mock-gpu-register"
    node_script.write_text(
        files["/usr/local/bin/hami-mock-gpu-register"][1].replace("/etc/hami-mock-gpu", str(config_dir))
    )
    fakes.log.unlink()
    return node_script


def test_registration_script_round_trips_the_annotation_and_patches_status_capacity(fakes, tmp_path):
    node_script = installed_register_script(fakes, tmp_path)
    # No rule for hostname: a machine's hostname need not be its node name, so the script must not ask.
    fakes.on("kubectl", r" annotate node w1 ", "").on("kubectl", r" patch node w1 ", "")

    result = fakes.run(node_script)

    assert result.returncode == 0, result.stderr
    annotate, patch = fakes.calls("kubectl")
    assert annotate["argv"][:2] == ["--kubeconfig=/etc/kubernetes/kubelet.conf", "--request-timeout=10s"]
    assert annotate["argv"][2:6] == ["annotate", "node", "w1", "--overwrite"]
    key, value = annotate["argv"][6].split("=", 1)
    assert (key, value) == ("hami.io/node-nvidia-register", REGISTER_JSON)
    assert json.loads(value)[0]["type"] == 'NVIDIA A100 80GB $HOME "x" ='
    assert patch["argv"][0] == "--kubeconfig=/etc/kubernetes/kubelet.conf"
    assert patch["argv"][2:8] == ["patch", "node", "w1", "--subresource=status", "--type=json", "-p"]
    assert json.loads(patch["argv"][8]) == [{"op": "add", "path": "/status/capacity/nvidia.com~1gpu", "value": "10"}]


def test_register_gpus_rejects_a_bad_capacity_before_touching_the_node(fakes):
    result = fakes.run("register-gpus.sh", NODE="w1", GPU_REGISTER_JSON=REGISTER_JSON, GPU_CAPACITY="ten")

    assert result.returncode != 0
    assert "GPU_CAPACITY must be a positive integer" in result.stderr
    assert fakes.calls() == []


def test_register_gpus_requires_a_joined_node(fakes):
    node_joined(node_booted(fakes), joined=False)

    result = fakes.run("register-gpus.sh", NODE="w1", GPU_REGISTER_JSON=REGISTER_JSON, GPU_CAPACITY="10")

    assert result.returncode != 0
    assert "w1 has not joined its tenant" in result.stderr
    assert fakes.calls("docker", "^exec -i") == []


# --- wait-gpus --------------------------------------------------------------------------------------


def hami_up(fakes: Fakes, device_plugin: str = "hami-mock-device-plugin") -> Fakes:
    """HAMi ready, with the chart's mock plugin or (hami-device-plugin) its NVIDIA one; w1 has 80 GiB of mock GPU."""
    return (
        fakes.on("kubectl", r"get deployment hami-scheduler", "True")
        .on("kubectl", r"get endpointslices -l kubernetes\.io/service-name=hami-scheduler", "true")
        .on("kubectl", rf"get daemonset {device_plugin} ", "2 2 2")
        .on("kubectl", r"get mutatingwebhookconfiguration hami-webhook", "Q0EtQlVORExF")
        .on("kubectl", r"get node w1 ", "81920")
    )


def test_wait_gpus_waits_until_every_node_advertises_its_gpu_memory(fakes):
    hami_up(fakes).on("kubectl", r"get node w2 ", "", "81920")

    result = fakes.run("wait-gpus.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODES="w1 w2", EXPECTED_GPUMEM="81920")

    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert len(fakes.calls("kubectl", "get node w2 ")) == 2
    assert "nvidia\\.com/gpumem" in " ".join(fakes.calls("kubectl", "get node w2 ")[0]["argv"])


def test_wait_gpus_times_out_naming_the_node_that_is_short(fakes):
    hami_up(fakes).on("kubectl", r"get node w2 ", "40960")

    result = fakes.run(
        "wait-gpus.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODES="w1 w2", EXPECTED_GPUMEM="81920", WAIT_TIMEOUT="0"
    )

    assert result.returncode != 0
    assert "node w2 to advertise nvidia.com/gpumem=81920 (now: 40960)" in result.stderr


def test_wait_gpus_without_gpu_nodes_still_waits_for_hami(fakes):
    hami_up(fakes)

    result = fakes.run("wait-gpus.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODES="", EXPECTED_GPUMEM="0")

    assert result.returncode == 0, result.stderr
    assert fakes.calls("kubectl", "get deployment hami-scheduler")
    assert fakes.calls("kubectl", "get node ") == []


REGISTERED = '[{"id":"GPU-0","count":4,"devmem":23034,"type":"NVIDIA-NVIDIA L4","health":true}]'


def test_wait_gpus_on_real_gpus_waits_for_the_nvidia_plugin_to_register_them(fakes):
    hami_up(fakes, "hami-device-plugin").on("kubectl", r"get node dgx-1 ", " ", f"0 {REGISTERED}", f"4 {REGISTERED}")

    result = fakes.run("wait-gpus.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODES="dgx-1", EXPECTED_GPUMEM="",
                       DEVICE_PLUGIN="hami-device-plugin")

    assert result.returncode == 0, result.stderr
    assert len(fakes.calls("kubectl", "get node dgx-1 ")) == 3
    assert fakes.calls("kubectl", "get daemonset hami-mock-device-plugin") == []


def test_wait_gpus_on_real_gpus_names_a_node_whose_gpus_never_show(fakes):
    hami_up(fakes, "hami-device-plugin").on("kubectl", r"get node dgx-1 ", " ")

    result = fakes.run("wait-gpus.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODES="dgx-1", EXPECTED_GPUMEM="",
                       DEVICE_PLUGIN="hami-device-plugin", WAIT_TIMEOUT="0")

    assert result.returncode != 0
    assert "node dgx-1 to advertise its GPUs" in result.stderr


def test_wait_gpus_waits_for_the_elected_scheduler(fakes):
    fakes.on("kubectl", r"get deployment hami-scheduler", "True")
    fakes.on("kubectl", r"get endpointslices", "false")

    result = fakes.run(
        "wait-gpus.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODES="w1", EXPECTED_GPUMEM="81920", WAIT_TIMEOUT="0"
    )

    assert result.returncode != 0
    assert "Service kube-system/hami-scheduler to get a ready endpoint" in result.stderr


@pytest.mark.parametrize(
    "rollout",
    ["0 0 0", "2 1 2", "2 2 1"],
    ids=["no-schedulable-node", "a-pod-not-ready", "a-pod-not-updated"],
)
def test_wait_gpus_waits_for_the_device_plugin_on_every_node(fakes, rollout):
    # desiredNumberScheduled numberReady updatedNumberScheduled, as the DaemonSet status reports them.
    hami_up(fakes.on("kubectl", r"get daemonset hami-mock-device-plugin", rollout))

    result = fakes.run(
        "wait-gpus.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODES="w1", EXPECTED_GPUMEM="81920", WAIT_TIMEOUT="0"
    )

    assert result.returncode != 0
    expected = f"hami-mock-device-plugin to be ready on all nodes (desired/ready/updated: {rollout})"
    assert expected in result.stderr


def test_wait_gpus_waits_for_the_webhook_ca_to_be_injected(fakes):
    # cert-manager's (or HAMi's patch job's) CA lands in caBundle after the webhook object exists.
    hami_up(fakes.on("kubectl", r"get mutatingwebhookconfiguration hami-webhook", ""))

    result = fakes.run(
        "wait-gpus.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODES="w1", EXPECTED_GPUMEM="81920", WAIT_TIMEOUT="0"
    )

    assert result.returncode != 0
    assert "MutatingWebhookConfiguration hami-webhook to get a caBundle" in result.stderr


# --- the fakes themselves ---------------------------------------------------------------------------


def test_a_call_the_fakes_do_not_model_fails_loudly(fakes, tmp_path):
    script = tmp_path / "unmodelled.sh"
    script.write_text("kubectl get pods\n")

    result = fakes.run(script)

    assert result.returncode == 97
    assert "fake kubectl: no rule models `kubectl get pods`" in result.stderr


def test_docker_exec_hands_stdin_only_with_dash_i(fakes, tmp_path):
    script = tmp_path / "stdin.sh"
    script.write_text("echo secret | docker exec n1 cat\necho secret | docker exec -i n1 cat\n")
    fakes.on("docker", r"^exec ", "")

    assert fakes.run(script).returncode == 0
    assert [call["stdin"] for call in fakes.calls("docker")] == ["", "secret\n"]


# --- conventions ------------------------------------------------------------------------------------

# Runs inside a container of the node image, read from stdin, where lib.sh is not (network-filter.sh).
IN_CONTAINER = ("network-filter-rules.sh",)
ENTRY_SCRIPTS = sorted(p for p in SCRIPTS.glob("*.sh") if p.name != "lib.sh" and p.name not in IN_CONTAINER)


@pytest.mark.parametrize("script", ENTRY_SCRIPTS, ids=lambda p: p.name)
def test_scripts_follow_the_conventions(script):
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in text
    assert 'source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"' in text
    assert "# env:" in text and "# stdout:" in text
    assert not re.search(r"set -[a-z]*x|set -o xtrace", text)


# Neither takes any input: kind-subnet.sh reads Docker, grafana-password.sh only makes a password,
# lab-identity.sh only makes an identity.
NO_INPUT = ("kind-subnet.sh", "grafana-password.sh", "lab-identity.sh")


@pytest.mark.parametrize("script", [p for p in ENTRY_SCRIPTS if p.name not in NO_INPUT], ids=lambda p: p.name)
def test_scripts_fail_clearly_without_their_environment(fakes, script):
    result = fakes.run(script.name)
    assert result.returncode != 0
    assert "environment variable" in result.stderr and "is required" in result.stderr
    assert fakes.calls() == []


def test_the_lab_identity_is_128_random_bits_new_on_every_run(fakes):
    made = [fakes.run("lab-identity.sh") for _ in range(2)]

    assert [result.returncode for result in made] == [0, 0]
    assert all(re.fullmatch(r"[0-9a-f]{32}\n", result.stdout) for result in made)
    assert made[0].stdout != made[1].stdout


# `make lint` runs shellcheck (requirements.txt installs it; CI runs `make venv lint test`, which
# tests/test_make_and_workflows.py checks), so running it again here only repeated those 20 s. What a test adds is
# that lint leaves no script out (lib.sh among them: shellcheck follows `source` only into files it is given) and
# fails on a finding.
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("finding", [False, True], ids=["clean", "a-finding"])
def test_make_lint_shellchecks_every_script_and_fails_on_a_finding(tmp_path, finding):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".requirements-installed").touch()  # newer than requirements.txt: make builds no venv
    (venv / "bin" / "ruff").write_text("#!/bin/sh\n")
    shellcheck = tmp_path / "shellcheck"
    shellcheck.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/checked"\nexit {int(finding)}\n')
    for tool in (venv / "bin" / "ruff", shellcheck):
        tool.chmod(0o755)

    lint = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "lint", f"VENV={venv}",
                           f"SHELLCHECK={shellcheck}", "ACTIONLINT="], capture_output=True, text=True, check=False)

    assert (lint.returncode != 0) == finding, lint.stdout + lint.stderr
    checked = (tmp_path / "checked").read_text().splitlines()
    assert sorted(checked) == sorted(str(path.relative_to(ROOT)) for path in SCRIPTS.glob("*.sh"))


def test_release_object_adds_helm_ownership_to_existing_annotations():
    manifest = "---\nkind: DataStore\nmetadata:\n  name: default\n  annotations:\n    team: lab\nspec: {}\n"
    record = json.dumps({"name": "kamaji", "namespace": "kamaji-system", "manifest": manifest})

    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "helm_release_object.py"), "DataStore", "default"],
        input=record,
        capture_output=True,
        text=True,
        check=True,
    )

    assert yaml.safe_load(result.stdout)["metadata"] == {
        "name": "default",
        "annotations": {
            "team": "lab",
            "meta.helm.sh/release-name": "kamaji",
            "meta.helm.sh/release-namespace": "kamaji-system",
        },
    }
