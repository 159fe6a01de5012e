"""A real Prometheus (Debian's 2.42) runs the lab's scrape jobs and rules while tenants misbehave: one tenant's
sources vanish (it sleeps: Kamaji reports it Sleeping), one tenant runs two control-plane replicas, and two tenants'
HAMi schedulers flood series or labels. The dashboard's queries are run as Grafana runs them.

The fakes serve the series of the pinned versions (tests/test_observability_prometheus.py cites them): HAMi's
per-GPU and per-container series (Project-HAMi/HAMi cmd/scheduler/metrics.go@v2.10.0), konnectivity-server's
`ready_backends` (kubernetes-sigs/apiserver-network-proxy pkg/server/metrics/metrics.go@v0.36.0: each server
counts the agents connected to it, and each agent connects to every server) and Kamaji's status gauge
(clastix/kamaji internal/metrics/metrics.go@ddbabd8: reset and set again, one series per control plane).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from components import observability_values
from components.dashboard import NO_AGENTS, dashboard
from tests.metrics_server import Fake, serve
from tests.real_etcd import free_port

if not shutil.which("prometheus"):
    if os.environ.get("CI"):
        pytest.fail("CI is set but prometheus is not installed (Debian's prometheus)", pytrace=False)
    pytest.skip("needs Debian's prometheus package", allow_module_level=True)

# tenant-a: two control-plane replicas, two agents; tenant-b: goes to sleep during the test; the flooders: one
# serves a sample more than the limit, one a series with a label more than the limit.
AWAKE, SLEEPER, FLOOD_SAMPLES, FLOOD_LABELS = "tenant-a", "tenant-b", "tenant-f", "tenant-l"
TENANTS = (AWAKE, SLEEPER, FLOOD_SAMPLES, FLOOD_LABELS)
REPLICAS = {AWAKE: 2, SLEEPER: 1, FLOOD_SAMPLES: 1, FLOOD_LABELS: 1}
AGENTS = {AWAKE: 2, SLEEPER: 1, FLOOD_SAMPLES: 1, FLOOD_LABELS: 1}
GPUS = 2
SHARED = (1, 0)  # containers on each GPU: the second is free
MIB = 1024 * 1024
STARTUP_SECONDS = 60
# Points of each series before the sleep: a rate needs two, so a stale rate would show; a third to spare.
SCRAPES_BEFORE_SLEEP = 3


def hami(tenant: str) -> str:
    """Two GPUs on one node, one pod on each (a quarter of its memory, 30% of its cores), and the flood."""
    lines = []
    for index in range(GPUS):
        gpu = f'device_index="{index}",device_type="NVIDIA",device_uuid="gpu-{index}",node="{tenant}-worker"'
        lines += [f"hami_gpu_memory_limit_bytes{{{gpu}}} {16384 * MIB}",
                  f'hami_gpu_memory_allocated_bytes{{{gpu},device_cores="100"}} {4096 * MIB}',
                  f"hami_gpu_core_limit_ratio{{{gpu}}} 100", f"hami_gpu_core_allocated_ratio{{{gpu}}} 30",
                  f"hami_gpu_shared_count{{{gpu}}} {SHARED[index]}"]
        pod = (f'container_index="0",device_uuid="gpu-{index}",namespace="default",node="{tenant}-worker",'
               f'pod="job-{index}"')
        lines += [f"hami_vgpu_memory_allocated_bytes{{{pod}}} {4096 * MIB}",
                  f"hami_vgpu_core_allocated_ratio{{{pod}}} 30"]
    if tenant == FLOOD_SAMPLES:
        lines += [f'hami_flood{{n="{n}"}} 1' for n in range(observability_values.SAMPLE_LIMIT)]
    if tenant == FLOOD_LABELS:
        lines.append("hami_flood{" + ",".join(f'l{n}="x"' for n in range(observability_values.LABEL_LIMIT)) + "} 1")
    return "\n".join(lines) + "\n"


def queue() -> str:
    return 'scheduler_pending_pods{queue="active"} 0\nscheduler_pending_pods{queue="unschedulable"} 1\n'


def konnectivity(tenant: str) -> str:
    return f'konnectivity_network_proxy_server_ready_backends{{proxy_strategy="default"}} {AGENTS[tenant]}\n'


def kamaji(statuses: dict[str, tuple[str, str]]) -> str:
    return "".join(f'kamaji_tenant_control_plane_status{{ready="{ready}",status="{status}",tcp_name="{tenant}",'
                   f'tcp_namespace="tenants"}} 1\n' for tenant, (status, ready) in statuses.items())


@dataclass
class Lab:
    url: str
    fakes: dict[str, Fake]
    kamaji: dict[str, tuple[str, str]]
    slept_at: float = 0.0


def api(lab: Lab, path: str, **params: object) -> dict:
    with urllib.request.urlopen(f"{lab.url}{path}?{urllib.parse.urlencode(params)}", timeout=10) as answer:  # noqa: S310
        return json.loads(answer.read())["data"]


def configuration(fakes: dict[str, Fake]) -> dict:
    """The lab's jobs on the fakes: the tenant API server's proxy stands in plain HTTP (the TLS and token path is
    tests/test_observability_prometheus.py's), discovered sidecars as static targets labelled as discovery would."""
    config = observability_values.prometheus_config(
        {tenant: "v1.36.4" for tenant in TENANTS}, True,
        api_server=lambda tenant: fakes[f"hami-{tenant}"].address, kamaji_target=fakes["kamaji"].address)
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    for job in config["scrape_configs"]:
        if job.pop("authorization", None):
            job["scheme"] = "http"
            del job["tls_config"]
        if job["job_name"] == observability_values.JOB_KONNECTIVITY:
            del job["kubernetes_sd_configs"]
            job["static_configs"] = [
                {"targets": [fakes[f"konnectivity-{tenant}-{replica}"].address], "labels": {
                    "__meta_kubernetes_pod_name": f"{tenant}-{replica}",
                    "__meta_kubernetes_pod_label_kamaji_clastix_io_name": tenant,
                    "__meta_kubernetes_pod_container_name": "konnectivity-server",
                    "__meta_kubernetes_pod_container_port_name": "healthport"}}
                for tenant in TENANTS for replica in range(REPLICAS[tenant])]
    return config


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    root: Path = tmp_path_factory.mktemp("prometheus-stale")
    statuses = {tenant: ("Ready", "true") for tenant in TENANTS}
    fakes = {f"hami-{tenant}": serve({observability_values.HAMI_METRICS_PATH: hami(tenant),
                                     observability_values.HAMI_QUEUE_PATH: queue()}) for tenant in TENANTS}
    fakes |= {f"konnectivity-{tenant}-{replica}": serve({"/metrics": konnectivity(tenant)})
              for tenant in TENANTS for replica in range(REPLICAS[tenant])}
    fakes["kamaji"] = serve({"/metrics": kamaji(statuses)})
    config = configuration(fakes)
    (root / "rules.yml").write_text(yaml.safe_dump(observability_values.alerting_rules()))
    config["rule_files"] = [str(root / "rules.yml")]
    (root / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (root / "prometheus.log").open("w")
    process = subprocess.Popen(
        ["prometheus", f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    lab = Lab(f"http://127.0.0.1:{port}", fakes, statuses)
    try:
        wait_until_scraped(lab, process, root / "prometheus.log")
        # tenant-b sleeps: its control-plane pod and HAMi are gone, Kamaji reports it Sleeping.
        lab.fakes[f"konnectivity-{SLEEPER}-0"].stop()
        lab.fakes[f"hami-{SLEEPER}"].stop()
        statuses[SLEEPER] = ("Sleeping", "false")
        lab.fakes["kamaji"].bodies["/metrics"] = kamaji(statuses)
        lab.slept_at = time.time()
        wait_until_stale(lab)
        yield lab
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)
        log.close()
        for fake in fakes.values():
            fake.server.shutdown()


def wait_until_scraped(lab: Lab, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        assert process.poll() is None, f"prometheus exited: {log.read_text()[-2000:]}"
        try:
            targets = api(lab, "/api/v1/targets")["activeTargets"]
            counts = api(lab, "/api/v1/query", query="count_over_time(up[1m])")["result"]
            scrapes = [float(r["value"][1]) for r in counts]
            if targets and len(scrapes) == len(targets) and min(scrapes) >= SCRAPES_BEFORE_SLEEP:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"not every target scraped within {STARTUP_SECONDS}s: {log.read_text()[-2000:]}")


def wait_until_stale(lab: Lab) -> None:
    """Until every target has been scraped since the sleeper's sources went away, and each of the sleeper's
    scrapes failed: a failed scrape's commit carries the staleness markers of the series the target had
    (prometheus/prometheus scrape/scrape.go@v2.42.0, scrapeAndReport), and `up` is written in that commit."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        scraped_at = api(lab, "/api/v1/query", query="timestamp(up)")["result"]
        sleeper_up = api(lab, "/api/v1/query", query=f'up{{tenant="{SLEEPER}"}}')["result"]
        if (scraped_at and all(float(r["value"][1]) > lab.slept_at for r in scraped_at)
                and sleeper_up and all(float(r["value"][1]) == 0 for r in sleeper_up)):
            return
        time.sleep(0.1)
    raise AssertionError(f"not every target scraped again within {STARTUP_SECONDS}s of {SLEEPER}'s sleep")


def as_grafana_runs(lab: Lab, target: dict, tenants: str) -> list[tuple[dict, float | None]]:
    """Each series' value as the panel shows it: an instant target's value now; a range target's last non-null
    point over the last 10 minutes (the stat's and table's lastNotNull)."""
    expr = target["expr"].replace("$tenant", tenants).replace("$__rate_interval", "1m")
    now = time.time()
    if target.get("instant"):
        answer = api(lab, "/api/v1/query", query=expr, time=now)
        return [(r["metric"], float(r["value"][1])) for r in answer["result"]]
    answer = api(lab, "/api/v1/query_range", query=expr, start=now - 600, end=now, step=1)
    return [(r["metric"], float(r["values"][-1][1])) for r in answer["result"]]


def shown_panels() -> list[tuple[str, dict]]:
    return [(p["title"], t) for p in dashboard()["panels"] if p["type"] in ("stat", "table") for t in p["targets"]]


ALL = "|".join(TENANTS)


@pytest.mark.parametrize(("title", "target"), shown_panels(), ids=lambda v: v if isinstance(v, str) else v["refId"])
def test_no_stat_or_table_shows_a_value_of_a_tenant_that_is_gone(lab, title, target):
    shown = [(labels, value) for labels, value in as_grafana_runs(lab, target, ALL)
             if labels.get("tenant") == SLEEPER]
    now = api(lab, "/api/v1/query", query=target["expr"].replace("$tenant", ALL))["result"]
    true_now = [(r["metric"], float(r["value"][1])) for r in now if r["metric"].get("tenant") == SLEEPER]
    # Empty, 0 or the state Kamaji reports now: never the series the sleeping tenant had before.
    assert sorted(map(json.dumps, shown)) == sorted(map(json.dumps, true_now)), title


def test_a_sleeping_tenant_shows_no_agents_down_targets_and_sleeping(lab):
    panels = {p["title"]: p for p in dashboard()["panels"]}
    [agents] = as_grafana_runs(lab, panels["Konnectivity agents connected"]["targets"][0], SLEEPER) or [(None, None)]
    assert agents == (None, None)  # no series: the stat's null mapping, NO AGENTS in red
    assert panels["Konnectivity agents connected"]["fieldConfig"]["defaults"]["noValue"] == NO_AGENTS
    health = as_grafana_runs(lab, panels["Scrape health"]["targets"][0], SLEEPER)
    # (The sidecar's static target stands for a pod discovery would drop with the pod: in a cluster no series.)
    assert {labels["job"]: value for labels, value in health} == {
        f"{observability_values.JOB_HAMI}-{SLEEPER}": 0, f"{observability_values.JOB_GPU_QUEUE}-{SLEEPER}": 0,
        observability_values.JOB_KONNECTIVITY: 0}
    status = as_grafana_runs(lab, panels["Control plane (Kamaji)"]["targets"][0], SLEEPER)
    assert [(labels["status"], labels["ready"]) for labels, _ in status] == [("Sleeping", "false")]


def column(lab: Lab, panel_title: str, header: str) -> dict[str, float]:
    """One column of a table panel: its value per row, keyed by the row's labels joined by "/" (the tenant;
    tenant/namespace/pod; tenant/node)."""
    [panel] = [p for p in dashboard()["panels"] if p["title"] == panel_title]
    organize = panel["transformations"][1]["options"]
    [ref] = [name.removeprefix("Value #") for name, shown in organize["renameByName"].items() if shown == header]
    [target] = [t for t in panel["targets"] if t["refId"] == ref]
    keys = [name for name in organize["indexByName"] if not name.startswith("Value #")]
    return {"/".join(labels[key] for key in keys): value for labels, value in as_grafana_runs(lab, target, ALL)}


def test_agents_are_counted_once_whatever_the_control_plane_replicas(lab):
    assert column(lab, "Every tenant", "Agents")[AWAKE] == AGENTS[AWAKE]
    for title in ("Konnectivity agents connected", "Konnectivity agents connected, every tenant"):
        [panel] = [p for p in dashboard()["panels"] if p["title"] == title]
        shown = {labels["tenant"]: value for labels, value in as_grafana_runs(lab, panel["targets"][0], ALL)}
        assert shown[AWAKE] == AGENTS[AWAKE], title


def test_the_every_tenant_table_sums_each_tenants_gpus(lab):
    assert column(lab, "Every tenant", "GPUs")[AWAKE] == GPUS
    assert column(lab, "Every tenant", "GPUs in use")[AWAKE] == 1
    assert column(lab, "Every tenant", "GPUs in use %")[AWAKE] == 50
    assert column(lab, "Every tenant", "Memory allocated")[AWAKE] == GPUS * 4096 * MIB
    assert column(lab, "Every tenant", "Memory allocated %")[AWAKE] == 25
    assert column(lab, "Every tenant", "Cores allocated (GPUs)")[AWAKE] == pytest.approx(GPUS * 0.3)
    assert column(lab, "Every tenant", "Cores allocated %")[AWAKE] == 30
    assert column(lab, "Every tenant", "Pending GPU pods")[AWAKE] == 1
    ready = column(lab, "Every tenant", "Control plane ready")
    assert (ready[AWAKE], ready[SLEEPER]) == (1, 0)
    assert SLEEPER not in column(lab, "Every tenant", "GPUs")


def test_the_per_pod_table_shows_each_pods_gpu_memory_and_cores(lab):
    pods = {f"{AWAKE}/default/job-{index}" for index in range(GPUS)}
    assert {key: value for key, value in column(lab, "GPU allocation per pod", "GPUs").items()
            if key.startswith(f"{AWAKE}/")} == dict.fromkeys(pods, 1)
    assert column(lab, "GPU allocation per pod", "Memory")[f"{AWAKE}/default/job-0"] == 4096 * MIB
    assert column(lab, "GPU allocation per pod", "Cores (% of a GPU)")[f"{AWAKE}/default/job-1"] == 30


def test_the_per_node_table_rolls_up_each_workers_gpus(lab):
    node = f"{AWAKE}/{AWAKE}-worker"
    shown = [column(lab, "GPU allocation per node", header)[node]
             for header in ("GPUs", "Memory allocated %", "Cores allocated %")]
    assert shown == [GPUS, 25, 30]


def test_a_flooding_tenant_is_cut_off_and_the_others_stay_scraped(lab):
    up = {r["metric"]["job"]: float(r["value"][1])
          for r in api(lab, "/api/v1/query", query='up{job=~"hami-.+"}')["result"]}
    assert up == {f"hami-{AWAKE}": 1, f"hami-{SLEEPER}": 0, f"hami-{FLOOD_SAMPLES}": 0, f"hami-{FLOOD_LABELS}": 0}
    targets = {t["labels"]["job"]: t["lastError"] for t in api(lab, "/api/v1/targets")["activeTargets"]}
    assert "sample limit exceeded" in targets[f"hami-{FLOOD_SAMPLES}"]
    assert "label_limit exceeded" in targets[f"hami-{FLOOD_LABELS}"]
    # Nothing of a refused scrape is kept; the flooders' other jobs (the GPU queue) still are.
    stored = api(lab, "/api/v1/query", query='count by (tenant) ({__name__=~"hami_.+"})')["result"]
    assert {r["metric"]["tenant"] for r in stored} == {AWAKE}
    queues = api(lab, "/api/v1/query", query="count by (tenant) (scheduler_pending_pods)")["result"]
    assert {r["metric"]["tenant"] for r in queues} == {AWAKE, FLOOD_SAMPLES, FLOOD_LABELS}


def test_every_tenant_job_is_bounded():
    jobs = observability_values.scrape_configs({tenant: "v1.36.4" for tenant in TENANTS}, True)
    tenant_jobs = [job for job in jobs if job["job_name"] != observability_values.JOB_KAMAJI]
    assert len(tenant_jobs) == 2 * len(TENANTS) + 1
    for job in tenant_jobs:
        assert job["sample_limit"] > 0 and job["label_limit"] > 0, job["job_name"]
