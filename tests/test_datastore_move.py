"""What follows a tenant's move to another DataStore (issue 51): its kubelets restarted one worker at a time, as
Kamaji's guide asks (clastix/kamaji docs/content/guides/datastore-migration.md@26.8.2-edge, "Post migration"), then
the lab's in-cluster clients. The plan: only a move runs them, only for the tenant that moved, after Kamaji reports
the move done. The scripts: against fake docker and kubectl, and a real sshd whose systemctl is a fake.
"""

from __future__ import annotations

import pytest

from tests.plan import changed, dev_config, plan, reveal
from tests.sshd import machine_fakes
from tests.test_machines import EXISTING, MOCK_GPU_TENANT, SECRETS
from tests.test_scripts import TENANT_KUBECONFIG, reply
from tests.test_tenant_versions import TCP, of_tenant

KUBELET = "restart-kubelet.sh"
CLIENTS = "restart-tenant-clients.sh"
WORKLOAD_KINDS = ("kubernetes:apps/v1:DaemonSet", "kubernetes:apps/v1:Deployment", "kubernetes:helm.sh/v3:Release")


def lab(b_store: str | None = None, b_sleeping: bool = False) -> dict:
    b = {"name": "tenant-b", "workers": 2, **({"dataStore": b_store} if b_store else {})}
    return dev_config(
        tenants=[{"name": "tenant-a", "workers": 2}, {**b, **({"sleeping": True} if b_sleeping else {})}],
        observability=False,
    )


def restarts(plan_, tenant: str, script: str) -> list:
    urns = {r.urn for r in of_tenant(plan_, tenant)}
    return [c for c in plan_.commands(script) if c.urn in urns]


def environment(command) -> dict:
    return reveal(command.inputs["environment"])


@pytest.fixture(scope="module")
def plans():
    """(up with tenant-b shared, preview of its move to dedicated, up dedicated, preview of the move back)."""
    shared_up = plan(lab(), preview=False)
    dedicated_up = plan(lab("dedicated"), preview=False)
    return shared_up, plan(lab("dedicated"), True, shared_up), dedicated_up, plan(lab(), True, dedicated_up)


# --- the plan --------------------------------------------------------------------------------------------


def containers(plan_, tenant: str) -> list[str]:
    return [r.inputs["name"] for r in of_tenant(plan_, tenant) if r.type == "docker:index/container:Container"]


def data_store(plan_, tenant: str) -> str:
    (tcp,) = [r for r in of_tenant(plan_, tenant) if r.type == TCP]
    return tcp.inputs["spec"]["dataStore"]


def test_a_move_restarts_exactly_that_tenants_kubelets_and_clients_each_by_an_update(plans):
    shared_up, to_dedicated, dedicated_up, to_shared = plans
    for preview, previous in ((to_dedicated, shared_up), (to_shared, dedicated_up)):
        kubelets, clients = restarts(preview, "tenant-b", KUBELET), restarts(preview, "tenant-b", CLIENTS)
        assert sorted(environment(c)["NODE"] for c in kubelets) == sorted(containers(preview, "tenant-b"))
        assert len(containers(preview, "tenant-b")) == 2 and len(clients) == 1
        ran = {c.urn for c in (*kubelets, *clients)}
        moved = changed(preview, previous)
        # Each existed before and only its inputs changed: pulumi-command updates it, which runs its script.
        assert ran <= moved and ran <= previous.by_urn.keys()
        assert all(c.inputs.get("triggers") is None for c in (*kubelets, *clients))
        assert {environment(c)["DATASTORE"] for c in (*kubelets, *clients)} == {data_store(preview, "tenant-b")}
        assert data_store(preview, "tenant-b") != data_store(previous, "tenant-b")
        others = {c.urn for script in (KUBELET, CLIENTS) for c in restarts(preview, "tenant-a", script)}
        assert len(others) == 3 and not others & moved, "the other tenant restarts nothing"


