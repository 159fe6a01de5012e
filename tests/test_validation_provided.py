"""The validation suite on a lab whose platform pieces the management cluster provides.

The `platform` stack output says which pieces were provided and which DataStore the tenants
use; the suite checks those pieces as `pulumi up` did (webhooks, DataStore ready) instead of
looking for the workloads the program installs, and skips MetalLB's checks.
"""

from __future__ import annotations

import pytest

from tests.test_validation import error, healthy_lab, ok, outputs_with, recorded, result, validate
from validation.stack_outputs import OutputsError, Platform, parse_outputs

ALL_PROVIDED = {"provided": ["certManager", "loadBalancer", "kamaji"], "dataStore": "shared-etcd"}
NOT_FOUND = 'Error from server (NotFound): datastores.kamaji.clastix.io "shared-etcd" not found\n'


def provided_outputs(tmp_path, platform=None):
    return outputs_with(tmp_path, lambda document: document.update(platform=platform or ALL_PROVIDED))


def shared_etcd(ready: bool = True) -> dict:
    store = recorded("datastore-default.json")
    store["metadata"]["name"] = "shared-etcd"
    store["status"]["ready"] = ready
    return store


def provided_lab(webhooks=("webhooks-kamaji-mutating.json", "webhooks-kamaji-validating.json")):
    """The healthy lab, with Kamaji's webhooks, a DataStore shared-etcd and cert-manager admitting Issuers."""
    lab = healthy_lab()
    mutating, validating = (recorded(name) for name in webhooks)
    lab.on("management", r"^get mutatingwebhookconfiguration kamaji-mutating-webhook-configuration ", ok(mutating))
    lab.on(
        "management", r"^get validatingwebhookconfiguration kamaji-validating-webhook-configuration ", ok(validating)
    )
    lab.on(
        "management",
        r"^get endpointslices -n kamaji-system -l kubernetes\.io/service-name=kamaji-webhook-service ",
        ok(recorded("endpointslices-kamaji-webhook.json")),
    )
    lab.on("management", r"^get datastores\.kamaji\.clastix\.io shared-etcd ", ok(shared_etcd()))
    lab.on("management", r"^create -f - -n default --dry-run=server", ok(recorded("issuer-dry-run.json")))
    return lab


def test_provided_pieces_are_checked_by_their_webhooks_and_the_configured_datastore(tmp_path):
    lab = provided_lab()

    code, report = validate(lab, "--only", "platform", "load-balancer", outputs=provided_outputs(tmp_path))

    assert code == 0, report
    assert result(report, "platform", "management")["evidence"] == (
        "cert-manager (provided) admits an Issuer, webhook mtenantcontrolplane.kb.io served, "
        "webhook vtenantcontrolplane.kb.io served, DataStore shared-etcd ready"
    )
    assert not lab.commands("management", r"^get deployments"), "a provided piece's workloads may have any name"
    assert not lab.commands("management", r"datastores\.kamaji\.clastix\.io default")
    (probe,) = lab.commands("management", r"--dry-run=server")
    assert '"kind": "Issuer"' in probe.stdin, "a dry run stores nothing"


def test_a_provided_load_balancer_skips_the_metallb_check_saying_why(tmp_path):
    lab = provided_lab()

    code, report = validate(lab, "--only", "load-balancer", outputs=provided_outputs(tmp_path))

    skipped = result(report, "load-balancer", "management")
    assert code == 0 and skipped["status"] == "skip"
    assert "loadBalancer is provided" in skipped["reason"] and "MetalLB" in skipped["reason"]
    assert not lab.commands("management", "")


def test_every_missing_part_of_a_provided_kamaji_is_named(tmp_path):
    lab = provided_lab()
    without_ca = recorded("webhooks-kamaji-validating.json")
    for webhook in without_ca["webhooks"]:
        webhook["clientConfig"].pop("caBundle")
    lab.on("management", r"^get validatingwebhookconfiguration ", ok(without_ca))
    lab.on("management", r"^get datastores\.kamaji\.clastix\.io shared-etcd ", error(NOT_FOUND))

    code, report = validate(lab, "--only", "platform", outputs=provided_outputs(tmp_path))

    reason = result(report, "platform", "management")["reason"]
    assert code == 1
    assert "vtenantcontrolplane.kb.io has no CA injected" in reason
    assert "shared-etcd" in reason and "NotFound" in reason


def without_the_tenant_control_plane_webhook(configuration: dict) -> None:
    hooks = configuration["webhooks"]
    configuration["webhooks"] = [hook for hook in hooks if hook["name"] != "vtenantcontrolplane.kb.io"]


def called_by_url(configuration: dict) -> None:
    for webhook in configuration["webhooks"]:
        webhook["clientConfig"] = {"url": "https://kamaji.example:9443/validate", "caBundle": "Q0E="}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            without_the_tenant_control_plane_webhook,
            "validatingwebhookconfiguration kamaji-validating-webhook-configuration has no webhook "
            "vtenantcontrolplane.kb.io",
        ),
        (
            called_by_url,
            "webhook vtenantcontrolplane.kb.io names no service in its clientConfig (a URL?); this check reads the "
            "endpoints of the service that Kamaji's chart creates for it",
        ),
    ],
)
def test_a_provided_kamaji_webhook_the_check_cannot_find_is_named(tmp_path, change, reason):
    lab = provided_lab()
    configuration = recorded("webhooks-kamaji-validating.json")
    change(configuration)
    lab.on("management", r"^get validatingwebhookconfiguration ", ok(configuration))

    code, report = validate(lab, "--only", "platform", outputs=provided_outputs(tmp_path))

    assert code == 1
    assert result(report, "platform", "management")["reason"] == reason


