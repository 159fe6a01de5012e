"""The one Grafana dashboard the observability layer provisions: every tenant's GPU allocation and tunnel.

Metric names and labels: HAMi's scheduler (Project-HAMi/HAMi cmd/scheduler/metrics.go@v2.10.0), the
kube-scheduler beside it (kubernetes/kubernetes pkg/scheduler/metrics/metrics.go: `scheduler_pending_pods`,
STABLE, by `queue`), konnectivity-server (kubernetes-sigs/apiserver-network-proxy
pkg/server/metrics/metrics.go@v0.33.0 to @v0.36.0) and Kamaji (clastix/kamaji internal/metrics/metrics.go@ddbabd8).
Each series carries the `tenant` label the scrape jobs add (components/observability_values.py).
"""

from __future__ import annotations

from components.gpu_sharing import GPU_CORES_RESOURCE, GPU_MEMORY_RESOURCE

DASHBOARD_UID = "kamaji-hami-lab-tenants"
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}
# The tenant selector takes several tenants, or All: Grafana writes the choice as a regular expression.
TENANT = 'tenant=~"$tenant"'

MOCK_NOTE = (
    "**Mock GPUs report allocation only.** With `gpuDevices: mock` (the default) HAMi's mock device plugin "
    "advertises GPUs that do not exist: these panels show what HAMi's scheduler has *allocated* to pods "
    "(memory, cores, sharing, quotas), never what a GPU is doing. Utilisation and real memory use need "
    "real GPUs with NVIDIA's driver, HAMi's NVIDIA device plugin and NVML, which the mock has not."
)


def _target(expr: str, legend: str, ref: str) -> dict:
    return {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "refId": ref}


def _now(expr: str, legend: str, ref: str, table: bool = False) -> dict:
    """A target asking for the value at the dashboard's end time only: a series gone (a sleeping tenant, a dead
    sidecar) is gone from the panel, where a range query would keep its last point for the whole time range.
    Target keys of Grafana's PrometheusDataQuery (grafana/grafana docs/sources/developers/kinds/composable/
    prometheusdataquery/schema-reference.md: instant, range, format)."""
    return {**_target(expr, legend, ref), "instant": True, "range": False,
            "format": "table" if table else "time_series"}


def _panel(panel_id: int, title: str, kind: str, grid: tuple[int, int, int, int], targets: list[dict],
           description: str, **extra: object) -> dict:
    x, y, w, h = grid
    return {
        "id": panel_id, "title": title, "type": kind, "description": description, "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": w, "h": h}, "targets": targets, **extra,
    }


def _units(unit: str, **defaults: object) -> dict:
    return {"defaults": {"unit": unit, **defaults}, "overrides": []}


# Agents connected. Each agent connects to every konnectivity-server of its tenant (one per control-plane
# replica), so each server counts all of them: the tenant's count is the largest, never the sum.
# `ready_backends` (from v0.34.0, by proxy strategy, each strategy counting the same agents) replaces
# `ready_backend_connections`, which older servers alone have
# (kubernetes-sigs/apiserver-network-proxy pkg/server/metrics/metrics.go@v0.33.0, @v0.34.0, @v0.36.0).
READY_BACKENDS = "konnectivity_network_proxy_server_ready_backends"
READY_BACKENDS_BEFORE_V034 = "konnectivity_network_proxy_server_ready_backend_connections"
DIAL_FAILURES = "konnectivity_network_proxy_server_dial_failure_count"
NO_AGENTS = "NO AGENTS"
# Kamaji's status of a control plane that sleeps (api/v1alpha1 VersionSleeping, internal/metrics/metrics.go@ddbabd8).
SLEEPING = "Sleeping"
# HAMi writes a quota's used series for every namespace with HAMi pods, with limit="0" where no ResourceQuota
# sets one (Project-HAMi/HAMi cmd/scheduler/metrics.go@v2.10.0: collectQuotaMetrics).
QUOTA_SET = 'limit!="0"'
# HAMi's quota resources and their units, one panel each: MiB of GPU memory, percent of a GPU.
QUOTA_PANELS = ((8, "GPU memory quota used vs limit", GPU_MEMORY_RESOURCE, "mbytes"),
                (15, "GPU cores quota used vs limit", GPU_CORES_RESOURCE, "percent"))


def agents_query(by: str, selector: str) -> str:
    """Agents connected per `by` group (empty: one number), from whichever series the tenant's server has."""
    group = f" by ({by})" if by else ""
    where = f"{{{selector}}}" if selector else ""
    return f"max{group} ({READY_BACKENDS}{where}) or max{group} ({READY_BACKENDS_BEFORE_V034}{where})"


