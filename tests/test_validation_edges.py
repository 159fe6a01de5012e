"""The validation suite at the edges a live cluster produces: conditions that are Unknown,
missing or in another order, empty lists, and fakes that answer from what they were sent."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from components.config import parse_settings
from components.tenant_control_plane import control_plane_spec
from tests.plan import dev_config
from tests.test_validation import FakeLab, healthy_lab, ok, recorded, result, validate
from validation.checks.tenancy import container_trouble, coredns_problems, datastore_schema, node_problems, tcp_status
from validation.host import CommandResult

GPU_RESOURCE_PREFIX = "nvidia.com/"


def conditions_of(obj: dict) -> dict[str, dict]:
    return {item["type"]: item for item in obj["status"]["conditions"]}


def last_created_pod(lab: FakeLab, cluster: str, name: str) -> dict:
    for call in reversed(lab.calls):
        if call.cluster == cluster and call.command.startswith("create -f -") and call.stdin:
            manifest = json.loads(call.stdin)
            if manifest["kind"] == "Pod" and manifest["metadata"]["name"] == name:
                return manifest
    raise AssertionError(f"no pod {name} was created on {cluster}")


def log_of(pod: dict) -> str:
    """What a busybox `sh -c` pod prints: only its `echo` statements are modelled."""
    (container,) = pod["spec"]["containers"]
    assert container["command"][:2] == ["sh", "-c"], container["command"]
    printed = []
    for statement in container["command"][2].split(";"):
        words = shlex.split(statement)
        if words and words[0] == "echo":
            printed.append(" ".join(words[1:]) + "\n")
        elif words and words[:2] != ["exec", "sleep"] and words[0] != "sleep":
            raise AssertionError(f"the fake cannot run {statement!r}")
    return "".join(printed)


def webhook_dry_run(submitted: dict) -> dict:
    """HAMi's webhook (Project-HAMi/HAMi pkg/scheduler/webhook.go@v2.10.0) mutates only pods that ask
    for one of its resources: it sets schedulerName and adds nvidia.com/gpu when only memory or cores
    are asked for. Anything else is admitted unchanged."""
    pod = json.loads(json.dumps(submitted))
    limits = pod["spec"]["containers"][0].get("resources", {}).get("limits", {})
    if any(resource.startswith(GPU_RESOURCE_PREFIX) for resource in limits):
        pod["spec"]["schedulerName"] = "hami-scheduler"
        limits.setdefault("nvidia.com/gpu", "1")
    else:
        pod["spec"].setdefault("schedulerName", "default-scheduler")
    return pod


def last_dry_run(lab: FakeLab, tenant: str) -> dict:
    """What the tenant's latest dry run sent (its own: the other tenant's checks run beside it)."""
    return json.loads(lab.commands(tenant, r"--dry-run=server")[-1].stdin)


def answering_from_input(lab: FakeLab) -> FakeLab:
    """The healthy lab, but the probe's log and the dry run are derived from what the suite sent."""
    for tenant in ("tenant-a", "tenant-b"):
        lab.on(tenant, r"^logs -n \S+ probe$", lambda _, t=tenant: ok(log_of(last_created_pod(lab, t, "probe"))))
        lab.on(tenant, r"--dry-run=server", lambda _, t=tenant: ok(webhook_dry_run(last_dry_run(lab, t))))
    return lab


# --- fakes that answer from their input ---------------------------------------------------------------


def test_konnectivity_passes_when_the_probe_pod_prints_what_the_check_reads():
    code, report = validate(answering_from_input(healthy_lab()), "--only", "konnectivity")

    assert code == 0, report
    assert result(report, "konnectivity", "tenant-a")["status"] == "pass"


def test_webhook_passes_when_the_probe_asks_for_gpu_memory():
    lab = answering_from_input(healthy_lab())

    code, report = validate(lab, "--only", "webhook")

    assert code == 0, report
    (dry_run,) = [c for c in lab.calls if c.cluster == "tenant-a" and "--dry-run=server" in c.command]
    limits = json.loads(dry_run.stdin)["spec"]["containers"][0]["resources"]["limits"]
    # The probe leaves nvidia.com/gpu out on purpose: the webhook must add it.
    assert "nvidia.com/gpu" not in limits and int(limits["nvidia.com/gpumem"]) > 0