def test_a_provided_kamaji_without_a_ready_webhook_endpoint_fails(tmp_path):
    lab = provided_lab()
    slices = recorded("endpointslices-kamaji-webhook.json")
    for endpoint in slices["items"][0]["endpoints"]:
        endpoint["conditions"]["ready"] = False
    lab.on("management", r"^get endpointslices ", ok(slices))

    code, report = validate(lab, "--only", "platform", outputs=provided_outputs(tmp_path))

    assert code == 1
    assert (
        "no ready endpoint of service kamaji-system/kamaji-webhook-service"
        in result(report, "platform", "management")["reason"]
    )


def test_a_provided_cert_manager_that_refuses_issuers_fails_and_an_installed_kamaji_is_still_counted(tmp_path):
    lab = provided_lab()
    refused = 'Error from server (InternalError): failed calling webhook "webhook.cert-manager.io"\n'
    lab.on("management", r"--dry-run=server", error(refused))
    only_cert_manager = {"provided": ["certManager"], "dataStore": "default"}

    code, report = validate(lab, "--only", "platform", outputs=provided_outputs(tmp_path, only_cert_manager))

    reason = result(report, "platform", "management")["reason"]
    assert code == 1
    assert "the provided cert-manager does not admit an Issuer" in reason and "webhook.cert-manager.io" in reason
    assert lab.commands("management", r"^get deployments"), "the installed Kamaji is checked by its Deployment"


def test_the_datastore_check_skips_a_provided_datastore_it_cannot_read_with_the_charts_etcd(tmp_path):
    lab = provided_lab()
    lab.on("management", r"^get statefulset kamaji-etcd -n kamaji-system --ignore-not-found$", ok(""))

    code, report = validate(lab, "--only", "datastore", outputs=provided_outputs(tmp_path))

    assert code == 0
    for tenant in ("tenant-a", "tenant-b"):
        skipped = result(report, "datastore", tenant)
        assert skipped["status"] == "skip"
        assert "kamaji is provided" in skipped["reason"] and "kamaji-system/kamaji-etcd" in skipped["reason"]


def test_a_provided_kamaji_etcd_is_read_like_the_installed_one(tmp_path):
    lab = provided_lab()
    lab.on(
        "management",
        r"^get statefulset kamaji-etcd -n kamaji-system --ignore-not-found$",
        ok("statefulset.apps/kamaji-etcd\n"),
    )

    code, report = validate(lab, "--only", "datastore", outputs=provided_outputs(tmp_path))

    assert code == 0, report
    assert {result(report, "datastore", tenant)["status"] for tenant in ("tenant-a", "tenant-b")} == {"pass"}


def test_a_control_plane_without_a_named_datastore_uses_the_outputs_one(tmp_path):
    lab = provided_lab()
    lab.on("management", r"^get statefulset kamaji-etcd -n kamaji-system --ignore-not-found$", ok(""))
    for tenant in ("tenant-a", "tenant-b"):
        tcp = recorded(f"tcp-{tenant}.json")
        tcp.get("status", {}).get("storage", {}).pop("dataStoreName", None)
        tcp["spec"].pop("dataStore", None)
        lab.on("management", rf"^get tenantcontrolplanes\.kamaji\.clastix\.io {tenant} ", ok(tcp))

    validate(lab, "--only", "datastore", outputs=provided_outputs(tmp_path))

    assert lab.commands("management", r"^get datastores\.kamaji\.clastix\.io shared-etcd ")
    assert not lab.commands("management", r"^get datastores\.kamaji\.clastix\.io default ")


def test_outputs_without_the_platform_output_mean_everything_was_installed():
    assert parse_outputs(recorded("outputs.json")).platform == Platform()


@pytest.mark.parametrize(
    ("platform", "words"),
    [
        ({"provided": ["metallb"], "dataStore": "default"}, "platform.provided: unknown piece 'metallb'"),
        ({"provided": []}, "platform.dataStore: missing"),
        ("provided", "outputs.platform: expected an object"),
    ],
)
def test_a_malformed_platform_output_is_refused_naming_the_field(platform, words):
    document = recorded("outputs.json") | {"platform": platform}
    with pytest.raises(OutputsError, match=words):
        parse_outputs(document)


def test_a_provided_kamaji_endpoint_of_unknown_readiness_counts_as_ready(tmp_path):
    # discovery/v1 EndpointConditions: a nil ready is unknown, which consumers interpret as ready.
    lab = provided_lab()
    slices = recorded("endpointslices-kamaji-webhook.json")
    for endpoint in slices["items"][0]["endpoints"]:
        endpoint["conditions"].pop("ready", None)
    lab.on("management", r"^get endpointslices ", ok(slices))

    code, report = validate(lab, "--only", "platform", outputs=provided_outputs(tmp_path))

    assert code == 0, result(report, "platform", "management")
