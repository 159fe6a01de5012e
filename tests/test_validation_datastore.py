"""The `datastore` check: each tenant's etcd certificate reads its own prefix and nothing else.

Everything here runs on hand-made answers: the FakeLab of tests/test_validation.py
with tests/fake_etcd.py's hand-made kamaji-etcd behind the check's etcdctl pods,
and hand-made etcdctl outputs for the verdicts.
"""

from __future__ import annotations

import io
import json

import pytest

from tests.fake_etcd import ETCD_IMAGE, PERMISSION_DENIED, ROOT_USER, FakeEtcd
from tests.test_validation import (
    TENANTS,
    FakeClock,
    error,
    healthy_lab,
    ok,
    outputs_with,
    recorded,
    result,
    validate,
)
from validation.checks.datastore import Read, etcd_endpoints, marker_absent, marker_found, refused
from validation.cli import main

SCHEMAS = {tenant: spec["dataStoreSchema"] for tenant, spec in recorded("outputs.json")["tenants"].items()}
# Kamaji names the tenant's etcd client certificate <tenant>-datastore-certificate, with keys
# ca.crt, server.crt and server.key (clastix/kamaji internal/resources/datastore/datastore_certificate.go@26.8.2-edge).
TENANT_SECRET_KEYS = {"ca.crt", "server.crt", "server.key"}
# kamaji-etcd's DataStore: root client certificate and CA by secret reference, in the chart's namespace
# (clastix/kamaji-etcd charts/kamaji-etcd/templates/etcd_datastore.yaml@92f31f0).
ROOT_SECRETS = {("kamaji-etcd-root-client-certs", "tls.crt"), ("kamaji-etcd-root-client-certs", "tls.key")}
ROOT_CA = ("kamaji-etcd-certs", "ca.crt")


def lab_with(etcd: FakeEtcd | None = None):
    """The healthy lab, its hand-made etcd replaced by etcd when given."""
    lab = healthy_lab()
    if etcd:
        etcd.calls = lab.calls
        etcd.install(lab)
    return lab


def etcdctl_pods(lab) -> list[dict]:
    created = [json.loads(call.stdin) for call in lab.commands("management", r"^create -f - -n ") if call.stdin]
    return [pod for pod in created if pod["kind"] == "Pod"]


def mounted(pod: dict) -> set[tuple[str, str]]:
    """(secret, key) pairs the pod mounts."""
    (volume,) = pod["spec"]["volumes"]
    return {
        (source["secret"]["name"], item["key"])
        for source in volume["projected"]["sources"]
        for item in source["secret"]["items"]
    }


def namespace_of(lab, pod: dict) -> str:
    (call,) = [
        call for call in lab.commands("management", r"^create -f - -n ") if pod["metadata"]["name"] in call.stdin
    ]
    return call.command.split()[-1]


# --- verdicts on hand-made etcdctl answers --------------------------------------------------


def test_a_listed_marker_is_found_and_a_permission_denied_is_a_refusal():
    key = "/tenants_tenant_a/configmaps/validate-datastore-abc123/marker-1"
    own = Read("/tenants_tenant_a/configmaps/validate-datastore-abc123/", 0, f"{key}\n\n")

    assert marker_found(own, key) == (True, f"found {key}")
    assert refused(Read("/tenants_tenant_b/", 1, PERMISSION_DENIED)) == (
        True,
        "/tenants_tenant_b/ refused (permission denied)",
    )


def test_an_empty_answer_is_not_a_refusal():
    proven, why = refused(Read("/tenants_tenant_b/", 0, ""))

    assert not proven
    assert why == (
        "/tenants_tenant_b/ answered with no keys instead of permission denied; an empty answer is no proof "
        "(is etcd auth enabled?)"
    )


def test_other_errors_are_not_refusals_either():
    proven, why = refused(Read("/", 1, "Error: context deadline exceeded\n"))

    assert not proven and "context deadline exceeded" in why


def test_a_marker_listed_under_another_prefix_is_a_leak():
    path = "configmaps/validate-datastore-abc123/marker-1"
    listing = f"/tenants_tenant_b/configmaps/kube-system/kube-root-ca.crt\n/tenants_tenant_b/{path}\n"

    assert marker_absent(Read("/tenants_tenant_b/", 0, listing), path) == (
        False,
        f"the marker is also under another tenant's prefix: /tenants_tenant_b/{path}",
    )


# --- the check against the hand-made lab ----------------------------------------------------


