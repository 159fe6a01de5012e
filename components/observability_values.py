"""The observability layer's pure parts: its charts and names, and the chart values and scrape jobs.

components/observability.py puts them into the management cluster and each tenant; nothing here
makes a resource, so scripts/render_charts.py and the tests build the same values offline.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping

from components.dashboard import DIAL_FAILURES, SLEEPING, agents_query, dashboard
from components.gpu_sharing import HAMI_NAMESPACE, KUBE_SCHEDULER_METRICS_PATH
from components.platform import KAMAJI_NAMESPACE, KAMAJI_RELEASE, TENANTS_NAMESPACE
from components.tenant_control_plane import konnectivity_metrics_port

# Names of the lab's own, so a management cluster that already runs a Prometheus or Grafana (a provided
# one often does, in `monitoring`) keeps its namespace and its charts' cluster-wide RBAC objects.
MONITORING_NAMESPACE = "lab-monitoring"
HELM_TIMEOUT_SECONDS = 600
PROMETHEUS_REPO = "https://prometheus-community.github.io/helm-charts"
PROMETHEUS_CHART_VERSION = "29.27.0"
PROMETHEUS_CHART = "prometheus"
PROMETHEUS_RELEASE = "lab-prometheus"
# grafana/helm-charts deprecated its grafana chart (commit "deprecate chart Grafana", Jan 2026);
# it lives on in grafana-community/helm-charts.
GRAFANA_REPO = "https://grafana-community.github.io/helm-charts"
GRAFANA_CHART_VERSION = "12.11.1"
GRAFANA_CHART = "grafana"
GRAFANA_RELEASE = "lab-grafana"
GRAFANA_PORT = 80
GRAFANA_ADMIN_SECRET = "grafana-admin"
# With a provided LoadBalancer, where `make dashboard` (scripts/dashboard.sh) forwards the chart's ClusterIP Service.
GRAFANA_LOCAL_PORT = 3000
GRAFANA_FORWARDED_URL = f"http://127.0.0.1:{GRAFANA_LOCAL_PORT}"
# The chart's server Service: <release>-server (the release name contains the chart's) on port 80
# (prometheus-community/helm-charts charts/prometheus/templates/_helpers.tpl, values.yaml@prometheus-29.27.0).
PROMETHEUS_URL = f"http://{PROMETHEUS_RELEASE}-server.{MONITORING_NAMESPACE}.svc:80"

# Bounded: a week of data, at most 1 GB of blocks on a 2 GiB volume, and a memory limit.
RETENTION = "7d"
RETENTION_SIZE = "1GB"
STORAGE_SIZE = "2Gi"
SCRAPE_INTERVAL = "30s"
PROMETHEUS_MEMORY = "512Mi"
# Grafana's install docs ask for at least 512 MB (grafana.com/docs/grafana/v13.2/setup-grafana/installation,
# "Hardware recommendations"; the chart's appVersion is 13.2.0).
GRAFANA_MEMORY = "512Mi"

# In each tenant: a ServiceAccount whose only right is GET on two Service ports through the service
# proxy. The proxied Service is named [<scheme>:]<service>:<port name> in the request
# (kubernetes/apimachinery pkg/util/net/http.go SplitSchemeNamePort), which is the name RBAC checks
# (services/proxy); the chart names the Service <release>-scheduler with port `monitor`
# (Project-HAMi/HAMi charts/hami/templates/scheduler/service.yaml@v2.10.0).
METRICS_ACCOUNT = "lab-metrics-reader"
METRICS_ACCOUNT_NAMESPACE = HAMI_NAMESPACE
HAMI_MONITOR = "hami-scheduler:monitor"
HAMI_METRICS_PATH = f"/api/v1/namespaces/{HAMI_NAMESPACE}/services/{HAMI_MONITOR}/proxy/metrics"
# HAMi's kube-scheduler (pending GPU pods, components/gpu_sharing.py) has no port on the chart's Service:
# the lab's own Service in the tenant selects the same leader pod. It serves HTTPS with a self-signed
# certificate, which the API server's proxy does not verify (kubernetes/kubernetes
# pkg/controlplane/apiserver/config.go: CreateProxyTransport).
QUEUE_SERVICE = "lab-hami-kube-scheduler"
QUEUE_PORT_NAME = "metrics"
HAMI_QUEUE = f"https:{QUEUE_SERVICE}:{QUEUE_PORT_NAME}"
HAMI_QUEUE_PATH = f"/api/v1/namespaces/{HAMI_NAMESPACE}/services/{HAMI_QUEUE}/proxy{KUBE_SCHEDULER_METRICS_PATH}"
# kube-scheduler's one STABLE series about its queue (kubernetes/kubernetes pkg/scheduler/metrics/metrics.go,
# test/instrumentation/testdata/stable-metrics-list.yaml); its other series (latency histograms) are dropped.
QUEUE_SERIES = "scheduler_pending_pods"
TENANT_API_PORT = 6443
# Where Prometheus finds each tenant's token and CA (one Secret mounted per tenant).
TENANT_SECRETS_DIR = "/etc/tenant-metrics"
# Kamaji names the sidecar (clastix/kamaji internal/builders/controlplane/konnectivity_server.go@ddbabd8) and
# labels control-plane pods kamaji.clastix.io/name=<tenant> (deployment.go@ddbabd8); which of its ports serves
# /metrics depends on the tenant's version (components/tenant_control_plane.py: konnectivity_metrics_port).
KONNECTIVITY_CONTAINER = "konnectivity-server"
# Kamaji labels the control-plane pods with the DataStore the TenantControlPlane's status names (clastix/kamaji
# internal/builders/controlplane/deployment.go@26.8.2-edge: templateLabels, component.kamaji.clastix.io/datastore);
# pod discovery sanitizes the label's name as it does kamaji.clastix.io/name's. Its series carry it as `datastore`.
DATASTORE_POD_LABEL = "__meta_kubernetes_pod_label_component_kamaji_clastix_io_datastore"
# Kamaji's controller-runtime metrics Service, plain HTTP (charts/kamaji/templates/service_metrics.yaml@ddbabd8).
KAMAJI_METRICS_TARGET = f"{KAMAJI_RELEASE}-metrics-service.{KAMAJI_NAMESPACE}.svc:8080"
# Kamaji's per-TenantControlPlane series (internal/metrics/metrics.go@ddbabd8); its other series
# describe no tenant and are dropped.
KAMAJI_TENANT_SERIES = "kamaji_tenant_control_plane_.*"

# Per target of a tenant's jobs: a tenant runs its own HAMi scheduler, so it could make it serve any number of
# series and get the shared Prometheus (a memory limit) killed. Past either limit the whole scrape is refused
# (up 0) and nothing of it stored (prometheus/prometheus docs/configuration/configuration.md: sample_limit,
# label_limit). HAMi serves some 10 series per GPU and 2 per GPU container, far below.
SAMPLE_LIMIT = 5000
LABEL_LIMIT = 30
LIMITS = {"sample_limit": SAMPLE_LIMIT, "label_limit": LABEL_LIMIT}

# How long a condition holds before its alert fires: a tenant waking, or a pod the scheduler places on its next
# try, is not a problem yet.
ALERT_AFTER = "5m"

JOB_HAMI = "hami"
JOB_GPU_QUEUE = "gpu-queue"
JOB_KONNECTIVITY = "konnectivity"
JOB_KAMAJI = "kamaji"


def tenant_api_server(tenant: str) -> str:
    # In the management cluster, a tenant's API server Service; Kamaji puts <tcp>.<namespace>.svc in
    # the serving certificate's SANs (clastix/kamaji internal/kubeadm/configuration.go@ddbabd8).
    return f"{tenant}.{TENANTS_NAMESPACE}.svc:{TENANT_API_PORT}"


def tenant_secret_name(tenant: str) -> str:
    return f"tenant-metrics-{tenant}"


def scrape_configs(
    tenants: Mapping[str, str],
    kamaji_installed: bool,
    secrets_dir: str = TENANT_SECRETS_DIR,
    api_server: Callable[[str], str] = tenant_api_server,
    kamaji_target: str = KAMAJI_METRICS_TARGET,
) -> list[dict]:
    """Prometheus scrape_configs: per tenant a HAMi and a GPU queue job, Konnectivity by pod discovery, Kamaji once.

    `tenants`: each tenant's name and Kubernetes version. Tests point `api_server`, `kamaji_target` and
    `secrets_dir` at loopback fakes; nothing else differs.
    """

    def through_proxy(job: str, tenant: str, path: str) -> dict:
        return {
            "job_name": f"{job}-{tenant}",
            "scheme": "https",
            "metrics_path": path,
            "authorization": {"credentials_file": f"{secrets_dir}/{tenant}/token"},
            "tls_config": {"ca_file": f"{secrets_dir}/{tenant}/ca.crt"},
            "static_configs": [{"targets": [api_server(tenant)], "labels": {"tenant": tenant}}],
            **LIMITS,
        }

    hami = [through_proxy(JOB_HAMI, tenant, HAMI_METRICS_PATH) for tenant in tenants]
    queue = [
        {**through_proxy(JOB_GPU_QUEUE, tenant, HAMI_QUEUE_PATH),
         "metric_relabel_configs": [{"source_labels": ["__name__"], "regex": QUEUE_SERIES, "action": "keep"}]}
        for tenant in tenants
    ]
    # Each tenant's sidecar on the port that serves /metrics at its version; only this lab's tenants: a
    # control plane of someone else in the namespace is not ours to watch.
    by_port: dict[str, list[str]] = {}
    for tenant, version in tenants.items():
        by_port.setdefault(konnectivity_metrics_port(version), []).append(tenant)
    sidecars = "|".join(f"{port};({'|'.join(names)})" for port, names in sorted(by_port.items()))
    konnectivity = {
        "job_name": JOB_KONNECTIVITY,
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [TENANTS_NAMESPACE]}}],
        "relabel_configs": [
            {"source_labels": ["__meta_kubernetes_pod_container_name", "__meta_kubernetes_pod_container_port_name",
                               "__meta_kubernetes_pod_label_kamaji_clastix_io_name"],
             "regex": f"{KONNECTIVITY_CONTAINER};({sidecars})", "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_label_kamaji_clastix_io_name"], "target_label": "tenant"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"source_labels": [DATASTORE_POD_LABEL], "target_label": "datastore"},
        ],
        **LIMITS,
    }
    kamaji = {
        "job_name": JOB_KAMAJI,
        "static_configs": [{"targets": [kamaji_target]}],
        "metric_relabel_configs": [
            {"source_labels": ["__name__", "tcp_namespace", "tcp_name"],
             "regex": f"{KAMAJI_TENANT_SERIES};{TENANTS_NAMESPACE};({'|'.join(tenants)})", "action": "keep"},
            {"source_labels": ["tcp_name"], "target_label": "tenant"},
        ],
    }
    return [*hami, *queue, konnectivity, *([kamaji] if kamaji_installed else [])]


def alerting_rules() -> dict:
    """The alerting rules file: per tenant, a tunnel without agents, dial failures, GPU pods left pending and a
    control plane Kamaji does not report ready. The dashboard's "Alerts firing" panel lists what fires."""
    awake = f'max by (tenant) (kamaji_tenant_control_plane_status{{status!="{SLEEPING}"}})'
    rules = [
        ("KonnectivityNoAgents", f"{awake} unless on (tenant) ({agents_query('tenant', '')}) > 0", ALERT_AFTER,
         "{{ $labels.tenant }} is awake but no Konnectivity agent is connected: its API server cannot reach its "
         "nodes (logs, exec, HAMi's webhook)."),
        # A counter's series appears at its first failure; increase() counts from its second sample on.
        ("KonnectivityDialFailures", f"sum by (tenant, reason) (increase({DIAL_FAILURES}[10m])) > 0", "0s",
         "{{ $labels.tenant }}: the API server's dials to its nodes fail ({{ $labels.reason }}, "
         "{{ $value | humanize }} in 10 minutes)."),
        # The queue gauge counts pods, not their age: some GPU pod has waited all along (gated ones by choice).
        ("GpuPodsPending", 'sum by (tenant) (scheduler_pending_pods{queue!="gated"}) > 0', ALERT_AFTER,
         "{{ $labels.tenant }} has had GPU pods waiting for HAMi's scheduler for 5 minutes ({{ $value }} now): "
         "`make status` shows why."),
        ("ControlPlaneNotReady",
         f'max by (tenant, status) (kamaji_tenant_control_plane_status{{ready!="true", status!="{SLEEPING}"}})',
         ALERT_AFTER, "Kamaji reports {{ $labels.tenant }}'s control plane {{ $labels.status }}, not ready."),
    ]
    return {"groups": [{"name": "kamaji-hami-lab", "rules": [
        {"alert": name, "expr": expr, "for": after, "labels": {"severity": "warning"},
         "annotations": {"summary": summary}}
        for name, expr, after, summary in rules]}]}


