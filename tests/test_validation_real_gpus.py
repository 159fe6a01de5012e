"""The validation suite on a tenant with real GPUs reads the GPUs from what its nodes report."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from tests.test_validation import created_pods, gpumem_limit, healthy_lab, ok, outputs_with, recorded, result, validate
from validation.checks.hami import registered_cards
from validation.results import CheckFailed

# What HAMi's NVIDIA plugin registers for one L4 shared 4 ways (the DeviceInfo list of
# Project-HAMi/HAMi pkg/device/devices.go@v2.10.0; memory in MiB as NVML reports it), and the
# slots kubelet then advertises as nvidia.com/gpu. The real plugin advertises no gpumem resource.
L4 = {
    "id": "GPU-5e1f",
    "index": 0,
    "count": 4,
    "devmem": 23034,
    "devcore": 100,
    "type": "NVIDIA-NVIDIA L4",
    "numa": 0,
    "mode": "hami-core",
    "health": True,
}


def real_gpu_outputs(tmp_path):
    def on_real_gpus(document):
        tenant = document["tenants"]["tenant-a"]
        tenant["gpuDevices"], tenant["gpusPerWorker"] = "real", []

    return outputs_with(tmp_path, on_real_gpus)


def nodes_reporting(*cards):
    nodes = recorded("nodes-tenant-a.json")
    node = nodes["items"][0]
    node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = json.dumps(list(cards))
    node["status"]["allocatable"] = {
        key: value for key, value in node["status"]["allocatable"].items() if not key.startswith("nvidia.com/")
    } | {"nvidia.com/gpu": str(sum(card["count"] for card in cards))}
    return nodes


def test_a_real_gpu_tenant_is_checked_against_the_gpus_its_nodes_report(tmp_path):
    lab = healthy_lab()
    lab.on("tenant-a", r"^get nodes ", ok(nodes_reporting(L4)))

    code, report = validate(lab, "--only", "gpu-capacity", "fractional", outputs=real_gpu_outputs(tmp_path))

    assert code == 0, report
    capacity = result(report, "gpu-capacity", "tenant-a")
    assert "nvidia.com/gpu=4" in capacity["evidence"]
    # An oversized pod asks for one MiB more than the largest card the node reported.
    oversized = [pod for pod in created_pods(lab, "tenant-a") if pod["metadata"]["name"] == "oversized"]
    assert [gpumem_limit(pod) for pod in oversized] == [23035]


def test_a_real_gpu_tenant_whose_plugin_registered_nothing_fails_instead_of_skipping(tmp_path):
    lab = healthy_lab()
    lab.on("tenant-a", r"^get nodes ", ok(nodes_reporting()))

    code, report = validate(lab, "--only", "gpu-capacity", outputs=real_gpu_outputs(tmp_path))

    assert code == 1
    found = result(report, "gpu-capacity", "tenant-a")
    assert found["status"] == "fail"
    assert found["reason"] == (
        "no worker reports a GPU: HAMi's NVIDIA plugin registered none in hami.io/node-nvidia-register "
        "(kubectl -n kube-system logs ds/hami-device-plugin)"
    )


def test_slots_advertised_short_of_what_the_plugin_registered_are_reported(tmp_path):
    lab = healthy_lab()
    nodes = nodes_reporting(L4)
    nodes["items"][0]["status"]["allocatable"]["nvidia.com/gpu"] = "2"
    lab.on("tenant-a", r"^get nodes ", ok(nodes))

    _, report = validate(lab, "--only", "gpu-capacity", outputs=real_gpu_outputs(tmp_path))

    assert "kamaji-tenant-a-w1: nvidia.com/gpu is 2, expected 4" in result(report, "gpu-capacity", "tenant-a")["reason"]


def test_outputs_from_before_machine_workers_are_mock_gpus():
    code, report = validate(healthy_lab(), "--only", "gpu-capacity")
    assert code == 0 and result(report, "gpu-capacity", "tenant-a")["status"] == "pass"


@pytest.mark.parametrize(
    ("annotations", "cards"),
    [
        (None, []),
        ({}, []),
        ({"hami.io/node-nvidia-register": ""}, []),
        # A card without its memory or slot count cannot be sized or counted (a null is Go's zero value).
        ({"hami.io/node-nvidia-register": json.dumps([{**L4, "devmem": None}, L4, {"type": "x"}])}, [L4]),
    ],
    ids=["no-annotations", "no-register", "empty", "incomplete-cards"],
)
def test_only_complete_registered_cards_count(annotations, cards):
    node = {"metadata": {"name": "dgx-1", "annotations": annotations}}
    assert [asdict(card) for card in registered_cards(node)] == [
        {key: card[key] for key in ("id", "index", "count", "devmem", "devcore", "type", "health")} for card in cards
    ]


@pytest.mark.parametrize(
    ("register", "why"),
    [
        ("not json", "hami.io/node-nvidia-register is not JSON"),
        (json.dumps([L4, "GPU-1"]), "hami.io/node-nvidia-register entry 1 is not an object"),
        (json.dumps([L4, {**L4, "count": "ten"}]), 'hami.io/node-nvidia-register entry 1: count is "ten"'),
    ],
    ids=["not-json", "entry-not-an-object", "count-not-a-number"],
)
def test_a_register_annotation_hami_cannot_read_is_an_error_naming_the_node_not_fewer_cards(register, why):
    # HAMi's scheduler reads the annotation with one json.Unmarshal, which fails as a whole on any
    # entry of the wrong type (Project-HAMi/HAMi pkg/device/devices.go@v2.10.0, UnMarshalNodeDevices).
    node = {"metadata": {"name": "dgx-1", "annotations": {"hami.io/node-nvidia-register": register}}}
    with pytest.raises(CheckFailed) as failed:
        registered_cards(node)
    assert str(failed.value).startswith(f"node dgx-1: {why}")


def test_a_missing_node_has_no_cards():
    assert registered_cards(None) == []