def test_marker_found_and_refusals_seen_pass_with_the_prefix_key_and_refusal_as_evidence():
    code, report = validate(lab_with(), "--only", "datastore")

    assert code == 0
    for tenant in TENANTS:
        evidence = result(report, "datastore", tenant)["evidence"]
        other = SCHEMAS[next(name for name in TENANTS if name != tenant)]
        assert f"found /{SCHEMAS[tenant]}/configmaps/validate-datastore-" in evidence
        assert f"/{other}/ refused (permission denied)" in evidence
        assert "/ refused (permission denied)" in evidence
        assert f"root credentials: found /{SCHEMAS[tenant]}/configmaps/validate-datastore-" in evidence
        assert f"marker not under /{other}/" in evidence


def test_a_datastore_without_auth_fails_naming_what_the_certificate_could_read():
    _, report = validate(lab_with(FakeEtcd(SCHEMAS, [], auth_enabled=False)), "--only", "datastore")

    reason = result(report, "datastore", "tenant-a")["reason"]
    assert result(report, "datastore", "tenant-a")["status"] == "fail"
    assert "tenants/tenant-a-datastore-certificate" in reason
    assert "/ is readable" in reason
    # tenant-b's prefix holds nothing, or its own marker when tenant-b's check (beside this one) wrote it first:
    # an empty answer is said to prove nothing, a listing is a leak
    assert (
        "/tenants_tenant_b/ answered with no keys instead of permission denied" in reason
        or "/tenants_tenant_b/ is readable: etcd listed 1 key, e.g. /tenants_tenant_b/configmaps/validate-" in reason
    )


def test_marker_found_under_another_tenants_prefix_fails():
    etcd = FakeEtcd(SCHEMAS, [], copies={"tenant-a": SCHEMAS["tenant-b"]})

    _, report = validate(lab_with(etcd), "--only", "datastore")

    reason = result(report, "datastore", "tenant-a")["reason"]
    assert (
        "the marker is also under another tenant's prefix: /tenants_tenant_b/configmaps/validate-datastore-" in reason
    )
    assert result(report, "datastore", "tenant-b")["status"] == "pass"


def test_a_lone_tenant_is_still_refused_at_the_root(tmp_path):
    def one_tenant(document: dict) -> None:
        del document["tenants"]["tenant-b"], document["kubeconfigs"]["tenant-b"]

    lab = lab_with()
    _, report = validate(lab, "--only", "datastore", outputs=outputs_with(tmp_path, one_tenant))

    evidence = result(report, "datastore", "tenant-a")["evidence"]
    assert "/ refused (permission denied)" in evidence
    assert "root credentials: no other tenant to search" in evidence
    assert {namespace_of(lab, pod) for pod in etcdctl_pods(lab)} == {"tenants"}


def test_a_datastore_that_is_not_etcd_skips_the_check():
    lab = lab_with()
    lab.on("management", r"^get datastores\.kamaji\.clastix\.io default ", ok({"spec": {"driver": "PostgreSQL"}}))

    _, report = validate(lab, "--only", "datastore")

    assert result(report, "datastore", "tenant-a")["status"] == "skip"
    assert "PostgreSQL" in result(report, "datastore", "tenant-a")["reason"]


# --- what the pods mount and run, and their cleanup -----------------------------------------


def test_each_tenant_pod_mounts_that_tenants_certificate_and_the_root_pod_only_the_root_secrets():
    lab = lab_with()
    validate(lab, "--only", "datastore")

    pods = etcdctl_pods(lab)
    tenant_pods = [pod for pod in pods if namespace_of(lab, pod) == "tenants"]
    root_pods = [pod for pod in pods if namespace_of(lab, pod) == "kamaji-system"]
    # One pod per tenant, created in whichever order the tenants (checked side by side) got there.
    assert sorted(map(sorted, map(mounted, tenant_pods))) == [
        sorted((f"{tenant}-datastore-certificate", key) for key in TENANT_SECRET_KEYS) for tenant in TENANTS
    ]
    # The CA's private key (ca.key, same secret) stays out of the pod.
    assert [mounted(pod) for pod in root_pods] == [ROOT_SECRETS | {ROOT_CA}] * len(TENANTS)


def test_etcdctl_argv_names_files_never_key_material_and_lists_keys_only():
    lab = lab_with()
    validate(lab, "--only", "datastore")

    document = recorded("outputs.json")
    secret_values = [document["managementKubeconfig"], *document["kubeconfigs"].values()]
    for pod in etcdctl_pods(lab):
        mount = pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"]
        for container in pod["spec"]["containers"]:
            argv = container["command"]
            assert argv[0].endswith("/etcdctl") and "--keys-only" in argv
            files = [arg.split("=", 1)[1] for arg in argv if arg.startswith(("--cacert=", "--cert=", "--key="))]
            assert len(files) == 3 and all(path.startswith(f"{mount}/") for path in files)
            assert not any("BEGIN" in arg or "PRIVATE" in arg for arg in argv)
            assert not any(value in json.dumps(pod) for value in secret_values)