def test_creating_a_tenant_restarts_nothing(plans):
    shared_up, _, dedicated_up, _ = plans
    for up in (shared_up, dedicated_up):
        steps = [c for tenant in ("tenant-a", "tenant-b") for script in (KUBELET, CLIENTS)
                 for c in restarts(up, tenant, script)]
        assert len(steps) == 6
        for step in steps:
            assert "create" not in step.inputs, f"{step.name} would run on the tenant's creation"
            assert step.inputs["update"].endswith(("/" + KUBELET, "/" + CLIENTS))


def test_a_second_up_after_a_move_restarts_nothing(plans):
    _, _, dedicated_up, _ = plans
    again = plan(lab("dedicated"), True, dedicated_up)
    assert changed(again, dedicated_up) == set()


def test_the_kubelets_restart_after_kamaji_reports_the_move_done_one_worker_at_a_time(plans):
    _, to_dedicated, _, _ = plans
    (moved,) = [c for c in to_dedicated.commands("wait-datastore-move.sh")
                if c.inputs["environment"]["TENANT"] == "tenant-b"]
    first, second = sorted(restarts(to_dedicated, "tenant-b", KUBELET), key=lambda c: environment(c)["NODE"])
    assert moved.urn in to_dedicated.upstream(first.urn)
    assert first.urn in to_dedicated.upstream(second.urn), "the second kubelet restarts once the first did"
    (clients,) = restarts(to_dedicated, "tenant-b", CLIENTS)
    assert {first.urn, second.urn} <= to_dedicated.upstream(clients.urn)
    # The clients restart last in the tenant, once HAMi and the network are in place; nothing of another tenant.
    (gpu_sharing,) = [r.urn for r in of_tenant(to_dedicated, "tenant-b") if r.type.endswith(":GpuSharing")]
    hami = {r.urn for r in to_dedicated.registrations if r.custom and gpu_sharing in to_dedicated.ancestors(r.urn)}
    assert hami and hami <= to_dedicated.upstream(clients.urn)
    a = {r.urn for r in of_tenant(to_dedicated, "tenant-a")}
    assert not a & (to_dedicated.upstream(clients.urn) | to_dedicated.upstream(second.urn))


def test_the_clients_are_restarted_with_the_tenants_own_admin_kubeconfig(plans):
    _, to_dedicated, _, _ = plans
    for tenant in ("tenant-a", "tenant-b"):
        (clients,) = restarts(to_dedicated, tenant, CLIENTS)
        assert "environment" in clients.secret_inputs
        assert environment(clients)["TENANT"] == tenant
        assert f"{tenant}-admin" in environment(clients)["KUBECONFIG_DATA"]


def test_every_namespace_the_lab_puts_workloads_into_is_restarted(plans):
    # kube-proxy and HAMi here; flannel with machine workers (below).
    shared_up = plans[0]
    (clients,) = restarts(shared_up, "tenant-b", CLIENTS)
    placed = {r.inputs.get("namespace") or r.inputs["metadata"]["namespace"]
              for r in of_tenant(shared_up, "tenant-b") if r.type in WORKLOAD_KINDS and r.provider_urn.endswith(
                  "tenant-b-kubernetes")}
    assert placed and placed <= set(environment(clients)["NAMESPACES"].split())


def test_a_sleeping_tenant_restarts_nothing_until_it_wakes(plans):
    shared_up = plans[0]
    asleep = plan(lab("dedicated", b_sleeping=True), True, shared_up)
    for script in (KUBELET, CLIENTS):
        for step in restarts(asleep, "tenant-b", script):
            # The engine keeps the inputs of the last awake up: the move is not seen until the tenant wakes.
            assert step.ignore_changes == ["environment"], step.name
        for step in restarts(asleep, "tenant-a", script):
            assert step.ignore_changes == [], step.name
    # Woken on the new store, the state still holds the old one: the wake runs the restarts.
    woken = plan(lab("dedicated"), True, shared_up)
    assert {c.urn for c in restarts(woken, "tenant-b", KUBELET)} <= changed(woken, shared_up)


# --- machines ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def machine_move():
    config = {**EXISTING}
    shared_up = plan(dev_config(tenants=[MOCK_GPU_TENANT], **config), preview=False, secrets=SECRETS)
    moved = {**MOCK_GPU_TENANT, "dataStore": "dedicated"}
    return shared_up, plan(dev_config(tenants=[moved], **config), True, shared_up, secrets=SECRETS)


