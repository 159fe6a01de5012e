"""Opt-in observability: the plan on and off, each tenant's scrape job and metrics reader, chart values."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from components import observability_values
from components.config import ConfigError, parse_settings
from tests.kube_api import is_label
from tests.plan import GRAFANA_PASSWORD, dev_config, is_secret, plan, resolve, reveal

RELEASE = "kubernetes:helm.sh/v3:Release"
FIXTURES = Path(__file__).parent / "fixtures"
TENANT_KINDS = (
    "kubernetes:core/v1:ServiceAccount",
    "kubernetes:rbac.authorization.k8s.io/v1:Role",
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
)


def value_keys(fixture: str) -> dict[tuple[str, ...], str]:
    """Key path -> kind of its default, from a chart's values.yaml (see tests/fixtures/README.md)."""
    lines = (FIXTURES / fixture).read_text().splitlines()[1:]
    return {tuple(path): kind for path, kind in map(json.loads, lines)}


PROMETHEUS_KEYS = value_keys("prometheus-29.27.0-value-keys.jsonl")
GRAFANA_KEYS = value_keys("grafana-12.11.1-value-keys.jsonl")
# The keys Grafana's provisioning reads in the files the chart writes from `datasources` and `dashboardProviders`
# (see tests/fixtures/README.md): below those two keys the chart passes anything on.
GRAFANA_PROVISIONING = json.loads((FIXTURES / "grafana-13.2.0-provisioning-keys.json").read_text())
# Read by the chart's template although its values.yaml does not list it: the ConfigMap renders
# serverFiles."prometheus.yml".scrape_configs (charts/prometheus/templates/cm.yaml@prometheus-29.27.0).
PROMETHEUS_TEMPLATE_KEYS = {("serverFiles", "prometheus.yml", "scrape_configs")}


def leaves(values: dict, prefix: tuple[str, ...] = ()):
    for key, value in values.items():
        path = (*prefix, key)
        if isinstance(value, dict) and value:
            yield from leaves(value, path)
        else:
            yield path


def unread_keys(values: dict, keys: dict[tuple[str, ...], str], template_keys=frozenset()) -> list:
    """Leaf paths of `values` the chart never reads: neither its own key, nor below a free-form default ({} or [])
    or a key its templates read."""

    def read(path):
        if path in keys or path in template_keys:
            return True
        return any(
            keys.get(path[:n], "").endswith("-empty") or path[:n] in template_keys for n in range(1, len(path))
        )

    return [path for path in leaves(values) if not read(path)]


def releases(plan_, chart):
    return [r for r in plan_.of_type(RELEASE) if r.inputs["chart"] == chart]


def provider_of(plan_, name):
    return plan_.named(name).provider_urn


@pytest.fixture
def off_plan(shared):
    return shared("observability-off", lambda: plan(dev_config(observability=False), preview=False))


# --- config ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("written", "expected"), [("true", True), ("false", False), (True, True), (False, False)])
def test_observability_reads_the_clis_text_and_yaml_booleans(written, expected):
    assert parse_settings({**dev_config(), "observability": written}).observability is expected


def test_observability_is_off_unless_set():
    config = {key: value for key, value in dev_config().items() if key != "observability"}
    assert parse_settings(config).observability is False


@pytest.mark.parametrize("written", ["yes", "1", 1, ""])
def test_observability_refuses_anything_but_true_or_false_naming_the_key(written):
    with pytest.raises(ConfigError) as refused:
        parse_settings({**dev_config(), "observability": written})
    assert "observability" in str(refused.value) and "expected true or false" in str(refused.value)


def test_both_example_stacks_show_observability_on():
    import yaml

    root = Path(__file__).parent.parent
    for stack in (root / "Pulumi.dev.yaml", root / "examples" / "Pulumi.beyond-one-host.yaml"):
        assert yaml.safe_load(stack.read_text())["config"]["kamaji-hami-lab:observability"] is True, stack


# --- the plan, on and off --------------------------------------------------------------------------------------


def test_off_installs_nothing_of_it_and_exports_no_dashboard(off_plan):
    assert releases(off_plan, "prometheus") == releases(off_plan, "grafana") == []
    assert [r.name for r in off_plan.registrations if "observability" in r.name] == []
    assert [r.name for r in off_plan.registrations if r.type in TENANT_KINDS and "lab-metrics-reader" in str(
        r.inputs.get("metadata"))] == []
    assert off_plan.of_type("kamaji-hami-lab:index:Observability") == []
    assert not {"grafanaUrl", "grafanaAdminPassword"} & set(off_plan.outputs)


def test_on_installs_prometheus_and_grafana_pinned_from_their_official_repositories(dev_plan):
    expected = {
        "prometheus": ("https://prometheus-community.github.io/helm-charts", "29.27.0"),
        "grafana": ("https://grafana-community.github.io/helm-charts", "12.11.1"),
    }
    management = provider_of(dev_plan, "platform-kamaji")
    for chart, (repo, version) in expected.items():
        [release] = releases(dev_plan, chart)
        assert (release.inputs["repositoryOpts"]["repo"], release.inputs["version"]) == (repo, version)
        assert release.inputs["namespace"] == "lab-monitoring" and release.provider_urn == management


def test_prometheus_and_grafana_values_use_only_keys_the_charts_read(up_plan):
    [prometheus] = releases(up_plan, "prometheus")
    [grafana] = releases(up_plan, "grafana")
    assert unread_keys(prometheus.inputs["values"], PROMETHEUS_KEYS, PROMETHEUS_TEMPLATE_KEYS) == []
    assert unread_keys(grafana.inputs["values"], GRAFANA_KEYS) == []


