"""The datastore check's edges that the mutation run over validation/checks/datastore.py (issue 52) found untested.

Certificates come from the openssl CLI (tests/real_etcd.py); kubectl is a runner answering one fixed output, as
`kubectl get secret -o jsonpath={.data.server\\.crt}` prints a Secret's base64 data; etcdctl's answers are Reads.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.real_etcd import issue, make_ca
from validation.checks.datastore import (
    Read,
    RootCredentials,
    Survey,
    alone,
    between_stores,
    certificate_cn,
    etcd_image,
    first_member,
    identity,
    marker_absent,
    marker_found,
    named_stores,
    other_readers,
    own_reach,
    refused,
    remove,
    root_credentials,
    shared_schema,
    stores_of,
    survey,
    tenant_schema,
    tenant_user,
    tenant_users,
    used_store,
)
from validation.checks.etcd_ranges import OPEN_ENDED, Permission
from validation.host import CommandResult
from validation.kube import Kubectl
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import Tenant

USER = "6f1c2b2e-93b4-4a57-9d0c-2f1f0f3b9a11"


class Answers:
    """A runner that prints the same stdout for every kubectl call."""

    def __init__(self, stdout: str):
        self.stdout = stdout

    def run(self, argv, stdin=None, timeout=None, **_) -> CommandResult:
        return CommandResult(tuple(argv), 0, self.stdout, "")


def management(stdout: str) -> Kubectl:
    return Kubectl(Answers(stdout), Path("/nonexistent/management.kubeconfig"), "management")


@pytest.fixture(scope="module")
def pem(tmp_path_factory) -> str:
    directory = tmp_path_factory.mktemp("certificates")
    make_ca(directory)
    cert, _ = issue(directory, "client", USER, "extendedKeyUsage=clientAuth\n")
    return cert.read_text()


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_the_cn_is_read_from_the_secrets_certificate(pem):
    assert certificate_cn(management(encoded(pem.encode()) + "\n"), "tenants", "a-datastore-certificate") == USER


def test_a_certificate_that_is_not_pem_text_has_no_cn_and_stops_nothing(pem):
    # A server.crt holding DER (binary) bytes: no CN can be read, and the check goes on to name the certificate
    # without one instead of crashing on the bytes that are no UTF-8.
    der = base64.b64decode("".join(line for line in pem.splitlines() if "-----" not in line))

    assert certificate_cn(management(encoded(der)), "tenants", "a-datastore-certificate") is None


def test_data_that_is_not_clean_base64_is_not_read_as_a_certificate(pem):
    # Skipping what is not base64 would name a CN read from an answer that is not the Secret's data.
    assert certificate_cn(management(encoded(pem.encode()) + "!"), "tenants", "a-datastore-certificate") is None


def test_a_grant_reaching_several_tenants_names_each_of_them_apart():
    # A role reading every key from /tenants_tenant_ on: past the tenant's own range, into tenant-b's and tenant-c's.
    own = Permission("READWRITE", b"/tenants_tenant_a/", b"/tenants_tenant_a0")
    wide = Permission("READ", b"/tenants_tenant_", OPEN_ENDED)
    found = Survey({"uid-a": ["tenants_tenant_a", "wide"]}, {"tenants_tenant_a": [own], "wide": [wide]}, [])
    owners = {"tenants_tenant_b": "tenant tenant-b", "tenants_tenant_c": "tenant tenant-c"}

    (verdict,) = own_reach(found, "uid-a", "tenants_tenant_a", owners)

    assert not verdict.good
    assert verdict.what.endswith(
        ", including tenant tenant-b's /tenants_tenant_b/, tenant tenant-c's /tenants_tenant_c/"
    )


def test_a_user_whose_grants_cannot_be_read_is_a_problem_naming_the_user_and_etcds_answer():
    # What etcdctl prints when the user went away between `user list` and `user get` (etcd-io/etcd
    # server/auth/store.go@v3.5.1: ErrUserNotFound).
    gone = Read("etcd user uid-b", 1, "Error: etcdserver: user name not found\n")

    found = survey(["uid-b"], [], {"user-0": gone})

    assert found.problems == ["cannot read etcd user uid-b: Error: etcdserver: user name not found"]
    assert found.user_roles == {}


def test_a_role_whose_permissions_cannot_be_read_is_a_problem_naming_the_role_and_etcds_answer():
    # What etcdctl prints when the role went away between `role list` and `role get` (etcd-io/etcd
    # server/auth/store.go@v3.5.1: ErrRoleNotFound).
    gone = Read("etcd role tenants_tenant_b", 1, "Error: etcdserver: role name not found\n")

    found = survey([], ["tenants_tenant_b"], {"role-0": gone})

    assert found.problems == ["cannot read etcd role tenants_tenant_b: Error: etcdserver: role name not found"]
    assert found.role_permissions == {}


def test_the_roles_its_own_user_holds_are_no_strangers_in_a_tenants_own_datastore():
    # Roles granted to the tenant's own user (besides Kamaji's role <schema>) are its own; a role nobody of the
    # tenant holds is a stranger's.
    found = Survey({"uid-a": ["tenants_tenant_a", "metrics-reader"]}, {}, [])
    roles = ["tenants_tenant_a", "metrics-reader"]

    assert alone(found, ["uid-a"], roles, "uid-a", "tenants_tenant_a", {}, "tenant-a-etcd") == (
        True,
        "DataStore tenant-a-etcd has no etcd user or role but root and this tenant's",
    )
    assert alone(found, ["uid-a"], [*roles, "wide"], "uid-a", "tenants_tenant_a", {}, "tenant-a-etcd") == (
        False,
        "DataStore tenant-a-etcd is this tenant's own, yet it also has role wide",
    )


def test_a_tenants_own_datastore_whose_user_could_not_be_read_still_names_every_stranger():
    # uid-a's `user get` failed (the survey says so apart): only Kamaji's role <schema> counts as its own.
    found = Survey({}, {}, ["cannot read etcd user uid-a: Error: etcdserver: user name not found"])
    roles = ["tenants_tenant_a", "metrics-reader"]

    # uid-b is a lab tenant's user, uid-x nobody's the lab knows.
    assert alone(
        found, ["uid-a", "uid-b", "uid-x"], roles, "uid-a", "tenants_tenant_a", {"uid-b": "tenant-b"}, "tenant-a-etcd"
    ) == (
        False,
        "DataStore tenant-a-etcd is this tenant's own, yet it also has etcd user uid-b (tenant tenant-b), "
        "etcd user uid-x, role metrics-reader",
    )


def own_reach_of(*granted: Permission) -> list[str]:
    """What the check says of tenant-a's user uid-a when its one role grants exactly `granted`."""
    found = Survey({"uid-a": ["tenants_tenant_a"]}, {"tenants_tenant_a": list(granted)}, [])
    return [verdict.what for verdict in own_reach(found, "uid-a", "tenants_tenant_a", {}) if not verdict.good]