def test_a_machines_kubelet_restarts_over_the_ssh_transport_its_join_uses(machine_move):
    shared_up, to_dedicated = machine_move
    kubelets = restarts(to_dedicated, "research", KUBELET)
    assert {c.urn for c in kubelets} <= changed(to_dedicated, shared_up)
    joins = {environment(c)["NODE"]: environment(c) for c in to_dedicated.commands("join-worker.sh")}
    assert sorted(joins) == sorted(environment(c)["NODE"] for c in kubelets) == ["gpu-1", "gpu-2"]
    for kubelet in kubelets:
        env = environment(kubelet)
        assert "environment" in kubelet.secret_inputs, "the machine's private key"
        transport = {key: value for key, value in joins[env["NODE"]].items()
                     if key.startswith("SSH_") or key == "NODE_TRANSPORT"}
        assert transport["NODE_TRANSPORT"] == "ssh"
        assert {key: env[key] for key in transport} == transport


def test_a_machine_tenants_pod_network_is_restarted_too(machine_move):
    shared_up, _ = machine_move
    (clients,) = restarts(shared_up, "research", CLIENTS)
    placed = {r.inputs.get("namespace") or r.inputs["metadata"]["namespace"]
              for r in of_tenant(shared_up, "research") if r.type in WORKLOAD_KINDS}
    assert "kube-flannel" in placed and placed <= set(environment(clients)["NAMESPACES"].split())


# --- restart-kubelet.sh -----------------------------------------------------------------------------------

NODE = "lab-b-w1"
RUNNING = r"^inspect --format \{\{\.State\.Running\}\} "
RESTART = r"^exec lab-b-w1 systemctl restart kubelet$"
ACTIVE = r"^exec lab-b-w1 systemctl is-active --quiet kubelet$"


def restart_kubelet(fakes, **env: str):
    return fakes.run(KUBELET, NODE=NODE, DATASTORE="etcd-tenant-b", **env)


def test_a_running_container_workers_kubelet_is_restarted_and_waited_for(fakes):
    fakes.on("docker", RUNNING, "true\n").on("docker", RESTART, "")
    fakes.on("docker", ACTIVE, reply(exit=3), reply(exit=3), "")
    result = restart_kubelet(fakes)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE}: kubelet restarted\n"
    assert len(fakes.calls("docker", RESTART)) == 1 and len(fakes.calls("docker", ACTIVE)) == 3
    assert fakes.calls("docker", r"^(stop|start|rm|kill) ") == [], "the container itself stays"


def test_a_stopped_container_is_not_started_to_restart_its_kubelet(fakes):
    fakes.on("docker", RUNNING, "false\n")
    result = restart_kubelet(fakes)
    assert result.returncode == 1
    assert f"container {NODE} is stopped" in result.stderr and "etcd-tenant-b" in result.stderr
    assert fakes.calls("docker", r"^(exec|start) ") == []


def test_a_missing_container_fails_saying_so(fakes):
    fakes.on("docker", RUNNING, reply(exit=1, stderr=f"Error: No such object: {NODE}\n"))
    result = restart_kubelet(fakes)
    assert result.returncode == 1
    assert f"container {NODE} not found" in result.stderr
    assert fakes.calls("docker", r"^exec ") == []


def test_a_kubelet_that_cannot_be_restarted_fails_the_step_saying_how_to_by_hand(fakes):
    fakes.on("docker", RUNNING, "true\n").on("docker", RESTART, reply(exit=1, stderr="Job failed\n"))
    result = restart_kubelet(fakes)
    assert result.returncode == 1 and result.stdout == ""
    assert f"worker {NODE}: cannot restart its kubelet" in result.stderr
    assert f"docker exec {NODE} systemctl restart kubelet" in result.stderr
    assert fakes.calls("docker", ACTIVE) == []


def test_a_kubelet_not_active_after_its_restart_fails_the_step(fakes):
    fakes.on("docker", RUNNING, "true\n").on("docker", RESTART, "").on("docker", ACTIVE, reply(exit=3))
    result = restart_kubelet(fakes, ACTIVE_TIMEOUT="0")
    assert result.returncode == 1 and result.stdout == ""
    assert f"worker {NODE}: its kubelet is not active 0s after its restart" in result.stderr


