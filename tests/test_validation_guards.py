"""The validation run reads nodes, pods and TenantControlPlanes as `make status` does, with the same guards.

Before issue 36 each answer below ended its check with "unexpected TypeError/AttributeError: ...";
now the check fails with a short reason naming what was malformed, and the other tenant is unaffected.
"""

from __future__ import annotations

import json

from tests.test_validation import healthy_lab, ok, recorded, result, validate
from tests.test_validation_real_gpus import L4, nodes_reporting, real_gpu_outputs


def test_a_node_list_without_items_fails_the_nodes_check_with_its_reason_and_only_that_tenant_s():
    lab = healthy_lab()
    lab.on("tenant-a", r"^get nodes ", ok({"apiVersion": "v1", "kind": "List", "items": None}))

    _, report = validate(lab, "--only", "nodes")

    failed = result(report, "nodes", "tenant-a")
    assert failed["status"] == "fail"
    assert failed["reason"] == "`kubectl get nodes` on tenant-a: expected a list of items, got items null"
    assert result(report, "nodes", "tenant-b")["status"] == "pass"


def test_a_control_plane_whose_status_is_null_is_not_ready_rather_than_an_unexpected_error():
    lab = healthy_lab()
    tcp = recorded("tcp-tenant-a.json")
    tcp["status"] = None
    lab.on("management", r"^get tenantcontrolplanes\.kamaji\.clastix\.io tenant-a -n tenants ", ok(tcp))

    _, report = validate(lab, "--only", "control-plane")

    assert result(report, "control-plane", "tenant-a")["reason"] == (
        "TenantControlPlane tenants/tenant-a is without status, not Ready"
    )
    assert result(report, "control-plane", "tenant-b")["status"] == "pass"


def test_a_node_whose_kubelet_version_is_not_a_string_is_named():
    lab = healthy_lab()
    nodes = recorded("nodes-tenant-a.json")
    nodes["items"][0]["status"]["nodeInfo"]["kubeletVersion"] = 136
    lab.on("tenant-a", r"^get nodes ", ok(nodes))

    _, report = validate(lab, "--only", "nodes")

    worker = nodes["items"][0]["metadata"]["name"]
    assert result(report, "nodes", "tenant-a")["reason"] == f"node {worker}: kubeletVersion is a number, not a string"


def test_a_register_annotation_hami_cannot_read_fails_gpu_capacity_naming_it(tmp_path):
    lab = healthy_lab()
    nodes = nodes_reporting(L4)
    node = nodes["items"][0]
    node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = json.dumps([L4, {**L4, "count": "ten"}])
    lab.on("tenant-a", r"^get nodes ", ok(nodes))

    _, report = validate(lab, "--only", "gpu-capacity", outputs=real_gpu_outputs(tmp_path))

    # Before, the card was left out silently and the check passed on the other one.
    reason = result(report, "gpu-capacity", "tenant-a")["reason"]
    assert reason == f'node {node["metadata"]["name"]}: hami.io/node-nvidia-register entry 1: count is "ten"'