def _agents_stat(panel_id: int, title: str, grid: tuple[int, int, int, int], expr: str, legend: str,
                 description: str) -> dict:
    """Agents connected; 0, and no series at all (no sidecar scraped), show red as NO AGENTS."""
    return _panel(
        panel_id, title, "stat", grid, [_now(expr, legend, "A")], description,
        fieldConfig={"defaults": {
            # With no series Grafana passes null through the mappings (grafana/grafana packages/grafana-data/src/
            # field/fieldDisplay.ts: createNoValuesFieldDisplay); noValue is the text should a mapping not apply.
            "noValue": NO_AGENTS,
            "mappings": [{"type": "value", "options": {"0": {"text": NO_AGENTS, "color": "red", "index": 0}}},
                         {"type": "special", "options": {"match": "null+nan",
                                                         "result": {"text": NO_AGENTS, "color": "red", "index": 1}}}],
            "thresholds": {"mode": "absolute", "steps": [{"color": "red", "value": None},
                                                         {"color": "green", "value": 1}]},
        }, "overrides": []},
        options={"colorMode": "background", "textMode": "value_and_name", "reduceOptions": {"calcs": ["lastNotNull"]}},
    )


def fleet_columns() -> list[tuple[str, str, str]]:
    """The every-tenant table's columns: (header, query by tenant, unit)."""
    gpus = "count by (tenant) (hami_gpu_shared_count)"
    # A GPU is in use while HAMi has placed a container on it; 0 for a tenant whose GPUs all are free.
    in_use = f"(count by (tenant) (hami_gpu_shared_count > 0) or 0 * {gpus})"
    memory = "sum by (tenant) (hami_gpu_memory_allocated_bytes)"
    cores = "sum by (tenant) (hami_gpu_core_allocated_ratio)"
    return [
        ("GPUs", gpus, "none"),
        ("GPUs in use", in_use, "none"),
        ("GPUs in use %", f"100 * {in_use} / {gpus}", "percent"),
        ("Memory allocated", memory, "bytes"),
        ("Memory allocated %", f"100 * {memory} / sum by (tenant) (hami_gpu_memory_limit_bytes)", "percent"),
        # hami_gpu_core_allocated_ratio is in percent of one GPU: 100 is a whole GPU's cores.
        ("Cores allocated (GPUs)", f"{cores} / 100", "none"),
        ("Cores allocated %", f"100 * {cores} / sum by (tenant) (hami_gpu_core_limit_ratio)", "percent"),
        ("Pending GPU pods", 'sum by (tenant) (scheduler_pending_pods{queue!="gated"})', "none"),
        ("Agents", agents_query("tenant", ""), "none"),
        # 1 while Kamaji reports the control plane ready, 0 while it reports anything else.
        ("Control plane ready", 'max by (tenant) (kamaji_tenant_control_plane_status{ready="true"}) '
                                "or max by (tenant) (0 * kamaji_tenant_control_plane_status)", "none"),
    ]


def node_columns() -> list[tuple[str, str, str]]:
    """The per-node table's columns: each worker's GPUs and what HAMi has allocated of them."""
    by_node = "tenant, node"
    selected = f"{{{TENANT}}}"

    def share(allocated: str, limit: str) -> str:
        return (f"100 * sum by ({by_node}) ({allocated}{selected}) / "
                f"sum by ({by_node}) ({limit}{selected})")

    return [
        ("GPUs", f"count by ({by_node}) (hami_gpu_memory_limit_bytes{selected})", "none"),
        ("Memory allocated %", share("hami_gpu_memory_allocated_bytes", "hami_gpu_memory_limit_bytes"), "percent"),
        ("Cores allocated %", share("hami_gpu_core_allocated_ratio", "hami_gpu_core_limit_ratio"), "percent"),
    ]


def pod_columns() -> list[tuple[str, str, str]]:
    """The per-pod table's columns, from HAMi's per-container series (cmd/scheduler/metrics.go@v2.10.0:
    collectContainerMetrics, by namespace, node, pod, container_index, device_uuid)."""
    by_pod = "tenant, namespace, pod"
    selected = f"{{{TENANT}}}"
    return [
        ("GPUs", f"count by ({by_pod}) (count by ({by_pod}, device_uuid) "
                 f"(hami_vgpu_memory_allocated_bytes{selected}))", "none"),
        ("Memory", f"sum by ({by_pod}) (hami_vgpu_memory_allocated_bytes{selected})", "bytes"),
        ("Cores (% of a GPU)", f"sum by ({by_pod}) (hami_vgpu_core_allocated_ratio{selected})", "percent"),
    ]


