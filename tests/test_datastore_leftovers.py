"""A tenant moved between two real etcd DataStores as Kamaji's migrate Job moves it (tests/datastores.py), and
`python -m snapshot.leftovers`, which removes what the move left in the DataStore the tenant no longer uses."""

from __future__ import annotations

import subprocess

import pytest

from tests.datastores import (
    DEDICATED,
    clean,
    dedicated_datastore,
    everything,
    kamaji_migrate,
    kamaji_sets_up,
    on_the_dedicated_store,
    users_and_roles,
)
from tests.plan import ROOT
from tests.snapshot_etcd import etcdctl, root
from tests.test_validation import SCHEMAS, USERS, ok, recorded
from validation.checks.datastore import etcd_of, same_etcd

A, B = SCHEMAS["tenant-a"], SCHEMAS["tenant-b"]


def of(keys: dict[bytes, bytes], schema: str) -> dict[bytes, bytes]:
    return {key: value for key, value in keys.items() if key.startswith(f"/{schema}/".encode())}


def test_a_finished_move_leaves_identical_keys_in_the_target_and_after_clean_up_nothing_of_it_in_the_source(stores):
    before = everything(stores.shared)
    # pulumi up: the spec names the dedicated DataStore; Kamaji sets the tenant up there and runs its Job.
    stores.name("tenant-a", spec=DEDICATED, state="Migrating")
    kamaji_sets_up(stores.dedicated, "tenant-a")
    kamaji_migrate(stores.shared, stores.dedicated, A)
    assert clean(stores, "tenant-a")[0] == 1  # still moving: refused
    assert everything(stores.shared) == before
    stores.name("tenant-a", status=DEDICATED, state="Ready")  # the Job completed; Kamaji points the tenant there

    code, said, problems = clean(stores)

    assert code == 0, problems
    moved = everything(stores.dedicated)
    assert moved == of(before, A) and moved  # byte for byte, and nothing else
    assert everything(stores.shared) == {key: value for key, value in before.items() if key not in moved}
    assert users_and_roles(stores.shared) == ({"root", USERS["tenant-b"]}, {"root", B})
    assert users_and_roles(stores.dedicated) == ({"root", USERS["tenant-a"]}, {"root", A})
    assert said == f"tenant tenant-a: removed from DataStore default: {len(moved)} keys, etcd user " \
        f"{USERS['tenant-a']}, role {A}\n"
    # Run again (make up each time): nothing left to remove, nothing else touched.
    assert clean(stores) == (0, "", "")
    assert everything(stores.dedicated) == moved


def test_a_half_copied_target_is_cleaned_on_undo_and_the_source_left_whole(stores):
    on_the_dedicated_store(stores, "tenant-b")
    source, shared = everything(stores.dedicated), everything(stores.shared)
    # Back to the shared DataStore: Kamaji sets tenant-b up there, and its Job dies after one put.
    stores.name("tenant-b", spec="default", state="Migrating")
    kamaji_sets_up(stores.shared, "tenant-b")
    kamaji_migrate(stores.dedicated, stores.shared, B, puts=1)
    assert len(of(everything(stores.shared), B)) == 1

    code, _, problems = clean(stores, "tenant-b")
    assert code == 1 and "Kamaji is moving it to DataStore default (its status is Migrating)" in problems
    assert len(of(everything(stores.shared), B)) == 1

    stores.name("tenant-b", spec=DEDICATED, state="Ready")  # undo: the key back to dedicated, make up
    code, said, problems = clean(stores, "tenant-b")

    assert code == 0, problems
    assert everything(stores.shared) == shared  # tenant-a's keys as they were, nothing of tenant-b's
    assert users_and_roles(stores.shared) == ({"root", USERS["tenant-a"]}, {"root", A})
    assert everything(stores.dedicated) == source
    assert users_and_roles(stores.dedicated) == ({"root", USERS["tenant-b"]}, {"root", B})
    assert said == f"tenant tenant-b: removed from DataStore default: 1 key, etcd user {USERS['tenant-b']}, " \
        f"role {B}\n"


