#!/usr/bin/env python3
"""Check that this host can run kamaji-hami-lab, before `pulumi up` finds out the hard way.

Prints every problem with the command that fixes it. Exit status 1 if any
error was found; warnings alone exit 0. With --tools, only checks that the
named programs are on PATH and new enough, and prints nothing if they are. With
--stack, reads that stack's config and checks only what its mode uses: a lab on
an existing management cluster needs no kind, and Docker only for container
workers (dockerNetwork). Needs only the Python standard library, and runs on
Pythons older than the 3.11 it asks for.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# The tool versions the lab needs; README.md ("Required tools") and the workflows state the
# same (tests/test_preflight_versions.py keeps them equal).
MIN_VERSIONS = {
    # kind v0.33.0's release notes list kindest/node:v1.36.4, and a node image is built for one kind release.
    "kind": (0, 33, 0),
    # The pinned Pulumi SDK in requirements.txt; the workflows install this CLI.
    "pulumi": (3, 272, 0),
    # Kubernetes' version skew policy: kubectl within one minor of the v1.36 API servers.
    "kubectl": (1, 35, 0),
}
# The newest minor a tool may be (kubectl: one above the API servers); a newer one is a warning.
NEWEST_MINORS = {"kubectl": (1, 37)}
VERSION_COMMANDS = {
    "kind": ("kind", "version"),
    "pulumi": ("pulumi", "version"),
    # Prints "Client Version: v1.36.3" first (kubernetes/kubectl pkg/cmd/version/version.go@v0.36.3).
    "kubectl": ("kubectl", "version", "--client"),
}
_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
INSTALL_HINTS = {
    "docker": "Docker Engine: https://docs.docker.com/engine/install/",
    "kind": "kind v0.33.0 or newer: https://kind.sigs.k8s.io/docs/user/quick-start/#installation",
    "kubectl": "kubectl v1.35 to v1.37: https://kubernetes.io/docs/tasks/tools/#kubectl",
    "pulumi": "the Pulumi CLI: curl -fsSL https://get.pulumi.com | sh (https://www.pulumi.com/docs/install/)",
    # scripts/join-worker.sh hashes the tenant CA on the host for `kubeadm join`.
    "openssl": "OpenSSL's command-line tool (e.g. sudo apt-get install openssl)",
    # scripts/lib.sh reaches machine workers with it.
    "ssh": "the OpenSSH client (e.g. sudo apt-get install openssh-client)",
}
# What only the kind lab, container workers and machine workers use.
KIND_TOOLS = ("kind",)
DOCKER_TOOLS = ("docker",)
MACHINE_TOOLS = ("ssh",)
PROJECT = "kamaji-hami-lab"
MIN_PYTHON = (3, 11)
INOTIFY_MINIMUMS = {"fs.inotify.max_user_watches": 524288, "fs.inotify.max_user_instances": 512}
SYSCTL_FILE = "/etc/sysctl.d/99-kamaji-hami-lab.conf"


# What the lab is estimated to use on its Docker host, in GiB: derived from what each part runs, not measured.
# The program sets no memory requests and Kamaji's and HAMi's pods keep their charts' (none), so nothing
# but the host's memory limits how many tenants fit. docs/architecture.md ("Sizing") derives its table
# from these figures (a test keeps them equal).
SIZING_GIB = {
    # The kind node: its own control plane, cert-manager, MetalLB, Kamaji and the etcd of every tenant.
    "management_memory": 3.0,
    # Per tenant control-plane replica on the management cluster: kube-apiserver, controller-manager,
    # scheduler and konnectivity-server in one pod.
    "control_plane_memory": 0.5,
    # Per container worker: containerd, kubelet, kube-proxy, kindnet, the Konnectivity agent, HAMi's pods.
    "worker_memory": 0.5,
    # The kindest/node image in Docker's store, once.
    "node_image_disk": 1.0,
    # The kind node's /var volume: the node image's preloaded images, then the platform's charts' images.
    "management_var_disk": 1.5,
    # Per container worker, its own /var volume: a copy of the node image's image store, then HAMi's,
    # kube-scheduler's and Konnectivity's images pulled again.
    "worker_var_disk": 2.0,
    # With observability on, in the kind node: Prometheus' and Grafana's memory limits (512 + 512 MiB,
    # components/observability_values.py) and Prometheus' volume (2 GiB, on the node's disk).
    "observability_memory": 1.0,
    "observability_disk": 2.0,
    # Per tenant control-plane replica, its share of the tenant's audit log on the kind node's /var: at most
    # (replicas + 2) pods' files of 3 x 10 MiB each (components/audit.py, log_bytes), under 128 MiB per replica
    # (a figure a float holds exactly, so sums of it stay exact).
    "audit_log_disk": 0.125,
    # Per tenant with `dataStore: dedicated`, in the kind node: its own one-member etcd, holding one tenant's keys
    # (small, but etcd maps its whole database), and its volume: a 2 GiB backend quota, its write-ahead log (5
    # files of 64 MiB kept) and snapshots (components/dedicated_datastore.py).
    "dedicated_datastore_memory": 0.25,
    "dedicated_datastore_disk": 2.5,
}
GIB = 1 << 30


@dataclass(frozen=True)
class Finding:
    severity: str  # "error" or "warning"
    problem: str
    fix: str = ""


def _run(argv: Sequence[str]) -> tuple[int, str]:
    """(exit status, stdout) on success, (exit status, the complaint) on failure."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return 1, str(error)
    if done.returncode == 0:
        return 0, done.stdout.strip()  # docker info may print warnings on stderr even then
    return done.returncode, done.stderr.strip() or done.stdout.strip()


