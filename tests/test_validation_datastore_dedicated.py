"""The `datastore` check with two real etcd DataStores (tests/datastores.py): a tenant on a DataStore of its own
passes only when nothing of anyone else is in it and, after a move, nothing of it is left in the other one."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.datastores import (
    DEDICATED,
    DEDICATED_NAMESPACE,
    DEDICATED_RELEASE,
    TwoStores,
    clean,
    dedicated_datastore,
    kamaji_migrate,
    kamaji_sets_up,
    on_the_dedicated_store,
)
from tests.etcd_pods import ETCD_IMAGE, EtcdPods, chart_secrets, tenant_secrets
from tests.test_validation import SCHEMAS, USERS, error, healthy_lab, ok, recorded, result, validate
from validation.checks.datastore import Member, Read, absent, first_member, nothing_left, only_its_keys
from validation.results import CheckFailed

A, B = SCHEMAS["tenant-a"], SCHEMAS["tenant-b"]
SHARED_ROOT = "DataStore default's root credentials kamaji-system/kamaji-etcd-client-certs"
OWN_ROOT = f"the DataStore's root credentials {DEDICATED_NAMESPACE}/{DEDICATED_RELEASE}-client-certs"


def checked(stores: TwoStores, shared_store: dict | None = None, unreadable: str = "") -> dict:
    """The check's report, each tenant's API server writing to and its certificate issued by the CA of the
    DataStore its TenantControlPlane's status names; shared_store: DataStore default as the cluster has it;
    unreadable: a tenant whose TenantControlPlane the management cluster answers for only once (its own check)."""
    on = {name: stores.server(stores.tcps[name]["status"]["storage"]["dataStoreName"]) for name in SCHEMAS}
    secrets = {}
    for name, server in on.items():
        secrets |= tenant_secrets(server, {name: USERS[name]})
    secrets |= chart_secrets(stores.shared)
    secrets |= {(DEDICATED_NAMESPACE, name.replace("kamaji-etcd", DEDICATED_RELEASE)): files
                for (_, name), files in chart_secrets(stores.dedicated).items()}  # fmt: skip
    members = {endpoint: stores.dedicated.url for endpoint in dedicated_datastore()["spec"]["endpoints"]}
    pods = EtcdPods(stores.shared, SCHEMAS, secrets, members={f"https://{m}": url for m, url in members.items()},
                    homes=on)  # fmt: skip
    lab = healthy_lab()
    pods.install(lab)
    for name, tcp in stores.tcps.items():
        refused = error("Error from server (InternalError): an error on the server has prevented the request\n")
        answers = [ok(json.dumps(tcp))] + ([refused] if name == unreadable else [])
        lab.on("management", rf"^get tenantcontrolplanes\.kamaji\.clastix\.io {name} -n tenants ", *answers)
    lab.on("management", rf"^get datastores\.kamaji\.clastix\.io {DEDICATED} ", ok(json.dumps(dedicated_datastore())))
    if shared_store:
        lab.on("management", r"^get datastores\.kamaji\.clastix\.io default ", ok(json.dumps(shared_store)))
    statefulset = {"spec": {"template": {"spec": {"containers": [{"name": "etcd", "image": ETCD_IMAGE}]}}}}
    own_etcd = rf"^get statefulset {DEDICATED_RELEASE} -n {DEDICATED_NAMESPACE} "
    lab.on("management", own_etcd, ok(json.dumps(statefulset)))
    return validate(lab, "--only", "datastore")[1]


def test_a_moved_tenant_passes_only_once_the_old_datastore_holds_nothing_of_it(stores):
    stores.name("tenant-a", spec=DEDICATED, status=DEDICATED)  # moved: Kamaji's Job done, no clean-up yet
    kamaji_sets_up(stores.dedicated, "tenant-a")
    kamaji_migrate(stores.shared, stores.dedicated, A)

    before = checked(stores)

    found = result(before, "datastore", "tenant-a")
    assert found["status"] == "fail"
    assert f"{SHARED_ROOT}: DataStore default, which tenant tenant-a no longer uses, still holds 2 keys under /{A}/" \
        in found["reason"]
    clean_up = "`make datastore-clean TENANT=tenant-a` removes it"
    assert f"still has etcd user {USERS['tenant-a']}: {clean_up}" in found["reason"]
    assert f"still has etcd role {A}" in found["reason"]
    assert result(before, "datastore", "tenant-b")["status"] == "pass"

    assert clean(stores)[0] == 0
    after = checked(stores)

    for tenant in SCHEMAS:
        assert result(after, "datastore", tenant)["status"] == "pass", result(after, "datastore", tenant)["reason"]
    evidence = result(after, "datastore", "tenant-a")["evidence"]
    assert f"{OWN_ROOT}: etcd authentication is enabled" in evidence
    assert f"DataStore {DEDICATED} has no etcd user or role but root and this tenant's" in evidence
    assert f"every key of DataStore {DEDICATED} is under /{A}/" in evidence
    assert f"{SHARED_ROOT}: no key under /{A}/; no etcd user {USERS['tenant-a']}; no etcd role {A}" in evidence
    # tenant-b, on the shared DataStore, is searched for in tenant-a's too.
    searched = f"DataStore {DEDICATED}'s root credentials {DEDICATED_NAMESPACE}/{DEDICATED_RELEASE}-client-certs"
    assert f"{searched}: no key under /{B}/; no etcd user {USERS['tenant-b']}; no etcd role {B}" in (
        result(after, "datastore", "tenant-b")["evidence"]
    )


STRANGERS = {
    "another-tenants-user": (
        lambda server: server.admin("user", "add", "--no-password=true", USERS["tenant-b"]),
        f"DataStore {DEDICATED} is this tenant's own, yet it also has etcd user {USERS['tenant-b']} (tenant tenant-b)",
    ),
    "another-tenants-role": (
        lambda server: server.admin("role", "add", B),
        f"DataStore {DEDICATED} is this tenant's own, yet it also has role {B}",
    ),
    "another-tenants-prefix": (
        lambda server: server.put(f"/{B}/configmaps/default/theirs"),
        f"DataStore {DEDICATED} is this tenant's own, yet 1 of its keys are outside /{A}/, "
        f"e.g. /{B}/configmaps/default/theirs",
    ),
}


@pytest.mark.parametrize(("add", "why"), STRANGERS.values(), ids=STRANGERS.keys())
def test_anything_of_another_tenant_in_a_dedicated_datastore_fails(stores, add, why):
    on_the_dedicated_store(stores, "tenant-a")
    add(stores.dedicated)

    found = result(checked(stores), "datastore", "tenant-a")

    assert found["status"] == "fail"
    assert f"{OWN_ROOT}: {why}" in found["reason"]


@pytest.mark.parametrize(
    ("state", "why"),
    [
        ("Migrating", f"Kamaji is moving it to DataStore {DEDICATED} (its status is Migrating)"),
        ("Ready", f"it is on DataStore default and its spec names {DEDICATED}: a move has not finished"),
    ],
    ids=["kamaji-migrating", "spec-and-status-differ"],
)
def test_a_tenant_between_two_datastores_fails_saying_why(stores, state, why):
    stores.name("tenant-a", spec=DEDICATED, state=state)

    report = checked(stores)

    found = result(report, "datastore", "tenant-a")
    assert found == found | {"status": "fail", "reason": f"tenant tenant-a is not on one DataStore: {why}"}


def test_another_lab_datastore_that_cannot_be_searched_leaves_the_result_unproven(stores):
    on_the_dedicated_store(stores, "tenant-a")
    shared = recorded("datastore-default.json")
    del shared["spec"]["tlsConfig"]["clientCertificate"]["certificate"]

    found = result(checked(stores, shared_store=shared), "datastore", "tenant-a")

    assert found["status"] == "unproven"
    assert found["reason"].startswith(
        "DataStore default could not be searched for what tenant tenant-a left: DataStore default names no secret "
        "for client.crt (root credentials); without it that part of the proof was not looked at. What was seen: "
    )


# --- verdicts on etcdctl's answers, as etcdctl 3.5.1 printed them against the real server --------

WARNING = (
    '{"level":"warn","ts":"2026-12-06T10:50:01.170Z","logger":"etcd-client","caller":"v3/retry_interceptor.go:62",'
    '"msg":"retrying of unary invoker failed","target":"etcd-endpoints://0xc000310a80/127.0.0.1:60671","attempt":0}'
)


def test_keys_left_under_the_prefix_fail_and_an_empty_listing_passes():
    listed = Read(f"/{A}/", 0, f"/{A}/configmaps/kube-system/kube-root-ca.crt\n")
    assert nothing_left(listed, "default", "tenant-a") == (
        False,
        f"DataStore default, which tenant tenant-a no longer uses, still holds 1 key under /{A}/, e.g. "
        f"/{A}/configmaps/kube-system/kube-root-ca.crt: `make datastore-clean TENANT=tenant-a` removes them",
    )
    assert nothing_left(Read(f"/{A}/", 0, f"{WARNING}\n"), "default", "tenant-a") == (True, f"no key under /{A}/")
    unreadable = Read(f"/{A}/", 1, "Error: context deadline exceeded\n")
    assert nothing_left(unreadable, "default", "tenant-a") == (False, f"cannot read /{A}/: Error: context deadline "
                                                               "exceeded")


@pytest.mark.parametrize(
    ("output", "code", "verdict"),
    [
        ("Error: etcdserver: user name not found\n", 1, (True, "no etcd user x")),
        ("Error: etcdserver: role name not found\n", 1, (True, "no etcd user x")),
        # not seen is not gone
        ("Error: etcdserver: permission denied\n", 1,
         (False, "cannot read etcd user x: Error: etcdserver: permission denied")),
        ('{"header":{"revision":7},"roles":["x"]}\n', 0,
         (False, "DataStore default, which tenant tenant-a no longer uses, still has etcd user x: "
                 "`make datastore-clean TENANT=tenant-a` removes it")),
    ],
    ids=["user-gone", "role-gone", "refused", "present"],
)
def test_only_etcds_not_found_proves_a_user_or_role_gone(output, code, verdict):
    not_found = "etcdserver: role name not found" if "role" in output else "etcdserver: user name not found"
    assert absent(Read("etcd user x", code, output), not_found, "default", "tenant-a") == verdict


def test_every_key_of_an_own_datastore_is_under_the_prefix_and_client_warnings_are_no_keys():
    own = f"/{A}/configmaps/a\n{WARNING}\n\n/{A}/secrets/b\n"
    assert only_its_keys(Read("every key", 0, own), f"/{A}/", DEDICATED).good
    look_alike = f"/{A}/configmaps/a\n/{A}x/configmaps/b\n"
    outside = only_its_keys(Read("every key", 0, look_alike), f"/{A}/", DEDICATED)
    assert outside == (False, f"DataStore {DEDICATED} is this tenant's own, yet 1 of its keys are outside /{A}/, "
                       f"e.g. /{A}x/configmaps/b")
    unreadable = only_its_keys(Read("every key", 1, "Error: permission denied\n"), f"/{A}/", DEDICATED)
    assert unreadable == (False, f"cannot read every key of DataStore {DEDICATED}: Error: permission denied")


@pytest.mark.parametrize(
    "key",
    ['{"level":"warn"}', '{"msg":"retrying of unary invoker failed"}', '["level","msg"]', '"level msg"', "{}", "42"],
    ids=["level-only", "msg-only", "list", "string", "empty-object", "number"],
)
def test_a_key_that_parses_as_json_is_still_a_key_unless_it_is_a_log_line_with_level_and_msg(key):
    # etcd keys are any bytes; only etcdctl's own log lines (an object with both) are skipped.
    listed = Read("every key", 0, f"/{A}/configmaps/a\n{WARNING}\n{key}\n")
    assert only_its_keys(listed, f"/{A}/", DEDICATED) == (
        False, f"DataStore {DEDICATED} is this tenant's own, yet 1 of its keys are outside /{A}/, e.g. {key}")


def test_another_lab_datastore_whose_etcd_cannot_be_found_leaves_the_result_unproven(stores):
    on_the_dedicated_store(stores, "tenant-a")
    shared = recorded("datastore-default.json")
    shared["spec"]["endpoints"] = ["10.96.0.10:2379"]  # no cluster DNS name: no StatefulSet to take the image of

    found = result(checked(stores, shared_store=shared), "datastore", "tenant-a")

    assert found["status"] == "unproven"
    assert found["reason"].startswith(
        "DataStore default could not be searched for what tenant tenant-a left: DataStore default's endpoint "
        "10.96.0.10:2379 is no cluster DNS name"
    )


keys = st.lists(st.text(st.characters(codec="ascii", exclude_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85"), max_size=12),
                max_size=5)


@given(own=keys, foreign=st.text(st.characters(codec="ascii", exclude_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85"),
                                 min_size=1, max_size=12), warnings=st.integers(0, 2))
def test_any_key_outside_the_prefix_fails_and_only_etcdctls_warnings_are_skipped(own, foreign, warnings):
    prefix = f"/{A}/"
    lines = [prefix + key for key in own] + [WARNING] * warnings
    assert only_its_keys(Read("every key", 0, "\n".join(lines) + "\n"), prefix, DEDICATED).good
    stranger = "/" + foreign if not ("/" + foreign).startswith(prefix) and foreign.strip() else f"/{B}/x"
    with_stranger = "\n".join([*lines, stranger]) + "\n"
    assert not only_its_keys(Read("every key", 0, with_stranger), prefix, DEDICATED).good


@given(st.lists(st.text(max_size=40), min_size=1, max_size=3))
def test_any_endpoints_give_a_member_named_in_the_first_or_a_clear_refusal(endpoints):
    store = {"metadata": {"name": "x"}, "spec": {"endpoints": endpoints}}
    try:
        member = first_member(store)
    except CheckFailed as refusal:
        assert "DataStore x" in str(refusal)
        return
    first = endpoints[0].split("://", 1)[-1]
    assert first.startswith(f"{member.name}.") and first.endswith(f":{member.port}")
    assert f".{member.namespace}.svc" in first


@pytest.mark.parametrize(
    ("endpoint", "member", "statefulset"),
    [
        ("etcd-a-2.etcd-a.store-of-a.svc.cluster.local:2379", Member("store-of-a", "pod", "etcd-a-2", 2379), "etcd-a"),
        ("https://etcd-a-client.store-of-a.svc.cluster.local:2379",
         Member("store-of-a", "service", "etcd-a-client", 2379), None),
        # The same without the cluster domain, as a DataStore written by hand may name them.
        ("etcd-a-2.etcd-a.store-of-a.svc:2379", Member("store-of-a", "pod", "etcd-a-2", 2379), "etcd-a"),
        ("etcd-a-client.store-of-a.svc:2379", Member("store-of-a", "service", "etcd-a-client", 2379), None),
    ],
    ids=["headless-pod", "client-service", "headless-pod-no-domain", "client-service-no-domain"],
)  # fmt: skip
def test_kamaji_etcds_two_endpoint_forms_name_a_pod_of_its_statefulset_or_its_client_service(
    endpoint, member, statefulset
):
    found = first_member({"metadata": {"name": "x"}, "spec": {"endpoints": [endpoint]}})
    assert (found, found.statefulset) == (member, statefulset)


@pytest.mark.parametrize(
    "endpoint",
    [
        "etcd-a-client.store-of-a:2379",  # no ".svc": a name outside the cluster's DNS
        # A path naming another etcd: the endpoint is read up to its scheme only, never as the other one.
        "https://etcd-a-2.etcd-a.store-of-a.svc:2379/x://etcd-b-0.etcd-b.store-of-b.svc:2379",
    ],
)
def test_an_endpoint_that_is_no_cluster_dns_name_is_refused_naming_it_whole(endpoint):
    with pytest.raises(CheckFailed) as refusal:
        first_member({"metadata": {"name": "x"}, "spec": {"endpoints": [endpoint]}})

    assert str(refusal.value) == (
        f"DataStore x's endpoint {endpoint.split('://', 1)[-1]} is no cluster DNS name (<pod>.<service>.<namespace>"
        ".svc... or <service>.<namespace>.svc...): the lab cannot tell which etcd it is"
    )


def test_another_tenant_whose_control_plane_cannot_be_read_leaves_the_result_unproven(stores):
    on_the_dedicated_store(stores, "tenant-a")
    report = checked(stores, unreadable="tenant-b")

    found = result(report, "datastore", "tenant-a")
    assert found["status"] == "unproven"
    assert found["reason"].startswith("the DataStores named by tenant-b (")
