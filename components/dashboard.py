"""The one Grafana dashboard the observability layer provisions: every tenant's GPU allocation and tunnel.

Metric names and labels: HAMi's scheduler (Project-HAMi/HAMi cmd/scheduler/metrics.go@v2.10.0), the
kube-scheduler beside it (kubernetes/kubernetes pkg/scheduler/metrics/metrics.go: `scheduler_pending_pods`,
STABLE, by `queue`), konnectivity-server (kubernetes-sigs/apiserver-network-proxy
pkg/server/metrics/metrics.go@v0.33.0 to @v0.36.0) and Kamaji (clastix/kamaji internal/metrics/metrics.go@ddbabd8).
Each series carries the `tenant` label the scrape jobs add (components/observability_values.py).
"""

from __future__ import annotations

DASHBOARD_UID = "kamaji-hami-lab-tenants"
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}
TENANT = 'tenant="$tenant"'

MOCK_NOTE = (
    "**Mock GPUs report allocation only.** With `gpuDevices: mock` (the default) HAMi's mock device plugin "
    "advertises GPUs that do not exist: these panels show what HAMi's scheduler has *allocated* to pods "
    "(memory, cores, sharing, quotas), never what a GPU is doing. Utilisation and real memory use need "
    "real GPUs with NVIDIA's driver, HAMi's NVIDIA device plugin and NVML, which the mock has not."
)


def _target(expr: str, legend: str, ref: str) -> dict:
    return {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "refId": ref}


def _panel(panel_id: int, title: str, kind: str, grid: tuple[int, int, int, int], targets: list[dict],
           description: str, **extra: object) -> dict:
    x, y, w, h = grid
    return {
        "id": panel_id, "title": title, "type": kind, "description": description, "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": w, "h": h}, "targets": targets, **extra,
    }


# Agents connected, summed over a tenant's control-plane pods. `ready_backends` (from v0.34.0, by proxy strategy,
# each strategy counting the same agents) replaces `ready_backend_connections`, which older servers alone have
# (kubernetes-sigs/apiserver-network-proxy pkg/server/metrics/metrics.go@v0.33.0, @v0.34.0, @v0.36.0).
READY_BACKENDS = "konnectivity_network_proxy_server_ready_backends"
READY_BACKENDS_BEFORE_V034 = "konnectivity_network_proxy_server_ready_backend_connections"
DIAL_FAILURES = "konnectivity_network_proxy_server_dial_failure_count"
NO_AGENTS = "NO AGENTS"


def agents_query(by: str, selector: str) -> str:
    """Agents connected per `by` group (empty: one sum), from whichever series the tenant's server has."""
    group = f" by ({by})" if by else ""
    inner = ", ".join(filter(None, (by, "pod")))
    where = f"{{{selector}}}" if selector else ""
    return (f"sum{group} (max by ({inner}) ({READY_BACKENDS}{where})) "
            f"or sum{group} ({READY_BACKENDS_BEFORE_V034}{where})")


