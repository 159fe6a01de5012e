"""`make status` with a sleeping tenant: its state as Kamaji reports it and what it still holds.

tenant-b of tests/fixtures/status/ is put to sleep: `sleeping: true` in the outputs, and its TenantControlPlane
shaped as Kamaji writes one at 0 replicas (clastix/kamaji internal/resources/k8s_deployment_resource.go@26.8.2-edge,
computeStatus: status Sleeping, the spec's version kept).
"""

from __future__ import annotations

import io
import json

from tests.test_status import FIXTURES, REFRESHED, FakeKubectl, as_list, fixture, tenant
from validation.status.cli import main
from validation.status.render import WIDTH

ASLEEP = "tenant-b"


def sleeping_tcp(state: str = "Sleeping") -> dict:
    tcp = json.loads(fixture(f"tcp-{ASLEEP}.json"))
    tcp["spec"]["controlPlane"]["deployment"]["replicas"] = 0
    tcp["status"]["kubernetesResources"]["version"]["status"] = state
    return tcp


def fake_with(state: str = "Sleeping") -> FakeKubectl:
    tcps = [json.loads(fixture(f"tcp-{name}.json")) for name in ("tenant-a", "tenant-c")] + [sleeping_tcp(state)]
    # tenant-b's API server is down, as it is while it sleeps: asking it would only time out.
    answers = {("management", "tenantcontrolplanes"): as_list(tcps)}
    return FakeKubectl(unreachable=(ASLEEP,), gpus_healthy=True, answers=answers)


def outputs_asleep(tmp_path) -> str:
    document = json.loads((FIXTURES / "outputs.json").read_text())
    document["tenants"][ASLEEP]["sleeping"] = True
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(document))
    return str(path)


def run(tmp_path, *args: str, fake: FakeKubectl | None = None) -> tuple[int, str, FakeKubectl]:
    fake = fake or fake_with()
    stdout = io.StringIO()
    code = main(["--outputs", outputs_asleep(tmp_path), *args], runner=fake, stdout=stdout, clock=fake)
    return code, stdout.getvalue(), fake


def test_a_sleeping_tenant_is_asleep_and_healthy_and_its_cluster_is_not_asked(tmp_path):
    code, text, fake = run(tmp_path, "--json")
    doc = json.loads(text)
    b = tenant(doc, ASLEEP)
    assert (b["asleep"], b["healthy"], b["controlPlaneState"], b["problems"]) == (True, True, "Sleeping", [])
    assert doc["ok"] is True and code == 0
    assert [call for call in fake.calls if call[0] == ASLEEP] == []
    assert tenant(doc, "tenant-a")["asleep"] is False


def test_a_sleeping_tenant_shows_what_it_holds(tmp_path):
    outputs = json.loads((FIXTURES / "outputs.json").read_text())["tenants"][ASLEEP]
    _, text, _ = run(tmp_path, "--json")
    holds = tenant(json.loads(text), ASLEEP)["holds"]
    cards = sum(gpu["count"] for gpu in outputs["gpusPerWorker"]) * len(outputs["workers"])
    memory = sum(gpu["count"] * gpu["memoryMiB"] for gpu in outputs["gpusPerWorker"]) * len(outputs["workers"])
    assert holds == {
        "address": outputs["endpoint"].split("//")[1].rsplit(":", 1)[0],
        "workers": outputs["workers"],
        "gpus": cards,
        "gpuMemoryMiB": memory,
        "gpuDevices": "mock",
    }
    assert cards > 0


def test_the_frame_says_asleep_with_its_address_workers_and_gpus(tmp_path):
    code, text, _ = run(tmp_path)
    lines = text.splitlines()
    assert lines[0] == f"refreshed {REFRESHED:%Y-%m-%d %H:%M:%S} UTC: 3/3 tenants healthy, 1 asleep"
    start = lines.index(f"{ASLEEP}  v1.36.4  asleep  https://172.30.149.40:6443  datastore default")
    assert lines[start + 1].startswith("  control plane Sleeping; holds address 172.30.149.40, 1 stopped worker, ")
    assert "mock GPUs" in lines[start + 1]
    assert all(len(line) <= WIDTH for line in lines)
    assert lines[-1] == "OK: every tenant is healthy" and code == 0


def test_a_tenant_that_should_sleep_but_runs_is_unhealthy(tmp_path):
    code, text, _ = run(tmp_path, "--json", fake=fake_with("Ready"))
    b = tenant(json.loads(text), ASLEEP)
    assert b["healthy"] is False and b["problems"] == ["control plane Ready, not Sleeping: run pulumi up"]
    assert code == 1


def test_a_sleeping_tenant_without_the_management_cluster_is_unknown(tmp_path):
    fake = fake_with()
    fake.before = lambda cluster, args: None
    fake.unreachable.add("management")
    code, text, _ = run(tmp_path, "--json", fake=fake)
    b = tenant(json.loads(text), ASLEEP)
    assert b["controlPlaneReady"] is None and b["problems"] == ["control plane unknown (management cluster not read)"]
    assert code == 1