def test_a_user_that_may_only_read_its_range_is_told_it_cannot_write_it():
    assert own_reach_of(Permission("READ", b"/tenants_tenant_a/", b"/tenants_tenant_a0")) == [
        "etcd user uid-a cannot write [/tenants_tenant_a/, /tenants_tenant_a0) of its own range"
    ]


def test_a_user_granted_part_of_its_range_is_told_every_part_it_cannot_reach():
    # Kamaji grants the whole prefix; a grant on the ConfigMaps alone leaves the keys before and after them out.
    granted = Permission("READWRITE", b"/tenants_tenant_a/configmaps/", b"/tenants_tenant_a/configmaps0")

    assert own_reach_of(granted) == [
        "etcd user uid-a can neither read nor write [/tenants_tenant_a/, /tenants_tenant_a/configmaps/), "
        "[/tenants_tenant_a/configmaps0, /tenants_tenant_a0) of its own range"
    ]


# A TenantControlPlane as Kamaji's defaulting webhook admits it (spec.dataStore, dataStoreSchema and
# dataStoreUsername filled in: clastix/kamaji internal/webhook/handlers/tcp_defaults.go@26.8.2-edge), before its
# controller has written any status, and at each later stage of that status.
SPEC = {"dataStore": "default", "dataStoreSchema": "tenants_tenant_a", "dataStoreUsername": USER}
FRESH = {"metadata": {"name": "tenant-a", "uid": "uid-of-tenant-a"}, "spec": SPEC}


