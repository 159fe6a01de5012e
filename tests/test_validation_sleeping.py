"""`make validate` and `make status` on a lab where a tenant sleeps (`sleeping: true`).

The sleeping tenant's TenantControlPlane is tenant-b's recorded answer shaped as Kamaji writes it for a control
plane at 0 replicas: `spec.controlPlane.deployment.replicas` 0, `status.kubernetesResources.version.status`
Sleeping with the spec's version, and the Deployment's status of a Deployment scaled to none (no replica counts)
(clastix/kamaji internal/resources/k8s_deployment_resource.go@26.8.2-edge: computeStatus,
UpdateTenantControlPlaneStatus; e2e/tcp_scale_test.go).
"""

from __future__ import annotations

import io
import json

import pytest

from tests.test_validation import (
    OUTPUTS,
    PER_TENANT_CHECKS,
    FakeClock,
    healthy_lab,
    ok,
    outputs_with,
    recorded,
    result,
    validate,
)
from validation.cli import main
from validation.stack_outputs import OutputsError, parse_outputs

ASLEEP, AWAKE = "tenant-b", "tenant-a"
TCP = rf"^get tenantcontrolplanes\.kamaji\.clastix\.io {ASLEEP} -n tenants "


def sleeping_tcp() -> dict:
    tcp = recorded(f"tcp-{ASLEEP}.json")
    tcp["spec"]["controlPlane"]["deployment"]["replicas"] = 0
    tcp["status"]["kubernetesResources"]["version"] = {
        "status": "Sleeping",
        "version": tcp["spec"]["kubernetes"]["version"],
    }
    deployment = tcp["status"]["kubernetesResources"]["deployment"]
    for count in ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas"):
        deployment.pop(count, None)
    return tcp


def asleep_in_outputs(tmp_path, tenant: str = ASLEEP):
    return outputs_with(tmp_path, lambda document: document["tenants"][tenant].update(sleeping=True))


def sleeping_lab():
    lab = healthy_lab()
    lab.on("management", TCP, ok(sleeping_tcp()))
    return lab


def test_a_sleeping_tenant_is_reported_sleeping_and_the_run_passes(tmp_path):
    lab = sleeping_lab()
    code, report = validate(lab, outputs=asleep_in_outputs(tmp_path))

    assert code == 0 and report["ok"]
    assert {check: result(report, check, ASLEEP)["status"] for check in PER_TENANT_CHECKS} == dict.fromkeys(
        PER_TENANT_CHECKS, "sleeping"
    )
    assert {result(report, check, AWAKE)["status"] for check in PER_TENANT_CHECKS} == {"pass"}
    assert (
        "Kamaji reports TenantControlPlane tenants/tenant-b Sleeping"
        in result(report, "control-plane", ASLEEP)["reason"]
    )
    # Every check of the sleeping tenant, observability's too, says so.
    asleep = [r for r in report["results"] if r["target"] == ASLEEP]
    assert {r["status"] for r in asleep} == {"sleeping"} and len(asleep) > len(PER_TENANT_CHECKS)
    assert report["summary"]["sleeping"] == len(asleep) and report["summary"]["fail"] == 0
    # Its API server does not run: nothing was sent to it.
    assert lab.commands(ASLEEP, r".") == []


def test_isolation_needs_two_tenants_awake(tmp_path):
    code, report = validate(sleeping_lab(), outputs=asleep_in_outputs(tmp_path))
    isolation = result(report, "isolation", "all tenants")
    assert isolation["status"] == "skip" and "tenant-b asleep" in isolation["reason"]


def test_the_awake_tenant_still_fails_the_run_when_it_is_broken(tmp_path):
    lab = sleeping_lab()
    nodes = recorded(f"nodes-{AWAKE}.json")
    nodes["items"] = []
    lab.on(AWAKE, r"^get nodes ", ok(nodes))

    code, report = validate(lab, "--only", "nodes", outputs=asleep_in_outputs(tmp_path))

    assert code == 1 and not report["ok"]
    assert result(report, "nodes", AWAKE)["status"] == "fail"
    assert result(report, "nodes", ASLEEP)["status"] == "sleeping"


