"""A real Prometheus (Debian's 2.42) runs the lab's scrape configuration against loopback fakes of each
tenant's sources, and every query of the dashboard returns data for each tenant; promtool checks the
configuration the chart gets.

The fakes serve the exposition format of the pinned versions, written from their sources:
HAMi's scheduler (Project-HAMi/HAMi cmd/scheduler/metrics.go and pkg/metrics/metrics.go@v2.10.0: metric
names, label names, the `zone="vGPU"` label its registry wraps every series in, bytes for memory),
HAMi's kube-scheduler (kubernetes/kubernetes pkg/scheduler/metrics/metrics.go and
test/instrumentation/testdata/stable-metrics-list.yaml: `scheduler_pending_pods`, a STABLE gauge whose name
and `queue` label cannot change within v1.36; k8s.io/component-base metrics/opts.go@v0.36.3 prefixes its
help with "[STABLE] "), konnectivity-server (kubernetes-sigs/apiserver-network-proxy
pkg/server/metrics/metrics.go@v0.33.0 and @v0.36.0: the dial-failure counter has a series only once a dial
failed, `ready_backends` exists from v0.34.0 on) and Kamaji (clastix/kamaji internal/metrics/metrics.go@ddbabd8).
The HAMi fake stands where the tenant API server's service proxy would: HTTPS with the tenant's CA,
answering only the two proxy paths and only that tenant's bearer token.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from components import observability_values
from components.config import parse_settings
from components.dashboard import dashboard
from components.gpu_sharing import GPU_CORES_RESOURCE, GPU_MEMORY_RESOURCE
from components.gpus import node_gpu_count, register_annotation
from tests.metrics_server import Fake, serve
from tests.plan import dev_config
from tests.real_etcd import free_port

MISSING = [tool for tool in ("prometheus", "promtool", "openssl") if not shutil.which(tool)]
if MISSING and os.environ.get("CI"):
    # CI (GitHub Actions sets CI) installs them: a skip there would hide that these tests never ran.
    pytest.fail(f"CI is set but these are not installed: {', '.join(MISSING)} (Debian's prometheus, openssl)",
                pytrace=False)
pytestmark = pytest.mark.skipif(
    bool(MISSING), reason="needs Debian's prometheus package and openssl (.ci/run installs them)",
)

# The dev stack's two tenants (v1.36, no quota), and a third on v1.33 with a GPU memory quota: its
# konnectivity-server (v0.33.0) serves /metrics only on its admin port.
OLD_TENANT = {"name": "tenant-c", "kubernetesVersion": "v1.33.4", "gpus": [{"model": "NVIDIA L4 24GB", "count": 1}],
              "quotas": [{"namespace": "team-c", "gpumemMiB": 8192, "gpucores": 50}]}
LAB = parse_settings(dev_config(tenants=[*dev_config()["tenants"], OLD_TENANT]))
TENANTS = [tenant.name for tenant in LAB.tenants]
VERSIONS = {tenant.name: tenant.kubernetes_version for tenant in LAB.tenants}
WITH_QUOTA = {tenant.name for tenant in LAB.tenants if tenant.quotas}
STARTUP_SECONDS = 60
# Scrapes of every target before the tests query: a rate needs two samples; a third leaves one to spare.
SCRAPES_BEFORE_TESTS = 3

# Upstream facts (kubernetes-sigs/apiserver-network-proxy pkg/server/metrics/metrics.go@v0.33.0, DialFailureReason;
# cmd/server/app/server.go@v0.33.0 and @v0.34.0: where /metrics is served).
DIAL_FAILURE_REASONS = ("no_agent", "error_response", "unrecognized_response", "send_rsp", "backend_close",
                        "frontend_close")
FIRST_SERVER_WITH_METRICS_ON_HEALTH_PORT = (0, 34)
# Agents and dial failures per tenant: tenant-a has never failed a dial (so no failure series at all),
# tenant-b's tunnel has no agent.
AGENTS = {"tenant-a": 1, "tenant-b": 0, "tenant-c": 1}
DIAL_FAILURES = {"tenant-a": {}, "tenant-b": {"no_agent": 3}, "tenant-c": {"error_response": 2}}


def quota_limits(quota) -> dict[str, int | None]:
    """A configured quota's limit of each HAMi resource (components/gpu_sharing.py: quota_spec)."""
    return {GPU_MEMORY_RESOURCE: quota.gpumem_mib, GPU_CORES_RESOURCE: quota.gpucores}


