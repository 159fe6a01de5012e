#!/usr/bin/env python3
"""Resolve every pinned chart from its repository and render it with the program's values.

A first `pulumi preview` never reaches the Kubernetes provider (its kubeconfig is
unknown), so a wrong chart version or a value a chart rejects would only show in
`pulumi up`. This script, run by the pull-request workflow, reads the stack's
configuration as the CLI hands it to the program, writes the values the program
installs each chart with, runs `helm show chart` and `helm template` for each, and
checks that every image the rendered charts (and the node image) name exists
(`docker manifest inspect`, no pull) and that no tenant's chart opens a node port.
Needs helm and docker on PATH.

usage: render_charts.py [--stack dev] [--out DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
# Run as a file: make the program's components importable.
sys.path.insert(0, str(ROOT))

from components import dedicated_datastore, observability_values, platform  # noqa: E402
from components.config import parse_settings  # noqa: E402
from components.config.messages import PROJECT  # noqa: E402
from components.flannel import FLANNEL_CHART_VERSION, FLANNEL_NAMESPACE, FLANNEL_REPO, flannel_values  # noqa: E402
from components.gpu_sharing import HAMI_NAMESPACE, HAMI_REPO, hami_values  # noqa: E402
from components.settings import LabSettings  # noqa: E402


@dataclass(frozen=True)
class Chart:
    name: str
    """Release and chart name."""
    repo: str
    version: str
    namespace: str
    values_files: tuple[str, ...] = field(default=())
    """YAML texts in the order the release applies them (later ones win)."""
    tenant: str = ""
    """The tenant whose release this is, for charts installed once per tenant."""
    kube_version: str = ""
    """The cluster's Kubernetes version, when it is a tenant's rather than the lab's."""
    bundles: tuple[str, ...] = field(default=())
    """The subcharts the chart must render, as their helm.sh/chart labels name them (<name>-<version>)."""

    @property
    def label(self) -> str:
        """Names the files written for this release."""
        return f"{self.name}-{self.tenant}" if self.tenant else self.name


def project_defaults(root: Path = ROOT) -> dict[str, Any]:
    """Pulumi.yaml's config defaults, which the CLI merges into every stack."""
    declared = yaml.safe_load((root / "Pulumi.yaml").read_text())["config"]
    return {key: spec["default"] for key, spec in declared.items()}


def stack_config(stack: str, root: Path = ROOT) -> dict[str, Any]:
    """This project's keys of Pulumi.<stack>.yaml, without the namespace."""
    values = yaml.safe_load((root / f"Pulumi.{stack}.yaml").read_text())["config"]
    prefix = f"{PROJECT}:"
    return {key[len(prefix) :]: value for key, value in values.items() if key.startswith(prefix)}


def charts(lab: LabSettings) -> list[Chart]:
    """Every chart the program installs, with the values it passes (as Platform and GpuSharing do)."""
    versions = lab.versions
    # Pieces the cluster already runs (lab.provided) are checked, not installed.
    installed = []
    if not lab.provided.cert_manager:
        installed.append(
            Chart(
                "cert-manager",
                platform.CERT_MANAGER_REPO,
                versions.cert_manager,
                "cert-manager",
                (yaml.safe_dump(platform.CERT_MANAGER_VALUES),),
            )
        )
    if not lab.provided.load_balancer:
        installed.append(
            Chart("metallb", platform.METALLB_REPO, platform.metallb_chart_version(versions.metallb), "metallb-system")
        )
    if not lab.provided.kamaji:
        installed.append(
            Chart(
                platform.KAMAJI_RELEASE,
                platform.KAMAJI_REPO,
                versions.kamaji_chart,
                platform.KAMAJI_NAMESPACE,
                (platform.KAMAJI_VALUES_YAML, yaml.safe_dump(platform.kamaji_values(versions.kamaji_image_tag))),
                bundles=(platform.KAMAJI_ETCD_CHART,),
            )
        )
    return [
        *installed,
        *observability_charts(lab),
        # HAMi's values depend on the tenant (its GPU slots).
        *(
            Chart(
                "hami",
                HAMI_REPO,
                versions.hami_chart,
                HAMI_NAMESPACE,
                (yaml.safe_dump(hami_values(
                    tenant.kubernetes_version, tenant.gpu_slots, tenant.real_gpus, versions.mock_device_plugin,
                    scheduler_metrics=lab.observability,
                )),),
                tenant=tenant.name,
                kube_version=tenant.kubernetes_version,
            )
            for tenant in lab.tenants
        ),
        # The etcd of each tenant on a datastore of its own, from the chart Kamaji's bundles (KAMAJI_ETCD_CHART).
        *(
            Chart(
                dedicated_datastore.KAMAJI_ETCD_CHART_NAME,
                platform.KAMAJI_REPO,
                dedicated_datastore.KAMAJI_ETCD_CHART_VERSION,
                tenant.data_store,
                (yaml.safe_dump(dedicated_datastore.dedicated_etcd_values(tenant.data_store)),),
                tenant=tenant.name,
            )
            for tenant in lab.tenants
            if tenant.dedicated_data_store
        ),
        # The pod network of tenants whose workers are machines.
        *(
            Chart(
                "flannel",
                FLANNEL_REPO,
                FLANNEL_CHART_VERSION,
                FLANNEL_NAMESPACE,
                (yaml.safe_dump(flannel_values(tenant.pod_cidr)),),
                tenant=tenant.name,
                kube_version=tenant.kubernetes_version,
            )
            for tenant in lab.tenants
            if tenant.machines
        ),
    ]