@pytest.fixture
def machine(tmp_path, sshd):
    return machine_fakes(tmp_path, ("systemctl",), sshd)


def test_a_machines_kubelet_is_restarted_over_ssh(machine):
    machine.on("machine-systemctl", r"^restart kubelet$", "")
    machine.on("machine-systemctl", r"^is-active --quiet kubelet$", "")
    result = machine.run(KUBELET, NODE="m1", DATASTORE="default", **machine.transport())
    assert result.returncode == 0, result.stderr
    assert result.stdout == "m1: kubelet restarted\n"
    assert [call["argv"] for call in machine.calls("machine-systemctl")] == [
        ["restart", "kubelet"], ["is-active", "--quiet", "kubelet"]]
    assert machine.calls("docker") == []


def test_a_machine_whose_kubelet_cannot_be_restarted_fails_the_step(machine):
    machine.on("machine-systemctl", r"^restart kubelet$", reply(exit=5, stderr="Unit kubelet.service not found.\n"))
    result = machine.run(KUBELET, NODE="m1", DATASTORE="default", **machine.transport())
    assert result.returncode == 1
    assert "worker m1: cannot restart its kubelet after the move to DataStore default" in result.stderr


# --- restart-tenant-clients.sh ------------------------------------------------------------------------------

LIST = r"-n {} get daemonsets\.apps,deployments\.apps -o jsonpath=.*updateStrategy"
STATUS = r"-n {} get daemonsets\.apps,deployments\.apps -o jsonpath=.*observedGeneration"
ROLL = r"-n {} rollout restart "
SYSTEM = "DaemonSet/kube-proxy|RollingUpdate\nDaemonSet/hami-device-plugin|RollingUpdate\nDeployment/coredns|\n"


def ds(name: str, generation: int = 2, observed: int = 2, desired: int = 2, updated: int = 2, available: int = 2):
    return f"DaemonSet/{name}|{generation}|{observed}|||||{desired}|{updated}|{available}\n"


def deploy(name: str, generation: int = 2, observed: int = 2, wanted: int = 2, replicas: int = 2,
           updated: int = 2, available: int = 2):
    return f"Deployment/{name}|{generation}|{observed}|{wanted}|{replicas}|{updated}|{available}||||\n"


DONE = ds("kube-proxy") + ds("hami-device-plugin") + deploy("coredns")


def restart_clients(fakes, **env: str):
    return fakes.run(CLIENTS, KUBECONFIG_DATA=TENANT_KUBECONFIG, TENANT="tenant-b", DATASTORE="etcd-tenant-b",
                     NAMESPACES="kube-flannel kube-system", **env)


def lab_namespaces(fakes, system: str = SYSTEM, flannel: str = ""):
    return fakes.on("kubectl", LIST.format("kube-system"), system).on("kubectl", LIST.format("kube-flannel"), flannel)


def test_the_labs_clients_are_restarted_and_waited_for_with_the_tenants_kubeconfig(fakes):
    lab_namespaces(fakes).on("kubectl", ROLL.format("kube-system"), "restarted\n")
    fakes.on("kubectl", STATUS.format("kube-system"),
             ds("kube-proxy", observed=1) + ds("hami-device-plugin") + deploy("coredns"),
             ds("kube-proxy", updated=1) + ds("hami-device-plugin") + deploy("coredns"),
             DONE)
    result = restart_clients(fakes)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    (roll,) = fakes.calls("kubectl", ROLL.format("kube-system"))
    assert roll["argv"][roll["argv"].index("restart") + 1:] == [
        "daemonset/kube-proxy", "daemonset/hami-device-plugin", "deployment/coredns"]
    assert fakes.calls("kubectl", ROLL.format("kube-flannel")) == [], "an empty namespace has nothing to restart"
    assert len(fakes.calls("kubectl", STATUS.format("kube-system"))) == 3
    assert all(call["kubeconfig"]["content"] == TENANT_KUBECONFIG for call in fakes.calls("kubectl"))
    assert "ADMIN-CLIENT-KEY" not in result.stderr