def _table(panel_id: int, title: str, grid: tuple[int, int, int, int], columns: list[tuple[str, str, str]],
           keys: list[str], description: str) -> dict:
    """One row per `keys`, one column per query: each query's instant value, joined on the keys."""
    refs = [chr(ord("A") + index) for index in range(len(columns))]
    return _panel(
        panel_id, title, "table", grid,
        [_now(expr, "", ref, table=True) for ref, (_, expr, _) in zip(refs, columns, strict=True)], description,
        # Grafana names each query's value column "Value #<refId>" (packages/grafana-prometheus: table format).
        transformations=[
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {
                "excludeByName": {"Time": True},
                "indexByName": {name: index for index, name in enumerate(
                    [*keys, *(f"Value #{ref}" for ref in refs)])},
                "renameByName": {f"Value #{ref}": header for ref, (header, _, _) in zip(refs, columns, strict=True)},
            }},
        ],
        fieldConfig={"defaults": {}, "overrides": [
            {"matcher": {"id": "byName", "options": header}, "properties": [{"id": "unit", "value": unit}]}
            for header, _, unit in columns]},
    )


def panels() -> list[dict]:
    bytes_unit = _units("bytes")
    return [
        _panel(1, "About these numbers", "text", (0, 0, 24, 3), [], "Mock GPUs yield allocation metrics only.",
               options={"mode": "markdown", "content": MOCK_NOTE}),
        _table(12, "Every tenant", (0, 3, 24, 7), fleet_columns(), ["tenant"],
               "One line per tenant, whatever the selection: GPUs and how many hold a pod, what HAMi has "
               "allocated of their memory and cores, GPU pods waiting, Konnectivity agents (0: a tunnel with no "
               "agent) and whether Kamaji reports the control plane ready (1) or not (0). A tenant missing here "
               "is not scraped."),
        _panel(13, "Alerts firing", "table", (0, 10, 24, 4),
               [_now('ALERTS{alertstate="firing"}', "", "A", table=True)],
               "The lab's alerting rules that fire now (Prometheus' ALERTS series); none: no line.",
               transformations=[{"id": "organize", "options": {"excludeByName": {"Time": True, "Value": True,
                                                                               "__name__": True}}}]),
        _agents_stat(11, "Konnectivity agents connected, every tenant", (0, 14, 24, 4), agents_query("tenant", ""),
                     "{{tenant}}", "Every tenant at once, whichever is selected: agents connected to its "
                     "konnectivity-server, counted once however many control-plane replicas. A tenant in red has "
                     "a tunnel with no agent."),
        _agents_stat(2, "Konnectivity agents connected", (0, 18, 6, 5), agents_query("tenant", TENANT), "{{tenant}}",
                     "Agents connected to each selected tenant's konnectivity-servers (each agent connects to every "
                     "one of them, so counted once). With none, or no konnectivity-server scraped, the API server "
                     "cannot reach the tenant's nodes (logs, exec, HAMi's webhook)."),
        _panel(3, "Konnectivity dial failures", "timeseries", (6, 18, 9, 5),
               # The counter has no series until a first failure: 0, as `none`, while the tenant's sidecar is up.
               [_target(f"sum by (tenant, reason) (increase({DIAL_FAILURES}{{{TENANT}}}[$__rate_interval])) or on "
                        f'(tenant) label_replace(0 * count by (tenant) (up{{job="konnectivity", {TENANT}}} == 1), '
                        '"reason", "none", "", "")',
                        "{{tenant}} {{reason}}", "A")],
               "Dials from the API server to the tenant's nodes that failed, by reason (`none`: no failure yet)."),
        _panel(4, "Control plane (Kamaji)", "stat", (15, 18, 9, 5),
               [_now(f"max by (tenant, status, ready) (kamaji_tenant_control_plane_status{{{TENANT}}})",
                     "{{tenant}}: {{status}} (ready: {{ready}})", "A")],
               "Each selected tenant's TenantControlPlane status as Kamaji reports it now.",
               options={"textMode": "name", "reduceOptions": {"calcs": ["lastNotNull"]}}),
        _table(14, "GPU allocation per pod", (0, 23, 14, 8), pod_columns(), ["tenant", "namespace", "pod"],
               "Each pod HAMi has given GPUs to: how many GPUs, their memory and their cores (100: a whole GPU)."),
        _table(16, "GPU allocation per node", (14, 23, 10, 8), node_columns(), ["tenant", "node"],
               "Each worker with GPUs: how many, and what share of their memory and cores HAMi has allocated."),
        _panel(5, "GPU memory allocated vs limit", "timeseries", (0, 31, 12, 8), [
            _target(f"max by (tenant, node, device_index) (hami_gpu_memory_allocated_bytes{{{TENANT}}})",
                    "{{tenant}} {{node}} GPU {{device_index}} allocated", "A"),
            _target(f"max by (tenant, node, device_index) (hami_gpu_memory_limit_bytes{{{TENANT}}})",
                    "{{tenant}} {{node}} GPU {{device_index}} limit", "B"),
        ], "Per GPU: memory HAMi has given to pods, against the GPU's memory.", fieldConfig=bytes_unit),
        _panel(6, "GPU cores allocated", "timeseries", (12, 31, 12, 8), [
            _target(f"max by (tenant, node, device_index) (hami_gpu_core_allocated_ratio{{{TENANT}}})",
                    "{{tenant}} {{node}} GPU {{device_index}} allocated", "A"),
            _target(f"max by (tenant, node, device_index) (hami_gpu_core_limit_ratio{{{TENANT}}})",
                    "{{tenant}} {{node}} GPU {{device_index}} limit", "B"),
        ], "Per GPU: compute share (percent of a GPU) HAMi has given to pods, against 100.",
               fieldConfig=_units("percent")),
        _panel(7, "Pods sharing each GPU", "timeseries", (0, 39, 12, 8), [
            _target(f"max by (tenant, node, device_index) (hami_gpu_shared_count{{{TENANT}}})",
                    "{{tenant}} {{node}} GPU {{device_index}}", "A"),
        ], "Per GPU: containers HAMi has placed on it, out of its vGPU slots (gpuSlots).",
               fieldConfig=_units("none", decimals=0)),
        *(_panel(panel_id, title, "timeseries", (12, 39 + 8 * number, 12, 8), [
            _target(f'max by (tenant, namespace) (hami_resource_quota_used{{{TENANT}, quota_name="{resource}", '
                    f"{QUOTA_SET}}})", "{{tenant}} {{namespace}} used", "A"),
            _target(f'max by (tenant, namespace) (hami_resource_quota_limit{{{TENANT}, quota_name="{resource}"}})',
                    "{{tenant}} {{namespace}} limit", "B"),
        ], f"Per namespace with a ResourceQuota on {resource}: what HAMi counts as used, against the limit. "
           "Namespaces without one are not shown.", fieldConfig=_units(unit))
          for number, (panel_id, title, resource, unit) in enumerate(QUOTA_PANELS)),
        _panel(10, "Pending GPU pods", "timeseries", (0, 47, 12, 8), [
            _target(f"sum by (tenant, queue) (scheduler_pending_pods{{{TENANT}}})", "{{tenant}} {{queue}}", "A"),
        ], "GPU pods HAMi's scheduler has not placed yet, by queue: unschedulable (tried and refused, e.g. no GPU "
           "with enough memory left; `make status` shows why), backoff (waiting to retry), active (about to be "
           "tried), gated (held by scheduling gates).", fieldConfig=_units("none", decimals=0)),
        _panel(9, "Scrape health", "stat", (0, 55, 24, 4),
               [_now(f"up{{{TENANT}}}", "{{tenant}} {{job}}", "A")],
               "1: Prometheus reached the source (HAMi and its kube-scheduler through the tenant's API server, "
               "the konnectivity-server); 0: it did not (a sleeping or broken tenant). Kamaji's own target serves "
               "every tenant, so it carries no tenant and is not listed here.",
               fieldConfig={"defaults": {"thresholds": {"mode": "absolute", "steps": [
                   {"color": "red", "value": None}, {"color": "green", "value": 1}]}}, "overrides": []},
               options={"colorMode": "background", "textMode": "value_and_name",
                        "reduceOptions": {"calcs": ["lastNotNull"]}}),
        _panel(17, "DataStore of each tenant", "table", (0, 59, 24, 4),
               [_now(DATASTORE_QUERY, "", "A", table=True)],
               "Where each selected tenant's etcd data is: the DataStore its TenantControlPlane's status names, as "
               "Kamaji labels its control-plane pods. One line per tenant whose control plane runs (none while it "
               "sleeps); two while a move to another DataStore restarts it.",
               transformations=[{"id": "organize", "options": {"excludeByName": {"Time": True, "Value": True}}}]),
    ]


# The `datastore` label of each selected tenant's konnectivity-server targets
# (components/observability_values.py: DATASTORE_POD_LABEL).
DATASTORE_QUERY = f'max by (tenant, datastore) (up{{job="konnectivity", {TENANT}}})'


def dashboard() -> dict:
    """The dashboard model Grafana provisions (schemaVersion 39), with a tenant selector."""
    return {
        "uid": DASHBOARD_UID,
        "title": "kamaji-hami-lab: tenants",
        "description": "GPU allocation (HAMi) and Konnectivity tunnel health per tenant. " + MOCK_NOTE,
        "tags": ["kamaji-hami-lab", "hami", "konnectivity"],
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [{
            "name": "tenant", "label": "tenant", "type": "query", "datasource": DATASOURCE,
            "query": {"query": "label_values(up, tenant)", "refId": "tenant"},
            "definition": "label_values(up, tenant)", "refresh": 2, "sort": 1,
            "multi": True, "includeAll": True, "current": {"text": ["All"], "value": ["$__all"]},
        }]},
        "panels": panels(),
    }