def test_a_pod_the_webhook_leaves_alone_fails_webhook():
    lab = healthy_lab()
    for tenant in ("tenant-a", "tenant-b"):
        lab.on(tenant, r"--dry-run=server", lambda _: ok(webhook_dry_run(recorded("pod-probe-running.json"))))

    code, report = validate(lab, "--only", "webhook")

    assert code == 1
    assert "default-scheduler" in result(report, "webhook", "tenant-a")["reason"]


# --- nodes: Ready by type, never by position ----------------------------------------------------------


@pytest.mark.parametrize("status", ["Unknown", "False"])
def test_a_node_whose_ready_condition_is_not_true_fails_nodes(status):
    lab = healthy_lab()
    node_list = recorded("nodes-tenant-a.json")
    # What the node lifecycle controller writes when the kubelet stops posting status.
    conditions_of(node_list["items"][0])["Ready"].update(
        status=status, reason="NodeStatusUnknown", message="Kubelet stopped posting node status."
    )
    lab.on("tenant-a", r"^get nodes ", ok(node_list))

    code, report = validate(lab, "--only", "nodes")

    assert code == 1
    reason = result(report, "nodes", "tenant-a")["reason"]
    assert "kamaji-tenant-a-w1 NotReady" in reason and "Kubelet stopped posting node status." in reason


def test_a_node_without_conditions_fails_nodes():
    lab = healthy_lab()
    node_list = recorded("nodes-tenant-a.json")
    del node_list["items"][0]["status"]["conditions"]
    lab.on("tenant-a", r"^get nodes ", ok(node_list))

    code, report = validate(lab, "--only", "nodes")

    assert code == 1
    assert "no Ready condition" in result(report, "nodes", "tenant-a")["reason"]


def test_condition_order_does_not_matter():
    lab = healthy_lab()
    node_list = recorded("nodes-tenant-a.json")
    node_list["items"][0]["status"]["conditions"].reverse()
    pods = recorded("coredns-pods.json")
    for pod in pods["items"]:
        pod["status"]["conditions"].reverse()
    lab.on("tenant-a", r"^get nodes ", ok(node_list))
    lab.on("tenant-a", r"k8s-app=kube-dns", ok(pods))

    code, report = validate(lab, "--only", "nodes")

    assert code == 0, report


def test_no_coredns_pods_at_all_fails_nodes():
    lab = healthy_lab()
    lab.on("tenant-b", r"k8s-app=kube-dns", ok({"apiVersion": "v1", "kind": "List", "items": []}))

    code, report = validate(lab, "--only", "nodes")

    assert code == 1
    assert "no CoreDNS pods" in result(report, "nodes", "tenant-b")["reason"]
    assert result(report, "nodes", "tenant-a")["status"] == "pass"


def test_a_coredns_pod_with_ready_unknown_fails_nodes():
    lab = healthy_lab()
    pods = recorded("coredns-pods.json")
    conditions_of(pods["items"][0])["Ready"]["status"] = "Unknown"
    lab.on("tenant-a", r"k8s-app=kube-dns", ok(pods))

    code, _ = validate(lab, "--only", "nodes")

    assert code == 1


# --- platform: DaemonSets -------------------------------------------------------------------------------


def platform_with_speaker(**status: int) -> FakeLab:
    lab = healthy_lab()
    workloads = recorded("platform-workloads.json")
    (speaker,) = [w for w in workloads["items"] if w["metadata"]["name"] == "metallb-speaker"]
    speaker["status"].update(status)
    lab.on("management", r"^get deployments,daemonsets --all-namespaces", ok(workloads))
    return lab


def test_a_daemonset_with_no_desired_pods_fails_load_balancer():
    lab = platform_with_speaker(desiredNumberScheduled=0, numberReady=0, updatedNumberScheduled=0)

    code, report = validate(lab, "--only", "load-balancer")

    assert code == 1
    assert "MetalLB speaker 0/0 ready" in result(report, "load-balancer", "management")["reason"]


def test_a_daemonset_still_rolling_out_fails_load_balancer():
    lab = platform_with_speaker(desiredNumberScheduled=1, numberReady=1, updatedNumberScheduled=0)

    code, report = validate(lab, "--only", "load-balancer")

    assert code == 1
    assert "MetalLB speaker" in result(report, "load-balancer", "management")["reason"]


