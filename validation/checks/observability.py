"""Check: with observability on, Prometheus scrapes each tenant and sees its GPUs.

Prometheus is asked through the management API server's service proxy, so the check needs
nothing but the management kubeconfig. The answers are Prometheus' HTTP API
(`/api/v1/targets`, `/api/v1/query`), as Prometheus 2.42 gives them (tests/fixtures/validation/
prometheus-*.json were recorded from one).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from components.observability_values import JOB_GPU_QUEUE, JOB_HAMI, JOB_KONNECTIVITY
from validation.checks.base import per_tenant
from validation.host import poll
from validation.lab import Lab
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import Tenant

# The chart's server Service and its port name (prometheus-community/helm-charts
# charts/prometheus/templates/service.yaml and _helpers.tpl@prometheus-29.27.0), as the lab installs it.
PROMETHEUS_PROXY = "/api/v1/namespaces/lab-monitoring/services/lab-prometheus-server:http/proxy"
# `make up` validates right after Prometheus starts: its first scrapes come within one interval (30 s), and a
# target not yet scraped reads as `unknown`.
TARGETS_TIMEOUT = 90
TARGETS_INTERVAL = 5


def target_problems(answer: dict[str, Any], tenant: str) -> tuple[list[str], list[str]]:
    """(healthy sources, problems) of a tenant's targets in a /api/v1/targets answer."""
    targets = [t for t in answer.get("activeTargets") or [] if (t.get("labels") or {}).get("tenant") == tenant]
    # The jobs components/observability_values.py writes: two per tenant, one shared by pod discovery.
    expected = {f"{JOB_HAMI}-{tenant}": "HAMi", f"{JOB_GPU_QUEUE}-{tenant}": "GPU queue",
                JOB_KONNECTIVITY: "Konnectivity"}
    healthy, problems = [], []
    for job, source in expected.items():
        found = [t for t in targets if t["labels"].get("job") == job]
        if not found:
            problems.append(f"no {source} target (job {job}) for the tenant")
            continue
        down = [t for t in found if t.get("health") != "up"]
        if down:
            problems.append(f"{source} target {down[0].get('scrapeUrl', '?')} is {down[0].get('health')}: "
                            f"{down[0].get('lastError') or 'no error given'}")
        else:
            healthy.append(f"{source} {len(found)} up")
    return healthy, problems


def scalar(answer: dict[str, Any]) -> float | None:
    """The single value of an instant-vector answer; None when the vector is empty."""
    result = answer.get("result")
    if answer.get("resultType") != "vector" or not isinstance(result, list):
        raise CheckFailed(f"Prometheus answered {str(answer)[:100]!r}, not an instant vector")
    if not result:
        return None
    if len(result) > 1:
        raise CheckFailed(f"expected one series, Prometheus gave {len(result)}")
    return float(result[0]["value"][1])


def gpu_query(tenant: str) -> str:
    return f'count(hami_gpu_memory_limit_bytes{{tenant="{tenant}"}})'


def prometheus_api(lab: Lab, path: str, **params: str) -> dict[str, Any]:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    answer = lab.management.get_raw(f"{PROMETHEUS_PROXY}{path}{query}")
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise CheckFailed(f"Prometheus ({path}) answered {str(answer)[:100]!r}")
    return answer["data"]


@per_tenant("observability", "Prometheus has healthy HAMi, GPU queue and Konnectivity targets and sees the GPUs")
def observability(lab: Lab, tenant: Tenant) -> str:
    if not lab.outputs.observability:
        raise CheckSkipped("observability is off (no grafanaUrl output)")

    def targets() -> tuple[bool, tuple[list[str], list[str]]]:
        healthy, problems = target_problems(prometheus_api(lab, "/api/v1/targets", state="active"), tenant.name)
        return not problems, (healthy, problems)

    _, (healthy, problems) = poll(lab.clock, TARGETS_TIMEOUT, targets, interval=TARGETS_INTERVAL)
    if problems:
        raise CheckFailed(f"after {TARGETS_TIMEOUT}s: " + "; ".join(problems))
    seen = scalar(prometheus_api(lab, "/api/v1/query", query=gpu_query(tenant.name))) or 0
    if tenant.real_gpus:
        if not seen:
            raise CheckFailed(f"{gpu_query(tenant.name)} found no GPU; the nodes' GPUs should be reported")
        return f"{', '.join(healthy)}; {seen:g} GPUs reported"
    expected = len(tenant.workers) * sum(gpu.count for gpu in tenant.gpus_per_worker)
    if seen != expected:
        raise CheckFailed(f"{gpu_query(tenant.name)} = {seen:g}, expected {expected} "
                          f"({len(tenant.workers)} workers x {expected // max(len(tenant.workers), 1)} GPUs)")
    return f"{', '.join(healthy)}; {expected} GPUs reported"