def _free_bytes(path: str) -> int | None:
    try:
        stats = os.statvfs(path)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


@dataclass(frozen=True)
class Host:
    """What the checks read; tests point root at a directory of recorded files."""

    root: Path = Path("/")
    which: Callable[[str], str | None] = shutil.which
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    run: Callable[[Sequence[str]], tuple[int, str]] = _run  # (exit status, output or complaint)
    kernel_release: str = field(default_factory=platform.release)  # uname -r
    free_bytes: Callable[[str], int | None] = lambda path: _free_bytes(path)  # bytes free under a directory
    python: tuple[int, int] = field(default_factory=lambda: tuple(sys.version_info[:2]))

    def read(self, path: str) -> str | None:
        try:
            return (self.root / path.lstrip("/")).read_text()
        except OSError:
            return None

    def exists(self, path: str) -> bool:
        return (self.root / path.lstrip("/")).exists()

    def number(self, path: str) -> int | None:
        text = (self.read(path) or "").strip()
        return int(text) if text.isdigit() else None

    def sysctl(self, key: str) -> int | None:
        return self.number("/proc/sys/" + key.replace(".", "/"))


def check_tools(host: Host, tools: Sequence[str] = tuple(INSTALL_HINTS)) -> list[Finding]:
    return [
        Finding("error", f"{tool} is not on PATH", f"install {INSTALL_HINTS[tool]}")
        for tool in tools
        if host.which(tool) is None
    ]


def version_text(version: Sequence[int]) -> str:
    return "v" + ".".join(map(str, version))


def wanted_version(tool: str) -> str:
    """The versions of `tool` the lab works with, as the README's tools table states them."""
    need, newest = MIN_VERSIONS[tool], NEWEST_MINORS.get(tool)
    return f"{version_text(need[:2])} to {version_text(newest)}" if newest else f"{version_text(need)} or newer"


def check_versions(host: Host, tools: Sequence[str] = tuple(MIN_VERSIONS)) -> list[Finding]:
    """kind, kubectl and the Pulumi CLI must be new enough, kubectl not too new; a missing one is reported
    by check_tools."""
    findings = []
    for tool in tools:
        if tool not in MIN_VERSIONS or host.which(tool) is None:
            continue
        command, install = VERSION_COMMANDS[tool], f"install {INSTALL_HINTS[tool]}"
        status, output = host.run(list(command))
        match = _VERSION.search(output) if status == 0 else None
        if match is None:
            said = output.splitlines()[0] if output else f"exit status {status}"
            problem = f"cannot tell which {tool} this is (`{' '.join(command)}` said: {said})"
            findings.append(Finding("warning", f"{problem}; the lab needs {wanted_version(tool)}", install))
            continue
        have, newest = tuple(map(int, match.groups())), NEWEST_MINORS.get(tool)
        if have < MIN_VERSIONS[tool]:
            problem = f"{tool} is {version_text(have)}; the lab needs {wanted_version(tool)}"
            findings.append(Finding("error", problem, install))
        elif newest and have[:2] > newest:
            # Kubernetes' skew policy: newer still mostly works, unlike an older kubectl missing APIs.
            problem = (f"{tool} is {version_text(have)}, more than one minor newer than the lab's API servers "
                       f"(the lab needs {wanted_version(tool)}); most commands still work")
            findings.append(Finding("warning", problem, install))
    return findings


def check_python(host: Host) -> list[Finding]:
    if host.python >= MIN_PYTHON:
        return []
    have, need = ".".join(map(str, host.python)), ".".join(map(str, MIN_PYTHON))
    return [
        Finding(
            "error",
            f"this is Python {have}; the lab's venv (Pulumi program, validation) needs Python >= {need}",
            f"install Python {need} or newer and use it: make PYTHON=python{need} up "
            "(delete .venv first if an older Python created it)",
        )
    ]


def check_docker_daemon(host: Host) -> list[Finding]:
    if host.which("docker") is None:
        return []  # already reported as a missing tool
    status, message = host.run(["docker", "info", "--format", "{{.OperatingSystem}}"])
    if status != 0:
        return [
            Finding(
                "error",
                f"the Docker daemon is not reachable: {message.splitlines()[0] if message else 'no answer'}",
                "start it (sudo systemctl start docker) and let your user use it "
                "(sudo usermod -aG docker $USER, then log in again)",
            )
        ]
    if "Docker Desktop" in message:
        return [
            Finding(
                "error",
                "docker talks to Docker Desktop, which runs containers in a VM: the tenant API servers' "
                f"MetalLB addresses on the lab's docker network {LAB_NETWORK} would be unreachable from this host",
                "use Docker Engine on Linux (https://docs.docker.com/engine/install/); if it is installed "
                "next to Docker Desktop, switch to it with: docker context use default",
            )
        ]
    return []


