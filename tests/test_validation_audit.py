"""The `audit` check on recorded answers: a probe request per tenant, found in its own audit log and no other."""

from __future__ import annotations

import re

from tests.test_validation import (
    FORBIDDEN,
    TENANTS,
    FakeClock,
    FakeLab,
    api_server_pods,
    audit_logs,
    error,
    healthy_lab,
    ok,
    outputs_with,
    result,
    validate,
)
from validation.checks.audit import FIND_TIMEOUT


def audit_result(lab: FakeLab, clock: FakeClock | None = None, **kwargs) -> dict:
    _, report = validate(lab, "--only", "audit", clock=clock, **kwargs)
    return result(report, "audit", "all tenants")


def probes_asked(lab: FakeLab, tenant: str) -> list[str]:
    return [call.command.split()[2] for call in lab.commands(tenant, r"^get configmap audit-probe-")]


def test_each_tenants_probe_is_found_in_its_own_log_only():
    lab = healthy_lab()
    found = audit_result(lab)

    assert found["status"] == "pass", found
    assert found["evidence"] == "each of 2 tenants' probe is in its own audit log only"
    # One request each, under a name no other tenant was asked for, and nothing created anywhere.
    (probe_a,), (probe_b,) = (probes_asked(lab, tenant) for tenant in TENANTS)
    assert probe_a != probe_b
    assert re.fullmatch(r"audit-probe-[0-9a-f]{12}", probe_a)
    assert not [call for call in lab.calls if call.command.startswith(("create", "delete", "apply", "patch"))]
    # Each log was read through the management cluster, from the reader container of the tenant's API server.
    for tenant in TENANTS:
        assert lab.commands("management", rf"^exec -n tenants {tenant}-\S+ -c audit-reader -- cat ")


def test_another_tenants_probe_in_a_log_fails_naming_both():
    lab = healthy_lab()
    # tenant-b's volume also shows the requests tenant-a's API server received.
    audit_logs(lab, logged_by=lambda tenant: ("tenant-b", "tenant-a") if tenant == "tenant-b" else (tenant,))
    found = audit_result(lab)

    (probe_a,) = probes_asked(lab, "tenant-a")
    assert found["status"] == "fail"
    assert found["reason"] == f"a tenant's audit log holds another tenant's request: tenant-b's log has {probe_a}"


def test_a_log_without_the_probe_fails_once_the_wait_is_over():
    lab = healthy_lab()
    audit_logs(lab, logged_by=lambda tenant: () if tenant == "tenant-a" else (tenant,))
    clock = FakeClock()
    found = audit_result(lab, clock)

    (probe_a,) = probes_asked(lab, "tenant-a")
    assert found["status"] == "fail"
    assert found["reason"] == (
        f"tenant-a's audit log has no event of its probe (get configmap default/{probe_a}) after {FIND_TIMEOUT}s"
    )
    assert clock.time >= FIND_TIMEOUT
    # The log was read again while waiting, not once.
    assert len(lab.commands("management", r"^exec -n tenants tenant-a-\S+ -c audit-reader -- find ")) > 1


def test_a_logged_get_of_the_probes_name_answered_otherwise_than_404_is_not_taken_for_the_probe():
    lab = healthy_lab()
    audit_logs(lab, code=403)
    found = audit_result(lab)

    assert found["status"] == "fail" and "no event of its probe" in found["reason"]


def test_a_probe_answered_otherwise_than_not_found_fails():
    lab = healthy_lab()
    lab.on("tenant-a", r"^get configmap audit-probe-", error(FORBIDDEN))
    found = audit_result(lab)

    assert found["status"] == "fail"
    assert found["reason"].startswith("tenant-a: the probe get of configmap audit-probe-")
    assert "did not answer NotFound" in found["reason"]


def test_a_probe_that_finds_a_configmap_fails():
    lab = healthy_lab()
    lab.on("tenant-b", r"^get configmap audit-probe-", ok("configmap/audit-probe\n"))
    found = audit_result(lab)

    assert found["status"] == "fail" and found["reason"].startswith("tenant-b: the probe get")


def test_no_running_reader_container_fails_saying_the_log_is_kept():
    lab = healthy_lab()
    lab.on(
        "management",
        r"^get pods -n tenants -l kamaji.clastix.io/name=tenant-b ",
        ok(api_server_pods("tenant-b-6d8f7c9b5-x2k4p", reader_state="waiting")),
    )
    found = audit_result(lab)

    assert found["status"] == "fail"
    assert "no API server pod of tenant-b runs its audit-reader container" in found["reason"]
    assert "its log is kept" in found["reason"]


def test_a_sleeping_tenant_is_not_asked_and_the_evidence_says_so(tmp_path):
    lab = healthy_lab()
    outputs = outputs_with(tmp_path, lambda document: document["tenants"]["tenant-b"].update(sleeping=True))
    found = audit_result(lab, outputs=outputs)

    assert found["status"] == "pass"
    assert found["evidence"] == "each of 1 tenants' probe is in its own audit log only; asleep, not asked: tenant-b"
    assert probes_asked(lab, "tenant-b") == []


def test_every_tenant_asleep_skips_rather_than_passes(tmp_path):
    def asleep(document: dict) -> None:
        for spec in document["tenants"].values():
            spec["sleeping"] = True

    found = audit_result(healthy_lab(), outputs=outputs_with(tmp_path, asleep))

    assert found["status"] == "skip" and found["reason"] == "every tenant sleeps; no API server runs to ask"
