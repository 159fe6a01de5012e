"""The `observability` check on Prometheus' recorded answers (tests/fixtures/validation/prometheus-*.json)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.test_validation import FakeClock
from validation.checks import CHECKS
from validation.checks.observability import gpu_query, observability, scalar, target_problems
from validation.results import CheckFailed, Status
from validation.stack_outputs import Gpu, Tenant, parse_outputs

FIXTURES = Path(__file__).parent / "fixtures" / "validation"
PROXY = "/api/v1/namespaces/lab-monitoring/services/lab-prometheus-server:http/proxy"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def tenant(name: str, gpus: int, workers: int = 1, real: bool = False) -> Tenant:
    return Tenant(name=name, endpoint="https://172.18.255.201:6443", kubernetes_version="v1.36.4", namespace="tenants",
                  data_store_schema=f"tenants_{name}", workers=tuple(f"w{i}" for i in range(workers)),
                  gpus_per_worker=() if real else (Gpu("NVIDIA L4 24GB", 23034, gpus),), gpu_slots=10, quotas=(),
                  real_gpus=real)


@dataclass
class Management:
    answers: dict[str, Any]
    asked: list[str] = field(default_factory=list)

    def get_raw(self, path: str) -> Any:
        self.asked.append(path)
        return self.answers[path]


@dataclass
class Outputs:
    observability: bool


@dataclass
class FakeLab:
    outputs: Outputs
    management: Management
    clock: Any = field(default_factory=lambda: FakeClock())


def lab_answering(targets: dict, gpus: dict[str, dict], on: bool = True) -> FakeLab:
    from urllib.parse import urlencode

    answers = {f"{PROXY}/api/v1/targets?state=active": targets}
    for name, answer in gpus.items():
        answers[f"{PROXY}/api/v1/query?{urlencode({'query': gpu_query(name)})}"] = answer
    return FakeLab(Outputs(on), Management(answers))


def recorded_lab(on: bool = True) -> FakeLab:
    return lab_answering(recorded("prometheus-targets.json"), {
        "tenant-a": recorded("prometheus-gpus-tenant-a.json"), "tenant-b": recorded("prometheus-gpus-tenant-b.json"),
        "nobody": recorded("prometheus-gpus-none.json")}, on)


def test_the_check_runs_last_for_every_tenant():
    assert CHECKS[-1] is observability and observability.for_tenant is not None


def test_outputs_with_a_grafana_url_turn_the_check_on():
    document = recorded("outputs.json")
    assert parse_outputs(document).observability is False
    assert parse_outputs({**document, "grafanaUrl": "http://172.18.255.230"}).observability is True


@pytest.mark.parametrize(("name", "gpus"), [("tenant-a", 1), ("tenant-b", 2)])
def test_each_dev_tenant_passes_on_the_recorded_answers(name, gpus):
    lab = recorded_lab()
    result = observability.for_tenant(lab, tenant(name, gpus))
    assert result.status is Status.PASS, result.reason
    assert result.evidence == f"HAMi 1 up, GPU queue 1 up, Konnectivity 1 up; {gpus} GPUs reported"
    assert lab.management.asked[0] == f"{PROXY}/api/v1/targets?state=active"


def test_a_gpu_count_other_than_the_configured_one_fails_naming_both():
    result = observability.for_tenant(recorded_lab(), tenant("tenant-b", 2, workers=2))
    assert result.status is Status.FAIL
    assert 'count(hami_gpu_memory_limit_bytes{tenant="tenant-b"}) = 2, expected 4' in result.reason


def test_off_is_skipped_saying_why_and_asks_nothing():
    lab = recorded_lab(on=False)
    result = observability.for_tenant(lab, tenant("tenant-a", 1))
    assert result.status is Status.SKIP and "observability is off" in result.reason
    assert lab.management.asked == []


def test_a_tenant_prometheus_does_not_scrape_fails_naming_both_sources():
    healthy, problems = target_problems(recorded("prometheus-targets.json")["data"], "tenant-c")
    assert healthy == []
    assert problems == ["no HAMi target (job hami-tenant-c) for the tenant",
                        "no GPU queue target (job gpu-queue-tenant-c) for the tenant",
                        "no Konnectivity target (job konnectivity) for the tenant"]


@pytest.mark.parametrize("job", ["hami-tenant-a", "gpu-queue-tenant-a", "konnectivity"])
def test_a_down_target_fails_with_prometheus_own_error(job):
    targets = copy.deepcopy(recorded("prometheus-targets.json"))
    for target in targets["data"]["activeTargets"]:
        if target["labels"] == {**target["labels"], "job": job, "tenant": "tenant-a"}:
            target["health"], target["lastError"] = "down", "server returned HTTP status 403 Forbidden"
    lab = lab_answering(targets, {})
    result = observability.for_tenant(lab, tenant("tenant-a", 1))
    assert result.status is Status.FAIL
    assert "after 90s:" in result.reason and "is down: server returned HTTP status 403 Forbidden" in result.reason
    # Asked again until the bound, in case Prometheus had not scraped it yet.
    assert len(lab.management.asked) > 1 and lab.clock.now() >= 90
    # The other tenant is untouched by it.
    _, problems = target_problems(targets["data"], "tenant-b")
    assert problems == []


def test_a_real_gpu_tenant_passes_with_any_gpu_and_fails_with_none():
    result = observability.for_tenant(recorded_lab(), tenant("tenant-b", 0, real=True))
    assert result.status is Status.PASS and result.evidence.endswith("2 GPUs reported")
    empty = lab_answering(recorded("prometheus-targets.json"), {"tenant-a": recorded("prometheus-gpus-none.json")})
    result = observability.for_tenant(empty, tenant("tenant-a", 0, real=True))
    assert result.status is Status.FAIL and "found no GPU" in result.reason


def test_scalar_reads_one_value_none_for_an_empty_vector_and_refuses_anything_else():
    assert scalar(recorded("prometheus-gpus-tenant-a.json")["data"]) == 1
    assert scalar(recorded("prometheus-gpus-none.json")["data"]) is None
    with pytest.raises(CheckFailed):
        scalar({"resultType": "matrix", "result": []})
    two = recorded("prometheus-gpus-tenant-a.json")["data"]
    with pytest.raises(CheckFailed):
        scalar({**two, "result": two["result"] * 2})


def test_an_error_answer_from_prometheus_fails_the_check():
    lab = lab_answering({"status": "error", "errorType": "bad_data", "error": "parse error"}, {})
    result = observability.for_tenant(lab, tenant("tenant-a", 1))
    assert result.status is Status.FAIL and "parse error" in result.reason


def test_a_target_not_yet_scraped_is_waited_for():
    fresh = copy.deepcopy(recorded("prometheus-targets.json"))
    for target in fresh["data"]["activeTargets"]:
        target["health"] = "unknown"
    lab = recorded_lab()
    path = f"{PROXY}/api/v1/targets?state=active"
    answers = iter([fresh, fresh, recorded("prometheus-targets.json")])
    lab.management.answers = {**lab.management.answers, path: None}
    real_get = lab.management.get_raw
    lab.management.get_raw = lambda asked: next(answers) if asked == path else real_get(asked)
    result = observability.for_tenant(lab, tenant("tenant-a", 1))
    assert result.status is Status.PASS, result.reason
    assert lab.clock.now() == 10  # two waits of 5 s