@pytest.mark.parametrize(
    "status",
    [
        None,
        {},
        {"storage": {}, "kubernetesResources": {}},
        {"storage": {"setup": {}}, "kubernetesResources": {"version": {}}},
    ],
    ids=["no-status", "no-storage", "no-setup", "no-version"],
)
def test_a_control_plane_kamaji_has_not_set_up_yet_is_read_by_its_spec(status):
    tcp = FRESH | ({} if status is None else {"status": status})

    assert (used_store(tcp), named_stores(tcp), between_stores(tcp)) == ("default", {"default"}, "")
    assert (tenant_user(tcp), tenant_schema(tcp)) == (USER, "tenants_tenant_a")


def test_a_control_plane_before_its_first_run_is_on_the_datastore_its_spec_names():
    # No status.storage.dataStoreName yet: the DataStore the spec names, not the platform's.
    tcp = FRESH | {"spec": SPEC | {"dataStore": "tenant-a-etcd"}, "status": {"storage": {}}}

    assert (used_store(tcp), named_stores(tcp)) == ("tenant-a-etcd", {"tenant-a-etcd"})


def test_a_control_plane_naming_no_datastore_names_none_until_kamaji_puts_it_on_one():
    # Kamaji's webhook names a DataStore only when Kamaji has a default one (tcp_defaults.go@26.8.2-edge): the
    # platform's is then the tenant's (the check's and the clean-up's callers fall back to it).
    bare = FRESH | {"spec": {key: value for key, value in SPEC.items() if key != "dataStore"}}
    placed = bare | {"status": {"storage": {"dataStoreName": "default"}}}

    assert (used_store(bare), named_stores(bare)) == ("", set())
    assert (used_store(placed), named_stores(placed)) == ("default", {"default"})


def test_what_kamaji_set_up_wins_over_the_spec_and_an_older_spec_without_a_user():
    # A control plane made before spec.dataStoreUsername existed: Kamaji keeps the user and schema of its status
    # (clastix/kamaji internal/resources/datastore/datastore_storage_config.go@26.8.2-edge).
    tcp = FRESH | {
        "spec": {"dataStore": "default", "dataStoreSchema": "tenants_tenant_a"},
        "status": {"storage": {"dataStoreName": "default", "setup": {"schema": "tenants_a_old", "user": "tenants_a"}}},
    }

    assert (tenant_user(tcp), tenant_schema(tcp)) == ("tenants_a", "tenants_a_old")


def test_a_failure_to_ask_etcd_whose_certificate_it_is_is_no_pass_and_names_etcdctls_error():
    asked = Read(f"etcd user {USER}", 1, "Error: context deadline exceeded\n")

    assert identity(asked, USER, "tenants/tenant-a-datastore-certificate", None) == (
        False,
        "cannot ask etcd whose certificate tenants/tenant-a-datastore-certificate is: Error: context deadline exceeded",
    )


def test_a_certificate_of_no_etcd_user_whose_cn_was_not_read_names_no_cn():
    asked = Read(f"etcd user {USER}", 1, "Error: etcdserver: user name not found\n")

    assert identity(asked, USER, "tenants/tenant-a-datastore-certificate", None) == (
        False,
        "the certificate tenants/tenant-a-datastore-certificate's CN is no etcd user at all; the user this "
        f"check inspects is {USER}",
    )