def test_the_fakes_refuse_what_they_do_not_model():
    call = ["kubectl", "--kubeconfig", "/nowhere/tenant-a.kubeconfig", "--request-timeout=15s", "drain", "x"]
    answer = healthy_lab().run(call)
    assert isinstance(answer, CommandResult) and not answer.ok
    assert re.search(r"nothing recorded for tenant-a: drain x", answer.stderr)


def platform_with(name: str, change) -> FakeLab:
    lab = healthy_lab()
    workloads = recorded("platform-workloads.json")
    (workload,) = [w for w in workloads["items"] if w["metadata"]["name"] == name]
    change(workload)
    lab.on("management", r"^get deployments,daemonsets --all-namespaces", ok(workloads))
    return lab


def platform_reason(lab: FakeLab, check: str = "platform") -> str:
    code, report = validate(lab, "--only", check)
    assert code == 1
    return result(report, check, "management")["reason"]


def test_the_healthy_platform_reports_each_component_with_its_counts():
    code, report = validate(healthy_lab(), "--only", "platform", "load-balancer")

    assert code == 0
    assert result(report, "platform", "management")["evidence"] == (
        "cert-manager 1/1, cert-manager webhook 1/1, cert-manager cainjector 1/1, Kamaji 1/1, DataStore default ready"
    )
    assert result(report, "load-balancer", "management")["evidence"] == "MetalLB controller 1/1, MetalLB speaker 1/1"


def test_a_deployment_with_no_ready_pods_fails_platform():
    # The API server omits zero counts: a Deployment with no ready pod has no readyReplicas at all.
    lab = platform_with("kamaji", lambda w: w["status"].pop("readyReplicas"))
    assert "Kamaji 0/1 ready (Deployment kamaji)" in platform_reason(lab)


def test_every_unready_component_is_named_in_one_reason():
    workloads = recorded("platform-workloads.json")
    for workload in workloads["items"]:
        if workload["metadata"]["name"] in ("kamaji", "cert-manager-webhook"):
            workload["status"].pop("readyReplicas")
    lab = healthy_lab()
    lab.on("management", r"^get deployments,daemonsets --all-namespaces", ok(workloads))

    assert platform_reason(lab) == (
        "cert-manager webhook 0/1 ready (Deployment cert-manager-webhook); Kamaji 0/1 ready (Deployment kamaji)"
    )


def test_a_deployment_short_of_its_replicas_fails_platform():
    lab = platform_with("kamaji", lambda w: w["spec"].update(replicas=2))
    assert "Kamaji 1/2 ready" in platform_reason(lab)


def test_a_workload_without_status_yet_fails_load_balancer():
    lab = platform_with("metallb-speaker", lambda w: w.pop("status"))
    assert "MetalLB speaker 0/0 ready" in platform_reason(lab, "load-balancer")


def test_a_daemonset_without_updated_pods_fails_load_balancer():
    # updatedNumberScheduled is omitted when zero (k8s.io/api apps/v1 DaemonSetStatus, omitempty).
    lab = platform_with("metallb-speaker", lambda w: w["status"].pop("updatedNumberScheduled"))
    assert "MetalLB speaker 0/1 ready" in platform_reason(lab, "load-balancer")


def test_every_missing_component_is_named():
    lab = healthy_lab()
    workloads = recorded("platform-workloads.json")
    workloads["items"] = [w for w in workloads["items"] if "cert-manager" not in w["metadata"]["name"]]
    lab.on("management", r"^get deployments,daemonsets --all-namespaces", ok(workloads))

    reason = platform_reason(lab)

    for label in ("cert-manager", "cert-manager webhook", "cert-manager cainjector"):
        assert f"{label}: no Deployment found" in reason


def test_a_component_in_another_namespace_is_not_found():
    lab = platform_with("kamaji", lambda w: w["metadata"].update(namespace="default"))
    assert "Kamaji: no Deployment found" in platform_reason(lab)