@pytest.mark.parametrize(("state", "waiting_for"), [
    (deploy("coredns", replicas=3, updated=2, available=2), "coredns"),  # an old replica still terminating
    (deploy("coredns", wanted=2, updated=1, available=1), "coredns"),
    (deploy("coredns", updated=2, available=1), "coredns"),
    (ds("kube-proxy", updated=2, available=1), "kube-proxy"),
    (ds("kube-proxy", generation=3, observed=2), "kube-proxy"),
], ids=["old-replica", "not-updated", "not-available", "ds-not-available", "not-observed"])
def test_a_rollout_not_finished_at_the_timeout_fails_naming_it(fakes, state, waiting_for):
    lab_namespaces(fakes, system="DaemonSet/kube-proxy|RollingUpdate\nDeployment/coredns|\n")
    fakes.on("kubectl", ROLL.format("kube-system"), "restarted\n")
    others = deploy("coredns") if waiting_for != "coredns" else ds("kube-proxy")
    fakes.on("kubectl", STATUS.format("kube-system"), state + others)
    result = restart_clients(fakes, ROLLOUT_TIMEOUT="0")
    assert result.returncode == 1
    assert "tenant tenant-b: not rolled out 0s after the restart" in result.stderr
    assert f"kube-system/{'Deployment' if waiting_for == 'coredns' else 'DaemonSet'}/{waiting_for} (" in result.stderr
    other = "DaemonSet/kube-proxy (" if waiting_for == "coredns" else "Deployment/coredns ("
    assert other not in result.stderr.rsplit("ERROR", 1)[-1]


def test_a_status_that_cannot_be_read_is_asked_again(fakes):
    lab_namespaces(fakes).on("kubectl", ROLL.format("kube-system"), "restarted\n")
    fakes.on("kubectl", STATUS.format("kube-system"), reply(exit=1, stderr="Unable to connect\n"), DONE)
    result = restart_clients(fakes)
    assert result.returncode == 0, result.stderr


def test_a_namespace_that_cannot_be_listed_restarts_nothing(fakes):
    fakes.on("kubectl", LIST.format("kube-flannel"), reply(exit=1, stderr="Unable to connect\n"))
    fakes.on("kubectl", LIST.format("kube-system"), SYSTEM)
    result = restart_clients(fakes)
    assert result.returncode == 1
    assert "cannot list the Deployments and DaemonSets of namespace kube-flannel" in result.stderr
    assert fakes.calls("kubectl", r"rollout restart") == []


def test_a_daemonset_that_updates_on_delete_is_refused_before_anything_restarts(fakes):
    lab_namespaces(fakes, flannel="DaemonSet/kube-flannel-ds|OnDelete\n")
    result = restart_clients(fakes)
    assert result.returncode == 1
    assert "kube-flannel/DaemonSet/kube-flannel-ds updates only OnDelete" in result.stderr
    assert fakes.calls("kubectl", r"rollout restart") == []


@pytest.mark.parametrize("count", [12, 13])
def test_more_workloads_than_the_lab_puts_there_are_refused_before_any_restart(fakes, count):
    many = "".join(f"Deployment/d{index}|\n" for index in range(count))
    lab_namespaces(fakes, system=many).on("kubectl", ROLL.format("kube-system"), "restarted\n")
    fakes.on("kubectl", STATUS.format("kube-system"), "".join(deploy(f"d{index}") for index in range(count)))
    result = restart_clients(fakes)
    assert result.returncode == (0 if count == 12 else 1), result.stderr
    assert bool(fakes.calls("kubectl", r"rollout restart")) == (count == 12)


def test_a_restart_that_fails_fails_the_step(fakes):
    lab_namespaces(fakes).on("kubectl", ROLL.format("kube-system"), reply(exit=1, stderr="forbidden\n"))
    result = restart_clients(fakes)
    assert result.returncode == 1
    assert "cannot restart daemonset/kube-proxy daemonset/hami-device-plugin deployment/coredns in kube-system" in (
        result.stderr)
    assert fakes.calls("kubectl", STATUS.format("kube-system")) == []