# Storage under which kind mounts /dev/mapper into its nodes (kubernetes-sigs/kind
# pkg/cluster/internal/providers/docker/util.go, mountDevMapper); the lab's workers do not.
DEV_MAPPER_DRIVERS = ("btrfs", "zfs", "devicemapper")
DEV_MAPPER_BACKING_FILESYSTEMS = ("btrfs", "zfs", "xfs")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")


def docker_endpoint(host: Host) -> str:
    """The daemon address the docker CLI uses: DOCKER_HOST, else its current context's."""
    if host.env.get("DOCKER_HOST"):
        return host.env["DOCKER_HOST"]
    status, endpoint = host.run(["docker", "context", "inspect", "--format", "{{.Endpoints.docker.Host}}"])
    return endpoint if status == 0 else ""


def _is_remote(endpoint: str) -> bool:
    scheme, separator, rest = endpoint.partition("://")
    # Without a scheme, docker reads it as tcp:// (docker/cli opts/hosts.go@v29.7.2, parseDockerDaemonHost).
    if endpoint and not separator:
        scheme, rest = "tcp", endpoint
    if scheme in ("", "unix"):
        return False
    address = rest.rsplit("@", 1)[-1]  # ssh://user@host
    return address.rsplit(":", 1)[0] not in LOCAL_HOSTS and address not in LOCAL_HOSTS


def docker_info(host: Host) -> tuple[dict | None, list[Finding]]:
    """`docker info` as JSON, which the Docker host checks need, or None: with no docker or no daemon
    (check_tools and check_docker_daemon report those), or an answer that is no JSON (a warning)."""
    if host.which("docker") is None:
        return None, []
    status, answer = host.run(["docker", "info", "--format", "{{json .}}"])
    if status != 0:
        return None, []
    try:
        return json.loads(answer), []
    except json.JSONDecodeError:
        return None, [Finding("warning", "could not read `docker info`; the Docker host checks were skipped")]


def check_remote_docker(host: Host) -> list[Finding]:
    """The lab network and its MetalLB addresses are on the daemon's machine, reachable from that one only."""
    endpoint = docker_endpoint(host)
    if not _is_remote(endpoint):
        return []
    return [
        Finding(
            "error",
            f"docker talks to a remote daemon ({endpoint}): the lab's docker network {LAB_NETWORK} and its "
            "MetalLB addresses (the tenant API servers) would be on that machine, out of this host's reach",
            "run the lab on the Docker host itself: unset DOCKER_HOST, or docker context use default",
        )
    ]


def check_rootless_docker(info: dict) -> list[Finding]:
    """The MetalLB addresses live on the lab network's bridge inside the daemon's network namespace: the host
    reaches them only when the daemon runs as root (moby/moby#43625 for rootless)."""
    if not any("name=rootless" in option for option in info.get("SecurityOptions") or []):
        return []
    return [
        Finding(
            "error",
            "Docker runs rootless: its networks live in a user namespace, so the tenant API servers' "
            "MetalLB addresses are unreachable from the host (moby/moby#43625)",
            "use the root Docker daemon: docker context use default "
            "(or install Docker Engine: https://docs.docker.com/engine/install/)",
        )
    ]


def check_docker_storage(info: dict) -> list[Finding]:
    driver = str(info.get("Driver", "")).lower()
    backing = {key: value for key, value in info.get("DriverStatus") or [] if isinstance(key, str)}
    backing_fs = str(backing.get("Backing Filesystem", "")).lower()
    if driver not in DEV_MAPPER_DRIVERS and backing_fs not in DEV_MAPPER_BACKING_FILESYSTEMS:
        return []
    return [
        Finding(
            "error",
            f"Docker stores containers on {driver}{f' over {backing_fs}' if backing_fs else ''}; kind mounts "
            "/dev/mapper into nodes on such hosts so the kubelet finds its disk, and the lab's workers do not",
            "use a Docker host whose storage driver is overlay2 on ext4 (docker info -f '{{.Driver}}')",
        )
    ]


def check_proxies(host: Host) -> list[Finding]:
    proxies = sorted({name for name in PROXY_VARIABLES if host.env.get(name)} | _docker_client_proxies(host))
    if not proxies:
        return []
    return [
        Finding(
            "error",
            f"a proxy is configured ({', '.join(proxies)}); kind passes it into its nodes, "
            "the lab's workers get none and could not pull their images",
            "if this host reaches the registries directly, unset the proxy variables "
            "(and the proxies of ~/.docker/config.json) for make up",
        )
    ]


def _docker_client_proxies(host: Host) -> set[str]:
    """Proxies the docker CLI hands to containers (~/.docker/config.json "proxies"), which kind also reads."""
    directory = host.env.get("DOCKER_CONFIG") or f"{host.env.get('HOME', '')}/.docker"
    try:
        config = json.loads(host.read(f"{directory}/config.json") or "{}")
    except json.JSONDecodeError:
        return set()
    proxies = config.get("proxies", {}).get("default", {}) if isinstance(config, dict) else {}
    return {f"config.json {key}" for key in ("httpProxy", "httpsProxy") if proxies.get(key)}


def _sysctl_finding(key: str, have: int | None, need: int, why: str) -> list[Finding]:
    fix = f"sudo sysctl -w {key}={need}"
    if have is None:
        return [Finding("warning", f"cannot read {key}; {why} needs >= {need}", fix)]
    if have < need:
        return [Finding("error", f"{key} is {have}; {why} needs >= {need}", fix)]
    return []