@pytest.mark.parametrize(
    ("state", "why"),
    [
        ({"spec": DEDICATED}, "it is on DataStore default and its spec names team-a-store: a move has not finished"),
        ({"state": "Migrating"}, "Kamaji is moving it to DataStore default (its status is Migrating)"),
        ({"job": True}, "Kamaji's migrate Job kamaji-system/migrate-0001 still runs"),
    ],
    ids=["spec-and-status-differ", "kamaji-says-migrating", "migrate-job-active"],
)
def test_nothing_is_deleted_while_the_tenant_moves(stores, state, why):
    state = dict(state)  # the parameter itself serves every run of the test in this process (mutmut's are several)
    kamaji_sets_up(stores.dedicated, "tenant-a")
    kamaji_migrate(stores.shared, stores.dedicated, A)
    if state.pop("job", False):
        job = {"metadata": {"name": "migrate-0001", "namespace": "kamaji-system"}, "status": {"active": 1}}
        stores.jobs.append(job)
        stores.name("tenant-b", spec=DEDICATED, status=DEDICATED)  # the dedicated store is a lab store
    stores.name("tenant-a", **state)
    before = everything(stores.shared), everything(stores.dedicated)

    code, said, problems = clean(stores, "tenant-a")

    assert (code, said) == (1, "")
    assert problems == f"snapshot.leftovers: tenant tenant-a: nothing deleted: {why}; run `make datastore-clean " \
        "TENANT=tenant-a` once it is on one DataStore\n"
    assert (everything(stores.shared), everything(stores.dedicated)) == before


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"spec": "default"}, "its TenantControlPlane names DataStore default now"),
        ({"state": "Migrating"}, f"Kamaji is moving it to DataStore {DEDICATED} (its status is Migrating)"),
        ({"job": True}, "Kamaji's migrate Job kamaji-system/migrate-0002 still runs"),
    ],
    ids=["named-again", "kamaji-says-migrating", "migrate-job-active"],
)
def test_a_move_started_after_the_first_read_stops_the_delete(stores, change, why):
    """A `make up` run meanwhile turns the tenant back toward the store about to be cleaned: read again just before
    the delete, the tenant is left as it is."""
    stores.name("tenant-a", spec=DEDICATED, status=DEDICATED)
    kamaji_sets_up(stores.dedicated, "tenant-a")
    kamaji_migrate(stores.shared, stores.dedicated, A)
    reads = []

    def tcp_now(command):
        reads.append(command)
        if len(reads) > 1:  # every read after the first, which decides what to clean
            if change.get("job") and not stores.jobs:
                stores.jobs.append(
                    {"metadata": {"name": "migrate-0002", "namespace": "kamaji-system"}, "status": {"active": 1}})
            stores.name("tenant-a", **{key: value for key, value in change.items() if key != "job"})
        return ok(stores.tcps["tenant-a"])

    stores.lab.on("management", r"^get tenantcontrolplanes\.kamaji\.clastix\.io tenant-a -n tenants -o json", tcp_now)
    before = everything(stores.shared)

    code, said, problems = clean(stores, "tenant-a")

    assert (code, said) == (1, "")
    assert problems == f"snapshot.leftovers: tenant tenant-a: nothing deleted: {why}; run `make datastore-clean " \
        "TENANT=tenant-a` once it is on one DataStore\n"
    assert everything(stores.shared) == before


def test_nothing_is_deleted_when_the_datastore_the_tenant_uses_holds_none_of_its_keys(stores):
    kamaji_sets_up(stores.dedicated, "tenant-a")
    kamaji_migrate(stores.shared, stores.dedicated, A)
    stores.name("tenant-a", spec=DEDICATED, status=DEDICATED)
    with root(stores.dedicated) as client:
        etcdctl(client, "del", f"/{A}/", "--prefix")
    before = everything(stores.shared)

    code, _, problems = clean(stores, "tenant-a")

    assert code == 1
    assert f"DataStore {DEDICATED}, the one it uses, holds none of its keys under /{A}/" in problems
    assert everything(stores.shared) == before


