"""scripts/render_charts.py, offline: the values files it writes and the images it finds.

Resolving charts and images needs the network; the pull-request workflow runs that part.
"""

from __future__ import annotations

import pytest
import yaml

from tests.plan import dev_config, fake_kubeconfig
from tests.render_charts_module import render_charts
from tests.ssh_keys import made_key
from tests.test_hami_services import RENDERS


def written(tmp_path, **config) -> dict[str, tuple[str, str, list]]:
    """chart label -> (repo, version, values files as loaded, in order)."""
    lab = render_charts.parse_settings(dev_config(**config))
    return {
        chart.label: (
            chart.repo,
            chart.version,
            [yaml.safe_load(path.read_text()) for path in render_charts.write_values(chart, tmp_path)],
        )
        for chart in render_charts.charts(lab)
    }


def test_every_chart_the_dev_stack_installs_is_rendered_with_its_pinned_version(tmp_path):
    charts = written(tmp_path)
    assert {name: (repo, version) for name, (repo, version, _) in charts.items()} == {
        "cert-manager": ("https://charts.jetstack.io", "v1.21.2"),
        "metallb": ("https://metallb.github.io/metallb", "0.16.1"),
        "kamaji": ("https://clastix.github.io/charts", "0.0.0+latest"),
        # The dev stack turns observability on.
        "prometheus": ("https://prometheus-community.github.io/helm-charts", "29.27.0"),
        "grafana": ("https://grafana-community.github.io/helm-charts", "12.11.1"),
        # One HAMi release per tenant of the dev stack.
        "hami-tenant-a": ("https://project-hami.github.io/HAMi/", "2.10.0"),
        "hami-tenant-b": ("https://project-hami.github.io/HAMi/", "2.10.0"),
    }


def test_values_files_are_the_ones_the_releases_get(tmp_path):
    charts = written(tmp_path)
    assert charts["cert-manager"][2] == [{"crds": {"enabled": True}}]
    assert charts["metallb"][2] == []
    # A YAML null removes the chart's default limits; it must survive into the file helm reads. With no
    # kamajiImageTag the controller is the edge release the code was checked against, not the chart's `latest`.
    assert charts["kamaji"][2] == [{"resources": None}, {"image": {"tag": "26.8.2-edge", "pullPolicy": "IfNotPresent"}}]
    (hami,) = charts["hami-tenant-a"][2]
    assert hami["scheduler"]["kubeScheduler"]["image"]["tag"] == "v1.36.4"


def test_each_tenant_s_hami_is_rendered_with_its_own_gpu_slots(tmp_path):
    tenants = [{"name": "few", "gpuSlots": 3}, {"name": "many", "gpuSlots": 12}]
    charts = written(tmp_path, tenants=tenants)
    slots = {
        label: yaml.safe_load(values[0]["device-config"]["content"])["nvidia"]["deviceSplitCount"]
        for label, (_, _, values) in charts.items()
        if label.startswith("hami-")
    }
    assert slots == {"hami-few": 3, "hami-many": 12}


def test_a_pinned_kamaji_image_is_rendered_after_the_resources_file(tmp_path):
    kamaji = written(tmp_path, kamajiImageTag="26.8.2-edge")["kamaji"][2]
    assert kamaji == [{"resources": None}, {"image": {"tag": "26.8.2-edge", "pullPolicy": "IfNotPresent"}}]


def kamaji_rendered_with(*etcd_labels: str) -> str:
    """Kamaji's chart rendered with its etcd subchart's objects labelled as kamaji-etcd's helpers label them
    (clastix/kamaji-etcd charts/kamaji-etcd/templates/_helpers.tpl@92f31f0: <name>-<version>, + as _), as helm
    v4.2.3 `helm template` printed them for charts/kamaji@26.8.2-edge bundling that kamaji-etcd."""
    kamaji = "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: kamaji\n  labels:\n" \
        "    helm.sh/chart: kamaji-0.0.0_latest\n"
    etcd = "---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: kamaji-etcd\n  labels:\n" \
        "    helm.sh/chart: {}\n"
    return kamaji + "".join(etcd.format(label) for label in etcd_labels) + "---\n# empty\n"


@pytest.mark.parametrize(("labels", "said"), [
    (("kamaji-etcd-0.18.0",), "bundles kamaji-etcd-0.18.0, not kamaji-etcd-0.17.0"),
    # A version the pinned one is a prefix of is another version.
    (("kamaji-etcd-0.17.01",), "bundles kamaji-etcd-0.17.01, not kamaji-etcd-0.17.0"),
    ((), "bundles no kamaji-etcd, not kamaji-etcd-0.17.0"),
    (("kamaji-etcd-0.17.0", "kamaji-etcd-0.18.0"), "bundles kamaji-etcd-0.17.0, kamaji-etcd-0.18.0, not"),
])
def test_ci_fails_when_kamaji_s_chart_bundles_another_etcd_chart_than_the_lab_was_checked_against(
        tmp_path, labels, said):
    # Kamaji's chart asks for kamaji-etcd >=0.15.0 and is published with the newest (clastix/kamaji
    # charts/kamaji/Chart.yaml@26.8.2-edge); no value chooses the bundled one.
    (kamaji,) = [chart for chart in render_charts.charts(render_charts.parse_settings(dev_config()))
                 if chart.name == "kamaji"]

    (problem,) = render_charts.bundled_otherwise(kamaji, kamaji_rendered_with(*labels))

    assert said in problem
    assert problem.startswith("chart kamaji 0.0.0+latest ")
    assert "docs/configuration.md (Pinning Kamaji)" in problem