def check_sysctls(host: Host) -> list[Finding]:
    findings = []
    for key, need in INOTIFY_MINIMUMS.items():
        findings += _sysctl_finding(key, host.sysctl(key), need, "running many kind node containers")
    return findings


BRIDGE_FILTERING = "net.bridge.bridge-nf-call-iptables"


def check_bridge_filtering(host: Host, mode: Mode) -> list[Finding]:
    """The lab's network filter sees traffic between two containers of its network only through br_netfilter
    (docs/architecture.md, "The network filter"). Not loaded yet is fine: the filter loads it, which turns it on."""
    if not mode.kind or host.sysctl(BRIDGE_FILTERING) != 0:
        return []
    return [Finding("error", f"{BRIDGE_FILTERING} is 0: traffic between containers on the lab's network bypasses "
                    "iptables, so the lab's network filter could not hold and `make up` stops before its workers",
                    f"sudo sysctl -w {BRIDGE_FILTERING}=1")]


def check_swap(host: Host) -> list[Finding]:
    swaps = (host.read("/proc/swaps") or "").splitlines()[1:]  # first line is the header
    if not swaps:
        return []
    return [
        Finding(
            "warning",
            f"swap is on ({len(swaps)} device(s)); fine for this lab, whose kubelets run with "
            "failSwapOn=false, but pods may be swapped out",
            "sudo swapoff -a",
        )
    ]


def check_kernel(host: Host) -> list[Finding]:
    findings = []
    modules = f"/lib/modules/{host.kernel_release}"
    if not host.exists(modules):
        findings.append(
            Finding(
                "error",
                f"{modules} is missing (the running kernel's modules); worker containers mount it to load "
                "br_netfilter and friends. After a kernel upgrade, a reboot usually fixes this",
                "reboot into the installed kernel, or install the running kernel's modules "
                "(e.g. sudo apt-get install linux-modules-$(uname -r))",
            )
        )
    if not host.exists("/sys/fs/cgroup/cgroup.controllers"):
        findings.append(
            Finding(
                "error",
                "the host uses cgroup v1; kubelets of Kubernetes 1.35 and later refuse to start on it "
                "(failCgroupV1 defaults to true)",
                "boot with cgroup v2 (kernel parameter systemd.unified_cgroup_hierarchy=1)",
            )
        )
    return findings


@dataclass(frozen=True)
class Mode:
    """What the stack runs on this host: the kind cluster, Docker for worker containers, SSH to machines."""

    kind: bool = True
    docker: bool = True
    machines: bool = False
    control_planes: int = 0  # tenant control-plane replicas, on the management cluster
    container_workers: int = 0  # kindest/node containers on this host's Docker
    kind_subnet: str = ""  # kindSubnet and metallbAddressRange as configured, checked against the lab's network
    address_range: str = ""
    observability: bool = False  # Prometheus and Grafana on the management cluster
    dedicated_data_stores: int = 0  # tenants with an etcd of their own, on the management cluster
    configured: bool = False  # read from the stack's config; else kindSubnet is not known

    def tools(self, tools: Sequence[str] = tuple(INSTALL_HINTS)) -> list[str]:
        unused = (
            (() if self.kind else KIND_TOOLS)
            + (() if self.docker else DOCKER_TOOLS)
            + (() if self.machines else MACHINE_TOOLS)
        )
        return [tool for tool in tools if tool not in unused]


def stack_mode(host: Host, stack: str, config_json: str | None = None) -> tuple[Mode, list[Finding]]:
    """The mode of `stack` from `pulumi config --json`: fully qualified keys, Pulumi.yaml defaults
    applied, and no secret's value without --show-secrets, so no passphrase is needed for them
    (pulumi/pulumi pkg/cmd/pulumi/config/config.go: listConfig, configValueJSON; read on master,
    not at the pinned CLI's tag). `config_json`: a file holding that answer instead (scripts/check_config.py
    writes it from the stack file, so `make up` checks the host before it creates or selects the stack)."""
    if config_json is not None:
        try:
            status, answer = 0, Path(config_json).read_text()
        except OSError as error:
            status, answer = 1, f"cannot read {config_json}: {error.strerror}"
    elif host.which("pulumi") is None:
        return Mode(), []  # reported as a missing tool
    else:
        status, answer = host.run(["pulumi", "config", "--json", "--stack", stack])
    try:
        config = json.loads(answer) if status == 0 else None
    except json.JSONDecodeError:
        config = None
    if not isinstance(config, dict):
        said = answer.splitlines()[0] if status != 0 and answer else "no JSON object"
        return Mode(), [
            Finding(
                "warning",
                f"cannot read the config of stack {stack} ({said}); checked this host for the kind lab",
                f"create the stack first (pulumi stack select --create {stack}), or ignore this for a kind lab",
            )
        ]

    def value(key: str) -> str:
        entry = config.get(f"{PROJECT}:{key}")
        return (entry.get("value") or "") if isinstance(entry, dict) else ""

    try:
        tenants = json.loads(value("tenants") or "[]")
    except json.JSONDecodeError:
        tenants = []  # the program itself reports it, naming the key
    tenants = [tenant for tenant in tenants if isinstance(tenant, dict)] if isinstance(tenants, list) else []
    machines = any(tenant.get("machines") for tenant in tenants)
    replicas = sum(_count(tenant.get("controlPlaneReplicas") or value("controlPlaneReplicas")) for tenant in tenants)
    workers = sum(_count(tenant.get("workers") or value("workersPerTenant")) for tenant in tenants
                  if not tenant.get("machines"))
    if value("managementCluster") != "existing":
        observed = value("observability").strip().lower() == "true"
        dedicated = sum(tenant.get("dataStore") == "dedicated" for tenant in tenants)
        return Mode(machines=machines, control_planes=replicas, container_workers=workers,
                    kind_subnet=value("kindSubnet"), address_range=value("metallbAddressRange"),
                    observability=observed, dedicated_data_stores=dedicated, configured=True), []
    docker = bool(value("dockerNetwork"))
    return Mode(kind=False, docker=docker, machines=machines, container_workers=workers), []