def test_a_datastore_no_lab_tenant_names_is_never_opened(stores, tmp_path):
    """Only the platform's DataStore and those the lab's TenantControlPlanes name are the lab's: with every tenant
    on the shared one, nothing is even read."""
    kamaji_sets_up(stores.dedicated, "tenant-a")
    kamaji_migrate(stores.shared, stores.dedicated, A)
    before = everything(stores.dedicated), everything(stores.shared)

    assert clean(stores) == (0, "", "")
    assert (everything(stores.dedicated), everything(stores.shared)) == before
    assert not (tmp_path / "kubectl.log").exists()  # no port-forward to either


def test_what_another_tenant_in_that_datastore_also_uses_is_left_alone(stores):
    kamaji_sets_up(stores.dedicated, "tenant-a")
    kamaji_migrate(stores.shared, stores.dedicated, A)
    stores.name("tenant-a", spec=DEDICATED, status=DEDICATED)
    stores.tcps["tenant-b"]["spec"]["dataStoreSchema"] = A  # a lab gone wrong: tenant-b names tenant-a's schema
    stores.tcps["tenant-b"]["status"]["storage"]["setup"]["schema"] = A
    before = everything(stores.shared)

    code, said, _ = clean(stores, "tenant-a")

    assert code == 0
    assert said == f"tenant tenant-a: DataStore default left as it is: another tenant there uses schema {A} " \
        "(tenant-b)\n"
    assert everything(stores.shared) == before


# Another DataStore object for the tenant's etcd: by the same members, or by its client Service rather than its pods
# (the chart's two endpoint forms: clastix/kamaji-etcd charts/kamaji-etcd/templates@92f31f0). It is no other store:
# deleting the tenant's keys there would delete its live data.
@pytest.mark.parametrize("endpoints", [None, ["https://Kamaji-etcd-client.kamaji-system.svc:2379"]],
                         ids=["same-members", "client-service"])
def test_a_datastore_that_names_the_same_etcd_as_the_tenants_is_left_alone(stores, endpoints):
    alias = recorded("datastore-default.json")
    alias["metadata"]["name"] = "default-again"
    if endpoints:
        alias["spec"]["endpoints"] = endpoints
    stores.lab.on("management", r"^get datastores\.kamaji\.clastix\.io default-again ", ok(alias))
    stores.name("tenant-b", spec="default-again", status="default-again")
    before = everything(stores.shared)

    code, said, problems = clean(stores, "tenant-a")

    assert code == 0, problems
    assert said == "tenant tenant-a: DataStore default-again left as it is: it names an etcd member of DataStore " \
        "default, which the tenant uses\n"
    assert everything(stores.shared) == before


def another_driver(stores, name: str) -> None:
    """A DataStore on PostgreSQL, as a provided Kamaji may have (clastix/kamaji api/v1alpha1/datastore_types.go
    @26.8.2-edge: Driver), which no etcd client can open."""
    store = recorded("datastore-default.json")
    store["metadata"]["name"] = name
    store["spec"] |= {"driver": "PostgreSQL", "endpoints": ["postgres.example.com:5432"]}
    stores.lab.on("management", rf"^get datastores\.kamaji\.clastix\.io {name} ", ok(store))


def test_a_datastore_of_another_driver_is_never_opened_and_fails_no_tenant(stores, tmp_path):
    # tenant-b on a PostgreSQL DataStore; tenant-a moved to the dedicated etcd, its leftovers in the shared one.
    another_driver(stores, "postgres")
    stores.name("tenant-b", spec="postgres", status="postgres")
    stores.name("tenant-a", spec=DEDICATED, status=DEDICATED)
    kamaji_sets_up(stores.dedicated, "tenant-a")
    kamaji_migrate(stores.shared, stores.dedicated, A)

    code, said, problems = clean(stores)

    assert code == 0, problems
    assert said.startswith("tenant tenant-a: removed from DataStore default: ")
    assert not of(everything(stores.shared), A)
    assert "postgres" not in (tmp_path / "kubectl.log").read_text()