def test_the_etcd_chart_the_lab_was_checked_against_passes():
    (kamaji,) = [chart for chart in render_charts.charts(render_charts.parse_settings(dev_config()))
                 if chart.name == "kamaji"]
    # What snapshot/live.py, validation/checks/datastore.py and wait-kamaji.sh cite: clastix/kamaji-etcd 92f31f0.
    assert render_charts.bundled_otherwise(kamaji, kamaji_rendered_with("kamaji-etcd-0.17.0")) == []


def test_images_are_collected_from_every_rendered_container():
    rendered = """---
# Source: kamaji/templates/controller.yaml
apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
        - name: manager
          image: "clastix/kamaji:26.8.2-edge"
---
apiVersion: batch/v1
kind: Job
spec:
  template:
    spec:
      initContainers:
        - image: clastix/kubectl:v1.36
      containers:
        - image: quay.io/coreos/etcd:v3.6.12
---
apiVersion: v1
kind: ConfigMap
data:
  config.yaml: "image: not-a-container"
"""
    assert render_charts.images(rendered) == {
        "clastix/kamaji:26.8.2-edge",
        "clastix/kubectl:v1.36",
        "quay.io/coreos/etcd:v3.6.12",
    }


def test_provided_pieces_are_not_rendered(tmp_path):
    kubeconfig = fake_kubeconfig("https://10.20.0.1:6443", "platform-admin")
    modes = {"certManager": "provided", "loadBalancer": "provided", "kamaji": "provided"}
    charts = written(
        tmp_path, managementCluster="existing", managementKubeconfig=kubeconfig, dockerNetwork="n", **modes
    )
    # Prometheus and Grafana are the lab's own, installed whatever the platform provides.
    assert set(charts) == {"hami-tenant-a", "hami-tenant-b", "prometheus", "grafana"}


def test_each_tenant_s_hami_runs_the_kube_scheduler_of_its_own_version(tmp_path):
    charts = written(tmp_path, tenants=[{"name": "old", "kubernetesVersion": "v1.35.9"}, {"name": "new"}])
    tags = {
        label: values[0]["scheduler"]["kubeScheduler"]["image"]["tag"]
        for label, (_, _, values) in charts.items()
        if label.startswith("hami-")
    }
    assert tags == {"hami-old": "v1.35.9", "hami-new": "v1.36.4"}


def test_a_machine_tenant_s_flannel_is_rendered_with_its_pod_cidr(tmp_path):
    machines = {"name": "research", "podCidr": "10.250.0.0/16", "machines": [{"name": "m1", "address": "10.0.0.1",
                                                                                "hostKey": "ssh-ed25519 AAAAC3Nza"}]}
    config = dev_config(tenants=[machines, {"name": "web"}], sshPrivateKeys={"default": made_key()})
    lab = render_charts.parse_settings(config, secret_keys={"sshPrivateKeys"})
    charts = {chart.label: chart for chart in render_charts.charts(lab)}
    assert "flannel-web" not in charts
    flannel = charts["flannel-research"]
    assert (flannel.repo, flannel.version) == ("https://flannel-io.github.io/flannel/", "v0.28.9")
    assert [yaml.safe_load(path.read_text()) for path in render_charts.write_values(flannel, tmp_path)][0][
        "podCidr"] == "10.250.0.0/16"


def rendered_services(case: dict) -> str:
    """A render's Services as helm prints them, from the recorded renders of HAMi chart 2.10.0."""
    return "".join(
        "---\n" + yaml.safe_dump({"apiVersion": "v1", "kind": "Service", "metadata": {"name": service["name"]},
                                  "spec": {"type": service["type"], "ports": service["ports"]}})
        for service in case["services"]
    )


def hami_chart():
    return next(chart for chart in render_charts.charts(render_charts.parse_settings(dev_config()))
                if chart.name == "hami")


@pytest.mark.parametrize("case", RENDERS, ids=[case["case"] for case in RENDERS])
def test_ci_fails_on_any_node_port_a_tenants_chart_renders(case):
    chart = hami_chart()
    problems = render_charts.node_ports(chart, rendered_services(case))
    opened = {service["name"] for service in case["services"] if service["type"] == "NodePort"}
    assert len(problems) == len(opened)
    for name, problem in zip(sorted(opened), sorted(problems), strict=True):
        assert problem.startswith(f"chart hami 2.10.0 of tenant {chart.tenant} renders Service {name} as NodePort on")


def test_a_management_chart_may_render_node_ports():
    # Only a tenant's Services sit on nodes the other tenants share a network with.
    (kamaji,) = [chart for chart in render_charts.charts(render_charts.parse_settings(dev_config()))
                 if chart.name == "kamaji"]
    assert render_charts.node_ports(kamaji, rendered_services(RENDERS[0])) == []


def test_a_dedicated_tenant_s_etcd_is_rendered_from_the_chart_kamaji_bundles(tmp_path):
    charts = written(tmp_path, tenants=[{"name": "web"}, {"name": "bank", "dataStore": "dedicated"}])
    assert "kamaji-etcd-web" not in charts
    repo, version, (values,) = charts["kamaji-etcd-bank"]
    assert (repo, f"kamaji-etcd-{version}") == (charts["kamaji"][0], render_charts.platform.KAMAJI_ETCD_CHART)
    lab = render_charts.parse_settings(dev_config(tenants=[{"name": "bank", "dataStore": "dedicated"}]))
    ((chart,),) = [[c for c in render_charts.charts(lab) if c.tenant == "bank" and c.name == "kamaji-etcd"]]
    assert chart.namespace == values["datastore"]["name"] == lab.tenants[0].data_store