def _count(value: object) -> int:
    """A count as the stack holds it (text from the CLI, a number in the tenants' JSON); 1 if unreadable,
    as the program itself reports a bad one."""
    text = str(value).strip()
    return int(text) if text.isdigit() and int(text) > 0 else 1


def estimate(mode: Mode) -> tuple[float, list[str], float, list[str]]:
    """Memory and disk (GiB) the stack is estimated to use on this host, each with the terms it adds up."""
    gib, once = SIZING_GIB, int(mode.kind)
    memory = [("the management cluster", None, once, gib["management_memory"]),
              ("", "control-plane replica", mode.control_planes, gib["control_plane_memory"]),
              ("", "worker", mode.container_workers, gib["worker_memory"]),
              ("Prometheus and Grafana", None, once * mode.observability, gib["observability_memory"]),
              ("", "dedicated datastore", once * mode.dedicated_data_stores, gib["dedicated_datastore_memory"])]
    disk = [("the node image", None, 1, gib["node_image_disk"]),
            ("the management cluster's /var", None, once, gib["management_var_disk"]),
            ("", "control-plane replica's audit log", mode.control_planes, gib["audit_log_disk"]),
            ("", "worker's /var", mode.container_workers, gib["worker_var_disk"]),
            ("Prometheus' volume", None, once * mode.observability, gib["observability_disk"]),
            ("", "dedicated datastore's volume", once * mode.dedicated_data_stores, gib["dedicated_datastore_disk"])]

    def total(parts: list[tuple[str, str | None, int, float]]) -> tuple[float, list[str]]:
        counted = [part for part in parts if part[2]]
        terms = [f"{count} × {each:g} GiB per {per}" if per else f"{whole} {each:g} GiB"
                 for whole, per, count, each in counted]
        return sum(count * each for _, _, count, each in counted), terms

    return (*total(memory), *total(disk))


def check_capacity(host: Host, mode: Mode) -> list[Finding]:
    """Warns when the host has less memory available, or less disk free under Docker's data root, than the stack
    is estimated to use."""
    if not (mode.control_planes or mode.container_workers):
        return []  # no stack read: nothing to estimate
    memory, memory_terms, disk, disk_terms = estimate(mode)
    findings = []
    meminfo = re.search(r"^MemAvailable:\s+(\d+) kB", host.read("/proc/meminfo") or "", re.MULTILINE)
    if meminfo and int(meminfo.group(1)) * 1024 < memory * GIB:
        have = int(meminfo.group(1)) * 1024 / GIB
        findings.append(_capacity_finding("memory", memory, memory_terms, f"{have:.1f} GiB available",
                                          "free memory, or give the stack fewer tenants, workers or replicas"))
    status, answer = host.run(["docker", "info", "--format", "{{.DockerRootDir}}"])
    root = answer.strip() if status == 0 and answer.strip().startswith("/") else ""
    free = host.free_bytes(root) if root else None
    if free is not None and free < disk * GIB:
        findings.append(_capacity_finding("disk", disk, disk_terms, f"{free / GIB:.1f} GiB free under {root}",
                                          "free disk space there (docker system prune removes unused images), or "
                                          "give the stack fewer workers"))
    return findings


def _capacity_finding(what: str, need: float, terms: list[str], have: str, fix: str) -> Finding:
    return Finding(
        "warning",
        f"the stack is estimated to use about {need:g} GiB of {what} ({' + '.join(terms)}); this host has {have}. "
        "The figures are estimates, not measurements, and a lab that is already up is using part of it",
        fix,
    )


# The lab's docker network as scripts/kind-up.sh creates it, kept here because the preflight runs on the standard
# library: its name (components/kind_management_cluster.py KIND_NETWORK), its subnet when kindSubnet is empty
# (components/addresses.py DEFAULT_KIND_SUBNET) and the label that marks it.
LAB_NETWORK = "kamaji-hami-lab"
DEFAULT_KIND_SUBNET = ipaddress.IPv4Network("172.30.0.0/16")
LAYOUT_LABEL = "kamaji-hami-lab.io/layout"
# What the preflight suggests for kindSubnet when the planned one is taken, first fit: the top of Docker's default
# pools, which Docker hands out from 172.17 up (172.31 left out: the AWS default VPC's), then a corner of 10/8.
SPARE_SUBNETS = tuple(ipaddress.IPv4Network(f"172.{octet}.0.0/16") for octet in range(30, 19, -1)) + tuple(
    ipaddress.IPv4Network(f"10.{octet}.0.0/16") for octet in range(201, 211))