def prometheus_config(tenants: Mapping[str, str], kamaji_installed: bool, **where: object) -> dict:
    """The prometheus.yml the chart renders from prometheus_values (global and scrape jobs)."""
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "scrape_configs": scrape_configs(tenants, kamaji_installed, **where),  # type: ignore[arg-type]
    }


# The chart's default scrape jobs (charts/prometheus/values.yaml@prometheus-29.27.0: scrapeConfigs); Helm
# merges maps, so each is switched off by name and the lab's jobs stand alone.
CHART_SCRAPE_JOBS = (
    "prometheus", "kubernetes-api-servers", "kubernetes-nodes", "kubernetes-nodes-cadvisor",
    "kubernetes-service-endpoints", "kubernetes-service-endpoints-slow", "prometheus-pushgateway",
    "kubernetes-services", "kubernetes-pods", "kubernetes-pods-slow",
)


def prometheus_values(tenants: Mapping[str, str], kamaji_installed: bool) -> dict:
    """Helm values of the prometheus chart; every key is one its values.yaml@prometheus-29.27.0 has."""
    config = prometheus_config(tenants, kamaji_installed)
    return {
        "alertmanager": {"enabled": False},
        "kube-state-metrics": {"enabled": False},
        "prometheus-node-exporter": {"enabled": False},
        "prometheus-pushgateway": {"enabled": False},
        "scrapeConfigs": {job: {"enabled": False} for job in CHART_SCRAPE_JOBS},
        # The chart's prometheus.yml already reads /etc/config/alerting_rules.yml (rule_files,
        # values.yaml@prometheus-29.27.0), which it renders from this key.
        "serverFiles": {"prometheus.yml": {"scrape_configs": config["scrape_configs"]},
                        "alerting_rules.yml": alerting_rules()},
        "server": {
            "global": config["global"],
            "retention": RETENTION,
            "retentionSize": RETENTION_SIZE,
            "persistentVolume": {"size": STORAGE_SIZE},
            "resources": {"requests": {"memory": PROMETHEUS_MEMORY}, "limits": {"memory": PROMETHEUS_MEMORY}},
            "extraSecretMounts": [
                {"name": tenant_secret_name(tenant), "mountPath": f"{TENANT_SECRETS_DIR}/{tenant}",
                 "secretName": tenant_secret_name(tenant), "readOnly": True}
                for tenant in tenants
            ],
        },
    }