@pytest.mark.parametrize("kamaji_says", ["Ready", "NotReady", ""])
def test_a_tenant_the_outputs_put_to_sleep_that_kamaji_does_not_report_sleeping_fails(tmp_path, kamaji_says):
    lab = healthy_lab()
    tcp = recorded(f"tcp-{ASLEEP}.json")
    tcp["status"]["kubernetesResources"]["version"]["status"] = kamaji_says
    lab.on("management", TCP, ok(tcp))

    code, report = validate(lab, "--only", "control-plane", outputs=asleep_in_outputs(tmp_path))

    assert code == 1
    found = result(report, "control-plane", ASLEEP)
    assert found["status"] == "fail"
    assert f"is {kamaji_says or 'without status'}, not Sleeping" in found["reason"] and "pulumi up" in found["reason"]


def test_a_tenant_kamaji_reports_sleeping_that_should_be_awake_fails():
    code, report = validate(sleeping_lab(), "--only", "control-plane")
    assert code == 1
    found = result(report, "control-plane", ASLEEP)
    assert found["status"] == "fail" and "is Sleeping, not Ready" in found["reason"]


def test_the_text_report_says_sleeping_and_counts_the_tenants_asleep(tmp_path, capsys):
    code = main(
        ["--outputs", str(asleep_in_outputs(tmp_path)), "--only", "nodes"], runner=sleeping_lab(), clock=FakeClock()
    )
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    (line,) = [line for line in lines if line.split()[:3] == ["SLEEPING", "nodes", ASLEEP]]
    assert "sleeps (sleeping: true)" in line
    assert f"  {ASLEEP}     SLEEPING nodes" in lines
    assert lines[-1] == "OK: 1 passed, 0 failed, 0 skipped, 1 asleep"


def test_without_a_sleeping_tenant_the_summary_line_is_unchanged(capsys):
    main(["--outputs", str(OUTPUTS), "--only", "nodes"], runner=healthy_lab(), clock=FakeClock())
    assert capsys.readouterr().out.splitlines()[-1] == "OK: 2 passed, 0 failed, 0 skipped"


# --- the outputs ---------------------------------------------------------------------------------------


def test_outputs_without_the_sleeping_fact_describe_awake_tenants():
    outputs = parse_outputs(recorded("outputs.json"))
    assert not any(tenant.sleeping for tenant in outputs.tenants.values())


def test_the_sleeping_fact_is_read_per_tenant():
    document = recorded("outputs.json")
    document["tenants"][ASLEEP]["sleeping"] = True
    document["tenants"][AWAKE]["sleeping"] = False
    tenants = parse_outputs(document).tenants
    assert (tenants[ASLEEP].sleeping, tenants[AWAKE].sleeping) == (True, False)


@pytest.mark.parametrize("value", ["true", 1, None])
def test_a_sleeping_fact_that_is_not_a_boolean_is_refused_naming_it(value):
    document = recorded("outputs.json")
    document["tenants"][ASLEEP]["sleeping"] = value
    with pytest.raises(OutputsError, match=rf"tenant-b.*\.sleeping: expected true or false, got {value!r}"):
        parse_outputs(document)


def test_json_to_stdout_includes_the_sleeping_count(tmp_path):
    stdout = io.StringIO()
    main(
        ["--outputs", str(asleep_in_outputs(tmp_path)), "--only", "nodes", "--json", "-"],
        runner=sleeping_lab(),
        clock=FakeClock(),
        stdout=stdout,
    )
    assert json.loads(stdout.getvalue())["summary"] == {"pass": 1, "fail": 0, "skip": 0, "unproven": 0, "sleeping": 1}
