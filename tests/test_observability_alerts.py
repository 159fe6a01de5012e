"""The lab's alerting rules, run by `promtool test rules` (Debian's promtool 2.42) on series shaped as the pinned
sources write them: konnectivity-server's gauges and dial-failure counter (kubernetes-sigs/apiserver-network-proxy
pkg/server/metrics/metrics.go@v0.36.0), kube-scheduler's queue gauge (kubernetes/kubernetes
pkg/scheduler/metrics/metrics.go) and Kamaji's status gauge, one series per control plane with its status
and readiness as labels (clastix/kamaji internal/metrics/metrics.go@ddbabd8: SetTenantControlPlaneStatus).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from components import observability_values
from components.config.messages import PROJECT
from components.dashboard import DIAL_FAILURES, READY_BACKENDS, READY_BACKENDS_BEFORE_V034, dashboard

if not shutil.which("promtool"):
    if os.environ.get("CI"):
        pytest.fail("CI is set but promtool is not installed (Debian's prometheus)", pytrace=False)
    pytest.skip("needs Debian's prometheus package (promtool)", allow_module_level=True)

RULES = "rules.yml"


def status(tenant: str, state: str, ready: bool, values: str) -> dict:
    return {"series": f'kamaji_tenant_control_plane_status{{tenant="{tenant}",tcp_name="{tenant}",'
                      f'tcp_namespace="tenants",status="{state}",ready="{str(ready).lower()}"}}',
            "values": values}


def agents(tenant: str, pod: str, values: str, metric: str = READY_BACKENDS) -> dict:
    strategy = ',proxy_strategy="default"' if metric == READY_BACKENDS else ""
    return {"series": f'{metric}{{tenant="{tenant}",pod="{pod}",job="konnectivity"{strategy}}}', "values": values}


def labels_only(rules: dict) -> dict:
    """The rules without their annotations (prose, which promtool would compare too): these tests are about which
    alerts fire when, with which labels; test_promtool_accepts_the_rules checks the annotations' templates."""
    return {"groups": [{**group, "rules": [{key: value for key, value in rule.items() if key != "annotations"}
                                           for rule in group["rules"]]}
                       for group in rules["groups"]]}


def promtool(tmp_path, tests: list[dict]) -> subprocess.CompletedProcess:
    (tmp_path / RULES).write_text(yaml.safe_dump(labels_only(observability_values.alerting_rules())))
    (tmp_path / "test.yml").write_text(yaml.safe_dump(
        {"rule_files": [RULES], "evaluation_interval": "1m", "tests": tests}))
    return subprocess.run(["promtool", "test", "rules", str(tmp_path / "test.yml")],
                          capture_output=True, text=True, timeout=60)


def passes(tmp_path, tests: list[dict]) -> None:
    checked = promtool(tmp_path, tests)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def alert(name: str, at: str, firing: list[dict]) -> dict:
    return {"alertname": name, "eval_time": at,
            "exp_alerts": [{"exp_labels": {"severity": "warning", **labels}} for labels in firing]}


def test_no_agents_fires_for_an_awake_tenant_after_five_minutes_not_for_a_sleeping_one(tmp_path):
    passes(tmp_path, [{"interval": "1m", "input_series": [
        # tenant-a: awake, its two control-plane pods (two konnectivity-servers) lose their agents at minute 2.
        status("tenant-a", "Ready", True, "1x20"),
        agents("tenant-a", "a-1", "2 2 0x18"), agents("tenant-a", "a-2", "2 2 0x18"),
        # tenant-b: asleep, no sidecar at all.
        status("tenant-b", "Sleeping", False, "1x20"),
        # tenant-c: an old server (v0.33: only the deprecated gauge), one agent all along.
        status("tenant-c", "Ready", True, "1x20"),
        agents("tenant-c", "c-1", "1x20", READY_BACKENDS_BEFORE_V034),
        # tenant-d: awake and its sidecar never scraped (no series at all).
        status("tenant-d", "Ready", True, "1x20"),
    ], "alert_rule_test": [
        alert("KonnectivityNoAgents", "6m", [{"tenant": "tenant-d"}]),  # tenant-a: 4 minutes without, not yet
        alert("KonnectivityNoAgents", "8m", [{"tenant": "tenant-a"}, {"tenant": "tenant-d"}]),
    ]}])