def test_another_tenants_datastore_that_cannot_be_reached_is_a_warning_for_a_tenant_never_there(stores):
    unreachable = dedicated_datastore()
    unreachable["spec"]["endpoints"] = ["https://10.9.8.7:2379"]  # outside the cluster: no member to forward to
    stores.lab.on("management", rf"^get datastores\.kamaji\.clastix\.io {DEDICATED} ", ok(unreachable))
    stores.name("tenant-b", spec=DEDICATED, status=DEDICATED)
    before = everything(stores.shared)

    code, said, problems = clean(stores, "tenant-a")

    assert code == 0, problems
    assert said == f"tenant tenant-a: WARNING: DataStore {DEDICATED}, another tenant's where this one never was, " \
        f"could not be searched: DataStore {DEDICATED}'s endpoint 10.9.8.7:2379 is no cluster DNS name " \
        "(<pod>.<service>.<namespace>.svc... or <service>.<namespace>.svc...): the lab cannot tell which etcd it is\n"
    assert everything(stores.shared) == before


ENDPOINT_PAIRS = [
    ("kamaji-etcd-0.kamaji-etcd.kamaji-system.svc.cluster.local:2379", "kamaji-etcd-client.kamaji-system.svc:2379",
     True),
    ("https://etcd-a-0.etcd-a.store-of-a.svc.cluster.local.:2379", "ETCD-A-1.etcd-a.store-of-a.svc:2379", True),
    ("kamaji-etcd-0.kamaji-etcd.kamaji-system.svc:2379", "etcd-a-0.etcd-a.store-of-a.svc:2379", False),
    ("https://10.0.0.5:2379", "10.0.0.5:2379", True),
    ("https://10.0.0.5:2379", "10.0.0.5:2380", False),
    ("etcd.example.com:2379", "etcd.example.com", True),
    ("https://10.0.0.5:2379/", "10.0.0.5:2379", True),  # a URL's path names no other etcd
    ("https://[fd00::1]", "[FD00::1]:2379", True),  # an IPv6 literal's colons are no port
    ("[fd00::1]:2379", "[fd00::1]:2380", False),
]  # fmt: skip


@pytest.mark.parametrize(("endpoint", "other", "same"), ENDPOINT_PAIRS)
def test_two_endpoints_are_one_etcd_by_namespace_in_cluster_and_by_host_and_port_outside(endpoint, other, same):
    assert same_etcd({"spec": {"endpoints": [endpoint]}}, {"spec": {"endpoints": [other]}}) is same


def test_the_move_check_names_each_etcd_as_the_clean_up_does():
    """scripts/check-datastore-move.sh refuses a move onto the tenant's own etcd by the same names (its member)."""
    script = (ROOT / "scripts" / "check-datastore-move.sh").read_text()
    member = script[script.index("member() {"):script.index("\n}\n", script.index("member() {")) + 3]
    endpoints = sorted({endpoint for pair in ENDPOINT_PAIRS for endpoint in pair[:2]})
    named = subprocess.run(["bash", "-c", member + 'for e in "$@"; do member "$e"; done', "member", *endpoints],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert named == [etcd_of(endpoint) for endpoint in endpoints]


def test_a_datastore_that_cannot_be_reached_fails_the_tenant_and_deletes_nothing(stores):
    stores.name("tenant-a", spec=DEDICATED, status=DEDICATED)
    kamaji_sets_up(stores.dedicated, "tenant-a")
    kamaji_migrate(stores.shared, stores.dedicated, A)
    stores.lab.on("management", r"^get secret kamaji-etcd-client-certs -n kamaji-system -o json", ok({"data": {}}))
    before = everything(stores.shared), everything(stores.dedicated)

    code, said, problems = clean(stores)

    assert (code, said) == (1, "")
    # tenant-b, on that DataStore, is looked for in the dedicated one only once its own holds its keys.
    assert problems == "".join(
        f"snapshot.leftovers: tenant {tenant}: failed: secret kamaji-system/kamaji-etcd-client-certs has no tls.crt "
        "(the DataStore's client.crt); run it again\n" for tenant in ("tenant-a", "tenant-b")
    )
    assert (everything(stores.shared), everything(stores.dedicated)) == before
