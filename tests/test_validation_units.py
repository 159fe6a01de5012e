"""Small contracts of the validation suite's building blocks, checked directly."""

import pytest

from validation.checks.konnectivity import expect_output
from validation.host import CommandResult
from validation.results import CheckFailed, CheckResult, Status


def test_a_json_result_has_exactly_the_documented_fields():
    # Scripts read `--json` results by these keys; a renamed or extra key would break them.
    result = CheckResult("nodes", "tenant-a", Status.FAIL, reason="w1 is NotReady")
    assert result.to_json() == {
        "check": "nodes",
        "target": "tenant-a",
        "status": "fail",
        "evidence": "",
        "reason": "w1 is NotReady",
    }
    assert type(result.to_json()["status"]) is str  # plain JSON, not the enum


def test_unexpected_output_is_quoted_in_the_reason_and_cut_to_100_characters():
    printed = "x" * 150
    with pytest.raises(CheckFailed) as failed:
        expect_output(CommandResult(("kubectl", "logs"), 0, printed + "\n", ""), "probe-line", "kubectl logs")
    assert str(failed.value) == f"kubectl logs printed {'x' * 100!r} instead of 'probe-line'"