def test_the_key_check_catches_a_misspelt_key():
    assert unread_keys({"server": {"retension": "7d"}}, PROMETHEUS_KEYS) == [("server", "retension")]
    assert unread_keys({"adminPasword": "x"}, GRAFANA_KEYS) == [("adminPasword",)]


def test_the_prometheus_chart_runs_its_server_alone():
    # The chart's other components, each a top-level key with an `enabled` switch in its values.yaml (networkPolicy
    # is no component); the preflight counts the server's memory only, beside Grafana's.
    components = {path[0] for path in PROMETHEUS_KEYS if path[1:] == ("enabled",)} - {"networkPolicy"}
    values = observability_values.prometheus_values({"tenant-a": "v1.36.4"}, True)
    assert len(components) > 1
    assert {name: values.get(name) for name in components} == {name: {"enabled": False} for name in components}


@pytest.mark.parametrize("installed", [True, False])
def test_prometheus_scrapes_kamaji_exactly_when_the_lab_installs_it(installed):
    values = observability_values.prometheus_values({"tenant-a": "v1.36.4"}, installed)
    jobs = [job["job_name"] for job in values["serverFiles"]["prometheus.yml"]["scrape_configs"]]
    assert ("kamaji" in jobs) is installed


def test_every_default_scrape_job_of_the_chart_is_switched_off():
    chart_jobs = {path[1] for path in PROMETHEUS_KEYS if len(path) == 2 and path[0] == "scrapeConfigs"}
    values = observability_values.prometheus_values({"tenant-a": "v1.36.4"}, True)
    assert set(values["scrapeConfigs"]) == chart_jobs
    assert all(job == {"enabled": False} for job in values["scrapeConfigs"].values())


def test_retention_storage_and_memory_are_bounded(up_plan):
    [prometheus] = releases(up_plan, "prometheus")
    server = prometheus.inputs["values"]["server"]
    assert server["retention"] == "7d" and server["retentionSize"] == "1GB"
    assert server["persistentVolume"]["size"] == "2Gi"
    # The size bound must fit on the volume, or the volume fills first.
    assert int(server["retentionSize"].removesuffix("GB")) * 10**9 < 2 * 2**30
    for release in (prometheus, *releases(up_plan, "grafana")):
        resources = release.inputs["values"]["resources" if release.inputs["chart"] == "grafana" else "server"]
        resources = resources.get("resources", resources)
        assert resources["limits"]["memory"] == resources["requests"]["memory"]


def test_grafana_gets_the_memory_its_install_docs_ask_for(up_plan):
    # "Minimum recommended memory: 512 MB" (grafana.com/docs/grafana/v13.2/setup-grafana/installation).
    [grafana] = releases(up_plan, "grafana")
    resources = grafana.inputs["values"]["resources"]
    for kind in ("requests", "limits"):
        amount = resources[kind]["memory"]
        assert int(amount.removesuffix("Mi")) * 2**20 >= 512 * 10**6, (kind, amount)


def test_the_preflight_sizing_counts_prometheus_and_grafanas_memory_limits():
    from tests.test_preflight import preflight

    limits = (observability_values.PROMETHEUS_MEMORY, observability_values.GRAFANA_MEMORY)
    limits_mib = sum(int(m.removesuffix("Mi")) for m in limits)
    assert preflight.SIZING_GIB["observability_memory"] * 1024 >= limits_mib


# --- per tenant -------------------------------------------------------------------------------------------------


def jobs_named(plan_, prefix):
    [prometheus] = releases(plan_, "prometheus")
    jobs = prometheus.inputs["values"]["serverFiles"]["prometheus.yml"]["scrape_configs"]
    return {job["job_name"]: job for job in jobs if job["job_name"].startswith(prefix)}


def hami_jobs(plan_):
    return jobs_named(plan_, "hami-")


def queue_jobs(plan_):
    return jobs_named(plan_, "gpu-queue-")


# Facts of the pinned upstreams the queue job relies on:
# kube-scheduler's secure port (kubernetes/kubernetes pkg/scheduler/apis/config/types.go: DefaultKubeSchedulerPort).
KUBE_SCHEDULER_SECURE_PORT = 10259
# The selector of HAMi's own scheduler Service as `helm template` renders charts/hami@2.10.0 for release `hami`
# (templates/scheduler/service.yaml): the pod that holds the lease.
HAMI_SCHEDULER_SERVICE_SELECTOR = {
    "app.kubernetes.io/component": "hami-scheduler", "app.kubernetes.io/name": "hami",
    "app.kubernetes.io/instance": "hami", "hami.io/scheduler-role": "leader",
}
QUEUE_PROXY_NAME = "https:lab-hami-kube-scheduler:metrics"


def test_each_tenant_has_its_own_hami_job_through_its_api_servers_service_proxy(up_plan):
    jobs = hami_jobs(up_plan)
    assert set(jobs) == {"hami-tenant-a", "hami-tenant-b"}
    for tenant in ("tenant-a", "tenant-b"):
        job = jobs[f"hami-{tenant}"]
        [static] = job["static_configs"]
        assert static == {"targets": [f"{tenant}.tenants.svc:6443"], "labels": {"tenant": tenant}}
        assert job["scheme"] == "https"
        assert job["metrics_path"] == "/api/v1/namespaces/kube-system/services/hami-scheduler:monitor/proxy/metrics"
        assert job["authorization"]["credentials_file"] == f"/etc/tenant-metrics/{tenant}/token"
        assert job["tls_config"]["ca_file"] == f"/etc/tenant-metrics/{tenant}/ca.crt"


