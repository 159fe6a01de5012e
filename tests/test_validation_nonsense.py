"""A kubectl that answers nonsense: every check ends at once with FAIL and the reason, never by waiting
out its timeout, and the whole run ends in far less than the two minutes one check may wait."""

from __future__ import annotations

import pytest

from tests.test_validation import TENANTS, FakeClock, FakeLab, healthy_lab, ok, result, validate
from validation.host import CommandResult
from validation.kube import NAMESPACE_DELETE_TIMEOUT

# What a broken proxy, a wrong server or a tampered API could print instead of the answer asked for.
NONSENSE = {
    "items-null": ok({"apiVersion": "v1", "kind": "List", "items": None}),
    "not-json": ok("<html><body>502 Bad Gateway</body></html>\n"),
    "a-bare-list": ok([]),
    "a-number": ok("42"),
}
# The longest a single check may wait for a pod (validation/pods.py callers use 60-120 s).
ONE_CHECK_WAIT = 60


def answering_everything_with(reply: CommandResult) -> FakeLab:
    lab = FakeLab()
    for cluster in ("management", *TENANTS):
        lab.on(cluster, "", reply)
    return lab


@pytest.mark.parametrize("reply", NONSENSE.values(), ids=NONSENSE.keys())
def test_a_kubectl_answering_nonsense_to_everything_ends_the_run_before_any_check_could_time_out(reply):
    clock = FakeClock()
    code, report = validate(answering_everything_with(reply), clock=clock)
    assert code == 1
    statuses = {(entry["check"], entry["target"]): entry["status"] for entry in report["results"]}
    assert "pass" not in statuses.values(), statuses
    # Each reason says what was wrong with the answer; none is a crash of the reader ("unexpected TypeError").
    assert not [entry for entry in report["results"] if (entry.get("reason") or "").startswith("unexpected")]
    # Less than one check's own wait: no check polled nonsense until its limit, no cleanup waited for
    # a namespace that an unreadable answer said was still there.
    assert clock.now() < ONE_CHECK_WAIT


@pytest.mark.parametrize("reply", NONSENSE.values(), ids=NONSENSE.keys())
def test_a_pod_read_that_answers_nonsense_fails_its_check_at_once_with_the_reason(reply):
    lab = healthy_lab()
    lab.on("tenant-a", r"^get pod probe ", reply)
    clock = FakeClock()
    _, report = validate(lab, "--only", "konnectivity", clock=clock)
    failed = result(report, "konnectivity", "tenant-a")
    assert failed["status"] == "fail"
    assert "get pod probe" in failed["reason"] and "after" not in failed["reason"], failed["reason"]
    assert result(report, "konnectivity", "tenant-b")["status"] == "pass"
    assert clock.now() < ONE_CHECK_WAIT


def test_a_list_where_one_object_was_asked_for_names_what_came_back():
    lab = healthy_lab()
    lab.on("tenant-a", r"^get pod probe ", NONSENSE["items-null"])
    _, report = validate(lab, "--only", "konnectivity")
    assert "expected one object, got a list" in result(report, "konnectivity", "tenant-a")["reason"]


def test_a_namespace_read_that_prints_something_else_than_its_name_stops_the_wait_and_is_named():
    lab = healthy_lab()
    lab.on("tenant-a", r"^get namespace validate-", ok("<html>502</html>\n"))
    clock = FakeClock()
    _, report = validate(lab, "--only", "konnectivity", clock=clock)
    assert clock.now() < NAMESPACE_DELETE_TIMEOUT
    (warning,) = report["warnings"]
    assert warning.startswith("tenant-a: namespace validate-konnectivity-") and "printed neither" in warning


def test_a_namespace_still_there_is_still_awaited():
    lab = healthy_lab()
    lab.on("tenant-a", r"^get namespace validate-", lambda command: ok(f"namespace/{command.split()[2]}\n"))
    clock = FakeClock()
    _, report = validate(lab, "--only", "konnectivity", clock=clock)
    assert clock.now() >= NAMESPACE_DELETE_TIMEOUT
    (warning,) = report["warnings"]
    assert f"still there after {NAMESPACE_DELETE_TIMEOUT}s" in warning
