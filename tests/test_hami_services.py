"""HAMi's Services stay inside each tenant: no NodePort on any worker, and Prometheus still reaches HAMi.

The chart's two Service templates are read here in a few lines and held against what `helm template` renders
(tests/fixtures/hami-2.10.0-services.yaml); the lab's values then go through that reading.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.gpu_sharing import hami_values
from components.observability_values import HAMI_METRICS_PATH

RELEASE = "kubernetes:helm.sh/v3:Release"
MOCK_IMAGE = "docker.io/projecthami/mock-device-plugin:1.0.1"
RENDERS = yaml.safe_load((Path(__file__).parent / "fixtures" / "hami-2.10.0-services.yaml").read_text())


def chart_services(values: dict) -> dict[str, dict]:
    """Service name -> {type, ports (names), node_ports (names)} as chart 2.10.0 renders them.

    Each Service's type is its section's service.type, NodePort when unset, and a port gets a nodePort only
    for type NodePort (charts/hami/templates/scheduler/service.yaml@v2.10.0); the NVIDIA plugin's metrics
    Service exists while devicePlugin.enabled, true by default (device-plugin/monitorservice.yaml, values.yaml).
    """
    sections = {"hami-scheduler": ("scheduler", ["http", "monitor"])}
    if (values.get("devicePlugin") or {}).get("enabled", True):
        sections["hami-device-plugin-monitor"] = ("devicePlugin", ["monitorport"])
    services = {}
    for name, (section, ports) in sections.items():
        kind = ((values.get(section) or {}).get("service") or {}).get("type") or "NodePort"
        services[name] = {"type": kind, "ports": ports, "node_ports": ports if kind == "NodePort" else []}
    return services


def rendered(case: dict) -> dict[str, dict]:
    return {
        service["name"]: {
            "type": service["type"],
            "ports": [port["name"] for port in service["ports"]],
            "node_ports": [port["name"] for port in service["ports"] if "nodePort" in port],
        }
        for service in case["services"]
    }


@pytest.mark.parametrize("case", RENDERS, ids=[case["case"] for case in RENDERS])
def test_the_reading_of_the_service_templates_is_what_helm_renders(case):
    assert chart_services(case["values"]) == rendered(case)


def test_the_charts_defaults_open_the_node_ports_the_lab_must_close():
    # The renders hold what the issue found: without the lab's values, HAMi listens on every node.
    [defaults] = [case for case in RENDERS if case["values"] == {}]
    node_ports = {port["nodePort"] for service in defaults["services"] for port in service["ports"]}
    assert node_ports == {31992, 31993, 31998}


def lab_values(real_gpus: bool, scheduler_metrics: bool) -> dict:
    return hami_values("v1.36.4", 4, real_gpus, MOCK_IMAGE, scheduler_metrics=scheduler_metrics)


@pytest.mark.parametrize("scheduler_metrics", [False, True], ids=["observability-off", "observability-on"])
@pytest.mark.parametrize("real_gpus", [False, True], ids=["mock-gpus", "real-gpus"])
def test_no_hami_service_opens_a_node_port(real_gpus, scheduler_metrics):
    services = chart_services(lab_values(real_gpus, scheduler_metrics))
    # Real GPUs bring the NVIDIA plugin's metrics Service too: it must be closed as well.
    assert ("hami-device-plugin-monitor" in services) is real_gpus
    assert {name: (service["type"], service["node_ports"]) for name, service in services.items()} == {
        name: ("ClusterIP", []) for name in services
    }


def test_every_tenants_hami_release_opens_no_node_port(dev_plan):
    releases = [r for r in dev_plan.of_type(RELEASE) if r.inputs["chart"] == "hami"]
    assert len(releases) == 2
    for release in releases:
        for name, service in chart_services(release.inputs["values"]).items():
            assert (service["type"], service["node_ports"]) == ("ClusterIP", []), (release.name, name)


def proxied_service_port(path: str) -> tuple[str, str]:
    """(service, port name) of an API server service-proxy path .../services/[scheme:]<name>:<port>/proxy/..."""
    target = path.split("/services/", 1)[1].split("/proxy", 1)[0]
    name, port = target.split(":")[-2:]
    return name, port


@pytest.mark.parametrize("real_gpus", [False, True], ids=["mock-gpus", "real-gpus"])
def test_prometheus_reaches_hami_through_a_port_of_its_clusterip_service(real_gpus):
    # The API server's service proxy dials a ready endpoint of the named port, the pod itself, never a node's
    # port (kubernetes/kubernetes pkg/registry/core/service/storage/storage.go@v1.36.0, ResourceLocation), so
    # the scrape holds while the port it names is still on the Service the chart renders.
    service, port = proxied_service_port(HAMI_METRICS_PATH)
    rendered_service = chart_services(lab_values(real_gpus, scheduler_metrics=True))[service]
    assert port in rendered_service["ports"] and rendered_service["type"] == "ClusterIP"