def test_no_agents_stays_silent_while_one_of_several_servers_has_them(tmp_path):
    # Each agent connects to every server: one server with agents is a working tunnel.
    passes(tmp_path, [{"interval": "1m", "input_series": [
        status("tenant-a", "Ready", True, "1x20"),
        agents("tenant-a", "a-1", "0x20"), agents("tenant-a", "a-2", "1x20"),
    ], "alert_rule_test": [alert("KonnectivityNoAgents", "15m", [])]}])


def test_dial_failures_fire_while_they_rise_and_stop_when_they_stop(tmp_path):
    failures = f'{DIAL_FAILURES}{{tenant="tenant-a",reason="no_agent",job="konnectivity"}}'
    passes(tmp_path, [{"interval": "1m", "input_series": [
        {"series": failures, "values": "0 0 0 1 2 3 3x20"},
        {"series": f'{DIAL_FAILURES}{{tenant="tenant-b",reason="no_agent",job="konnectivity"}}', "values": "4x30"},
    ], "alert_rule_test": [
        alert("KonnectivityDialFailures", "2m", []),
        alert("KonnectivityDialFailures", "5m", [{"tenant": "tenant-a", "reason": "no_agent"}]),
        alert("KonnectivityDialFailures", "20m", []),  # ten minutes without a new failure
    ]}])


def test_gpu_pods_pending_fires_after_five_minutes_of_waiting_and_not_for_gated_pods(tmp_path):
    def queue(tenant: str, name: str, values: str) -> dict:
        return {"series": f'scheduler_pending_pods{{tenant="{tenant}",queue="{name}",job="gpu-queue-{tenant}"}}',
                "values": values}

    passes(tmp_path, [{"interval": "1m", "input_series": [
        queue("tenant-a", "unschedulable", "1x20"),
        queue("tenant-b", "gated", "3x20"),
        queue("tenant-c", "backoff", "1 1 1 0 1x20"),  # placed at minute 3, another waits from minute 4
    ], "alert_rule_test": [
        alert("GpuPodsPending", "4m", []),
        alert("GpuPodsPending", "5m", [{"tenant": "tenant-a"}]),
        alert("GpuPodsPending", "9m", [{"tenant": "tenant-a"}, {"tenant": "tenant-c"}]),
    ]}])


def test_control_plane_not_ready_fires_for_an_unready_status_and_never_for_a_sleeping_tenant(tmp_path):
    passes(tmp_path, [{"interval": "1m", "input_series": [
        status("tenant-a", "NotReady", False, "1x20"),
        status("tenant-b", "Sleeping", False, "1x20"),
        status("tenant-c", "Ready", True, "1x20"),
        # Ready again at minute 3: Kamaji resets the gauge, so the old status series ends.
        status("tenant-d", "Upgrading", False, "1 1 1 stale"),
        status("tenant-d", "Ready", True, "_ _ _ 1x20"),
    ], "alert_rule_test": [
        alert("ControlPlaneNotReady", "4m", []),
        alert("ControlPlaneNotReady", "6m", [{"tenant": "tenant-a", "status": "NotReady"}]),
    ]}])


def test_promtool_catches_an_alert_that_does_not_fire_as_expected(tmp_path):
    # The tests above can fail: an awake tenant without agents expected silent.
    checked = promtool(tmp_path, [{"interval": "1m", "input_series": [status("tenant-a", "Ready", True, "1x20")],
                                   "alert_rule_test": [alert("KonnectivityNoAgents", "10m", [])]}])
    assert checked.returncode != 0


def test_promtool_accepts_the_rules(tmp_path):
    (tmp_path / RULES).write_text(yaml.safe_dump(observability_values.alerting_rules()))
    checked = subprocess.run(["promtool", "check", "rules", str(tmp_path / RULES)],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{len(observability_values.alerting_rules()['groups'][0]['rules'])} rules found" in checked.stdout


def test_the_chart_renders_the_rules_where_its_prometheus_yml_reads_them():
    values = observability_values.prometheus_values({"tenant-a": "v1.36.4"}, True)
    assert values["serverFiles"]["alerting_rules.yml"] == observability_values.alerting_rules()


def test_the_dashboard_lists_the_alerts_that_fire():
    [panel] = [p for p in dashboard()["panels"] if p["title"] == "Alerts firing"]
    [target] = panel["targets"]
    assert target["expr"] == 'ALERTS{alertstate="firing"}' and target["instant"] is True


def test_prometheus_lists_the_rules_under_the_labs_name():
    # Its rules page and API group rules by this name: the lab's own group, beside any a user adds.
    [group] = observability_values.alerting_rules()["groups"]
    assert group["name"] == PROJECT
