"""scripts/preflight.py --stack: a lab on an existing management cluster is checked for what it uses."""

from __future__ import annotations

import ipaddress
import json
import re

import pytest
import yaml

from components.addresses import DEFAULT_KIND_SUBNET, dynamic_range
from components.kind_management_cluster import KIND_NETWORK as LAB_NETWORK
from tests.test_preflight import make_host, preflight, run_preflight
from tests.test_scripts import ROOT

# A host that could not run the kind lab: no kind, no Docker, distribution inotify limits, cgroup v1.
BARE_HOST = {
    "proc/sys/fs/inotify/max_user_watches": "8192\n",
    "proc/sys/fs/inotify/max_user_instances": "128\n",
    "sys/fs/cgroup/cgroup.controllers": None,
}


def config_json(tenants=(), **values) -> tuple[int, str]:
    """What `pulumi config --json --stack S` prints: a secret's value is left out without --show-secrets."""
    document = {"kamaji-hami-lab:managementKubeconfig": {"secret": True}}
    document |= {f"kamaji-hami-lab:{key}": {"value": value, "secret": False} for key, value in values.items()}
    document["kamaji-hami-lab:tenants"] = {"value": json.dumps(tenants), "objectValue": tenants, "secret": False}
    return 0, json.dumps(document)


def bare_host(tmp_path, stack_config, missing=("kind", "docker")):
    return make_host(tmp_path, BARE_HOST, missing_tools=missing, stack_config=stack_config)


def test_an_existing_cluster_without_container_workers_needs_no_kind_docker_or_host_settings(tmp_path, capsys):
    host, calls = bare_host(tmp_path, config_json(managementCluster="existing"))

    code, out = run_preflight(host, capsys, "--stack", "lab")

    assert (code, out) == (0, "preflight: all good\n")
    (read,) = [argv for argv in calls if argv[0] == "pulumi"]
    assert read[-2:] == ["--stack", "lab"] and "--show-secrets" not in read
    assert not [argv for argv in calls if argv[0] == "docker"]


def test_an_existing_cluster_still_needs_kubectl(tmp_path, capsys):
    host, _ = bare_host(tmp_path, config_json(managementCluster="existing"), missing=("kind", "docker", "kubectl"))

    code, out = run_preflight(host, capsys, "--stack", "lab")

    assert code == 1
    assert "kubectl is not on PATH" in out
    assert "kind is not on PATH" not in out and "docker is not on PATH" not in out


def test_container_workers_on_an_existing_cluster_need_docker_and_its_host_settings_but_not_kind(tmp_path, capsys):
    host, _ = bare_host(tmp_path, config_json(managementCluster="existing", dockerNetwork="lab-net"))

    code, out = run_preflight(host, capsys, "--stack", "lab")

    assert code == 1
    assert "docker is not on PATH" in out and "fs.inotify.max_user_watches" in out and "cgroup v1" in out
    assert "kind is not on PATH" not in out


def test_a_kind_stack_is_checked_as_before(tmp_path, capsys):
    host, _ = bare_host(tmp_path, config_json(managementClusterName="lab"))

    code, out = run_preflight(host, capsys, "--stack", "lab")

    assert code == 1
    assert "kind is not on PATH" in out and "docker is not on PATH" in out and "fs.inotify" in out


def test_an_unreadable_stack_config_is_a_warning_and_the_kind_lab_is_checked(tmp_path, capsys):
    missing_stack = (255, "error: no stack named 'lab' found")
    host, _ = bare_host(tmp_path, missing_stack, missing=())

    code, out = run_preflight(host, capsys, "--stack", "lab")

    assert "WARNING cannot read the config of stack lab (error: no stack named 'lab' found)" in out
    assert "fs.inotify.max_user_watches" in out and code == 1


def test_tool_checks_leave_out_what_the_stack_does_not_use(tmp_path, capsys):
    # make down checks the tools destroy may run; an existing cluster without container workers runs neither.
    host, _ = bare_host(tmp_path, config_json(managementCluster="existing"))
    assert run_preflight(host, capsys, "--tools", "kind", "docker", "kubectl", "--stack", "lab") == (0, "")

    with_workers, _ = bare_host(tmp_path, config_json(managementCluster="existing", dockerNetwork="lab-net"))
    code, out = run_preflight(with_workers, capsys, "--tools", "kind", "docker", "kubectl", "--stack", "lab")
    assert code == 1 and "docker is not on PATH" in out and "kind" not in out