def test_another_user_reaching_the_tenants_keys_is_a_failed_verdict_naming_user_tenant_role_and_grant():
    wide = Permission("READ", b"/tenants_tenant_", OPEN_ENDED)
    found = Survey({"root": ["root"], "uid-a": ["tenants_tenant_a"], "uid-b": ["wide"]}, {"wide": [wide]}, [])

    assert other_readers(found, "uid-a", "tenant-a", "tenants_tenant_a", {"uid-b": "tenant-b"}) == [
        (
            False,
            "etcd user uid-b (tenant tenant-b) can read tenant tenant-a's keys [/tenants_tenant_a/, "
            f"/tenants_tenant_a0): its role wide grants {wide}",
        )
    ]


def tenant(name: str, schema: str) -> Tenant:
    return Tenant(name, "https://172.18.255.3:6443", "v1.36.4", "tenants", schema, ("w1",), (), 0, ())


def test_every_tenant_sharing_the_schema_is_named():
    others = [tenant("tenant-b", "tenants_x"), tenant("tenant-c", "tenants_y"), tenant("tenant-d", "tenants_x")]

    assert shared_schema(tenant("tenant-a", "tenants_x"), others) == (
        False,
        "tenants tenant-a and tenant-b, tenant-d have the same dataStoreSchema tenants_x: each reads and "
        "writes the other's keys",
    )


class ControlPlanes:
    """A runner answering `kubectl get tenantcontrolplanes <name> -n tenants -o json` with each tenant's, set up as
    Kamaji sets it up; a tenant not in `users` is refused as an API server refuses a reader it forbids."""

    def __init__(self, users: dict[str, str]):
        self.users = users

    def run(self, argv, stdin=None, timeout=None, **_) -> CommandResult:
        name = argv[argv.index("get") + 2]
        if name not in self.users:
            return CommandResult(tuple(argv), 1, "", f'Error from server (Forbidden): tenantcontrolplanes "{name}" is '
                                 "forbidden\n")  # fmt: skip
        tcp = FRESH | {"metadata": {"name": name}, "status": {"storage": {"setup": {"user": self.users[name]}}}}
        return CommandResult(tuple(argv), 0, json.dumps(tcp), "")


def test_a_tenant_whose_control_plane_cannot_be_read_leaves_the_others_named():
    lab = SimpleNamespace(management=Kubectl(ControlPlanes({"tenant-c": "uid-c", "tenant-d": "uid-d"}),
                                             Path("/nonexistent/management.kubeconfig"), "management"))  # fmt: skip
    others = [tenant(name, f"tenants_{name}") for name in ("tenant-b", "tenant-c", "tenant-d")]

    assert tenant_users(lab, others) == {"uid-c": "tenant-c", "uid-d": "tenant-d"}


def test_a_datastore_naming_its_etcd_by_its_client_service_is_skipped_saying_why():
    # kamaji-etcd's DataStore with datastore.headless false (clastix/kamaji-etcd charts/kamaji-etcd/templates/
    # _helpers.tpl@92f31f0: client.endpointsYAML): no pod, so no StatefulSet to take etcdctl's image from.
    store = {"metadata": {"name": "x"}, "spec": {"endpoints": ["etcd-a-client.store-of-a.svc.cluster.local:2379"]}}

    with pytest.raises(CheckSkipped) as skipped:
        etcd_image(management(""), store, kamaji_provided=False)

    assert str(skipped.value) == (
        "DataStore x names its etcd by service store-of-a/etcd-a-client, not by its pods: this check reads the etcd "
        "image of the StatefulSet whose pods a DataStore names"
    )


def store_keeping(ca: tuple[str, ...], cert: tuple[str, ...], key: tuple[str, ...]) -> dict:
    """A DataStore named "x" whose root credentials are in these (namespace, secret, keyPath) places; a field left
    out of a tuple is left out of the reference."""

    def reference(place: tuple[str, ...]) -> dict:
        return dict(zip(("namespace", "name", "keyPath"), place, strict=False))

    return {
        "metadata": {"name": "x"},
        "spec": {
            "driver": "etcd",
            "tlsConfig": {
                "certificateAuthority": {"certificate": {"secretReference": reference(ca)}},
                "clientCertificate": {
                    "certificate": {"secretReference": reference(cert)},
                    "privateKey": {"secretReference": reference(key)},
                },
            },
        },
    }