def observability_charts(lab: LabSettings) -> list[Chart]:
    """Prometheus and Grafana, with observability on (as components/observability.py installs them)."""
    if not lab.observability:
        return []
    tenants = {tenant.name: tenant.kubernetes_version for tenant in lab.tenants}
    return [
        Chart(observability_values.PROMETHEUS_CHART, observability_values.PROMETHEUS_REPO,
              observability_values.PROMETHEUS_CHART_VERSION, observability_values.MONITORING_NAMESPACE,
              (yaml.safe_dump(observability_values.prometheus_values(tenants, not lab.provided.kamaji)),)),
        Chart(observability_values.GRAFANA_CHART, observability_values.GRAFANA_REPO,
              observability_values.GRAFANA_CHART_VERSION, observability_values.MONITORING_NAMESPACE,
              (yaml.safe_dump(observability_values.grafana_values()),)),
    ]


def write_values(chart: Chart, directory: Path) -> list[Path]:
    """The chart's values files, written for `helm template -f`."""
    paths = []
    for index, text in enumerate(chart.values_files):
        path = directory / f"{chart.label}-values-{index}.yaml"
        path.write_text(text)
        paths.append(path)
    return paths


def images(rendered: str) -> set[str]:
    """Every container image a rendered manifest names."""

    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "image" and isinstance(value, str):
                    yield value
                else:
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    return {image for document in yaml.safe_load_all(rendered) for image in walk(document)}


def bundled_otherwise(chart: Chart, rendered: str) -> list[str]:
    """What is wrong with the subcharts `chart` rendered: each expected one that came at another version, or not at all.

    Charts label what they render with helm.sh/chart: <name>-<version> (kamaji-etcd's _helpers.tpl, etcd.chart,
    at clastix/kamaji-etcd 92f31f0).
    """
    labels = {
        document["metadata"].get("labels", {}).get("helm.sh/chart", "")
        for document in yaml.safe_load_all(rendered)
        if isinstance(document, dict) and isinstance(document.get("metadata"), dict)
    }
    problems = []
    for wanted in chart.bundles:
        name = wanted.rsplit("-", 1)[0]
        found = sorted(label for label in labels if label.rsplit("-", 1)[0] == name)
        if found != [wanted]:
            problems.append(
                f"chart {chart.name} {chart.version} bundles {', '.join(found) or f'no {name}'}, not {wanted}, which "
                f"the lab was checked against: re-check what docs/configuration.md (Pinning Kamaji) lists, then move "
                f"KAMAJI_ETCD_CHART in components/platform.py"
            )
    return problems


def node_ports(chart: Chart, rendered: str) -> list[str]:
    """Each Service of a tenant's chart that opens a port on every node: on the lab's shared Docker network any
    other tenant would reach it (docs/security.md). Only the rendered type and nodePort count, whatever the
    values said: a chart ignores a key it does not know."""
    if not chart.tenant:
        return []
    problems = []
    for document in yaml.safe_load_all(rendered):
        if not isinstance(document, dict) or document.get("kind") != "Service":
            continue
        spec = document.get("spec") or {}
        opened = [str(port["nodePort"]) for port in spec.get("ports") or [] if port.get("nodePort")]
        if spec.get("type") in ("NodePort", "LoadBalancer") or opened:
            problems.append(
                f"chart {chart.name} {chart.version} of tenant {chart.tenant} renders Service "
                f"{document.get('metadata', {}).get('name', '?')} as {spec.get('type', 'ClusterIP')}"
                + (f" on node ports {', '.join(opened)}" if opened else "")
                + ": a tenant's Services must stay ClusterIP"
            )
    return problems


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(command), file=sys.stderr)
    return subprocess.run(command, capture_output=True, text=True, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--out", type=Path, default=Path("rendered-charts"))
    args = parser.parse_args(argv)
    lab = parse_settings({**project_defaults(), **stack_config(args.stack)})
    args.out.mkdir(parents=True, exist_ok=True)

    failures: list[str] = []
    found = {lab.node_image, *(tenant.node_image for tenant in lab.tenants)}
    for chart in charts(lab):
        source = [chart.name, "--repo", chart.repo, "--version", chart.version]
        shown = run(["helm", "show", "chart", *source])
        if shown.returncode != 0:
            failures.append(f"chart {chart.name} {chart.version} not found in {chart.repo}: {shown.stderr.strip()}")
            continue
        values = [arg for path in write_values(chart, args.out) for arg in ("-f", str(path))]
        # The management cluster runs kubernetesVersion (nodeImage's tag); a tenant its own.
        rendered = run(
            ["helm", "template", chart.name, *source, "--namespace", chart.namespace]
            + ["--kube-version", chart.kube_version or lab.versions.kubernetes, *values]
        )
        if rendered.returncode != 0:
            failures.append(f"chart {chart.name} {chart.version} rejects its values: {rendered.stderr.strip()}")
            continue
        (args.out / f"{chart.label}.yaml").write_text(rendered.stdout)
        failures += bundled_otherwise(chart, rendered.stdout)
        failures += node_ports(chart, rendered.stdout)
        found |= images(rendered.stdout)

    for image in sorted(found):
        if run(["docker", "manifest", "inspect", image]).returncode != 0:
            failures.append(f"image {image} does not exist (docker manifest inspect)")

    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    print(f"{len(found)} images checked; rendered charts in {args.out}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