@dataclass(frozen=True)
class KindNetwork:
    subnet: ipaddress.IPv4Network
    ip_range: ipaddress.IPv4Network | None  # where Docker picks container addresses; None: anywhere in the subnet
    ours: bool  # created by kind-up.sh


def kind_network(host: Host) -> KindNetwork | None:
    """The lab's docker network's IPv4 layout, as kind-up.sh reads it; None until it exists."""
    status, answer = host.run(["docker", "network", "inspect", "--format",
                               f'{{{{index .Labels "{LAYOUT_LABEL}"}}}}|'
                               "{{range .IPAM.Config}}{{.Subnet}}={{.IPRange}} {{end}}", LAB_NETWORK])
    label, _, ipam = answer.strip().partition("|") if status == 0 else ("", "", "")
    # Docker 29 prints a network's empty --ip-range as "invalid Prefix", a netip.Prefix's zero value (moby/moby
    # api/types/network/ipam.go@docker-v29.7.2, IPAMConfig.IPRange): no range, as an empty one.
    for entry in ipam.replace("=invalid Prefix", "=").split():
        subnet, _, ip_range = entry.partition("=")
        try:
            return KindNetwork(ipaddress.IPv4Network(subnet, strict=True),
                               ipaddress.IPv4Network(ip_range, strict=True) if ip_range else None, bool(label))
        except ValueError:
            continue  # the network's IPv6 /64, or no subnet at all
    return None


def docker_subnets(host: Host) -> dict[str, list[ipaddress.IPv4Network]] | None:
    """Every docker network's name with its IPv4 subnets; None when Docker does not say."""
    status, ids = host.run(["docker", "network", "ls", "--quiet"])
    if status != 0:
        return None
    if not ids.split():
        return {}
    status, answer = host.run(["docker", "network", "inspect", "--format",
                               "{{.Name}}|{{range .IPAM.Config}}{{.Subnet}} {{end}}", *ids.split()])
    if status != 0:
        return None  # e.g. a network removed in between; kind-up.sh still names an overlap when it creates
    subnets = {}
    for line in answer.splitlines():
        name, _, listed = line.partition("|")
        subnets[name.strip()] = [network for text in listed.split() if (network := _ipv4_network(text))]
    return subnets


def _ipv4_network(text: str) -> ipaddress.IPv4Network | None:
    """A subnet as Docker lists it; None for an IPv6 one. Host bits are forgiven: the addresses are what clash."""
    try:
        return ipaddress.IPv4Network(text, strict=False)
    except ValueError:
        return None


def _address_range(text: str) -> tuple[ipaddress.IPv4Address, ipaddress.IPv4Address] | None:
    """First and last address of 'a.b.c.d-a.b.c.e' or a CIDR (as MetalLB reads a pool); None if unreadable,
    which the program reports itself. Kept here: the preflight runs before the venv, on the standard library."""
    try:
        if "-" in text:
            first, last = (ipaddress.IPv4Address(part.strip()) for part in text.split("-", 1))
            return first, last
        network = ipaddress.IPv4Network(text.strip(), strict=True)
        return network.network_address, network.broadcast_address
    except ValueError:
        return None


def check_kind_network(host: Host, mode: Mode) -> list[Finding]:
    """The lab's real docker network, when it exists, against what the program plans with: kindSubnet (else the default
    kind-up.sh creates the network with), metallbAddressRange, and a first quarter that keeps Docker's own
    addresses away from the workers' fixed ones."""
    if not mode.kind or host.which("docker") is None:
        return []
    network = kind_network(host)
    if network is None:
        return _subnet_clashes(host, mode)  # kind-up.sh creates it as the lab needs it, if Docker lets it
    findings = []
    first_quarter = next(network.subnet.subnets(prefixlen_diff=2))
    if network.ip_range is None or not network.ip_range.subnet_of(first_quarter):
        origin = "created by kamaji-hami-lab" if network.ours else "not created by kamaji-hami-lab"
        given = f"addresses of {network.ip_range}" if network.ip_range else f"any address of {network.subnet}"
        findings.append(Finding(
            "error",
            f"the docker network {LAB_NETWORK} ({origin}) lets Docker give {given} to containers, beyond its "
            f"first quarter {first_quarter}: the workers' fixed addresses could be taken, and Docker refuses "
            "fixed addresses on a subnet it picked itself",
            f"once no container uses it (docker network inspect {LAB_NETWORK}), docker network rm {LAB_NETWORK}; "
            "make up then creates it with room for them",
        ))
    try:
        subnet = ipaddress.IPv4Network(mode.kind_subnet, strict=True) if mode.kind_subnet else DEFAULT_KIND_SUBNET
    except ValueError:
        subnet = network.subnet  # the program refuses it, naming the key
    if mode.configured and subnet != network.subnet:
        said = f"is {subnet}" if mode.kind_subnet else f"is empty, so the lab plans with its default {subnet}"
        findings.append(Finding(
            "error",
            f"kamaji-hami-lab:kindSubnet {said}, but the docker network {LAB_NETWORK} is {network.subnet}: "
            "MetalLB would announce addresses, and workers would get fixed ones, outside it",
            f"pulumi config set kamaji-hami-lab:kindSubnet {network.subnet}",
        ))
    pool = _address_range(mode.address_range)
    if pool is not None and not (pool[0] in network.subnet and pool[1] in network.subnet):
        findings.append(Finding(
            "error",
            f"kamaji-hami-lab:metallbAddressRange {mode.address_range} lies outside the docker network {LAB_NETWORK} "
            f"{network.subnet}: the tenants' API servers would be unreachable",
            f"choose free addresses of {network.subnet}, or leave metallbAddressRange empty to carve the lab's "
            "own block",
        ))
    return findings