def test_report_text_never_shows_key_material(capsys):
    stdout = io.StringIO()
    main(
        ["--outputs", "tests/fixtures/validation/outputs.json", "--only", "datastore"],
        runner=lab_with(),
        clock=FakeClock(),
        stdout=stdout,
    )

    assert "BEGIN" not in stdout.getvalue() and "PRIVATE KEY" not in stdout.getvalue()
    assert "PASS  datastore" in stdout.getvalue()


def test_a_pod_that_never_finishes_fails_within_the_bound_and_is_deleted():
    lab = lab_with()
    clock = FakeClock()
    pending = {
        "status": {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "own",
                    "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}},
                }
            ],
        }
    }
    lab.on("management", r"^get pod validate-datastore-", ok(pending))

    _, report = validate(lab, "--only", "datastore", clock=clock)

    assert "ImagePullBackOff" in result(report, "datastore", "tenant-a")["reason"]
    assert 60 < clock.time < 600
    created = {pod["metadata"]["name"] for pod in etcdctl_pods(lab)}
    deleted = {call.command.split()[2] for call in lab.commands("management", r"^delete pod ")}
    assert created == deleted and len(created) == len(TENANTS)
    assert len(lab.commands("tenant-a", r"^delete namespace validate-datastore-")) == 1


@pytest.mark.parametrize(
    "breakage",
    [
        (r"^create -f - -n ", error("Error from server (Timeout): the server was unable to return a response\n")),
        (r"^logs ", error('Error from server (BadRequest): container "own" is terminated\n')),
    ],
    ids=["create", "logs"],
)
def test_the_pod_is_deleted_when_the_check_fails_part_way(breakage):
    lab = lab_with()
    pattern, reply = breakage
    lab.on("management", pattern, reply)

    _, report = validate(lab, "--only", "datastore")

    assert result(report, "datastore", "tenant-a")["status"] == "fail"
    created = {pod["metadata"]["name"] for pod in etcdctl_pods(lab)}
    deleted = {call.command.split()[2] for call in lab.commands("management", r"^delete pod ")}
    assert created and created == deleted
    assert all("--ignore-not-found" in call.command for call in lab.commands("management", r"^delete pod "))


def test_a_pod_left_behind_is_a_warning_with_the_command_to_remove_it():
    lab = lab_with()
    lab.on("management", r"^delete pod ", error("error: etcdserver: request timed out\n"))

    code, report = validate(lab, "--only", "datastore")

    assert code == 0
    assert any("delete pod validate-datastore-" in warning for warning in report["warnings"])


def test_the_check_runs_after_isolation_and_is_listed_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    listing = capsys.readouterr().out

    assert listing.index("isolation") < listing.index("datastore") < listing.index("nodes")


def test_root_credentials_that_see_nothing_prove_nothing():
    # An empty answer under the marker's own prefix means the root read cannot be trusted.
    good, why = marker_found(Read("/tenants_tenant_a/", 0, ""), "/tenants_tenant_a/configmaps/ns/m", "root credentials")
    assert not good
    assert why == "/tenants_tenant_a/configmaps/ns/m is not under /tenants_tenant_a/ (etcd listed 0 keys there)"


def test_the_count_of_listed_keys_is_worded_for_one_and_for_several():
    wanted = "/tenants_tenant_a/configmaps/ns/marker"
    one = Read("/tenants_tenant_a/", 0, "/tenants_tenant_a/configmaps/ns/other\n")
    two = Read("/tenants_tenant_a/", 0, "/tenants_tenant_a/a\n/tenants_tenant_a/b\n")

    assert marker_found(one, wanted)[1].endswith("(etcd listed 1 key there)")
    assert marker_found(two, wanted)[1].endswith("(etcd listed 2 keys there)")


def test_endpoints_get_a_scheme_only_where_they_lack_one():
    # The DataStore CRD asks for bare host:port endpoints, but one written with its scheme keeps it.
    store = {"metadata": {"name": "default"}, "spec": {"endpoints": ["https://etcd-0:2379", "etcd-1:2379"]}}

    assert etcd_endpoints(store) == "https://etcd-0:2379,https://etcd-1:2379"


def test_the_etcdctl_pods_dial_every_member_of_the_datastore_over_tls():
    lab = lab_with()
    validate(lab, "--only", "datastore")

    members = [f"kamaji-etcd-{n}.kamaji-etcd.kamaji-system.svc.cluster.local:2379" for n in range(3)]
    for pod in etcdctl_pods(lab):
        for container in pod["spec"]["containers"]:
            assert f"--endpoints={','.join(f'https://{member}' for member in members)}" in container["command"]