def test_without_a_stack_the_kind_lab_is_checked(tmp_path, capsys):
    host, calls = bare_host(tmp_path, config_json(managementCluster="existing"))
    code, out = run_preflight(host, capsys)
    assert code == 1 and "kind is not on PATH" in out
    assert not [argv for argv in calls if argv[0] == "pulumi"], "no stack is read unless one is named"


def test_the_mode_is_read_from_this_projects_config_keys():
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == preflight.PROJECT
    assert {"managementCluster", "dockerNetwork"} <= set(project["config"]), "the keys the preflight reads"


MACHINE_TENANT = {"name": "research", "machines": [{"name": "gpu-1", "address": "10.0.0.11",
                                                          "hostKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKey"}]}


def test_machine_workers_need_the_ssh_client(tmp_path, capsys):
    host, _ = bare_host(tmp_path, config_json([MACHINE_TENANT], managementCluster="existing"),
                        missing=("kind", "docker", "ssh"))

    code, out = run_preflight(host, capsys, "--stack", "lab")

    assert code == 1
    assert "ssh is not on PATH" in out and "openssh-client" in out
    assert "docker is not on PATH" not in out


def test_a_lab_without_machines_does_not_ask_for_ssh(tmp_path, capsys):
    host, _ = bare_host(tmp_path, config_json([{"name": "web"}], managementCluster="existing"),
                        missing=("kind", "docker", "ssh"))

    assert run_preflight(host, capsys, "--stack", "lab") == (0, "preflight: all good\n")


# --- what the stack is estimated to use, against what the host has ------------------------------

GIB = 1 << 30


def meminfo(available_gib: float) -> str:
    """/proc/meminfo as Linux writes it (fs/proc/meminfo.c: "%-15s %8lu kB"), the lines the check may read."""
    return (f"MemTotal:       16303512 kB\nMemFree:         1203312 kB\n"
            f"MemAvailable:   {int(available_gib * 1024 * 1024):>8} kB\nBuffers:          204812 kB\n")


def sized_host(tmp_path, stack, available_gib, free_gib):
    free = {}
    host, _ = make_host(
        tmp_path, {"proc/meminfo": meminfo(available_gib)}, stack_config=stack,
        free_bytes=lambda path: free.setdefault(path, int(free_gib * GIB)),
    )
    return host, free


def test_a_host_with_less_memory_and_disk_than_the_estimate_is_warned_with_the_sum(tmp_path, capsys):
    # Two tenants of one replica and one worker each, as the dev stack runs.
    host, free = sized_host(tmp_path, config_json([{"name": "a"}, {"name": "b"}], controlPlaneReplicas="1",
                                                  workersPerTenant="1"), available_gib=4, free_gib=5)

    code, out = run_preflight(host, capsys, "--stack", "dev")

    assert code == 0, "an estimate only warns"
    assert (
        "WARNING the stack is estimated to use about 5 GiB of memory (the management cluster 3 GiB + 2 × 0.5 GiB "
        "per control-plane replica + 2 × 0.5 GiB per worker); this host has 4.0 GiB available. The figures are "
        "estimates, not measurements"
    ) in out
    assert (
        "WARNING the stack is estimated to use about 6.75 GiB of disk (the node image 1 GiB + the management "
        "cluster's /var 1.5 GiB + 2 × 0.125 GiB per control-plane replica's audit log + 2 × 2 GiB per worker's "
        "/var); this host has 5.0 GiB free under /var/lib/docker"
    ) in out
    assert list(free) == ["/var/lib/docker"], "the disk Docker keeps its images and volumes on"


def test_a_host_with_room_for_the_estimate_passes(tmp_path, capsys):
    host, _ = sized_host(tmp_path, config_json([{"name": "a"}], workersPerTenant="1", controlPlaneReplicas="1"),
                         available_gib=4.5, free_gib=4.625)

    assert run_preflight(host, capsys, "--stack", "dev") == (0, "preflight: all good\n")