def test_each_tenants_token_is_mounted_where_its_job_reads_it(up_plan):
    [prometheus] = releases(up_plan, "prometheus")
    mounts = {m["mountPath"]: m["secretName"] for m in prometheus.inputs["values"]["server"]["extraSecretMounts"]}
    secrets = {
        r.inputs["metadata"]["name"]: r for r in up_plan.of_type("kubernetes:core/v1:Secret")
        if r.inputs["metadata"]["namespace"] == "lab-monitoring"
    }
    for tenant, job in hami_jobs(up_plan).items():
        directory = job["authorization"]["credentials_file"].rsplit("/", 1)[0]
        assert mounts[directory] in secrets, tenant
        assert set(reveal(secrets[mounts[directory]].inputs["data"])) == {"token", "ca.crt"}


def test_each_tenants_token_gets_a_volume_of_its_own(up_plan):
    [prometheus] = releases(up_plan, "prometheus")
    mounts = prometheus.inputs["values"]["server"]["extraSecretMounts"]
    # The chart makes a volume and a mount of each entry under its `name` (charts/prometheus/templates/deploy.yaml
    # @prometheus-29.27.0); the API server refuses a pod whose volume names repeat or are no DNS-1123 label.
    names = [mount.get("name") for mount in mounts]
    assert len(mounts) == len(hami_jobs(up_plan)) == len(set(names)) > 1
    assert all(is_label(name) for name in names), names


def test_each_tenant_has_a_gpu_queue_job_through_the_same_proxy_with_the_same_token(up_plan):
    hami, queue = hami_jobs(up_plan), queue_jobs(up_plan)
    assert set(queue) == {"gpu-queue-tenant-a", "gpu-queue-tenant-b"}
    for tenant in ("tenant-a", "tenant-b"):
        job, sibling = queue[f"gpu-queue-{tenant}"], hami[f"hami-{tenant}"]
        assert job["metrics_path"] == f"/api/v1/namespaces/kube-system/services/{QUEUE_PROXY_NAME}/proxy/metrics"
        for key in ("scheme", "authorization", "tls_config", "static_configs"):
            assert job[key] == sibling[key], (tenant, key)
        # Only the queue gauge is stored; kube-scheduler's latency histograms would fill the bounded volume.
        assert job["metric_relabel_configs"] == [
            {"source_labels": ["__name__"], "regex": "scheduler_pending_pods", "action": "keep"}]


def test_each_tenant_gets_a_service_for_hamis_kube_scheduler_on_its_own_provider(dev_plan):
    hami = {r.name: r.provider_urn for r in releases(dev_plan, "hami")}
    for tenant in ("tenant-a", "tenant-b"):
        service = dev_plan.named(f"observability-{tenant}-queue-service")
        assert service.provider_urn == hami[f"{tenant}-hami"]
        assert service.inputs["metadata"] == {"name": "lab-hami-kube-scheduler", "namespace": "kube-system"}
        spec = service.inputs["spec"]
        assert spec["type"] == "ClusterIP" and spec["selector"] == HAMI_SCHEDULER_SERVICE_SELECTOR
        [port] = spec["ports"]
        assert f"https:{service.inputs['metadata']['name']}:{port['name']}" == QUEUE_PROXY_NAME
        assert port["targetPort"] == KUBE_SCHEDULER_SECURE_PORT


@pytest.mark.parametrize("count", [1, 3])
def test_adding_or_removing_a_tenant_adds_or_removes_its_job(count):
    from tests.plan import tenants

    lab = plan(dev_config(tenants=tenants(count)), preview=True)
    assert set(hami_jobs(lab)) == {f"hami-t{index}" for index in range(count)}
    assert set(queue_jobs(lab)) == {f"gpu-queue-t{index}" for index in range(count)}
    readers = [r.name for r in lab.of_type("kubernetes:core/v1:ServiceAccount") if "observability" in r.name]
    assert sorted(readers) == [f"observability-t{index}-reader" for index in range(count)]


