"""`make status` with a sleeping tenant: its state as Kamaji reports it and what it still holds.

tenant-b of tests/fixtures/status/ is put to sleep: `sleeping: true` in the outputs, and its TenantControlPlane
shaped as Kamaji writes one at 0 replicas (clastix/kamaji internal/resources/k8s_deployment_resource.go@26.8.2-edge,
computeStatus: status Sleeping, the spec's version kept).
"""

from __future__ import annotations

import io
import json

import pytest

from tests.test_status import FIXTURES, REFRESHED, FakeKubectl, as_list, fixture, tenant
from validation.status.cli import main
from validation.status.render import WIDTH, Style, render

ASLEEP = "tenant-b"


def sleeping_tcp(state: str = "Sleeping") -> dict:
    tcp = json.loads(fixture(f"tcp-{ASLEEP}.json"))
    tcp["spec"]["controlPlane"]["deployment"]["replicas"] = 0
    tcp["status"]["kubernetesResources"]["version"]["status"] = state
    return tcp


def fake_with(state: str = "Sleeping") -> FakeKubectl:
    return fake_serving(sleeping_tcp(state))


def fake_serving(asleep_tcp: dict | None) -> FakeKubectl:
    """The management cluster with the fixtures' TenantControlPlanes, tenant-b's as given (None: it has none)."""
    tcps = [json.loads(fixture(f"tcp-{name}.json")) for name in ("tenant-a", "tenant-c")]
    # tenant-b's API server is down, as it is while it sleeps: asking it would only time out.
    answers = {("management", "tenantcontrolplanes"): as_list(tcps + ([asleep_tcp] if asleep_tcp else []))}
    return FakeKubectl(unreachable=(ASLEEP,), gpus_healthy=True, answers=answers)


def outputs_asleep(tmp_path, **changes) -> str:
    """The fixtures' outputs with tenant-b asleep, and its outputs' keys changed as given."""
    document = json.loads((FIXTURES / "outputs.json").read_text())
    document["tenants"][ASLEEP].update(sleeping=True, **changes)
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(document))
    return str(path)


def run(tmp_path, *args: str, fake: FakeKubectl | None = None, **changes) -> tuple[int, str, FakeKubectl]:
    fake = fake or fake_with()
    stdout = io.StringIO()
    code = main(["--outputs", outputs_asleep(tmp_path, **changes), *args], runner=fake, stdout=stdout, clock=fake)
    return code, stdout.getvalue(), fake


def under_header(text: str) -> str:
    """The line under tenant-b's header in a frame."""
    lines = text.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith(f"{ASLEEP}  ")) + 1]


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


A1, A2 = "kamaji-tenant-b-w1", "kamaji-tenant-b-w2"


@pytest.mark.parametrize(
    ("changes", "args", "holds"),
    [
        ({}, (), "1 stopped worker, 2 mock GPUs (45 GiB)"),  # 2 x 23034 MiB, rounded to a tenth of a GiB
        ({}, ("--wide",), "1 stopped worker, 2 mock GPUs (46068 MiB)"),
        ({"workers": [A1, A2]}, (), "2 stopped workers, 4 mock GPUs (90 GiB)"),
        ({"workers": []}, (), "0 stopped workers, no GPUs"),
        ({"gpusPerWorker": []}, (), "1 stopped worker, no GPUs"),
        ({"gpusPerWorker": [], "gpuDevices": "real"}, (), "1 stopped worker, real GPUs"),
    ],
    ids=["one-worker", "wide", "two-workers", "no-workers", "no-gpus", "real-gpus"],
)
def test_the_line_under_a_sleeping_tenant_counts_its_workers_and_says_which_gpus_it_keeps(
    tmp_path, changes, args, holds
):
    _, text, _ = run(tmp_path, *args, **changes)
    assert under_header(text) == f"  control plane Sleeping; holds address 172.30.149.40, {holds}"
    _, doc, _ = run(tmp_path, "--json", **changes)
    assert tenant(json.loads(doc), ASLEEP)["holds"]["gpuDevices"] == changes.get("gpuDevices", "mock")


GREEN, RED, RESET = "\033[32m", "\033[31m", "\033[0m"