def grafana_values() -> dict:
    """Helm values of the grafana chart (grafana-community/helm-charts charts/grafana/values.yaml@grafana-12.11.1)."""
    return {
        # The lab's own LoadBalancer Service gives Grafana its MetalLB address (and a stack output).
        "service": {"type": "ClusterIP", "port": GRAFANA_PORT},
        "admin": {"existingSecret": GRAFANA_ADMIN_SECRET, "userKey": "admin-user", "passwordKey": "admin-password"},
        "persistence": {"enabled": False},
        "testFramework": {"enabled": False},
        "resources": {"requests": {"memory": GRAFANA_MEMORY}, "limits": {"memory": GRAFANA_MEMORY}},
        "datasources": {"datasources.yaml": {"apiVersion": 1, "datasources": [
            # timeInterval: the scrape interval, from which Grafana picks $__rate_interval.
            {"name": "Prometheus", "uid": "prometheus", "type": "prometheus", "access": "proxy",
             "url": PROMETHEUS_URL, "isDefault": True, "jsonData": {"timeInterval": SCRAPE_INTERVAL}},
        ]}},
        "dashboardProviders": {"dashboardproviders.yaml": {"apiVersion": 1, "providers": [
            {"name": "lab", "orgId": 1, "folder": "", "type": "file", "disableDeletion": True, "editable": False,
             "options": {"path": "/var/lib/grafana/dashboards/lab"}},
        ]}},
        "dashboards": {"lab": {"tenants": {"json": json.dumps(dashboard())}}},
    }


def metrics_reader_rules() -> list[dict]:
    """The tenant ServiceAccount's only right: GET HAMi's two metrics ports through the service proxy."""
    return [{"apiGroups": [""], "resources": ["services/proxy"], "resourceNames": [HAMI_MONITOR, HAMI_QUEUE],
             "verbs": ["get"]}]


def token_secret_data(answer: str) -> dict[str, str]:
    """The management-cluster Secret's data from tenant-metrics-token.sh's answer (JSON of base64 values)."""
    read = json.loads(answer)
    data = {key: read.get(key, "") for key in ("token", "ca.crt")}
    for key, value in data.items():
        if not value:
            raise ValueError(f"the tenant's token Secret has no {key}")
        base64.b64decode(value, validate=True)
    return data


def grafana_url(status: Mapping | None) -> str:
    """http://<address> of the LoadBalancer Service's first ingress (empty until it has one)."""
    status = status or {}
    # Output types read as dicts; their keys are the SDK's snake_case, the API's camelCase in raw maps.
    balancer = status.get("load_balancer") or status.get("loadBalancer") or {}
    ingress = balancer.get("ingress") or [{}]
    host = ingress[0].get("ip") or ingress[0].get("hostname") or ""
    return f"http://{host}" if host else ""