def test_the_estimate_counts_each_tenants_own_replicas_and_workers_and_no_machines(tmp_path, capsys):
    tenants = [
        {"name": "a", "workers": 3, "controlPlaneReplicas": 2},
        {"name": "b"},
        {"name": "c", "machines": [{"name": "m", "address": "10.0.0.5"}]},
    ]
    host, _ = sized_host(tmp_path, config_json(tenants, workersPerTenant="2", controlPlaneReplicas="1"),
                         available_gib=1, free_gib=1000)

    _, out = run_preflight(host, capsys, "--stack", "dev")

    # Replicas: 2 + 1 + 1 (machines still have a control plane); workers: 3 + 2, none for the machines.
    assert "about 7.5 GiB of memory (the management cluster 3 GiB + 4 × 0.5 GiB per control-plane replica " \
        "+ 5 × 0.5 GiB per worker)" in out


def test_the_estimate_counts_the_etcd_of_each_tenant_on_a_datastore_of_its_own(tmp_path, capsys):
    tenants = [{"name": "a", "dataStore": "dedicated"}, {"name": "b", "dataStore": "shared"}, {"name": "c"}]
    host, _ = sized_host(tmp_path, config_json(tenants, workersPerTenant="1", controlPlaneReplicas="1"),
                         available_gib=1, free_gib=1)

    _, out = run_preflight(host, capsys, "--stack", "dev")

    assert "about 6.25 GiB of memory (the management cluster 3 GiB + 3 × 0.5 GiB per control-plane replica " \
        "+ 3 × 0.5 GiB per worker + 1 × 0.25 GiB per dedicated datastore)" in out
    assert "+ 3 × 2 GiB per worker's /var + 1 × 2.5 GiB per dedicated datastore's volume)" in out


def test_on_an_existing_cluster_only_the_container_workers_use_this_host(tmp_path, capsys):
    stack = config_json([{"name": "a", "workers": 2}], managementCluster="existing", dockerNetwork="lab-net",
                        controlPlaneReplicas="1", workersPerTenant="1")
    host, _ = sized_host(tmp_path, stack, available_gib=0.5, free_gib=0.5)

    _, out = run_preflight(host, capsys, "--stack", "dev")

    assert "about 1 GiB of memory (2 × 0.5 GiB per worker)" in out
    assert "about 5 GiB of disk (the node image 1 GiB + 2 × 2 GiB per worker's /var)" in out


def test_without_a_stack_nothing_is_estimated(tmp_path, capsys):
    host, _ = sized_host(tmp_path, (0, "{}"), available_gib=0.1, free_gib=0.1)
    assert run_preflight(host, capsys) == (0, "preflight: all good\n")


# `docker network inspect --format '{{index .Labels "kamaji-hami-lab.io/layout"}}|{{range .IPAM.Config}}{{.Subnet}}=
# {{.IPRange}} {{end}}' kamaji-hami-lab`: the lab's label, then each IPAM entry with its ip-range (empty when none was
# given). As kind-up.sh creates it: labelled, the subnet with Docker's own addresses in its first quarter. As Docker
# lays out a network made without a subnet (kind's own `kind`): no label, an IPv4 subnet Docker picked without a range,
# and kind's IPv6 /64 (kubernetes-sigs/kind pkg/cluster/internal/providers/docker/network.go@v0.33.0-alpha,
# createNetwork). A missing network exits 1 with the daemon's "network kamaji-hami-lab not found".
D = DEFAULT_KIND_SUBNET
LAB_NETWORK_AT_DEFAULT = (0, f"quarters|{D}={dynamic_range(D)} \n")
UNLAID_NETWORK = (0, f"|{D}= fc00:f853:ccd:e793::/64= \n")
NO_LAB_NETWORK = (1, f"Error response from daemon: network {LAB_NETWORK} not found")
# The networks every Docker host has (`docker network ls`), as `docker network inspect --format
# '{{.Name}}|{{range .IPAM.Config}}{{.Subnet}} {{end}}'` shows them: docker0's bridge at the bottom of Docker's pools.
DEFAULT_NETWORKS = {"bridge": "172.17.0.0/16", "host": "", "none": ""}
KINDS_OWN = "fc00:f853:ccd:e793::/64 172.18.0.0/16"  # where Docker usually puts kind's `kind` network