def _subnet_clashes(host: Host, mode: Mode) -> list[Finding]:
    """Before the lab's network exists: the planned subnet against the host's networks (planned_subnet_clashes)."""
    try:
        planned = ipaddress.IPv4Network(mode.kind_subnet, strict=True) if mode.kind_subnet else DEFAULT_KIND_SUBNET
    except ValueError:
        return []  # the program refuses it, naming the key
    if not mode.configured:
        return []
    said = f"is {planned}" if mode.kind_subnet else f"is empty, so the lab plans with its default {planned}"
    return planned_subnet_clashes(host, planned, f"kamaji-hami-lab:kindSubnet {said}")


# The host's own networks. Docker avoids them when it picks a subnet itself, but checks a given --subnet against its
# other networks only (moby/moby libnetwork/netutils/utils_linux.go@v28.5.2, InferReservedNetworks: the on-link
# routes of the main table and the nameservers of resolv.conf). A bridge on such a subnet takes those addresses
# from the host: its LAN, a VPN's routes or its DNS server become unreachable, without an error.
ROUTES_FILE = "/proc/net/route"
# The main table, as netlink's RouteList without a table filter gives it to Docker; one line per route, every
# field hexadecimal, addresses in the host's byte order (torvalds/linux net/ipv4/fib_trie.c, fib_route_seq_show
# and fib_flag_trans, as indexed). Flags from include/uapi/linux/route.h.
RTF_GATEWAY, RTF_REJECT = 0x0002, 0x0200
# resolv.conf, and systemd-resolved's list of the servers it forwards to when resolv.conf names only its stub
# (moby/moby libnetwork/internal/resolvconf/resolvconf_path.go@v28.5.2, Path).
RESOLV_CONF_FILES = ("/etc/resolv.conf", "/run/systemd/resolve/resolv.conf")
# Routes through a gateway this wide are a default route in halves (a full-tunnel VPN's 0.0.0.0/1 and
# 128.0.0.0/1): every subnet overlaps them, and the lab's network, more specific, takes only its own addresses.
DEFAULT_LIKE_PREFIX = 8


@dataclass(frozen=True)
class Route:
    network: ipaddress.IPv4Network
    device: str
    gateway: ipaddress.IPv4Address | None  # None: on-link, the host is on that network itself

    def __str__(self) -> str:
        return f"{self.network} dev {self.device}" + (f" via {self.gateway}" if self.gateway else "")


def _host_order_address(field_: str) -> ipaddress.IPv4Address:
    """An address as /proc/net/route prints it: the 4 bytes in network order, read as one host-order number."""
    return ipaddress.IPv4Address(int(field_, 16).to_bytes(4, sys.byteorder))


def host_routes(host: Host) -> list[Route] | None:
    """The routes of the host's main table, without rejecting ones; None when ROUTES_FILE cannot be read whole."""
    lines = (host.read(ROUTES_FILE) or "").splitlines()
    if not lines or lines[0].split()[:3] != ["Iface", "Destination", "Gateway"]:
        return None
    routes = []
    for line in lines[1:]:
        fields = line.split()
        if not fields:
            continue
        try:
            if len(fields) < 8 or not all(re.fullmatch(r"[0-9A-Fa-f]{8}", fields[i]) for i in (1, 2, 7)):
                raise ValueError(line)
            flags = int(fields[3], 16)
            destination, mask = _host_order_address(fields[1]), _host_order_address(fields[7])
            network = ipaddress.IPv4Network(f"{destination}/{mask}", strict=True)
        except ValueError:
            return None  # one line unread: the others prove nothing about the rest
        if not flags & RTF_REJECT:
            routes.append(Route(network, fields[0], _host_order_address(fields[2]) if flags & RTF_GATEWAY else None))
    return routes


def host_nameservers(host: Host) -> list[tuple[ipaddress.IPv4Address, str]]:
    """(address, file) of every IPv4 nameserver the host's resolv.conf files name; a missing file names none."""
    found = []
    for path in RESOLV_CONF_FILES:
        for line in (host.read(path) or "").splitlines():
            fields = line.split()
            if len(fields) >= 2 and fields[0] == "nameserver":
                try:
                    found.append((ipaddress.IPv4Address(fields[1]), path))
                except ValueError:
                    continue  # an IPv6 server (the lab's network has no IPv6 subnet), or no address
    return found


