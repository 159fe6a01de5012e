"""The checks of platform pieces a management cluster already runs: they wait, then name what is missing."""

from __future__ import annotations

import pytest
import yaml

from tests.test_scripts import MANAGEMENT_KUBECONFIG, reply

# clastix/kamaji charts/kamaji/templates/*webhookconfiguration.yaml and controller-gen/*-webhook.yaml@26.8.2-edge.
MUTATING = ("mutatingwebhookconfiguration", "kamaji-mutating-webhook-configuration", "mtenantcontrolplane.kb.io")
VALIDATING = ("validatingwebhookconfiguration", "kamaji-validating-webhook-configuration", "vtenantcontrolplane.kb.io")
CRDS = "customresourcedefinition.apiextensions.k8s.io/tenantcontrolplanes.kamaji.clastix.io\n" + (
    "customresourcedefinition.apiextensions.k8s.io/datastores.kamaji.clastix.io\n"
)
SERVICE = "kamaji-system kamaji-webhook-service"


def check_kamaji(fakes, **env):
    return fakes.run("check-kamaji.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG, DATASTORE="shared-etcd", **env)


SERVING = "endpoint:false\nendpoint:true\n"  # one endpoint still starting, one ready


def kamaji_parts(fakes, crds=CRDS, ca="Q0E=", endpoints=SERVING, datastore=("shared-etcd|true",)):
    fakes.on("kubectl", r"get crd tenantcontrolplanes\.kamaji\.clastix\.io datastores\.kamaji\.clastix\.io", crds)
    for kind, name, _ in (MUTATING, VALIDATING):
        fakes.on("kubectl", rf"get {kind} {name} --ignore-not-found", f"{SERVICE} {ca}")
    fakes.on(
        "kubectl",
        r"-n kamaji-system get endpointslices -l kubernetes.io/service-name=kamaji-webhook-service",
        endpoints,
    )
    return fakes.on("kubectl", r"get datastores\.kamaji\.clastix\.io shared-etcd --ignore-not-found", *datastore)


def test_check_kamaji_passes_once_the_datastore_reports_ready(fakes):
    kamaji_parts(fakes, datastore=("shared-etcd|false", "shared-etcd|true"))

    result = check_kamaji(fakes)

    assert result.returncode == 0, result.stderr
    assert "DataStore shared-etcd reporting .status.ready=true" in result.stderr, "says what it waited for"
    for kind, name, webhook in (MUTATING, VALIDATING):
        (read,) = fakes.calls("kubectl", f"get {kind} {name}")[:1]
        assert webhook in " ".join(read["argv"]), "reads the webhook Kamaji's chart names"
    assert not fakes.calls("kubectl", r"^(--request-timeout=\S+ )?(create|apply|patch|delete)"), "changes nothing"


def test_check_kamaji_names_a_missing_datastore_and_the_key_to_change(fakes):
    kamaji_parts(fakes, datastore=("",))

    result = check_kamaji(fakes, WAIT_TIMEOUT="0")

    assert result.returncode != 0
    assert "kamaji-hami-lab:kamaji is provided" in result.stderr
    assert "DataStore shared-etcd" in result.stderr and "kamaji-hami-lab:kamajiDataStore" in result.stderr


def test_check_kamaji_fails_clearly_on_a_cluster_without_kamaji(fakes):
    kamaji_parts(fakes, crds="")

    result = check_kamaji(fakes, WAIT_TIMEOUT="0")

    assert result.returncode != 0
    assert "Kamaji's CRDs" in result.stderr and "set kamaji to install" in result.stderr


def test_check_kamaji_waits_for_the_webhook_ca(fakes):
    kamaji_parts(fakes, ca="")
    no_ca = check_kamaji(fakes, WAIT_TIMEOUT="0")
    assert no_ca.returncode != 0 and "mtenantcontrolplane.kb.io" in no_ca.stderr and "CA injected" in no_ca.stderr


@pytest.mark.parametrize("endpoints", ["", "endpoint:false\n"])
def test_check_kamaji_waits_for_a_ready_webhook_endpoint(fakes, endpoints):
    kamaji_parts(fakes, endpoints=endpoints)
    result = check_kamaji(fakes, WAIT_TIMEOUT="0")
    assert result.returncode != 0
    assert "ready endpoint of service kamaji-system/kamaji-webhook-service" in result.stderr


def test_check_kamaji_reads_an_endpoint_of_unknown_readiness_as_ready(fakes):
    # discovery/v1 EndpointConditions: a nil ready is unknown, which consumers interpret as ready.
    kamaji_parts(fakes, endpoints="endpoint:false\nendpoint:\n")
    assert check_kamaji(fakes).returncode == 0


def test_check_kamaji_keeps_the_kubeconfig_private(fakes):
    kamaji_parts(fakes)
    assert check_kamaji(fakes).returncode == 0
    seen = {call["kubeconfig"]["content"] for call in fakes.calls("kubectl")}
    assert seen == {MANAGEMENT_KUBECONFIG}
    assert {call["kubeconfig"]["mode"] for call in fakes.calls("kubectl")} == {0o600}


def test_check_cert_manager_waits_until_its_webhook_admits_an_issuer(fakes):
    refused = reply(
        exit=1, stderr='Error from server (InternalError): failed calling webhook "webhook.cert-manager.io"\n'
    )
    fakes.on(
        "kubectl",
        r"create --dry-run=server -f -",
        refused,
        "issuer.cert-manager.io/kamaji-hami-lab-probe created (server dry run)\n",
    )

    result = fakes.run("check-cert-manager.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG)

    assert result.returncode == 0, result.stderr
    probes = fakes.calls("kubectl", r"create --dry-run=server")
    assert len(probes) == 2
    assert yaml.safe_load(probes[0]["stdin"])["apiVersion"] == "cert-manager.io/v1"
    assert "failed calling webhook" in result.stderr


def test_check_cert_manager_names_the_key_when_cert_manager_is_absent(fakes):
    absent = reply(
        exit=1,
        stderr='error: resource mapping not found for name: "kamaji-hami-lab-probe" ... no matches for kind "Issuer"\n',
    )
    fakes.on("kubectl", r"create --dry-run=server -f -", absent)

    result = fakes.run("check-cert-manager.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG, WAIT_TIMEOUT="0")

    assert result.returncode != 0
    assert (
        "kamaji-hami-lab:certManager is provided" in result.stderr and 'no matches for kind "Issuer"' in result.stderr
    )


PROBE_NAMESPACE = "tenants"
ADDRESS_READ = r"-n tenants get service kamaji-hami-lab-lb-probe -o jsonpath="
PROBE_DELETE = r"-n tenants delete service kamaji-hami-lab-lb-probe"


def check_load_balancer(fakes, **env):
    return fakes.run("check-load-balancer.sh", KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG, NAMESPACE=PROBE_NAMESPACE, **env)


def load_balancer_parts(fakes, *addresses, created="service/kamaji-hami-lab-lb-probe created\n"):
    fakes.on("kubectl", r"apply -f -", created)
    fakes.on("kubectl", ADDRESS_READ, *addresses)
    return fakes.on("kubectl", PROBE_DELETE, 'service "kamaji-hami-lab-lb-probe" deleted\n')


def test_check_load_balancer_waits_for_an_address_then_removes_its_probe(fakes):
    load_balancer_parts(fakes, "", "", "203.0.113.7 ")

    result = check_load_balancer(fakes)

    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "203.0.113.7" in result.stderr, "says which address the cluster handed out"
    (applied,) = fakes.calls("kubectl", r"apply -f -")
    service = yaml.safe_load(applied["stdin"])
    assert (service["kind"], service["spec"]["type"]) == ("Service", "LoadBalancer")
    assert service["metadata"]["namespace"] == PROBE_NAMESPACE
    assert "selector" not in service["spec"], "an address, not traffic, is what is checked"
    assert len(fakes.calls("kubectl", ADDRESS_READ)) == 3
    assert len(fakes.calls("kubectl", PROBE_DELETE)) == 1


def test_check_load_balancer_accepts_a_hostname_as_the_address(fakes):
    # Cloud LoadBalancers may answer with a DNS name instead of an ip; the jsonpath prints either.
    load_balancer_parts(fakes, "probe-1234.elb.example.com ")
    result = check_load_balancer(fakes)
    assert result.returncode == 0, result.stderr
    assert "probe-1234.elb.example.com" in result.stderr


def test_check_load_balancer_names_the_key_and_deletes_the_probe_when_no_address_comes(fakes):
    load_balancer_parts(fakes, "")

    result = check_load_balancer(fakes, WAIT_TIMEOUT="0")

    assert result.returncode != 0
    assert "kamaji-hami-lab:loadBalancer is provided" in result.stderr
    assert "no address" in result.stderr and "set loadBalancer to metallb" in result.stderr
    assert len(fakes.calls("kubectl", PROBE_DELETE)) == 1, "the probe never outlives the check"


def test_check_load_balancer_reports_a_refused_probe_and_still_cleans_up(fakes):
    forbidden = reply(exit=1, stderr='Error from server (Forbidden): services is forbidden: User "platform-admin"\n')
    load_balancer_parts(fakes, "", created=forbidden)

    result = check_load_balancer(fakes)

    assert result.returncode != 0
    assert "kamaji-hami-lab:loadBalancer" in result.stderr and "Forbidden" in result.stderr
    assert not fakes.calls("kubectl", ADDRESS_READ)
    assert len(fakes.calls("kubectl", PROBE_DELETE)) == 1, "a create that timed out may still have stored it"


def test_check_load_balancer_keeps_the_kubeconfig_private(fakes):
    load_balancer_parts(fakes, "203.0.113.7 ")
    assert check_load_balancer(fakes).returncode == 0
    assert {call["kubeconfig"]["content"] for call in fakes.calls("kubectl")} == {MANAGEMENT_KUBECONFIG}
    assert {call["kubeconfig"]["mode"] for call in fakes.calls("kubectl")} == {0o600}