def with_kind_network(tmp_path, stack, answer, networks=None, files=None):
    """A host whose lab network inspect gives `answer`, whose Docker has `networks` (name: subnets) and whose
    recorded files `files` replaces (e.g. its routes)."""
    import dataclasses

    host, calls = make_host(tmp_path, files, stack_config=stack)
    networks = {**DEFAULT_NETWORKS, **(networks or {})}
    ids = {f"{index:012x}": name for index, name in enumerate(networks)}
    asked = []

    def run(argv):
        argv = list(argv)
        if argv[:3] == ["docker", "network", "inspect"] and argv[-1] == LAB_NETWORK:
            asked.append(argv)
            return answer
        if argv == ["docker", "network", "ls", "--quiet"]:
            asked.append(argv)
            return 0, "\n".join(ids)
        if argv[:4] == ["docker", "network", "inspect", "--format"] and argv[4].startswith("{{.Name}}|"):
            asked.append(argv)
            return 0, "".join(f"{ids[id]}|{networks[ids[id]]} \n" for id in argv[5:])
        return host.run(argv)

    return dataclasses.replace(host, run=run), asked


@pytest.mark.parametrize(("values", "problem"), [
    ({"kindSubnet": "10.89.0.0/16"}, f"ERROR   kamaji-hami-lab:kindSubnet is 10.89.0.0/16, but the docker network "
                                     f"{LAB_NETWORK} is {D}"),
    ({"metallbAddressRange": "192.168.50.240-192.168.50.250"},
     f"ERROR   kamaji-hami-lab:metallbAddressRange 192.168.50.240-192.168.50.250 lies outside the docker network "
     f"{LAB_NETWORK} {D}"),
    ({"metallbAddressRange": f"{D.broadcast_address + 1}/28"},
     f"ERROR   kamaji-hami-lab:metallbAddressRange {D.broadcast_address + 1}/28 lies outside the docker network "
     f"{LAB_NETWORK} {D}"),
    ({"metallbAddressRange": f"{D.broadcast_address - 5}-{D.broadcast_address + 6}"},
     f"ERROR   kamaji-hami-lab:metallbAddressRange {D.broadcast_address - 5}-{D.broadcast_address + 6} lies outside"),
])
def test_a_subnet_or_pool_that_is_not_the_real_lab_networks_is_refused(tmp_path, capsys, values, problem):
    host, asked = with_kind_network(tmp_path, config_json([{"name": "a"}], **values), LAB_NETWORK_AT_DEFAULT)

    code, out = run_preflight(host, capsys, "--stack", "dev")

    assert code == 1
    assert problem in out
    assert asked[0][-1] == LAB_NETWORK


@pytest.mark.parametrize("values", [
    {"kindSubnet": str(D)}, {"metallbAddressRange": f"{D[-56]}-{D[-6]}"},
    {"kindSubnet": str(D), "metallbAddressRange": f"{D[-64]}/27"},
])
def test_a_subnet_and_pool_of_the_real_lab_network_pass(tmp_path, capsys, values):
    host, _ = with_kind_network(tmp_path, config_json([{"name": "a"}], **values), LAB_NETWORK_AT_DEFAULT)
    assert run_preflight(host, capsys, "--stack", "dev") == (0, "preflight: all good\n")


def test_before_kind_up_made_the_network_nothing_is_compared(tmp_path, capsys):
    host, asked = with_kind_network(tmp_path, config_json([{"name": "a"}], kindSubnet="10.89.0.0/16"), NO_LAB_NETWORK)
    assert run_preflight(host, capsys, "--stack", "dev") == (0, "preflight: all good\n")
    assert asked


def test_an_existing_cluster_has_no_lab_network_to_compare(tmp_path, capsys):
    stack = config_json(managementCluster="existing", dockerNetwork="lab-net", metallbAddressRange="10.0.0.1-10.0.0.9")
    host, asked = with_kind_network(tmp_path, stack, LAB_NETWORK_AT_DEFAULT)
    run_preflight(host, capsys, "--stack", "lab")
    assert asked == []


@pytest.mark.parametrize("args", [(), ("--stack", "dev")])
def test_a_network_docker_laid_out_is_refused_as_it_leaves_no_room_for_fixed_worker_addresses(tmp_path, capsys, args):
    # Docker may give any address of a network without --ip-range to a container, and refuses fixed addresses on a
    # subnet it picked itself: kind-up.sh would refuse it too, later.
    host, _ = with_kind_network(tmp_path, config_json([{"name": "a"}]), UNLAID_NETWORK)

    code, out = run_preflight(host, capsys, *args)

    assert code == 1
    assert f"ERROR   the docker network {LAB_NETWORK} (not created by kamaji-hami-lab) lets Docker give any address " \
           f"of {D} to containers" in out
    assert f"docker network inspect {LAB_NETWORK}" in out and f"docker network rm {LAB_NETWORK}" in out