def test_a_ca_in_another_namespace_is_named_whole_for_the_copy_and_left_out_of_the_mounted_files():
    store = store_keeping(("etcd-ca", "the-ca", "ca.pem"), ("etcd", "client", "tls.crt"), ("etcd", "client", "tls.key"))

    assert root_credentials(store) == RootCredentials(
        "etcd",
        {("client", "tls.crt"): "client.crt", ("client", "tls.key"): "client.key"},
        ("etcd-ca", "the-ca", "ca.pem"),
    )


def test_a_ca_beside_the_client_certificate_is_mounted_with_it():
    store = store_keeping(("etcd", "the-ca", "ca.pem"), ("etcd", "client", "tls.crt"), ("etcd", "client", "tls.key"))

    assert root_credentials(store) == RootCredentials(
        "etcd",
        {("the-ca", "ca.pem"): "ca.crt", ("client", "tls.crt"): "client.crt", ("client", "tls.key"): "client.key"},
    )


@pytest.mark.parametrize(
    ("ca", "cert", "key", "why"),
    [
        (
            ("etcd",),
            ("etcd",),
            ("etcd", "client", "tls.key"),
            "DataStore x names no secret for ca.crt, client.crt (root credentials)",
        ),
        (
            ("etcd", "the-ca", "ca.pem"),
            ("", "client", "tls.crt"),
            ("etcd", "client", "tls.key"),
            "DataStore x does not name a namespace for each secret of its root credentials",
        ),
        (
            ("etcd", "the-ca", "ca.pem"),
            ("etcd", "client", "tls.crt"),
            ("etcd-keys", "client", "tls.key"),
            "DataStore x keeps its root client certificate and key in two namespaces (etcd, etcd-keys); "
            "no pod mounts both",
        ),
    ],
    ids=["two-secrets-unnamed", "a-namespace-unnamed", "certificate-and-key-apart"],
)
def test_root_credentials_no_pod_can_use_are_refused_naming_the_datastore_and_each_part(ca, cert, key, why):
    assert root_credentials(store_keeping(ca, cert, key)) == why


KAMAJI_ETCD = {
    "metadata": {"name": "default"},
    "spec": {"endpoints": ["kamaji-etcd-0.kamaji-etcd.kamaji-system.svc.cluster.local:2379"]},
}


def pod_template(*containers: dict) -> dict:
    return {"spec": {"template": {"spec": {"containers": list(containers)}}}}


@pytest.mark.parametrize(
    "statefulset",
    [
        {},
        {"spec": {}},
        {"spec": {"template": {}}},
        pod_template(),
        pod_template({"name": "etcd"}),
        pod_template({"name": "backup", "image": "quay.io/coreos/etcd:v3.6.12"}),
    ],
    ids=["no-spec", "no-template", "no-pod-spec", "no-container", "etcd-without-image", "only-another-container"],
)
def test_a_statefulset_without_an_etcd_container_image_fails_naming_it(statefulset):
    with pytest.raises(CheckFailed) as failed:
        etcd_image(management(json.dumps(statefulset)), KAMAJI_ETCD, kamaji_provided=False)

    assert str(failed.value) == "StatefulSet kamaji-system/kamaji-etcd has no etcd container image"