def planned_subnet_clashes(host: Host, planned: ipaddress.IPv4Network, said: str) -> list[Finding]:
    """What the lab's network, created on `planned` (`said` names where that comes from), would overlap: another
    docker network, which Docker refuses ("Pool overlaps with other one on this address space"), a route or a
    nameserver of the host, which it does not. Each overlap is named, with a free /16 to plan with instead."""
    clashes = []  # (severity, problem): each gets the spare subnet, known once everything taken is
    networks = docker_subnets(host) or {}
    bridges = {subnet for subnets in networks.values() for subnet in subnets}
    taken = list(bridges)
    # The lab's own network is no clash: another lab on this host may have created it since it was looked up.
    for name, subnets in sorted(networks.items()):
        clashes += [("error", f"{said}, which overlaps the docker network {name} ({subnet}): Docker refuses to create "
                              f"the lab's network {LAB_NETWORK} on addresses another network has")
                    for subnet in subnets if subnet.overlaps(planned) and name != LAB_NETWORK]
    routes = host_routes(host)
    for route in routes or []:
        # A docker network's own bridge route is that network, named above.
        if route.network in bridges or route.network.prefixlen == 0 or (
                route.gateway and route.network.prefixlen < DEFAULT_LIKE_PREFIX):
            continue
        taken.append(route.network)
        if route.network.overlaps(planned):
            clashes.append(("error", f"{said}, which overlaps this host's own network (route {route}): the lab's "
                                     "bridge would take those addresses from the host, and Docker does not check "
                                     "that") if route.gateway is None else
                           ("warning", f"{said}, which overlaps the route {route} of this host: the lab's bridge "
                                       "would take the addresses it shares with that route (a VPN's, say) from it"))
    for address, path in host_nameservers(host):
        taken.append(ipaddress.IPv4Network(address))
        if address in planned:
            clashes.append(("error", f"{said}, which holds the nameserver {address} of {path}: the lab's bridge "
                                     "would take it from this host, whose lookups would go to the lab's network"))
    spare = next((str(subnet) for subnet in SPARE_SUBNETS if not any(subnet.overlaps(t) for t in taken)),
                 "<a free private /16>")
    findings = [Finding(severity, problem, f"pulumi config set kamaji-hami-lab:kindSubnet {spare}")
                for severity, problem in clashes]
    if routes is None:
        findings.append(Finding("warning", f"cannot read this host's routes ({ROUTES_FILE}), so {planned} was not "
                                           "compared with the networks this host is on",
                                f"make sure no network of this host lies in {planned} (ip route)"))
    return findings


def preflight(host: Host, mode: Mode = Mode()) -> list[Finding]:
    findings = check_python(host) + check_tools(host, mode.tools()) + check_versions(host, mode.tools())
    if not mode.docker:
        return findings  # the rest is about the Docker host and the node containers it runs
    # The Docker host whose containers or MetalLB addresses the lab cannot use as it runs them is refused;
    # without a readable `docker info` none of that is checked.
    info, docker_host = docker_info(host)
    if info is not None:
        docker_host = (
            check_remote_docker(host) + check_rootless_docker(info) + check_docker_storage(info) + check_proxies(host)
        )
    return (
        findings
        + check_docker_daemon(host)
        + check_kind_network(host, mode)
        + docker_host
        + check_sysctls(host)
        + check_bridge_filtering(host, mode)
        + check_swap(host)
        + check_kernel(host)
        + check_capacity(host, mode)
    )


def report(findings: Sequence[Finding]) -> int:
    for finding in findings:
        print(f"{finding.severity.upper():<7} {finding.problem}")
        if finding.fix:
            print(f"        fix: {finding.fix}")
    if any("sysctl -w" in finding.fix for finding in findings):
        print(f"To keep sysctl fixes across reboots, put them (as key = value) in {SYSCTL_FILE}.")
    errors = sum(finding.severity == "error" for finding in findings)
    warnings = len(findings) - errors
    print(f"preflight: {errors} error(s), {warnings} warning(s)" if findings else "preflight: all good")
    return 1 if errors else 0


def _planned_subnet(text: str) -> ipaddress.IPv4Network:
    try:
        return ipaddress.IPv4Network(text, strict=True)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not an IPv4 subnet: {text} ({error})") from None


def main(argv: Sequence[str] | None = None, host: Host | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tools", nargs="+", choices=list(INSTALL_HINTS), help="only check these programs")
    parser.add_argument("--stack", help="check only what this stack's config uses (default: the kind lab)")
    parser.add_argument("--config-json", metavar="FILE",
                        help="read the stack's config from FILE (as `pulumi config --json` prints it) "
                             "rather than from pulumi")
    parser.add_argument("--planned-subnet", type=_planned_subnet, metavar="SUBNET",
                        help="only compare SUBNET, on which kind-up.sh is about to create the lab's docker network, "
                             "with the host's networks, routes and nameservers; prints nothing when it is clear")
    args = parser.parse_args(argv)
    # PREFLIGHT_ROOT: where the host's files are read (tests of scripts/kind-up.sh point it at recorded ones).
    host = host or Host(root=Path(os.environ.get("PREFLIGHT_ROOT") or "/"))
    if args.planned_subnet:
        said = f"the lab's subnet is {args.planned_subnet} (kamaji-hami-lab:kindSubnet, or its default when empty)"
        problems = planned_subnet_clashes(host, args.planned_subnet, said)
        return report(problems) if problems else 0
    mode, notes = stack_mode(host, args.stack, args.config_json) if args.stack else (Mode(), [])
    if args.tools:
        tools = mode.tools(args.tools)
        problems = check_tools(host, tools) + check_versions(host, tools)
        return report(problems) if problems else 0  # silent when all is well: make runs this often
    return report(notes + preflight(host, mode))


if __name__ == "__main__":
    sys.exit(main())