@pytest.mark.parametrize("tenant", ["tenant-a", "tenant-b"])
def test_the_tenant_control_plane_fixture_is_what_the_program_submits(tenant):
    # The program names the DataStore Kamaji's defaulting webhook would add (clastix/kamaji
    # internal/webhook/handlers/tcp_defaults.go), Kamaji's default.
    # The fixtures' lab: the pool of outputs.json, each tenant at the address its endpoint names.
    pinned = {"tenant-a": "172.18.255.200", "tenant-b": "172.18.255.201"}
    stack = [{**t, "apiAddress": pinned[t["name"]]} for t in dev_config()["tenants"]]
    config = dev_config(kindSubnet="172.18.0.0/16", metallbAddressRange="172.18.255.200-172.18.255.250", tenants=stack)
    settings = {t.name: t for t in parse_settings(config).tenants}[tenant]
    spec = recorded(f"tcp-{tenant}.json")["spec"]
    assert spec["dataStore"] == "default"
    assert spec == control_plane_spec(settings, "v1.36.4")


def test_a_schema_output_that_disagrees_with_the_cluster_fails_isolation():
    # Kamaji reports the etcd prefix it really uses in status.storage.setup.schema.
    lab = healthy_lab()
    tcp = recorded("tcp-tenant-a.json")
    tcp.setdefault("status", {}).setdefault("storage", {}).setdefault("setup", {})["schema"] = "tenants_elsewhere"
    lab.on("management", r"^get tenantcontrolplanes\.kamaji\.clastix\.io tenant-a -n tenants ", ok(tcp))

    code, report = validate(lab, "--only", "isolation")

    assert code == 1
    (isolation,) = [r for r in report["results"] if r["check"] == "isolation"]
    assert "tenant-a stores its data under tenants_elsewhere, the dataStoreSchema output is" in isolation["reason"]


# --- tenancy helpers on edge inputs (survivors of a mutmut run over validation/checks) -----------------


def test_every_missing_or_unready_worker_is_named():
    unready = {
        "metadata": {"name": "w2"},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}], "nodeInfo": {"kubeletVersion": "v1.36.4"}},
    }
    assert node_problems([unready], ("w1", "w2", "w3"), "v1.36.4") == [
        "node w1 has not joined",
        "node w2 NotReady (Ready=Unknown)",
        "node w3 has not joined",
    ]


def test_a_worker_left_on_another_kubelet_version_is_named():
    ready = [{"type": "Ready", "status": "True"}]
    nodes = [
        {"metadata": {"name": name}, "status": {"conditions": ready, "nodeInfo": {"kubeletVersion": version}}}
        for name, version in (("w1", "v1.36.1"), ("w2", "v1.35.9"))
    ]
    (problem,) = node_problems(nodes, ("w1", "w2"), "v1.36.1")
    assert problem.startswith("node w2 runs kubelet v1.35.9, not the tenant's v1.36.1")


def test_a_pending_coredns_pod_says_why_the_scheduler_left_it():
    pod = {
        "metadata": {"name": "coredns-1"},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}
            ],
        },
    }
    assert coredns_problems([pod]) == ["CoreDNS pod coredns-1 is Pending (Unschedulable: 0/1 nodes)"]


@pytest.mark.parametrize(("restarts", "words"), [(1, "1 restart"), (2, "2 restarts"), (0, "0 restarts")])
def test_container_trouble_names_the_container_its_state_and_restarts(restarts, words):
    waiting = {"name": "coredns", "state": {"terminated": {"reason": "Error"}}, "restartCount": restarts}
    assert container_trouble(waiting) == f"coredns Error, {words}"


def test_a_container_in_no_known_state_is_not_ready():
    assert container_trouble({"name": "coredns", "state": {}}) == "coredns not ready, 0 restarts"


def test_the_schema_in_use_comes_from_status_else_from_spec():
    spec_only = {"spec": {"dataStoreSchema": "tenants_tenant_a"}, "status": {}}
    assert datastore_schema(spec_only) == "tenants_tenant_a"
    in_use = {"spec": {"dataStoreSchema": "a"}, "status": {"storage": {"setup": {"schema": "b"}}}}
    assert datastore_schema(in_use) == "b"


def test_a_control_plane_without_status_is_not_ready():
    assert tcp_status({"spec": {}}) == ""
    assert tcp_status({"status": {"kubernetesResources": {}}}) == ""