def test_the_image_is_the_etcd_containers_not_a_sidecars_listed_first():
    statefulset = pod_template(
        {"name": "metrics", "image": "busybox:1.37"}, {"name": "etcd", "image": "quay.io/coreos/etcd:v3.6.12"}
    )

    assert etcd_image(management(json.dumps(statefulset)), KAMAJI_ETCD, kamaji_provided=False) == (
        "quay.io/coreos/etcd:v3.6.12"
    )


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (marker_found(Read("/p/", 1, "Error: x\n"), "/p/k"), "cannot read /p/: Error: x"),
        (marker_found(Read("/p/", 0, "/p/other\n"), "/p/k"), "/p/k is not under /p/ (etcd listed 1 key there)"),
        (marker_absent(Read("/q/", 1, "Error: x\n"), "configmaps/ns/m"), "cannot read /q/: Error: x"),
        (refused(Read("/q/", 1, "Error: x\n")), "/q/ failed without etcdserver: permission denied: Error: x"),
        (
            refused(Read("/q/", 0, "")),
            "/q/ answered with no keys instead of etcdserver: permission denied; an empty answer is no proof "
            "(is etcd auth enabled?)",
        ),
        (
            identity(Read("etcd user u", 1, "Error: etcdserver: permission denied\n"), "u", "tenants/c", None),
            "the certificate tenants/c is another etcd user (`openssl x509 -noout -subject` of its server.crt), not "
            "u, the user this check inspects (Kamaji's status.storage.setup.user): the tenant's API server acts as "
            "that user",
        ),
        (
            identity(Read("etcd user u", 1, "Error: etcdserver: user name not found\n"), "u", "tenants/c", "u"),
            "the certificate tenants/c's CN u is no etcd user at all",
        ),
    ],
    ids=[
        "marker-unread", "marker-missing", "other-prefix-unread", "refused-otherwise", "empty-answer",
        "certificate-of-another-user", "certificate-cn-is-the-user-etcd-lacks",
    ],
)  # fmt: skip
def test_every_failed_verdict_is_false_with_its_whole_reason(verdict, expected):
    assert verdict == (False, expected)


def test_a_schema_no_other_tenant_has_passes_naming_it():
    others = [tenant("tenant-b", "tenants_tenant_b")]

    assert shared_schema(tenant("tenant-a", "tenants_tenant_a"), others) == (
        True,
        "no other tenant has dataStoreSchema tenants_tenant_a",
    )


def test_a_control_plane_naming_no_user_is_read_by_its_uid():
    # Kamaji's last fallback for the etcd user, before it sets status.storage.setup.user.
    assert tenant_user({"metadata": {"uid": USER}, "spec": {}, "status": {}}) == USER


def test_the_first_member_is_named_with_its_own_port_when_the_others_listen_elsewhere():
    store = {
        "metadata": {"name": "x"},
        "spec": {"endpoints": ["etcd-0.etcd.ns.svc.cluster.local:2379", "etcd-1.etcd.ns.svc.cluster.local:32379"]},
    }

    member = first_member(store)

    assert (member.name, member.port) == ("etcd-0", 2379)


class Deleting:
    """A runner recording each kubectl call and answering every one with the same exit code and stderr."""

    def __init__(self, code: int, stderr: str):
        self.code, self.stderr, self.calls = code, stderr, []

    def run(self, argv, stdin=None, timeout=None, **_) -> CommandResult:
        self.calls.append(list(argv))
        return CommandResult(tuple(argv), self.code, "", self.stderr)


FORBIDDEN = 'Error from server (Forbidden): pods "validate-datastore-abc" is forbidden\n'
UNREACHABLE = "Unable to connect to the server: dial tcp 172.18.0.2:6443: i/o timeout\n"
REMOVE_BY_HAND = (
    "remove it with `kubectl --kubeconfig kubeconfigs/management.kubeconfig -n kamaji-system delete pod "
    "validate-datastore-abc`"
)


@pytest.mark.parametrize(
    ("code", "stderr", "warnings"),
    [
        (0, "", []),
        (
            1,
            FORBIDDEN,
            [
                "management: pod kamaji-system/validate-datastore-abc was not deleted (Error from server (Forbidden): "
                f'pods "validate-datastore-abc" is forbidden); {REMOVE_BY_HAND}'
            ],
        ),
        (
            1,
            UNREACHABLE,
            [
                "management: pod kamaji-system/validate-datastore-abc was not deleted (cannot reach the management "
                f"API server: Unable to connect to the server: dial tcp 172.18.0.2:6443: i/o timeout); {REMOVE_BY_HAND}"
            ],
        ),
    ],
    ids=["deleted", "refused", "unreachable"],
)
def test_what_the_check_made_is_deleted_without_waiting_or_left_with_the_command_to_delete_it(code, stderr, warnings):
    runner = Deleting(code, stderr)
    lab = SimpleNamespace(
        management=Kubectl(runner, Path("/nonexistent/management.kubeconfig"), "management"), warnings=[]
    )

    remove(lab, "pod", "kamaji-system", "validate-datastore-abc")

    assert [call[call.index("delete") :] for call in runner.calls] == [
        ["delete", "pod", "validate-datastore-abc", "-n", "kamaji-system", "--ignore-not-found", "--wait=false"]
    ]
    assert lab.warnings == warnings