@pytest.mark.parametrize(("ip_range", "passes"), [("172.18.0.0/18", True), ("172.18.0.0/19", True),
                                                  ("172.18.0.0/17", False), ("172.18.64.0/18", False)])
def test_a_foreign_network_passes_only_if_its_range_stays_in_the_first_quarter(tmp_path, capsys, ip_range, passes):
    stack = config_json([{"name": "a"}], kindSubnet="172.18.0.0/16")
    host, _ = with_kind_network(tmp_path, stack, (0, f"|172.18.0.0/16={ip_range} \n"))

    code, out = run_preflight(host, capsys, "--stack", "dev")

    if passes:
        assert (code, out) == (0, "preflight: all good\n")
    else:
        assert code == 1 and f"lets Docker give addresses of {ip_range} to containers" in out


def test_without_kind_subnet_the_network_must_have_the_default_subnet(tmp_path, capsys):
    host, _ = with_kind_network(tmp_path, config_json([{"name": "a"}]), (0, "quarters|10.89.0.0/16=10.89.0.0/18 \n"))

    code, out = run_preflight(host, capsys, "--stack", "dev")

    assert code == 1
    assert f"kamaji-hami-lab:kindSubnet is empty, so the lab plans with its default {D}, but the docker network " \
           f"{LAB_NETWORK} is 10.89.0.0/16" in out
    assert "pulumi config set kamaji-hami-lab:kindSubnet 10.89.0.0/16" in out


def test_the_default_subnet_is_clear_of_where_docker_usually_puts_kinds_own_network(tmp_path, capsys):
    # Most kind users have kind's `kind` network; the lab's network is created beside it.
    host, asked = with_kind_network(tmp_path, config_json([{"name": "a"}]), NO_LAB_NETWORK, {"kind": KINDS_OWN})

    assert run_preflight(host, capsys, "--stack", "dev") == (0, "preflight: all good\n")
    assert ["docker", "network", "ls", "--quiet"] in asked


def suggested_subnet(out: str) -> ipaddress.IPv4Network:
    (suggestion,) = re.findall(r"fix: pulumi config set kamaji-hami-lab:kindSubnet (\S+)", out)
    return ipaddress.IPv4Network(suggestion)


def test_a_planned_subnet_another_network_has_is_refused_before_anything_is_created(tmp_path, capsys):
    # kind's own network where the lab plans its own: Docker would refuse to create the lab's ("Pool overlaps").
    host, _ = with_kind_network(tmp_path, config_json([{"name": "a"}]), NO_LAB_NETWORK,
                                {"kind": f"fc00:f853:ccd:e793::/64 {D}", "compose_default": "172.29.0.0/16"})

    code, out = run_preflight(host, capsys, "--stack", "dev")

    assert code == 1
    assert f"ERROR   kamaji-hami-lab:kindSubnet is empty, so the lab plans with its default {D}, which overlaps the " \
           f"docker network kind ({D})" in out
    assert "compose_default" not in out and "bridge" not in out
    # A concrete free /16 to set: private, and clear of every network on the host.
    spare = suggested_subnet(out)
    assert spare.is_private and spare.prefixlen == 16
    assert not any(spare.overlaps(ipaddress.IPv4Network(taken)) for taken in ("172.17.0.0/16", str(D), "172.29.0.0/16"))


@pytest.mark.parametrize(("other", "clashes"), [("10.89.255.0/24", True), ("10.88.0.0/15", True),
                                                ("10.90.0.0/24", False), ("10.88.255.0/24", False)])
def test_a_configured_subnet_clashes_with_any_network_sharing_an_address(tmp_path, capsys, other, clashes):
    stack = config_json([{"name": "a"}], kindSubnet="10.89.0.0/16")
    host, _ = with_kind_network(tmp_path, stack, NO_LAB_NETWORK, {"other": other})

    code, out = run_preflight(host, capsys, "--stack", "dev")

    if clashes:
        assert code == 1
        assert f"kamaji-hami-lab:kindSubnet is 10.89.0.0/16, which overlaps the docker network other ({other})" in out
        assert not suggested_subnet(out).overlaps(ipaddress.IPv4Network(other))
    else:
        assert (code, out) == (0, "preflight: all good\n")