def test_a_sleeping_tenant_is_green_while_it_sleeps_as_it_should_and_red_with_each_problem(tmp_path):
    header = "tenant-b  v1.36.4  {}  https://172.30.149.40:6443  datastore default"
    _, doc, _ = run(tmp_path, "--json")
    lines = render(json.loads(doc), Style(True)).splitlines()
    assert f"{GREEN}{header.format('asleep')}{RESET}" in lines
    _, doc, _ = run(tmp_path, "--json", fake=fake_with("Ready"))
    lines = render(json.loads(doc), Style(True)).splitlines()
    start = lines.index(f"{RED}{header.format('UNHEALTHY, asleep')}{RESET}")
    assert lines[start + 1].startswith("  control plane Ready; holds address ")  # what it holds is no problem
    assert lines[start + 2] == f"{RED}  control plane Ready, not Sleeping: run pulumi up{RESET}"
    assert lines[start + 3] == ""


def without_status() -> dict:
    tcp = sleeping_tcp()
    del tcp["status"]  # as created, before Kamaji first writes its status
    return tcp


def naming_a_number_as_its_datastore() -> dict:
    tcp = sleeping_tcp()
    tcp["spec"]["dataStore"] = 7
    return tcp


def with_status(status: object, part: str = "") -> dict:
    """tenant-b's sleeping TenantControlPlane with its status (or the named part of it) replaced."""
    tcp = sleeping_tcp()
    if part:
        tcp["status"][part] = status
    else:
        tcp["status"] = status
    return tcp


@pytest.mark.parametrize(
    ("tcp", "problems", "state", "store"),
    [
        (None, ["no TenantControlPlane tenants/tenant-b"], None, None),
        (without_status(), ["control plane without status, not Sleeping: run pulumi up"], None, "default"),
        (
            naming_a_number_as_its_datastore(),
            ["DataStore unknown (TenantControlPlane tenants/tenant-b: dataStore is a number, not a string)"],
            "Sleeping",
            None,
        ),
        (
            with_status(["Sleeping"], "kubernetesResources"),
            ["control plane unknown (TenantControlPlane tenant-b: kubernetesResources is a list, not an object)"],
            None,
            None,
        ),
        (
            with_status("Sleeping"),
            ["control plane unknown (TenantControlPlane tenant-b: status is a string, not an object)"],
            None,
            None,
        ),
        (
            with_status("default", "storage"),
            ["DataStore unknown (TenantControlPlane tenants/tenant-b: storage is a string, not an object)"],
            "Sleeping",
            None,
        ),
    ],
    ids=[
        "no-control-plane",
        "control-plane-without-status",
        "datastore-malformed",
        "state-malformed",
        "status-malformed",
        "storage-malformed",
    ],
)
def test_a_sleeping_tenant_whose_control_plane_is_missing_or_unreadable_says_so(tmp_path, tcp, problems, state, store):
    code, doc, _ = run(tmp_path, "--json", fake=fake_serving(tcp))
    b = tenant(json.loads(doc), ASLEEP)
    assert (b["healthy"], b["problems"], b["internalError"]) == (False, problems, False)
    assert (b["controlPlaneState"], b["dataStore"]) == (state, store)
    assert b["controlPlaneReady"] is False  # Kamaji was asked: not unknown
    assert code == 1
    _, text, _ = run(tmp_path, fake=fake_serving(tcp))
    assert under_header(text).startswith(f"  control plane {state or 'unknown'}; holds address ")


def test_without_the_management_cluster_a_sleeping_tenant_s_state_and_datastore_are_unknown(tmp_path):
    fake = fake_with()
    fake.unreachable.add("management")
    _, doc, _ = run(tmp_path, "--json", fake=fake)
    b = tenant(json.loads(doc), ASLEEP)
    assert (b["controlPlaneState"], b["dataStore"], b["controlPlaneReady"]) == (None, None, None)
    fake = fake_with()
    fake.unreachable.add("management")
    _, text, _ = run(tmp_path, fake=fake)
    holds = "holds address 172.30.149.40, 1 stopped worker, 2 mock GPUs (45 GiB)"
    assert under_header(text) == f"  control plane unknown; {holds}"