OWN_RANGE = "[/tenants_tenant_a/, /tenants_tenant_a0)"


@pytest.mark.parametrize(
    ("roles", "verdicts"),
    [
        ({}, [(False, "etcd user uid-a does not exist")]),
        (
            {"tenants_tenant_a": [Permission("READWRITE", b"/tenants_tenant_a/", b"/tenants_tenant_a0")]},
            [(True, f"etcd user uid-a (roles: tenants_tenant_a) reads and writes exactly {OWN_RANGE}")],
        ),
        (
            {"tenants_tenant_a": [Permission("READWRITE", b"/tenants_tenant_", b"/tenants_tenant_b")]},
            [
                (
                    False,
                    "etcd user uid-a's role tenants_tenant_a grants READWRITE on "
                    f"[/tenants_tenant_, /tenants_tenant_b): beyond {OWN_RANGE} it can read and write "
                    "[/tenants_tenant_, /tenants_tenant_a/), "
                    "[/tenants_tenant_a0, /tenants_tenant_b)",
                )
            ],
        ),
        (
            {"tenants_tenant_a": [Permission("READ", b"/tenants_tenant_b/", b"/tenants_tenant_b0")]},
            [
                (
                    False,
                    "etcd user uid-a's role tenants_tenant_a grants READ on [/tenants_tenant_b/, /tenants_tenant_b0): "
                    f"all of it outside {OWN_RANGE}, including tenant tenant-b's /tenants_tenant_b/",
                ),
                (False, f"etcd user uid-a can neither read nor write {OWN_RANGE} of its own range"),
            ],
        ),
        (
            {"tenants_tenant_a": [Permission("READ", b"/tenants_tenant_a/", b"/tenants_tenant_a0")]},
            [(False, f"etcd user uid-a cannot write {OWN_RANGE} of its own range")],
        ),
    ],
    ids=["no-such-user", "exactly-its-range", "on-both-sides-of-its-range", "only-elsewhere", "read-only"],
)
def test_each_verdict_on_the_users_own_reach_is_whole(roles, verdicts):
    found = Survey({"uid-a": list(roles)} if roles else {}, roles, [])

    assert own_reach(found, "uid-a", "tenants_tenant_a", {"tenants_tenant_b": "tenant tenant-b"}) == verdicts


class OneControlPlane:
    """A runner answering only `kubectl get tenantcontrolplanes.kamaji.clastix.io tenant-b -n tenant-b-ns -o json`,
    with tenant-b moving from DataStore default to tenant-b-etcd; anything else is not found."""

    def run(self, argv, stdin=None, timeout=None, **_) -> CommandResult:
        asked = list(argv[argv.index("get") :])
        if asked != ["get", "tenantcontrolplanes.kamaji.clastix.io", "tenant-b", "-n", "tenant-b-ns", "-o", "json"]:
            return CommandResult(tuple(argv), 1, "", f"Error from server (NotFound): {' '.join(asked)}\n")
        tcp = {"spec": {"dataStore": "tenant-b-etcd"}, "status": {"storage": {"dataStoreName": "default"}}}
        return CommandResult(tuple(argv), 0, json.dumps(tcp), "")


def test_the_datastores_of_another_tenant_are_read_from_its_own_control_plane():
    lab = SimpleNamespace(management=Kubectl(OneControlPlane(), Path("/nonexistent/management.kubeconfig"), "m"))
    other = dataclasses.replace(tenant("tenant-b", "tenants_tenant_b"), namespace="tenant-b-ns")

    assert stores_of(lab, other) == {"default", "tenant-b-etcd"}