def _agents_stat(panel_id: int, title: str, grid: tuple[int, int, int, int], expr: str, legend: str,
                 description: str) -> dict:
    """Agents connected; 0, and no series at all (no sidecar scraped), show red as NO AGENTS."""
    return _panel(
        panel_id, title, "stat", grid, [_target(expr, legend, "A")], description,
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


def panels() -> list[dict]:
    bytes_unit = {"defaults": {"unit": "bytes"}, "overrides": []}
    return [
        _panel(1, "About these numbers", "text", (0, 0, 24, 3), [], "Mock GPUs yield allocation metrics only.",
               options={"mode": "markdown", "content": MOCK_NOTE}),
        _agents_stat(11, "Konnectivity agents connected, every tenant", (0, 3, 24, 4), agents_query("tenant", ""),
                     "{{tenant}}", "Every tenant at once, whichever is selected: agents connected to its "
                     "konnectivity-server. A tenant in red has a tunnel with no agent."),
        _agents_stat(2, "Konnectivity agents connected", (0, 7, 6, 5), agents_query("", TENANT), "agents",
                     "Agents connected to the tenant's konnectivity-server, summed over its control-plane pods. "
                     "With none, or no konnectivity-server scraped, the API server cannot reach the tenant's nodes "
                     "(logs, exec, HAMi's webhook)."),
        _panel(3, "Konnectivity dial failures", "timeseries", (6, 7, 9, 5),
               # The counter has no series until a first failure: 0, as `none`, while the tenant's sidecar is up.
               [_target(f"sum by (reason) (increase({DIAL_FAILURES}{{{TENANT}}}[$__rate_interval])) or on () "
                        f'label_replace(0 * count(up{{job="konnectivity", {TENANT}}} == 1), "reason", "none", "", "")',
                        "{{reason}}", "A")],
               "Dials from the API server to the tenant's nodes that failed, by reason (`none`: no failure yet)."),
        _panel(4, "Control plane (Kamaji)", "stat", (15, 7, 9, 5),
               [_target(f"max by (status, ready) (kamaji_tenant_control_plane_status{{{TENANT}}})",
                        "{{status}} (ready: {{ready}})", "A")],
               "The TenantControlPlane's status as Kamaji reports it.",
               options={"textMode": "name", "reduceOptions": {"calcs": ["lastNotNull"]}}),
        _panel(5, "GPU memory allocated vs limit", "timeseries", (0, 12, 12, 8), [
            _target(f"max by (node, device_index) (hami_gpu_memory_allocated_bytes{{{TENANT}}})",
                    "{{node}} GPU {{device_index}} allocated", "A"),
            _target(f"max by (node, device_index) (hami_gpu_memory_limit_bytes{{{TENANT}}})",
                    "{{node}} GPU {{device_index}} limit", "B"),
        ], "Per GPU: memory HAMi has given to pods, against the GPU's memory.", fieldConfig=bytes_unit),
        _panel(6, "GPU cores allocated", "timeseries", (12, 12, 12, 8), [
            _target(f"max by (node, device_index) (hami_gpu_core_allocated_ratio{{{TENANT}}})",
                    "{{node}} GPU {{device_index}} allocated", "A"),
            _target(f"max by (node, device_index) (hami_gpu_core_limit_ratio{{{TENANT}}})",
                    "{{node}} GPU {{device_index}} limit", "B"),
        ], "Per GPU: compute share (percent of a GPU) HAMi has given to pods, against 100."),
        _panel(7, "Pods sharing each GPU", "timeseries", (0, 20, 12, 8), [
            _target(f"max by (node, device_index) (hami_gpu_shared_count{{{TENANT}}})",
                    "{{node}} GPU {{device_index}}", "A"),
        ], "Per GPU: containers HAMi has placed on it, out of its vGPU slots (gpuSlots)."),
        _panel(8, "GPU quota used vs limit", "timeseries", (12, 20, 12, 8), [
            _target(f"max by (namespace, quota_name) (hami_resource_quota_used{{{TENANT}}})",
                    "{{namespace}} {{quota_name}} used", "A"),
            _target(f"max by (namespace, quota_name) (hami_resource_quota_limit{{{TENANT}}})",
                    "{{namespace}} {{quota_name}} limit", "B"),
        ], "Per quota namespace and resource: what HAMi counts as used, against the ResourceQuota's limit."),
        _panel(10, "Pending GPU pods", "timeseries", (0, 28, 24, 8), [
            _target(f"sum by (queue) (scheduler_pending_pods{{{TENANT}}})", "{{queue}}", "A"),
        ], "GPU pods HAMi's scheduler has not placed yet, by queue: unschedulable (tried and refused, e.g. no GPU "
           "with enough memory left; `make status` shows why), backoff (waiting to retry), active (about to be "
           "tried), gated (held by scheduling gates).", fieldConfig={"defaults": {"decimals": 0}, "overrides": []}),
        _panel(9, "Scrape health", "stat", (0, 36, 24, 4),
               [_target(f"up{{{TENANT}}}", "{{job}}", "A")],
               "1: Prometheus reached the source (HAMi and its kube-scheduler through the tenant's API server, "
               "the konnectivity-server); 0: it did not (a sleeping or broken tenant). Kamaji's own target serves "
               "every tenant, so it carries no tenant and is not listed here.",
               options={"textMode": "value_and_name", "reduceOptions": {"calcs": ["lastNotNull"]}}),
    ]


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
            "multi": False, "includeAll": False,
        }]},
        "panels": panels(),
    }
