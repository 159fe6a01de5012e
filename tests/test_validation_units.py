"""Small contracts of the validation suite's building blocks, checked directly."""

import io

import pytest

from validation.checks.base import conclude
from validation.checks.gpu_scheduling import find_slice, quota_mismatches, slice_mib
from validation.checks.hami import allocatable_mismatches, with_gpus
from validation.checks.konnectivity import expect_output
from validation.checks.platform import datastore_ready
from validation.host import CommandResult
from validation.report import TextReport, json_document
from validation.results import CheckFailed, CheckResult, CheckSkipped, CheckUnproven, Status
from validation.stack_outputs import Gpu, Quota, Tenant


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


def test_a_node_without_status_lacks_every_expected_gpu_resource():
    node = {"metadata": {"name": "w1"}}
    assert allocatable_mismatches(node, {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 4096}) == [
        "w1: nvidia.com/gpu is missing, expected 2",
        "w1: nvidia.com/gpumem is missing, expected 4096",
    ]
    assert allocatable_mismatches({"metadata": {"name": "w1"}, "status": {}}, {"nvidia.com/gpu": 2}) == [
        "w1: nvidia.com/gpu is missing, expected 2"
    ]


def test_gpu_checks_skip_a_tenant_without_gpus_and_say_why():
    # validation/README.md: GPU checks are skipped for a tenant without mock GPUs.
    cpu_only = Tenant(
        "tenant-c", "https://172.18.255.3:6443", "v1.36.4", "tenant-c", "tenants_tenant_c", ("w1",), (), 0, ()
    )
    with pytest.raises(CheckSkipped) as skipped:
        with_gpus(None, cpu_only)  # a mock tenant's GPUs come from its config: no cluster is asked
    assert str(skipped.value) == "the tenant has no mock GPUs"


def test_a_running_pod_hami_did_not_annotate_is_reported_as_unplaced():
    pod = {"metadata": {"name": "slice"}, "status": {"phase": "Running"}}
    with pytest.raises(CheckFailed) as failed:
        find_slice(pod, 4096, 25)
    # hami-scheduler records its placement in hami.io/vgpu-devices-allocated (Project-HAMi/HAMi
    # pkg/device/nvidia/device.go@v2.10.0); without it, HAMi never placed the pod.
    assert str(failed.value) == (
        "pod slice runs, but hami.io/vgpu-devices-allocated is missing (hami-scheduler did not place the pod); "
        "expected a 4096 MiB / 25% slice"
    )


def test_a_resource_quota_without_hard_limits_leaves_each_limit_not_set():
    # ResourceQuota's spec and spec.hard are optional in the Kubernetes API (core/v1 ResourceQuotaSpec).
    quota = Quota("team-a", {"nvidia.com/gpumem": 8192})
    objects = [{"metadata": {"name": "empty"}, "spec": {}}, {"metadata": {"name": "bare"}}]
    assert quota_mismatches(quota, objects) == ["namespace team-a: nvidia.com/gpumem is not set, expected 8192"]


class RecordingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushed_at: list[int] = []

    def flush(self) -> None:
        self.flushed_at.append(len(self.getvalue()))


def test_the_table_shows_evidence_for_a_pass_and_the_reason_otherwise_each_line_at_once():
    stream = RecordingStream()
    table = TextReport(stream, ["nodes", "webhook"], ["management", "tenant-a"])
    table.line(CheckResult("nodes", "tenant-a", Status.PASS, evidence="w1 Ready", reason="unused"))
    table.line(CheckResult("webhook", "tenant-a", Status.FAIL, evidence="unused", reason="not mutated"))
    lines = stream.getvalue().splitlines()
    assert [line.split()[-2:] for line in lines] == [["w1", "Ready"], ["not", "mutated"]]
    # Flushed after every line, so progress shows while a long check runs (also when piped).
    assert stream.flushed_at == [len(lines[0]) + 1, len(stream.getvalue())]