def test_a_certificate_refused_at_its_own_prefix_fails_the_check():
    _, report = validate(lab_with(FakeEtcd(SCHEMAS, [], without_role=("tenant-a",))), "--only", "datastore")

    reason = result(report, "datastore", "tenant-a")["reason"]
    assert "the tenant's own certificate cannot read /tenants_tenant_a/configmaps/validate-datastore-" in reason
    assert reason.count("etcdserver: permission denied") == 1  # the refusals elsewhere are as they should be
    assert result(report, "datastore", "tenant-b")["status"] == "pass"


def test_root_credentials_refused_everywhere_prove_nothing_and_fail_the_check():
    _, report = validate(lab_with(FakeEtcd(SCHEMAS, [], without_role=(ROOT_USER,))), "--only", "datastore")

    reason = result(report, "datastore", "tenant-a")["reason"]
    assert "root credentials cannot read /tenants_tenant_a/: Error: etcdserver: permission denied" in reason
    assert "root credentials cannot read /tenants_tenant_b/: Error: etcdserver: permission denied" in reason


def secret_references(tls: dict) -> list[dict]:
    return [
        tls["certificateAuthority"]["certificate"]["secretReference"],
        tls["clientCertificate"]["certificate"]["secretReference"],
        tls["clientCertificate"]["privateKey"]["secretReference"],
    ]


ONE_NAMESPACE = "does not name one namespace for its root credentials"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda tls: tls.pop("clientCertificate"), "names no secret for client.crt, client.key"),
        (
            lambda tls: tls["certificateAuthority"]["certificate"]["secretReference"].update(namespace="etcd-ca"),
            ONE_NAMESPACE,
        ),
        # secretReference.namespace is optional in Kamaji's DataStore CRD.
        (lambda tls: tls["clientCertificate"]["privateKey"]["secretReference"].pop("namespace"), ONE_NAMESPACE),
        (lambda tls: [reference.pop("namespace") for reference in secret_references(tls)], ONE_NAMESPACE),
    ],
    ids=["no-client-certificate", "two-namespaces", "one-without-namespace", "none-with-namespace"],
)
def test_root_credentials_a_pod_cannot_mount_skip_the_root_half_with_the_reason(change, why):
    lab = lab_with()
    store = recorded("datastore-default.json")
    change(store["spec"]["tlsConfig"])
    lab.on("management", r"^get datastores\.kamaji\.clastix\.io default ", ok(store))

    _, report = validate(lab, "--only", "datastore")

    verdict = result(report, "datastore", "tenant-a")
    assert verdict["status"] == "pass"
    assert f"root-credential half skipped: DataStore default {why}" in verdict["evidence"]
    assert {namespace_of(lab, pod) for pod in etcdctl_pods(lab)} == {"tenants"}  # no root pod


def test_etcdctl_runs_the_image_of_the_statefulsets_etcd_container():
    lab = lab_with()
    containers = [{"name": "wait-for-dns", "image": "busybox:1.37"}, {"name": "etcd", "image": ETCD_IMAGE}]
    statefulset = {"spec": {"template": {"spec": {"containers": containers}}}}
    lab.on("management", r"^get statefulset kamaji-etcd -n kamaji-system ", ok(statefulset))

    validate(lab, "--only", "datastore")

    assert {c["image"] for pod in etcdctl_pods(lab) for c in pod["spec"]["containers"]} == {ETCD_IMAGE}


def test_a_statefulset_without_an_etcd_container_fails_naming_it():
    lab = lab_with()
    no_etcd = {"spec": {"template": {"spec": {"containers": [{"name": "wait-for-dns", "image": "busybox:1.37"}]}}}}
    lab.on("management", r"^get statefulset kamaji-etcd -n kamaji-system ", ok(no_etcd))

    _, report = validate(lab, "--only", "datastore")

    assert result(report, "datastore", "tenant-a")["reason"] == (
        "StatefulSet kamaji-system/kamaji-etcd has no etcd container image"
    )


def test_each_pod_is_deleted_in_its_namespace_without_waiting_and_leaves_no_warning():
    lab = lab_with()
    code, report = validate(lab, "--only", "datastore")

    wanted = sorted(
        f"delete pod {pod['metadata']['name']} -n {namespace_of(lab, pod)} --ignore-not-found --wait=false"
        for pod in etcdctl_pods(lab)
    )
    assert code == 0 and report["warnings"] == []
    assert sorted(call.command for call in lab.commands("management", r"^delete pod ")) == wanted


def test_a_pod_left_behind_by_an_unreachable_cluster_is_a_warning_saying_so():
    lab = lab_with()
    unreachable = "Unable to connect to the server: dial tcp 172.18.0.2:6443: i/o timeout\n"
    lab.on("management", r"^delete pod ", error(unreachable))

    _, report = validate(lab, "--only", "datastore")

    assert any(
        "was not deleted (cannot reach the management API server: Unable to connect" in warning
        for warning in report["warnings"]
    )