WORKLOAD_NAMESPACE = "default"
POD_MEMORY_MIB = 8192
POD_CORES = 30


def server_version(tenant: str) -> tuple[int, int]:
    """The konnectivity-server Kamaji runs for the tenant: v0.<minor>.0 (konnectivity_server.go@ddbabd8)."""
    return 0, int(VERSIONS[tenant].split(".")[1])


def hami_exposition(tenant_name: str) -> str:
    """What HAMi 2.10.0's scheduler serves for a tenant of the dev stack: its configured GPUs, some allocated."""
    tenant = next(t for t in LAB.tenants if t.name == tenant_name)
    lines = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[dict, float]]) -> None:
        lines.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"])
        for labels, value in samples:
            # client_golang writes labels sorted by name.
            text = ",".join(f'{key}="{labels[key]}"' for key in sorted(labels))
            lines.append(f"{name}{{{text}}} {value:g}")

    devices = []
    for index in range(1, tenant.workers + 1):
        node = LAB.worker_name(tenant, index)
        for device in json.loads(register_annotation(node, tenant.gpus, tenant.gpu_slots)):
            devices.append((node, device))
    base = [({"node": node, "device_uuid": d["id"], "device_index": str(d["index"]), "device_type": d["type"],
              "zone": "vGPU"}, d) for node, d in devices]
    mib = 1024 * 1024
    metric("hami_build_info", "gauge", "hami build metadata exposed as labels with a constant value of 1.",
           [({"version": "v2.10.0", "revision": "fake", "build_date": "", "go_version": "go1.25",
              "compiler": "gc", "platform": "linux/amd64"}, 1)])
    metric("hami_gpu_core_allocated_ratio", "gauge", "Device core allocated for a certain GPU",
           [(labels, 30) for labels, _ in base])
    metric("hami_gpu_core_limit_ratio", "gauge", "Device core limit for a certain GPU",
           [(labels, d["devcore"]) for labels, d in base])
    metric("hami_gpu_memory_allocated_bytes", "gauge", "Device memory allocated for a certain GPU",
           [({**labels, "device_cores": str(d["devcore"])}, 8192 * mib) for labels, d in base])
    metric("hami_gpu_memory_limit_bytes", "gauge", "Device memory limit for a certain GPU",
           [(labels, d["devmem"] * mib) for labels, d in base])
    metric("hami_gpu_shared_count", "gauge", "Number of containers sharing this GPU",
           [(labels, 2) for labels, _ in base])
    # Per GPU container (collectContainerMetrics): one pod on each GPU, in the tenant's namespace `default`.
    pods = [({"namespace": WORKLOAD_NAMESPACE, "node": labels["node"], "pod": f"job-{labels['node']}-{d['index']}",
              "container_index": "0", "device_uuid": d["id"], "zone": "vGPU"}) for labels, d in base]
    metric("hami_vgpu_core_allocated_ratio", "gauge", "vGPU core allocated from a container",
           [(labels, POD_CORES) for labels in pods])
    metric("hami_vgpu_memory_allocated_bytes", "gauge", "vGPU memory allocated from a container",
           [(labels, POD_MEMORY_MIB * mib) for labels in pods])
    # Used is written for every namespace with HAMi pods, limit="0" where no ResourceQuota sets one; the limit
    # series only where one does (collectQuotaMetrics: q.LimitSet).
    quotas = [({"namespace": q.namespace, "quota_name": name, "zone": "vGPU"}, limit)
              for q in tenant.quotas for name, limit in quota_limits(q).items() if limit]
    if quotas:
        metric("hami_resource_quota_limit", "gauge", "resourcequota limit for a certain device",
               [(labels, limit) for labels, limit in quotas])
    unlimited = [({"namespace": WORKLOAD_NAMESPACE, "quota_name": name, "zone": "vGPU"}, 0, used)
                 for name, used in ((GPU_MEMORY_RESOURCE, POD_MEMORY_MIB * len(pods)),
                                    (GPU_CORES_RESOURCE, POD_CORES * len(pods)))]
    metric("hami_resource_quota_used", "gauge", "resourcequota usage for a certain device",
           [({**labels, "limit": str(limit)}, used)
            for labels, limit, used in [*((labels, limit, limit // 4) for labels, limit in quotas), *unlimited]])
    return "\n".join(lines) + "\n"


# Pending GPU pods per tenant and queue: tenant-a has one pod no GPU can take, tenant-b one about to be tried,
# tenant-c two waiting to retry.
PENDING = {TENANTS[0]: {"unschedulable": 1}, TENANTS[1]: {"active": 1}, TENANTS[2]: {"backoff": 2}}
QUEUES = ("active", "backoff", "gated", "unschedulable")


def kube_scheduler_exposition(tenant: str) -> str:
    """What HAMi's kube-scheduler (v1.36) serves: its queue gauge, every queue, and a series the job drops."""
    return "\n".join([
        "# HELP scheduler_pending_pods [STABLE] Number of pending pods, by the queue type. 'active' means number of "
        "pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
        "unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of "
        "unschedulable pods that the scheduler never attempted to schedule because they are gated.",
        "# TYPE scheduler_pending_pods gauge",
        *(f'scheduler_pending_pods{{queue="{queue}"}} {PENDING[tenant].get(queue, 0)}' for queue in QUEUES),
        "# HELP scheduler_schedule_attempts_total [STABLE] Number of attempts to schedule pods, by the result. "
        "'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
        "# TYPE scheduler_schedule_attempts_total counter",
        'scheduler_schedule_attempts_total{profile="hami-scheduler",result="scheduled"} 4',
    ]) + "\n"


def konnectivity_exposition(tenant: str) -> str:
    """What the tenant's konnectivity-server serves: no dial-failure series before a first failure, and
    `ready_backends` beside the deprecated gauge only from v0.34.0 on."""
    agents = AGENTS[tenant]
    lines = []
    if DIAL_FAILURES[tenant]:
        lines += ["# HELP konnectivity_network_proxy_server_dial_failure_count Number of dial failures observed. "
                  "Multiple failures can occur for a single dial request.",
                  "# TYPE konnectivity_network_proxy_server_dial_failure_count counter",
                  *(f'konnectivity_network_proxy_server_dial_failure_count{{reason="{reason}"}} {count}'
                    for reason, count in DIAL_FAILURES[tenant].items())]
    new = server_version(tenant) >= FIRST_SERVER_WITH_METRICS_ON_HEALTH_PORT
    lines += ["# HELP konnectivity_network_proxy_server_ready_backend_connections Number of konnectivity agent "
              "connected to the proxy server" + (". DEPRECATED, please use ready_backends" if new else ""),
              "# TYPE konnectivity_network_proxy_server_ready_backend_connections gauge",
              f"konnectivity_network_proxy_server_ready_backend_connections {agents}"]
    if new:
        lines += ["# HELP konnectivity_network_proxy_server_ready_backends Number of konnectivity agent connected to "
                  "the proxy server",
                  "# TYPE konnectivity_network_proxy_server_ready_backends gauge",
                  f'konnectivity_network_proxy_server_ready_backends{{proxy_strategy="default"}} {agents}']
    return "\n".join(lines) + "\n"


def kamaji_exposition() -> str:
    lines = [
        "# HELP kamaji_build_info Build information for Kamaji.",
        "# TYPE kamaji_build_info gauge",
        'kamaji_build_info{build_time="",commit="ddbabd8",dirty="false",repo="",version="edge"} 1',
        "# HELP kamaji_tenant_control_plane_status Current status and readiness of TenantControlPlane resources.",
        "# TYPE kamaji_tenant_control_plane_status gauge",
    ]
    # Another namespace's control plane, not this lab's: it must not be labelled as a tenant.
    for namespace, name in [*(("tenants", t) for t in TENANTS), ("elsewhere", TENANTS[0])]:
        lines.append(f'kamaji_tenant_control_plane_status{{ready="true",status="Ready",tcp_name="{name}",'
                     f'tcp_namespace="{namespace}"}} 1')
    return "\n".join(lines) + "\n"


def tenant_ca(directory: Path, tenant: str) -> ssl.SSLContext:
    """A CA of the tenant's own and a serving certificate for 127.0.0.1 signed by it, as Kamaji would make."""
    directory.mkdir(parents=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={tenant}-ca",
            "-keyout", str(directory / "ca.key"), "-out", str(directory / "ca.crt"))
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver",
            "-keyout", str(directory / "server.key"), "-out", str(directory / "server.csr"))
    (directory / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", str(directory / "server.csr"), "-CA", str(directory / "ca.crt"),
            "-CAkey", str(directory / "ca.key"), "-CAcreateserial", "-days", "1",
            "-extfile", str(directory / "san.cnf"), "-out", str(directory / "server.crt"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "server.crt", directory / "server.key")
    return context


@dataclass
class Lab:
    url: str
    fakes: dict[str, Fake]
    config: dict


# The DataStore each tenant's control-plane pods are labelled with: the first on one of its own.
DATASTORES = {TENANTS[0]: "team-a-etcd"}


def konnectivity_targets(fakes: dict[str, Fake], decoy: Fake) -> list[dict]:
    """What pod discovery in the tenants namespace would find: each tenant's sidecar with both its ports (the one
    that serves /metrics at its version is a fake, the other the decoy), plus pods to skip."""

    def pod(port: int, tenant: str, container: str, port_name: str) -> dict:
        return {"targets": [f"127.0.0.1:{port}"], "labels": {
            "__meta_kubernetes_namespace": "tenants",
            "__meta_kubernetes_pod_name": f"{tenant}-6d9f-x",
            "__meta_kubernetes_pod_label_kamaji_clastix_io_name": tenant,
            "__meta_kubernetes_pod_label_component_kamaji_clastix_io_datastore": DATASTORES.get(tenant, "default"),
            "__meta_kubernetes_pod_container_name": container,
            "__meta_kubernetes_pod_container_port_name": port_name}}

    def sidecar(tenant: str) -> list[dict]:
        metrics = "healthport" if server_version(tenant) >= FIRST_SERVER_WITH_METRICS_ON_HEALTH_PORT else "adminport"
        return [pod(fakes[f"konnectivity-{tenant}"].port if name == metrics else decoy.port, tenant,
                    "konnectivity-server", name) for name in ("adminport", "healthport", "agentport")]

    return [
        *(target for t in TENANTS for target in sidecar(t)),
        pod(decoy.port, TENANTS[0], "kube-apiserver", "kube-apiserver"),  # another container of the pod
        pod(decoy.port, "not-ours", "konnectivity-server", "healthport"),  # a control plane the lab did not make
    ]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("prometheus")
    fakes: dict[str, Fake] = {}
    with ThreadPoolExecutor() as pool:  # each is openssl's RSA key generation: side by side
        contexts = dict(zip(TENANTS, pool.map(lambda tenant: tenant_ca(root / "secrets" / tenant, tenant), TENANTS),
                            strict=True))
    for tenant, context in contexts.items():
        token = f"token-of-{tenant}"
        (root / "secrets" / tenant / "token").write_text(token)
        # The tenant's API server: both Services through its proxy.
        fakes[f"hami-{tenant}"] = serve({observability_values.HAMI_METRICS_PATH: hami_exposition(tenant),
                                         observability_values.HAMI_QUEUE_PATH: kube_scheduler_exposition(tenant)},
                                        token, context)
        fakes[f"konnectivity-{tenant}"] = serve({"/metrics": konnectivity_exposition(tenant)})
    fakes["kamaji"] = serve({"/metrics": kamaji_exposition()})
    decoy = serve({"/metrics": "decoy_metric 1\n"})

    config = observability_values.prometheus_config(
        VERSIONS, True, secrets_dir=str(root / "secrets"),
        api_server=lambda tenant: f"127.0.0.1:{fakes[f'hami-{tenant}'].port}",
        kamaji_target=f"127.0.0.1:{fakes['kamaji'].port}",
    )
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    (root / "alerting_rules.yml").write_text(yaml.safe_dump(observability_values.alerting_rules()))
    config["rule_files"] = [str(root / "alerting_rules.yml")]
    for job in config["scrape_configs"]:
        if job["job_name"] == observability_values.JOB_KONNECTIVITY:
            # Discovery needs a cluster; its targets, as it would label them, go through the same relabelling.
            del job["kubernetes_sd_configs"]
            job["static_configs"] = konnectivity_targets(fakes, decoy)
    config_file = root / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    port = free_port()
    log = (root / "prometheus.log").open("w")
    process = subprocess.Popen(
        ["prometheus", f"--config.file={config_file}", f"--storage.tsdb.path={root / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    lab = Lab(f"http://127.0.0.1:{port}", {**fakes, "decoy": decoy}, config)
    try:
        wait_for_scrapes(lab, process, root / "prometheus.log")
        yield lab
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)
        log.close()
        for fake in lab.fakes.values():
            fake.server.shutdown()


def api(lab: Lab, path: str, **params: str) -> dict:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"{lab.url}{path}{query}", timeout=10) as answer:  # noqa: S310 (loopback)
        return json.loads(answer.read())["data"]


def wait_for_scrapes(lab: Lab, process: subprocess.Popen, log: Path) -> None:
    """Until every target is up and has been scraped a few times (rates need two samples), and every rule group
    has been evaluated since (an alert is pending only from the evaluation that first sees its series)."""
    deadline = time.monotonic() + STARTUP_SECONDS
    scraped_by = None
    while time.monotonic() < deadline:
        assert process.poll() is None, f"prometheus exited: {log.read_text()[-2000:]}"
        try:
            if scraped_by is None:
                targets = api(lab, "/api/v1/targets")["activeTargets"]
                scrapes = [float(r["value"][1]) for r in query(lab, "count_over_time(up[1m])")]
                if (targets and all(t["health"] == "up" for t in targets) and len(scrapes) == len(targets)
                        and min(scrapes) >= SCRAPES_BEFORE_TESTS):
                    scraped_by = time.time()
            else:
                groups = api(lab, "/api/v1/rules")["groups"]
                if all(datetime.fromisoformat(group["lastEvaluation"]).timestamp() > scraped_by for group in groups):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"targets not all up and scraped within {STARTUP_SECONDS}s: {log.read_text()[-2000:]}")


def query(lab: Lab, expr: str) -> list[dict]:
    return api(lab, "/api/v1/query", query=expr)["result"]


def dashboard_queries() -> list[tuple[str, str]]:
    return [(panel["title"], target["expr"]) for panel in dashboard()["panels"] for target in panel["targets"]]


def for_tenant(expr: str, tenant: str) -> str:
    # Grafana's own variables: the tenant selector and the rate window it picks.
    return expr.replace("$tenant", tenant).replace("$__rate_interval", "1m")


# --- promtool ---------------------------------------------------------------------------------------------------


def debian_buildable(config: dict) -> dict:
    """The configuration with pod discovery swapped for targets labelled as it would label them.

    Debian's prometheus is built without Kubernetes service discovery ("field kubernetes_sd_configs not
    found"), so this is the most of the configuration it can read. No Prometheus here reads the discovery
    block itself: tests/test_observability.py only compares it with the block the lab means to write.
    """
    for job in config["scrape_configs"]:
        if "kubernetes_sd_configs" in job:
            del job["kubernetes_sd_configs"]
            job["static_configs"] = [{"targets": ["127.0.0.1:8134"], "labels": {
                "__meta_kubernetes_pod_label_kamaji_clastix_io_name": TENANTS[0]}}]
    return config


def test_promtool_accepts_the_configuration_the_chart_gets(tmp_path):
    secrets = tmp_path / "secrets"
    for tenant in TENANTS:
        (secrets / tenant).mkdir(parents=True)
        (secrets / tenant / "token").write_text("t")
        (secrets / tenant / "ca.crt").write_text("")
    values = observability_values.prometheus_values(VERSIONS, True)
    config = debian_buildable({"global": values["server"]["global"],
                               "scrape_configs": values["serverFiles"]["prometheus.yml"]["scrape_configs"]})
    text = yaml.safe_dump(config).replace(observability_values.TENANT_SECRETS_DIR, str(secrets))
    (tmp_path / "prometheus.yml").write_text(text)
    checked = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout + checked.stderr


def test_promtool_refuses_a_broken_configuration(tmp_path):
    # The check above can fail: a relabel action Prometheus does not know.
    config = debian_buildable(observability_values.prometheus_config(VERSIONS, True))
    config["scrape_configs"][-2]["relabel_configs"][0]["action"] = "keepp"
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    checked = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode != 0


# --- a real Prometheus ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tenant", TENANTS)
@pytest.mark.parametrize(("title", "expr"), dashboard_queries())
def test_every_dashboard_query_returns_data_for_each_tenant(prometheus, tenant, title, expr):
    result = query(prometheus, for_tenant(expr, tenant))
    if "ALERTS" in expr:
        # An alert has a series only once it fires: test_observability_alerts.py and the pending test below.
        return
    if "$tenant" not in expr:
        # The all-tenants panel: one series per tenant, this one's among them.
        assert tenant in {r["metric"].get("tenant") for r in result}, f"{title}: {expr} has no series of {tenant}"
    elif "hami_resource_quota" in expr and tenant not in WITH_QUOTA:
        # HAMi has quota series only for namespaces with a ResourceQuota: none for a tenant without quotas.
        assert result == [], f"{title}: {expr} returned data for {tenant}, which has no quota"
    else:
        assert result, f"{title}: {expr} returned nothing for {tenant}"


def test_the_quota_panel_shows_each_configured_quota_and_nothing_else(prometheus):
    [panel] = [p for p in dashboard()["panels"] if p["title"] == "GPU memory quota used vs limit"]
    for tenant in LAB.tenants:
        for target in panel["targets"]:
            answer = query(prometheus, for_tenant(target["expr"], tenant.name))
            shown = {r["metric"]["namespace"] for r in answer}
            assert shown == {q.namespace for q in tenant.quotas if q.gpumem_mib}, (tenant.name, target["expr"])
    # Used and limit on one axis in MiB; the cores' quota (percent) has a panel of its own.
    assert panel["fieldConfig"]["defaults"]["unit"] == "mbytes"
    assert panel_titled("GPU cores quota used vs limit")["fieldConfig"]["defaults"]["unit"] == "percent"


def test_the_rules_load_and_a_tunnel_without_agents_is_pending_its_alert(prometheus):
    rules = api(prometheus, "/api/v1/rules")["groups"]
    assert {rule["health"] for group in rules for rule in group["rules"]} == {"ok"}
    pending = query(prometheus, 'ALERTS{alertstate="pending"}')
    assert {(r["metric"]["alertname"], r["metric"]["tenant"]) for r in pending} >= {
        ("KonnectivityNoAgents", t) for t in TENANTS if AGENTS[t] == 0}
    assert not {r["metric"]["tenant"] for r in pending if r["metric"]["alertname"] == "KonnectivityNoAgents"} & {
        t for t in TENANTS if AGENTS[t]}


def test_every_scraped_series_carries_a_tenant_label(prometheus):
    # Kamaji's target is shared by all tenants: only Prometheus' own series about that scrape lack one.
    unlabelled = query(prometheus, 'count by (__name__, job) ({__name__=~".+", __name__!~"up|scrape_.+", tenant=""})')
    assert unlabelled == []
    assert {r["metric"]["job"] for r in query(prometheus, 'up{tenant=""}')} == {"kamaji"}


def test_each_tenant_sees_its_own_gpus_and_no_one_elses(prometheus):
    for tenant in LAB.tenants:
        gpus = query(prometheus, f'count(hami_gpu_memory_limit_bytes{{tenant="{tenant.name}"}})')
        assert float(gpus[0]["value"][1]) == tenant.workers * node_gpu_count(tenant.gpus)
        nodes = {r["metric"]["node"] for r in query(prometheus, f'hami_gpu_shared_count{{tenant="{tenant.name}"}}')}
        assert nodes == {LAB.worker_name(tenant, index) for index in range(1, tenant.workers + 1)}


def test_the_api_server_fake_was_reached_only_through_the_proxy_paths_with_its_tenants_token(prometheus):
    for tenant in TENANTS:
        requests = prometheus.fakes[f"hami-{tenant}"].requests
        paths = (observability_values.HAMI_METRICS_PATH, observability_values.HAMI_QUEUE_PATH)
        assert set(requests) == {(path, f"Bearer token-of-{tenant}") for path in paths}


def test_the_pending_gpu_pods_panel_shows_each_tenants_own_queue(prometheus):
    [panel] = [p for p in dashboard()["panels"] if p["title"] == "Pending GPU pods"]
    [target] = panel["targets"]
    for tenant in TENANTS:
        answer = query(prometheus, for_tenant(target["expr"], tenant))
        assert {r["metric"]["queue"]: float(r["value"][1]) for r in answer} == {
            queue: PENDING[tenant].get(queue, 0) for queue in QUEUES}


def test_only_the_queue_series_of_the_kube_scheduler_is_kept(prometheus):
    # (Prometheus' own series about each scrape, up and scrape_*, aside.)
    kept = query(prometheus, f'count by (__name__) ({{job=~"{observability_values.JOB_GPU_QUEUE}-.+", '
                             f'__name__!~"up|scrape_.+"}})')
    assert [r["metric"]["__name__"] for r in kept] == [observability_values.QUEUE_SERIES]


def test_konnectivity_discovery_keeps_only_the_sidecar_of_this_labs_tenants(prometheus):
    targets = api(prometheus, "/api/v1/targets")["activeTargets"]
    jobs = {(t["labels"]["job"], t["labels"].get("tenant")) for t in targets}
    assert {tenant for job, tenant in jobs if job == "konnectivity"} == set(TENANTS)
    assert prometheus.fakes["decoy"].requests == []


def test_each_konnectivity_target_is_named_by_its_pod(prometheus):
    # Its address is the pod's IP and a port; the pod's name tells a user which control-plane replica it is.
    targets = [t for t in api(prometheus, "/api/v1/targets")["activeTargets"] if t["labels"]["job"] == "konnectivity"]
    assert len(targets) == len(TENANTS)
    for target in targets:
        assert target["labels"].get("pod") == target["discoveredLabels"]["__meta_kubernetes_pod_name"], target


def panel_titled(title: str) -> dict:
    [panel] = [p for p in dashboard()["panels"] if p["title"] == title]
    return panel


def shown_as(panel: dict, result: list[dict]) -> list[tuple[str, str]]:
    """(text, colour) of each value a Grafana stat shows, as its display processor picks them: the mapping that
    matches the value (with no series at all, null), else the value and its threshold colour."""
    defaults = panel["fieldConfig"]["defaults"]

    def display(value: float | None) -> tuple[str, str]:
        for mapping in defaults["mappings"]:
            if mapping["type"] == "value" and value is not None and f"{value:g}" in mapping["options"]:
                hit = mapping["options"][f"{value:g}"]
                return hit["text"], hit["color"]
            if mapping["type"] == "special" and value is None and mapping["options"]["match"] in ("null", "null+nan"):
                return mapping["options"]["result"]["text"], mapping["options"]["result"]["color"]
        if value is None:
            return defaults.get("noValue", "No data"), defaults["thresholds"]["steps"][0]["color"]
        steps = [step for step in defaults["thresholds"]["steps"] if step["value"] is None or value >= step["value"]]
        return f"{value:g}", steps[-1]["color"]

    return [display(float(r["value"][1])) for r in result] or [display(None)]


def test_the_datastore_panel_names_each_tenants_datastore_from_its_pods_label(prometheus):
    [target] = panel_titled("DataStore of each tenant")["targets"]
    every = for_tenant(target["expr"], "|".join(TENANTS))  # the selector on All
    found = {(r["metric"]["tenant"], r["metric"]["datastore"]) for r in query(prometheus, every)}
    assert found == {(tenant, DATASTORES.get(tenant, "default")) for tenant in TENANTS}


def test_a_tunnel_without_agents_and_one_without_series_are_both_marked_red(prometheus):
    stat = panel_titled("Konnectivity agents connected")
    expr = stat["targets"][0]["expr"]
    shown = {t: shown_as(stat, query(prometheus, for_tenant(expr, t))) for t in TENANTS}
    # Old (v0.33) and new servers alike: the agents of each, and a tunnel with none in red.
    assert shown == {t: [("NO AGENTS", "red")] if AGENTS[t] == 0 else [(f"{AGENTS[t]}", "green")] for t in TENANTS}
    # A control plane whose sidecar is not scraped has no series at all: red too, not "No data".
    assert query(prometheus, for_tenant(expr, "not-ours")) == []
    assert shown_as(stat, []) == [("NO AGENTS", "red")]


def test_the_all_tenants_panel_shows_every_tenants_agents_whichever_is_selected(prometheus):
    stat = panel_titled("Konnectivity agents connected, every tenant")
    [target] = stat["targets"]
    assert "$tenant" not in target["expr"]
    result = query(prometheus, target["expr"])
    by_tenant = {r["metric"]["tenant"]: shown_as(stat, [r]) for r in result}
    assert by_tenant == {t: [("NO AGENTS", "red")] if AGENTS[t] == 0 else [(f"{AGENTS[t]}", "green")] for t in TENANTS}


def test_dial_failures_read_zero_for_a_tenant_that_never_failed_and_the_reasons_of_the_others(prometheus):
    [target] = panel_titled("Konnectivity dial failures")["targets"]
    for tenant in TENANTS:
        reasons = {r["metric"].get("reason") for r in query(prometheus, for_tenant(target["expr"], tenant))}
        assert reasons == (set(DIAL_FAILURES[tenant]) or {"none"}), tenant
        assert reasons <= {*DIAL_FAILURE_REASONS, "none"}
    # Not a 0 for a tenant whose konnectivity-server is not scraped at all.
    assert query(prometheus, for_tenant(target["expr"], "not-ours")) == []


def test_each_konnectivity_server_is_scraped_on_the_port_that_serves_metrics_at_its_version(prometheus):
    targets = [t for t in api(prometheus, "/api/v1/targets")["activeTargets"]
               if t["labels"]["job"] == observability_values.JOB_KONNECTIVITY]
    ports = {t["labels"]["tenant"]: t["discoveredLabels"]["__meta_kubernetes_pod_container_port_name"]
             for t in targets}
    assert ports == {t: "healthport" if server_version(t) >= FIRST_SERVER_WITH_METRICS_ON_HEALTH_PORT else "adminport"
                     for t in TENANTS}
    assert {t["health"] for t in targets} == {"up"}


def test_kamaji_series_of_other_namespaces_are_dropped(prometheus):
    statuses = query(prometheus, "kamaji_tenant_control_plane_status")
    assert sorted(r["metric"]["tenant"] for r in statuses) == sorted(TENANTS)
    assert {r["metric"]["tcp_namespace"] for r in statuses} == {"tenants"}


def test_the_tenant_selector_lists_exactly_the_tenants(prometheus):
    variable = dashboard()["templating"]["list"][0]
    label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["definition"])
    values = api(prometheus, f"/api/v1/label/{label[2]}/values", **{"match[]": label[1]})
    assert sorted(values) == sorted(TENANTS)


def test_make_validates_reading_of_this_prometheus_finds_every_tenant_healthy_with_its_gpus(prometheus):
    from validation.checks.observability import gpu_query, scalar, target_problems

    targets = api(prometheus, "/api/v1/targets", state="active")
    for tenant in LAB.tenants:
        healthy, problems = target_problems(targets, tenant.name)
        assert problems == [] and len(healthy) == 3, tenant.name
        seen = scalar(api(prometheus, "/api/v1/query", query=gpu_query(tenant.name)))
        assert seen == tenant.workers * node_gpu_count(tenant.gpus)