def test_cleanup_warnings_come_before_the_summary_on_the_same_stream():
    stream = io.StringIO()
    table = TextReport(stream, ["nodes"], ["tenant-a"])
    table.finish([CheckResult("nodes", "tenant-a", Status.PASS)], ["tenant-a: namespace v-1 was not deleted"])
    *by_target, warning, summary_line = stream.getvalue().splitlines()
    assert by_target == ["by target:", "  tenant-a  PASS nodes"]
    assert warning.startswith("WARN") and warning.endswith("tenant-a: namespace v-1 was not deleted")
    assert summary_line.startswith("OK")


def test_a_proof_that_could_not_finish_is_unproven_with_its_reason_never_a_pass():
    def half() -> str:
        raise CheckUnproven("the root-credential half could not run: no root certificate")

    assert conclude("datastore", "tenant-a", half) == CheckResult(
        "datastore", "tenant-a", Status.UNPROVEN, reason="the root-credential half could not run: no root certificate"
    )


UNPROVEN = CheckResult("datastore", "tenant-a", Status.UNPROVEN, reason="root half could not run: no secret")
PASSED = CheckResult("nodes", "tenant-a", Status.PASS, evidence="w1 Ready")
FAILED = CheckResult("nodes", "tenant-b", Status.FAIL, reason="w2 NotReady")


def test_the_table_shows_unproven_with_its_reason_by_target_and_in_the_summary():
    stream = io.StringIO()
    table = TextReport(stream, ["datastore", "nodes"], ["tenant-a"])
    table.line(UNPROVEN)
    table.finish([UNPROVEN, PASSED], [])

    line, by_target, tenant, summary_line = stream.getvalue().splitlines()
    assert line.split()[:3] == ["UNPROVEN", "datastore", "tenant-a"] and line.endswith(
        "root half could not run: no secret"
    )
    assert tenant == "  tenant-a  UNPROVEN datastore; PASS nodes"
    assert summary_line == "UNPROVEN: 1 passed, 0 failed, 0 skipped, 1 unproven"


def test_the_json_report_is_not_ok_when_a_proof_did_not_finish_and_counts_it_apart():
    document = json_document([UNPROVEN, PASSED], [])

    assert document["ok"] is False
    assert document["summary"] == {"pass": 1, "fail": 0, "skip": 0, "unproven": 1, "sleeping": 0}
    assert document["results"][0]["status"] == "unproven"


def test_a_failure_outranks_an_unfinished_proof_in_the_summary():
    stream = io.StringIO()
    TextReport(stream, ["datastore", "nodes"], ["tenant-a", "tenant-b"]).finish([UNPROVEN, FAILED], [])

    assert stream.getvalue().splitlines()[-1] == "FAILED: 0 passed, 1 failed, 0 skipped, 1 unproven"


def test_a_check_that_crashes_fails_alone_naming_the_error():
    # A bug or an odd API answer in one check must not hide the other results.
    def crash() -> str:
        raise KeyError("status")

    assert conclude("nodes", "tenant-a", crash) == CheckResult(
        "nodes", "tenant-a", Status.FAIL, reason="unexpected KeyError: 'status'"
    )


def test_a_datastore_kamaji_has_not_reconciled_yet_is_not_ready():
    # A freshly created DataStore has no status until Kamaji's controller writes status.ready.
    fresh = {"kind": "DataStore", "metadata": {"name": "default"}}

    class Management:
        def get(self, *_args):
            return fresh

    with pytest.raises(CheckFailed) as failed:
        datastore_ready(Management(), "default")
    assert str(failed.value) == "DataStore default is not ready (status.ready is not true)"


def test_slices_shrink_to_fit_the_smallest_gpu_down_to_1_mib():
    # memoryMiB accepts any positive size for a custom model; three slices of a 3 MiB GPU are 1 MiB each.
    tiny = Tenant("t", "https://h:6443", "v1.36.4", "t", "tenants_t", ("w1",), (Gpu("tiny", 3, 1),), 3, ())
    assert slice_mib(tiny, pods=3) == 1