def test_a_subnet_docker_lists_with_host_bits_still_clashes(tmp_path, capsys):
    # `docker network create --subnet 10.89.0.1/16` keeps what it was given; its addresses are what clash.
    stack = config_json([{"name": "a"}], kindSubnet="10.89.0.0/16")
    host, _ = with_kind_network(tmp_path, stack, NO_LAB_NETWORK, {"other": "10.89.0.1/16"})

    code, out = run_preflight(host, capsys, "--stack", "dev")

    assert code == 1 and "overlaps the docker network other (10.89.0.0/16)" in out


def test_the_suggested_subnet_leaves_dockers_pools_when_their_top_is_taken(tmp_path, capsys):
    crowded = {f"net{octet}": f"172.{octet}.0.0/16" for octet in range(18, 32)}
    host, _ = with_kind_network(tmp_path, config_json([{"name": "a"}]), NO_LAB_NETWORK, crowded)

    code, out = run_preflight(host, capsys, "--stack", "dev")

    assert code == 1
    spare = suggested_subnet(out)
    assert spare.is_private and spare.prefixlen == 16 and not spare.overlaps(ipaddress.IPv4Network("172.16.0.0/12"))


def test_the_labs_own_network_is_no_clash_with_itself(tmp_path, capsys):
    # Another lab on this host created it between the preflight's two looks.
    host, _ = with_kind_network(tmp_path, config_json([{"name": "a"}]), NO_LAB_NETWORK,
                                {LAB_NETWORK: str(D), "kind": KINDS_OWN})
    assert run_preflight(host, capsys, "--stack", "dev") == (0, "preflight: all good\n")


@pytest.mark.parametrize("docker", ["ls", "inspect"])
def test_a_docker_that_does_not_list_its_networks_adds_no_finding(tmp_path, capsys, docker):
    # The daemon check reports a Docker that does not answer; kind-up.sh names an overlap when it creates.
    import dataclasses

    host, _ = with_kind_network(tmp_path, config_json([{"name": "a"}]), NO_LAB_NETWORK, {"kind": f"{D}"})
    answered = host.run

    def run(argv):
        if list(argv[:3]) == ["docker", "network", docker] and argv[-1] != LAB_NETWORK:
            return 1, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock."
        return answered(argv)

    code, out = run_preflight(dataclasses.replace(host, run=run), capsys, "--stack", "dev")
    assert (code, out) == (0, "preflight: all good\n")


def test_without_a_stack_the_subnet_is_not_compared(tmp_path, capsys):
    # kindSubnet is unknown then; the network's room is still checked.
    host, _ = with_kind_network(tmp_path, config_json([{"name": "a"}]), (0, "quarters|10.89.0.0/16=10.89.0.0/18 \n"))
    assert run_preflight(host, capsys) == (0, "preflight: all good\n")


def test_the_preflight_plans_with_the_programs_network_and_default_subnet():
    # Kept twice because the preflight runs on the standard library only.
    assert preflight.DEFAULT_KIND_SUBNET == DEFAULT_KIND_SUBNET
    assert preflight.LAB_NETWORK == LAB_NETWORK


def test_the_network_kind_up_creates_passes_the_preflight(tmp_path, capsys):
    from tests.test_scripts import Fakes, missing_network, run_kind_up

    (tmp_path / "fakes").mkdir()
    fakes = Fakes(tmp_path / "fakes")
    missing_network(fakes).on("docker", r"^network inspect bridge ", "\n")
    fakes.on("docker", r"^network create ", "network-id\n")
    fakes.on("kind", r"^get clusters$", "").on("kind", r"^create cluster ", "")
    # With the layout the program hands kind-up.sh when kindSubnet is empty.
    assert run_kind_up(fakes, KIND_SUBNET=str(D), KIND_IP_RANGE=str(dynamic_range(D))).returncode == 0
    (create,) = fakes.calls("docker", "^network create")
    argv = create["argv"]
    made = {flag: value for flag, value in zip(argv, argv[1:], strict=False) if flag.startswith("--")}
    label, _, value = made["--label"].partition("=")
    assert label == preflight.LAYOUT_LABEL
    # What `docker network inspect` then shows of it, in the preflight's format.
    answer = (0, f"{value}|{made['--subnet']}={made['--ip-range']} \n")

    (tmp_path / "host").mkdir()
    host, _ = with_kind_network(tmp_path / "host", config_json([{"name": "a"}]), answer)
    assert run_preflight(host, capsys, "--stack", "dev") == (0, "preflight: all good\n")