def test_konnectivity_and_kamaji_jobs_keep_only_this_labs_tenants_and_label_them():
    jobs = {job["job_name"]: job for job in observability_values.scrape_configs(
        {"tenant-a": "v1.36.4", "tenant-b": "v1.36.4"}, True)}
    keep, label, _, store = jobs["konnectivity"]["relabel_configs"]
    assert jobs["konnectivity"]["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"names": ["tenants"]}}]
    assert keep["action"] == "keep"
    assert keep["regex"] == "konnectivity-server;(healthport;(tenant-a|tenant-b))"
    assert label == {"source_labels": ["__meta_kubernetes_pod_label_kamaji_clastix_io_name"], "target_label": "tenant"}
    # The DataStore Kamaji's component.kamaji.clastix.io/datastore pod label names (deployment.go@26.8.2-edge).
    assert store == {"source_labels": ["__meta_kubernetes_pod_label_component_kamaji_clastix_io_datastore"],
                     "target_label": "datastore"}
    assert jobs["kamaji"]["static_configs"] == [{"targets": ["kamaji-metrics-service.kamaji-system.svc:8080"]}]


# Upstream facts: konnectivity-server serves /metrics on its health port from v0.34.0, before only on its admin
# port bound to 127.0.0.1 unless --admin-bind-address (kubernetes-sigs/apiserver-network-proxy
# cmd/server/app/server.go, options.go@v0.33.0, @v0.34.0); Kamaji runs v0.<minor>.0 and names the ports
# adminport and healthport (clastix/kamaji internal/builders/controlplane/konnectivity_server.go@ddbabd8).
OLD_TENANT_VERSION, NEW_TENANT_VERSION = "v1.33.4", "v1.36.4"


def konnectivity_server_of(plan_, tenant):
    from tests.test_tenants import control_planes

    return control_planes(plan_)[tenant].inputs["spec"]["addons"]["konnectivity"]["server"]


@pytest.mark.parametrize("observed", [True, False])
def test_a_tenant_before_v1_34_opens_its_admin_port_to_prometheus_only_with_observability_on(observed):
    lab = plan(dev_config(observability=observed, tenants=[
        {"name": "old", "kubernetesVersion": OLD_TENANT_VERSION}, {"name": "new"}]), preview=True)
    from tests.test_tenants import control_planes, problems, with_spec

    old, new = konnectivity_server_of(lab, "old"), konnectivity_server_of(lab, "new")
    assert problems(with_spec(control_planes(lab)["old"].inputs["spec"])) == []  # Kamaji's CRD takes extraArgs
    assert old.get("extraArgs") == (["--admin-bind-address=0.0.0.0"] if observed else None)
    assert "extraArgs" not in new
    if observed:
        [prometheus] = releases(lab, "prometheus")
        jobs = prometheus.inputs["values"]["serverFiles"]["prometheus.yml"]["scrape_configs"]
        [job] = [j for j in jobs if j["job_name"] == "konnectivity"]
        regex = re.compile(job["relabel_configs"][0]["regex"])
        # Prometheus anchors relabel regexes; the pod's container, port name and tenant label, joined by ";".
        assert regex.fullmatch("konnectivity-server;adminport;old") and not regex.fullmatch(
            "konnectivity-server;healthport;old")
        assert regex.fullmatch("konnectivity-server;healthport;new") and not regex.fullmatch(
            "konnectivity-server;adminport;new")


def test_a_provided_kamaji_is_not_scraped_at_an_address_the_lab_did_not_choose():
    jobs = [job["job_name"] for job in observability_values.scrape_configs({"tenant-a": "v1.36.4"}, False)]
    assert jobs == ["hami-tenant-a", "gpu-queue-tenant-a", "konnectivity"]


def test_each_tenants_metrics_reader_lives_in_that_tenant_on_its_own_provider(dev_plan):
    hami = {r.parent: r.provider_urn for r in releases(dev_plan, "hami")}
    tenant_providers = set(hami.values())
    management = provider_of(dev_plan, "platform-kamaji")
    for tenant in ("tenant-a", "tenant-b"):
        objects = [r for r in dev_plan.registrations if r.type in TENANT_KINDS and r.name.startswith(
            f"observability-{tenant}-")]
        token = dev_plan.named(f"observability-{tenant}-reader-token")
        assert len(objects) == 3
        providers = {r.provider_urn for r in [*objects, token]}
        assert len(providers) == 1 and providers <= tenant_providers and management not in providers
        [own] = [p for p in tenant_providers if f"{tenant}-kubernetes" in p]
        assert providers == {own}


def test_the_reader_may_only_get_the_two_metrics_ports_its_jobs_read_through_the_proxy(up_plan):
    roles = [r for r in up_plan.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role") if "observability" in r.name]
    assert len(roles) == 2
    for role in roles:
        assert role.inputs["rules"] == [{
            "apiGroups": [""], "resources": ["services/proxy"],
            "resourceNames": ["hami-scheduler:monitor", QUEUE_PROXY_NAME], "verbs": ["get"],
        }]
        # RBAC checks the proxied name as the request path spells it: each job's path names one of them.
        paths = [job["metrics_path"] for job in [*hami_jobs(up_plan).values(), *queue_jobs(up_plan).values()]]
        assert {path.split("/services/")[1].split("/proxy/")[0] for path in paths} == set(
            role.inputs["rules"][0]["resourceNames"])
    # Nothing cluster-wide for it: no ClusterRole or ClusterRoleBinding names the reader.
    assert [r.name for r in up_plan.registrations if r.type.endswith(("ClusterRole", "ClusterRoleBinding"))
            and "lab-metrics-reader" in json.dumps(r.inputs)] == []
    for binding in [r for r in up_plan.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
                    if "observability" in r.name]:
        assert binding.inputs["roleRef"]["kind"] == "Role"
        assert binding.inputs["subjects"] == [
            {"kind": "ServiceAccount", "name": "lab-metrics-reader", "namespace": "kube-system"}]


def test_each_tenants_token_is_read_with_its_own_kubeconfig_and_stays_secret(up_plan):
    for tenant in ("tenant-a", "tenant-b"):
        read = up_plan.named(f"observability-{tenant}-reader-token-read")
        assert {"stdout", "stderr"} <= set(read.secret_outputs) and "environment" in read.secret_inputs
        secret = up_plan.named(f"observability-{tenant}-token")
        assert "data" in secret.secret_inputs
        token = base64.b64decode(reveal(secret.inputs["data"])["token"]).decode()
        assert token == f"token-read-with-{tenant}-admin"


def test_no_tenant_admin_credential_reaches_the_management_cluster(up_plan):
    management = provider_of(up_plan, "platform-kamaji")
    on_management = [r for r in up_plan.registrations if r.provider_urn == management]
    for resource in on_management:
        # The fake tenant kubeconfigs' client keys (tests/plan.py fake_kubeconfig).
        assert "secret-key-of-tenant" not in json.dumps(reveal(resource.inputs), default=str), resource.name


@pytest.mark.parametrize("answer", [
    "{}", '{"token": "", "ca.crt": "Q0E="}', '{"token": "dG9rZW4=", "ca.crt": ""}',
    '{"token": "not base64!", "ca.crt": "Q0E="}',
    '{"token": "dG9r!ZW4=", "ca.crt": "Q0E="}',  # base64 but for one stray character, which is not skipped
])
def test_a_token_answer_without_a_token_or_ca_is_refused(answer):
    with pytest.raises(ValueError):
        observability_values.token_secret_data(answer)


@pytest.mark.parametrize(("answer", "lacking"), [
    ("{}", "token"), ('{"token": "", "ca.crt": "Q0E="}', "token"), ('{"token": "dG9rZW4="}', "ca.crt"),
])
def test_a_refused_token_answer_names_the_key_it_lacks(answer, lacking):
    with pytest.raises(ValueError) as refused:
        observability_values.token_secret_data(answer)
    assert str(refused.value) == f"the tenant's token Secret has no {lacking}"


def test_machine_workers_get_the_same_reader_and_job(machine_plan):
    lab = machine_plan("mock", False)
    assert [r.name for r in lab.registrations if r.type == "kubernetes:rbac.authorization.k8s.io/v1:Role"
            and "observability" in r.name]
    assert len(hami_jobs(lab)) == len(queue_jobs(lab)) == 1


# --- Grafana ----------------------------------------------------------------------------------------------------


def test_grafana_is_reached_at_its_load_balancer_address(up_plan):
    # The lab's MetalLB pool keeps its last address for Grafana.
    last = resolve(up_plan.outputs["metallbAddressRange"]).split("-")[1]
    assert resolve(up_plan.outputs["grafanaUrl"]) == f"http://{last}"
    service = up_plan.named("observability-grafana-address")
    assert service.inputs["spec"]["type"] == "LoadBalancer"
    # The chart's pod selector labels and port name (charts/grafana/templates/_helpers.tpl, _pod.tpl@grafana-12.11.1).
    assert service.inputs["spec"]["selector"] == {"app.kubernetes.io/name": "grafana",
                                                   "app.kubernetes.io/instance": "lab-grafana"}
    assert service.inputs["spec"]["ports"][0]["targetPort"] == "grafana"


def test_with_a_provided_load_balancer_grafana_gets_no_address_and_its_url_is_the_forwarded_one():
    from tests.test_management_modes import EXISTING_KUBECONFIG, PROVIDED

    lab = plan(dev_config(**PROVIDED, observability="true"), preview=False,
               secrets={"managementKubeconfig": EXISTING_KUBECONFIG})
    # Plain HTTP is not put on an address the cluster's own LoadBalancer picks (perhaps a public one).
    assert [s.inputs["spec"].get("type") for s in lab.of_type("kubernetes:core/v1:Service")
            if "grafana" in s.name] == []
    [grafana] = releases(lab, "grafana")
    assert grafana.inputs["values"]["service"]["type"] == "ClusterIP"
    url = resolve(lab.outputs["grafanaUrl"])
    assert url.startswith("http://127.0.0.1:"), url
    # The admin password is still there to log in with.
    assert resolve(lab.outputs["grafanaAdminPassword"]) == GRAFANA_PASSWORD


def test_the_admin_password_is_a_secret_output_and_never_in_the_charts_values(up_plan):
    assert is_secret(up_plan.outputs["grafanaAdminPassword"])
    assert resolve(up_plan.outputs["grafanaAdminPassword"]) == GRAFANA_PASSWORD
    [grafana] = releases(up_plan, "grafana")
    assert GRAFANA_PASSWORD not in json.dumps(grafana.inputs["values"])
    admin = up_plan.named("observability-grafana-admin")
    assert "stringData" in admin.secret_inputs
    assert grafana.inputs["values"]["admin"]["existingSecret"] == admin.inputs["metadata"]["name"]


def test_grafana_reads_the_admin_login_under_the_keys_the_admin_secret_has(up_plan):
    [grafana] = releases(up_plan, "grafana")
    keys = grafana.inputs["values"]["admin"]
    data = up_plan.named("observability-grafana-admin").inputs["stringData"]
    # `make dashboard` names user admin; its password is the stack's grafanaAdminPassword.
    assert data == {keys["userKey"]: "admin", keys["passwordKey"]: GRAFANA_PASSWORD}


@pytest.mark.parametrize("status, url", [
    ({"loadBalancer": {"ingress": [{"ip": "172.18.255.230"}]}}, "http://172.18.255.230"),
    ({"load_balancer": {"ingress": [{"hostname": "grafana.example"}]}}, "http://grafana.example"),
    ({"loadBalancer": {}}, ""),
    (None, ""),
])
def test_the_url_is_the_first_ingress_or_empty_until_there_is_one(status, url):
    assert observability_values.grafana_url(status) == url


def test_grafana_reads_prometheus_at_the_charts_server_service(up_plan):
    [grafana] = releases(up_plan, "grafana")
    [source] = grafana.inputs["values"]["datasources"]["datasources.yaml"]["datasources"]
    assert source["url"] == "http://lab-prometheus-server.lab-monitoring.svc:80"
    # Grafana's rate window follows the scrape interval Prometheus really uses.
    [prometheus] = releases(up_plan, "prometheus")
    assert source["jsonData"]["timeInterval"] == prometheus.inputs["values"]["server"]["global"]["scrape_interval"]
    provisioned = grafana.inputs["values"]["dashboards"]["lab"]["tenants"]["json"]
    [provider] = grafana.inputs["values"]["dashboardProviders"]["dashboardproviders.yaml"]["providers"]
    # The chart mounts dashboards.<provider> at /var/lib/grafana/dashboards/<provider> (_pod.tpl@grafana-12.11.1).
    assert provider["name"] == "lab" and provider["options"]["path"] == "/var/lib/grafana/dashboards/lab"
    assert json.loads(provisioned)["templating"]["list"][0]["name"] == "tenant"


def provisioning_files(plan_) -> dict[str, dict]:
    """The chart's two provisioning files, by the name of the list each holds."""
    [grafana] = releases(plan_, "grafana")
    values = grafana.inputs["values"]
    return {"datasources": values["datasources"]["datasources.yaml"],
            "providers": values["dashboardProviders"]["dashboardproviders.yaml"]}


def test_grafanas_provisioning_files_are_in_its_format_1_and_use_only_keys_it_reads(up_plan):
    for kind, file in provisioning_files(up_plan).items():
        keys = GRAFANA_PROVISIONING[kind]
        # Without it Grafana reads the file in format 0, whose keys differ (is_default, json_data, no uid).
        assert file.get("apiVersion") == GRAFANA_PROVISIONING["apiVersion"], kind
        assert set(file) <= set(keys["file"]), kind
        for entry in file[kind]:
            assert sorted(set(entry) - set(keys["entry"])) == [], (kind, entry)


def test_grafana_opens_on_prometheus_and_queries_it_from_its_own_pod(up_plan):
    [source] = provisioning_files(up_plan)["datasources"]["datasources"]
    # Its URL is a cluster Service name only Grafana's pod resolves: Grafana's server queries it ("proxy"), not
    # the browser ("direct"; grafana/grafana pkg/services/datasources/models.go: DS_ACCESS_PROXY).
    assert source["access"] == "proxy"
    # The default: Explore and a new panel start on it, under the name a user picks it by.
    assert source["isDefault"] is True and source["name"] == "Prometheus"


def test_the_dashboard_is_the_labs_own_in_grafanas_main_organisation(up_plan):
    [provider] = provisioning_files(up_plan)["providers"]["providers"]
    # Grafana makes organisation 1 at its first start and admin logs into it; provisioning into any other fails
    # until someone makes it (pkg/services/provisioning/dashboards/config_reader.go: orgExists).
    assert provider["orgId"] == 1
    # Read from files (the one type its provisioner takes, dashboard.go: getFileReaders), in no folder.
    assert provider["type"] == "file" and provider["folder"] == ""
    # The file is the dashboard: Grafana does not delete it (disableDeletion), nor may its UI change it.
    assert provider["disableDeletion"] is True and provider["editable"] is False
    assert provider.get("allowUiUpdates", False) is False


def test_grafana_keeps_no_volume_and_no_helm_test_pod(up_plan):
    from tests.test_preflight import preflight

    [grafana] = releases(up_plan, "grafana")
    values = grafana.inputs["values"]
    # The preflight counts Prometheus' volume alone: Grafana's data source and dashboard come from files.
    [prometheus] = releases(up_plan, "prometheus")
    volume_gib = int(prometheus.inputs["values"]["server"]["persistentVolume"]["size"].removesuffix("Gi"))
    assert values["persistence"]["enabled"] is False and preflight.SIZING_GIB["observability_disk"] == volume_gib
    # The lab never runs `helm test`; the chart's test pod (charts/grafana/templates/tests/test.yaml@grafana-12.11.1)
    # would only add an image for the CI's render to check.
    assert values["testFramework"]["enabled"] is False


# --- the dashboard, linted (Grafana's schema is not available offline: these are the rules it would enforce
# that matter here, from Grafana's dashboard JSON model docs: unique panel ids, a 24-column grid, refIds
# unique per panel, a uid of at most 40 characters) ------------------------------------------------------------

PANEL_TYPES = {"text", "stat", "table", "timeseries"}


def provisioned_dashboard(plan_):
    [grafana] = releases(plan_, "grafana")
    return json.loads(grafana.inputs["values"]["dashboards"]["lab"]["tenants"]["json"])


def test_the_provisioned_dashboard_is_well_formed(up_plan):
    board = provisioned_dashboard(up_plan)
    assert isinstance(board["schemaVersion"], int) and 0 < len(board["uid"]) <= 40
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells = set()
    for panel in panels:
        assert panel["type"] in PANEL_TYPES, panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["h"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        columns, lines = range(grid["x"], grid["x"] + grid["w"]), range(grid["y"], grid["y"] + grid["h"])
        mine = {(x, y) for x in columns for y in lines}
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
        refs = [t["refId"] for t in panel["targets"]]
        assert len(set(refs)) == len(refs), panel["title"]


def test_every_query_is_of_the_selected_tenant_on_the_provisioned_datasource(up_plan):
    board = provisioned_dashboard(up_plan)
    [grafana] = releases(up_plan, "grafana")
    [source] = grafana.inputs["values"]["datasources"]["datasources.yaml"]["datasources"]
    [variable] = board["templating"]["list"]
    assert variable["name"] == "tenant"
    assert variable["datasource"] == {"type": source["type"], "uid": source["uid"]}
    queries = [(p, t) for p in board["panels"] for t in p["targets"]]
    assert len(queries) >= 9
    for panel, target in queries:
        # By uid, of the plugin type it is: Grafana finds the data source by both.
        assert target["datasource"] == {"type": source["type"], "uid": source["uid"]}, target
        # The every-tenant panels show each tenant by tenant, the alerts panel every alert; every other one the
        # selected tenants (several, or All: a regular expression).
        mine = 'tenant=~"$tenant"' in target["expr"] or (
            "every tenant" in panel["title"].lower() and "by (tenant)" in target["expr"]) or (
            panel["title"] == "Alerts firing")
        assert mine, target


def test_the_tenant_selector_takes_several_tenants_and_all_and_starts_on_all(up_plan):
    [variable] = provisioned_dashboard(up_plan)["templating"]["list"]
    assert variable["multi"] is True and variable["includeAll"] is True
    assert variable["current"]["value"] == ["$__all"]


def test_every_stat_and_table_asks_for_the_value_now_not_the_last_of_the_range(up_plan):
    # Grafana runs a target without `instant` as a range query, and a stat reduces it to its last point: a
    # series gone hours ago would still show (tests/test_observability_stale.py shows it on a real Prometheus).
    shown_now = [(p["title"], t) for p in provisioned_dashboard(up_plan)["panels"] if p["type"] in ("stat", "table")
                 for t in p["targets"]]
    assert len(shown_now) >= 10
    for title, target in shown_now:
        assert (target.get("instant"), target.get("range")) == (True, False), title


def test_the_dashboard_has_the_panels_the_issue_asks_for_and_says_the_gpus_are_mocks(up_plan):
    board = provisioned_dashboard(up_plan)
    metrics = " ".join(t["expr"] for p in board["panels"] for t in p["targets"])
    for metric in ("hami_gpu_memory_allocated_bytes", "hami_gpu_memory_limit_bytes", "hami_gpu_core_allocated_ratio",
                   "hami_gpu_shared_count", "hami_resource_quota_used", "hami_resource_quota_limit",
                   "konnectivity_network_proxy_server_ready_backend_connections",
                   "konnectivity_network_proxy_server_dial_failure_count", "scheduler_pending_pods"):
        assert metric in metrics
    [note] = [p for p in board["panels"] if p["type"] == "text"]
    assert "allocation only" in note["options"]["content"] and "NVML" in note["options"]["content"]
    assert "allocation only" in board["description"]


# --- sizing -----------------------------------------------------------------------------------------------------


def test_the_sizing_table_lists_observability_as_the_preflight_counts_it():
    from tests.test_docs import ROOT, rows, section
    from tests.test_preflight import preflight

    text = section(ROOT / "docs" / "architecture.md", "Sizing: what a tenant costs").split("For tenants of one")[0]
    figures = {row[0]: (row[1], row[2]) for row in rows(text)}
    gib = preflight.SIZING_GIB
    assert figures["Prometheus and Grafana, with `observability: true`"] == (
        f"{gib['observability_memory']:g} GiB", f"{gib['observability_disk']:g} GiB (Prometheus' volume)")


@pytest.mark.parametrize("kind", [True, False])
def test_the_estimate_adds_observability_only_when_on_and_only_on_a_kind_cluster(kind):
    from tests.test_preflight import preflight

    off = preflight.estimate(preflight.Mode(kind=kind, control_planes=2, container_workers=2))
    on = preflight.estimate(preflight.Mode(kind=kind, control_planes=2, container_workers=2, observability=True))
    gib = preflight.SIZING_GIB
    added = (on[0] - off[0], on[2] - off[2])
    assert added == ((gib["observability_memory"], gib["observability_disk"]) if kind else (0, 0))
    if kind:
        assert f"Prometheus and Grafana {gib['observability_memory']:g} GiB" in on[1]


@pytest.mark.parametrize(("written", "counted"), [("true", True), ("false", False), (None, False)])
def test_the_preflight_reads_observability_from_the_stack(tmp_path, capsys, written, counted):
    from tests.test_preflight import preflight
    from tests.test_preflight_modes import config_json, run_preflight, sized_host

    scalars = {"controlPlaneReplicas": "1", "workersPerTenant": "1"}
    if written is not None:
        scalars["observability"] = written  # `pulumi config --json` prints booleans as text
    host, _ = sized_host(tmp_path, config_json([{"name": "a"}], **scalars), available_gib=1, free_gib=1)
    _, out = run_preflight(host, capsys, "--stack", "dev")
    assert (f"+ Prometheus and Grafana {preflight.SIZING_GIB['observability_memory']:g} GiB)" in out) is counted
    assert ("+ Prometheus' volume 2 GiB)" in out) is counted


def test_ci_renders_prometheus_and_grafana_with_the_values_the_releases_get(up_plan):
    import yaml

    from tests.render_charts_module import render_charts

    def monitoring_charts(observed: bool) -> dict:
        lab = render_charts.parse_settings(dev_config(observability=observed))
        return {chart.name: chart for chart in render_charts.charts(lab) if chart.namespace == "lab-monitoring"}

    assert monitoring_charts(False) == {}
    rendered = monitoring_charts(True)
    assert set(rendered) == {"prometheus", "grafana"}
    for name, chart in rendered.items():
        [release] = releases(up_plan, name)
        [values] = [yaml.safe_load(text) for text in chart.values_files]
        assert values == reveal(release.inputs["values"]) and chart.version == release.inputs["version"]


# --- make dashboard ---------------------------------------------------------------------------------------------


def run_dashboard(tmp_path, answer: str | None):
    import os
    import subprocess

    fake = tmp_path / "bin" / "pulumi"
    fake.parent.mkdir()
    # `pulumi stack output grafanaUrl --stack S` prints the value; a missing output is an error.
    missing = "echo 'error: current stack does not have output property' >&2\nexit 255\n"
    body = f'echo "$*" >> {tmp_path}/argv\n' + (f"echo {answer}\n" if answer is not None else missing)
    fake.write_text("#!/usr/bin/env bash\n" + body)
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}", "STACK": "staging"}
    root = Path(__file__).parent.parent
    done = subprocess.run(["bash", str(root / "scripts" / "dashboard.sh")], capture_output=True, text=True, env=env,
                          timeout=30)
    return done, (tmp_path / "argv").read_text()


def test_make_dashboard_prints_the_url_and_how_to_get_the_password_never_the_password(tmp_path):
    done, argv = run_dashboard(tmp_path, "http://172.18.255.230")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "Grafana:  http://172.18.255.230/d/kamaji-hami-lab-tenants (user admin)\n"
        "Password: pulumi stack output --show-secrets grafanaAdminPassword --stack staging\n"
    )
    assert argv == "stack output grafanaUrl --stack staging\n", "it reads only the URL, never a secret"


def forwarding_dashboard(tmp_path, kubectl_status: int):
    """make dashboard on a stack whose Grafana is forwarded: fake pulumi (the outputs) and kubectl (records its
    argv and the kubeconfig it was given, then ends as port-forward does on Ctrl-C or a lost connection)."""
    import os
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" >> {tmp_path}/pulumi-argv\n'
        'case "$*" in\n'
        f'  *grafanaUrl*) echo {observability_values.GRAFANA_FORWARDED_URL} ;;\n'
        "  *'--show-secrets managementKubeconfig'*) echo 'management-kubeconfig-text' ;;\n"
        "  *) exit 255 ;;\n"
        "esac\n")
    (bin_dir / "kubectl").write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" > {tmp_path}/kubectl-argv\n'
        f'echo "$KUBECONFIG" > {tmp_path}/kubeconfig-path\n'
        f'cat "$KUBECONFIG" > {tmp_path}/kubeconfig-seen\n'
        f"exit {kubectl_status}\n")
    for tool in ("pulumi", "kubectl"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STACK": "staging"}
    root = Path(__file__).parent.parent
    return subprocess.run(["bash", str(root / "scripts" / "dashboard.sh")], capture_output=True, text=True,
                          env=env, timeout=30)


@pytest.mark.parametrize("kubectl_status", [0, 1])
def test_make_dashboard_forwards_a_grafana_without_an_address_to_loopback_and_removes_the_kubeconfig(
        tmp_path, kubectl_status):
    done = forwarding_dashboard(tmp_path, kubectl_status)
    assert done.returncode == kubectl_status, done.stderr
    url = observability_values.GRAFANA_FORWARDED_URL
    assert done.stdout.startswith(f"Grafana:  {url}/d/kamaji-hami-lab-tenants (user admin)\n")
    port = url.rsplit(":", 1)[1]
    assert (tmp_path / "kubectl-argv").read_text().split() == [
        "port-forward", "--address", "127.0.0.1", "--namespace", observability_values.MONITORING_NAMESPACE,
        f"service/{observability_values.GRAFANA_RELEASE}", f"{port}:{observability_values.GRAFANA_PORT}"]
    assert (tmp_path / "kubeconfig-seen").read_text() == "management-kubeconfig-text"
    assert not Path((tmp_path / "kubeconfig-path").read_text().strip()).exists(), "the kubeconfig left behind"
    assert "management-kubeconfig-text" not in done.stdout + done.stderr


def test_the_docs_give_the_scrape_limits_and_the_forwarded_url_the_program_uses():
    text = " ".join((Path(__file__).parent.parent / "docs" / "operations.md").read_text().split())
    assert (f"past {observability_values.SAMPLE_LIMIT} samples or {observability_values.LABEL_LIMIT} labels a series"
            in text)
    assert f"`grafanaUrl` is `{observability_values.GRAFANA_FORWARDED_URL}`" in text
    assert f"memory limits ({observability_values.GRAFANA_MEMORY.removesuffix('Mi')} MiB each" in text
    assert observability_values.PROMETHEUS_MEMORY == observability_values.GRAFANA_MEMORY


def test_make_dashboard_without_observability_says_how_to_turn_it_on(tmp_path):
    done, _ = run_dashboard(tmp_path, None)
    assert done.returncode == 1 and done.stdout == ""
    assert "pulumi config set observability true --stack staging" in done.stderr


def test_the_dashboard_url_names_the_provisioned_dashboards_uid():
    from components.dashboard import DASHBOARD_UID

    assert f"/d/{DASHBOARD_UID} " in (Path(__file__).parent.parent / "scripts" / "dashboard.sh").read_text()


def test_each_alert_s_summary_says_what_fails_for_whom():
    # What the dashboard's "Alerts firing" panel shows, whole (Prometheus fills in the {{ }} templates).
    rules = {rule["alert"]: rule for rule in observability_values.alerting_rules()["groups"][0]["rules"]}
    assert {name: rule["annotations"]["summary"] for name, rule in rules.items()} == {
        "KonnectivityNoAgents": "{{ $labels.tenant }} is awake but no Konnectivity agent is connected: its API server "
        "cannot reach its nodes (logs, exec, HAMi's webhook).",
        "KonnectivityDialFailures": "{{ $labels.tenant }}: the API server's dials to its nodes fail "
        "({{ $labels.reason }}, {{ $value | humanize }} in 10 minutes).",
        "GpuPodsPending": "{{ $labels.tenant }} has had GPU pods waiting for HAMi's scheduler for 5 minutes "
        "({{ $value }} now): `make status` shows why.",
        "ControlPlaneNotReady": "Kamaji reports {{ $labels.tenant }}'s control plane {{ $labels.status }}, not ready.",
    }
