"""A tenant on a datastore of its own (issue 51): the config key, the plan of its own etcd, and the move.

Kamaji moves a tenant between DataStores when its spec.dataStore changes (clastix/kamaji
internal/resources/datastore/datastore_migrate.go@26.8.2-edge); the recorded answers below are its
TenantControlPlane status and its migration Job as that code and the Job controller report them.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.config import ConfigError, parse_settings
from components.platform import KAMAJI_ETCD_CHART
from tests.plan import changed, dev_config, plan
from tests.script_module import script_module
from tests.test_check_config import checked
from tests.test_config_modes import existing
from tests.test_scripts import MANAGEMENT_KUBECONFIG, reply
from tests.test_sleeping import deleted, replacements
from tests.test_tenant_versions import TCP, of_tenant

RELEASE = "kubernetes:helm.sh/v3:Release"
ISSUER = "kubernetes:cert-manager.io/v1:Issuer"


def lab(b_store: str | None = None, **overrides) -> dict:
    b = {"name": "tenant-b", **({"dataStore": b_store} if b_store else {})}
    return dev_config(tenants=[{"name": "tenant-a"}, b], observability=False, **overrides)


def config_error(**overrides) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(**overrides))
    return str(raised.value).splitlines()


def control_plane(plan_, tenant: str):
    (tcp,) = [r for r in of_tenant(plan_, tenant) if r.type == TCP]
    return tcp


# --- the key ----------------------------------------------------------------------------------------


def test_a_dedicated_tenant_names_a_datastore_of_its_own_and_the_others_keep_the_shared_one():
    settings = parse_settings(lab("dedicated"))
    a, b = settings.tenants
    assert (a.dedicated_data_store, b.dedicated_data_store) == (False, True)
    assert a.data_store == settings.kamaji_data_store
    assert b.data_store not in (a.data_store, settings.kamaji_data_store)
    assert b.name in b.data_store


def test_shared_is_the_default_and_can_be_written():
    assert parse_settings(lab("shared")) == parse_settings(lab())


def test_an_unknown_data_store_mode_is_refused_naming_key_and_value():
    lines = config_error(tenants=[{"name": "tenant-a", "dataStore": "own"}])
    assert "  kamaji-hami-lab:tenants[0].dataStore: 'own' is not one of 'shared', 'dedicated'" in lines


@pytest.mark.parametrize("length", [47, 48])
def test_a_dedicated_tenants_name_leaves_room_for_its_etcd_statefulset(length):
    # A StatefulSet's name is at most 52 characters (its pods' controller-revision-hash label adds 11 to it).
    tenant = {"name": "t" * length, "dataStore": "dedicated"}
    if length == 47:
        (settings,) = parse_settings(dev_config(tenants=[tenant], workersPerTenant=1)).tenants
        assert len(settings.data_store) == 52
        return
    (line,) = [line for line in config_error(tenants=[tenant], workersPerTenant=1) if "dataStore" in line]
    assert line == (
        "  kamaji-hami-lab:tenants[0].dataStore: 'dedicated' needs a tenant name of at most 47 characters: its etcd "
        f"StatefulSet 'etcd-{'t' * 48}' would be longer than Kubernetes allows (52)"
    )


PROVIDED = {"metallbAddressRange": "", "loadBalancer": "provided", "certManager": "provided", "kamaji": "provided"}


def test_with_a_provided_kamaji_a_tenant_may_still_have_its_own_datastore():
    # The kamaji-etcd chart needs only cert-manager and Kamaji's DataStore kind, which a provided Kamaji has.
    settings = parse_settings(dev_config(
        **existing(**PROVIDED, kamajiDataStore="shared-etcd"),
        tenants=[{"name": "tenant-a"}, {"name": "tenant-b", "dataStore": "dedicated"}],
    ))
    assert [t.data_store == "shared-etcd" for t in settings.tenants] == [True, False]


def test_a_dedicated_datastore_may_not_take_the_shared_ones_name():
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(
            **existing(**PROVIDED, kamajiDataStore="etcd-tenant-b"),
            tenants=[{"name": "tenant-a"}, {"name": "tenant-b", "dataStore": "dedicated"}],
        ))
    assert ("  kamaji-hami-lab:tenants[1].dataStore: 'dedicated' would name the tenant's own DataStore "
            "'etcd-tenant-b', which is kamajiDataStore, the shared one; rename the tenant or keep it shared"
            ) in str(raised.value).splitlines()


# --- the plan of its own etcd ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plans():
    """(up with tenant-b shared, preview of the move to dedicated, up dedicated, preview of the move back)."""
    shared_up = plan(lab(), preview=False)
    dedicated_up = plan(lab("dedicated"), preview=False)
    return shared_up, plan(lab("dedicated"), True, shared_up), dedicated_up, plan(lab(), True, dedicated_up)


def etcd_release(plan_):
    (release,) = [r for r in plan_.of_type(RELEASE) if r.inputs["chart"] == "kamaji-etcd"]
    return release


def test_its_etcd_is_pinned_as_the_one_kamajis_chart_bundles_and_named_in_its_control_plane(plans):
    _, _, up, _ = plans
    release = etcd_release(up)
    (kamaji,) = [r for r in up.of_type(RELEASE) if r.inputs["chart"] == "kamaji"]
    assert f"kamaji-etcd-{release.inputs['version']}" == KAMAJI_ETCD_CHART
    assert release.inputs["repositoryOpts"] == kamaji.inputs["repositoryOpts"]
    store = control_plane(up, "tenant-b").inputs["spec"]["dataStore"]
    values = release.inputs["values"]
    assert values["datastore"] == {"enabled": True, "name": store}
    assert release.inputs["namespace"] == values["fullnameOverride"] == store
    assert control_plane(up, "tenant-a").inputs["spec"]["dataStore"] == "default", "tenant-a stays shared"
    assert values["replicas"] == 1, "one tenant on one host"


def test_its_volume_is_what_the_preflight_counts_and_holds_its_quota(plans):
    preflight = script_module("preflight")
    _, _, up, _ = plans
    values = etcd_release(up).inputs["values"]
    size = values["persistentVolumeClaim"]["size"]
    assert size.endswith("Mi")
    volume = int(size.removesuffix("Mi")) << 20
    assert volume == preflight.SIZING_GIB["dedicated_datastore_disk"] * preflight.GIB
    assert int(values["quotaBackendBytes"]) < volume, "room beside the database for its write-ahead log"
    assert values["persistentVolumeClaim"]["retentionPolicyWhenDeleted"] == "Delete", "its data goes with it"


def test_its_certificates_come_from_a_ca_of_its_own(plans):
    _, _, up, _ = plans
    values = etcd_release(up).inputs["values"]
    assert values["selfSignedCertificates"] == {"enabled": False}, "cert-manager, not the chart's cfssl Jobs"
    issuer_ref = values["certManager"]["issuerRef"]
    assert values["certManager"]["enabled"] and issuer_ref["kind"] == "Issuer"
    (issuer,) = up.of_type(ISSUER)
    assert issuer.inputs["metadata"] == {"name": issuer_ref["name"], "namespace": values["fullnameOverride"]}
    assert issuer.inputs["spec"] == {"selfSigned": {}}, "the root of its own CA, not Kamaji's issuer"
    assert "ca" not in values["certManager"], "the chart creates its CA Certificate from that issuer"


def test_its_control_plane_comes_after_its_store_and_nobody_elses_does(plans):
    _, _, up, _ = plans
    (ready,) = up.commands("wait-datastore.sh")
    assert etcd_release(up).urn in ready.dependencies
    assert ready.urn in up.upstream(control_plane(up, "tenant-b").urn)
    assert ready.urn not in up.upstream(control_plane(up, "tenant-a").urn)
    assert ready.urn in {r.urn for r in of_tenant(up, "tenant-b")}, "part of the tenant: removed with it"
    assert up.misnamed() == [] and up.outside_components() == []


def test_removing_it_deletes_its_datastore_before_its_release_and_never_one_still_in_use(plans):
    _, _, up, _ = plans
    (ready,) = up.commands("wait-datastore.sh")
    environment = ready.inputs["environment"]
    assert ready.inputs["delete"].endswith("/delete-datastore.sh")
    assert environment["DATASTORE"] == control_plane(up, "tenant-b").inputs["spec"]["dataStore"]
    assert environment["REFUSE_IF_USED"] == "true"
    (kamaji_ready,) = up.commands("wait-kamaji.sh")
    assert "DATASTORE" not in kamaji_ready.inputs["environment"], "the shared store's deletion is unchanged"


# --- the move --------------------------------------------------------------------------------------


def test_a_move_updates_its_control_plane_in_place_with_kamajis_clean_target_and_touches_no_other_tenant(plans):
    shared_up, to_dedicated, dedicated_up, to_shared = plans
    store = {r.urn for r in to_dedicated.registrations if r.type == "kamaji-hami-lab:index:DedicatedDataStore"}
    created = [f"{r.name} (created)" for r in to_dedicated.registrations
               if r.custom and store & to_dedicated.ancestors(r.urn)]
    assert created and sorted(replacements(to_dedicated, shared_up)) == sorted(created), "only its store is new"
    assert replacements(to_shared, dedicated_up) == []
    for preview, previous in ((to_dedicated, shared_up), (to_shared, dedicated_up)):
        before, after = control_plane(previous, "tenant-b"), control_plane(preview, "tenant-b")
        assert before.inputs["spec"]["dataStore"] != after.inputs["spec"]["dataStore"]
        assert after.inputs["metadata"]["name"] == before.inputs["metadata"]["name"], "the same control plane"
        annotations = after.inputs["metadata"]["annotations"]
        assert annotations["kamaji.clastix.io/cleanup-prior-migration"] == "true"
        a_before = {r.urn: r.inputs for r in of_tenant(previous, "tenant-a")}
        assert {r.urn: r.inputs for r in of_tenant(preview, "tenant-a")} == a_before


def test_its_workers_kubeconfig_and_address_are_untouched_by_a_move(plans):
    shared_up, to_dedicated, dedicated_up, to_shared = plans
    for preview, previous in ((to_dedicated, shared_up), (to_shared, dedicated_up)):
        store = {r.urn for r in preview.registrations if r.type == "kamaji-hami-lab:index:DedicatedDataStore"}
        moved = [
            preview.by_urn[urn] for urn in changed(preview, previous) if not store & preview.ancestors(urn)]
        # What Kamaji's guide asks after the move, the tenant's restarts (tests/test_datastore_move.py), aside.
        restarts = {c.urn for script in ("restart-kubelet.sh", "restart-tenant-clients.sh")
                    for c in preview.commands(script)}
        b = {r.urn for r in of_tenant(preview, "tenant-b")}
        assert {r.urn for r in moved} & restarts and {r.urn for r in moved} & restarts <= b
        assert sorted((r.type, r.name) for r in moved if r.urn not in restarts) == [
            ("command:local:Command", "tenant-b-datastore-check"),
            ("command:local:Command", "tenant-b-datastore-moved"),
            ("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane", "tenant-b-control-plane"),
        ]


def test_the_move_to_its_own_store_creates_it_first_and_deletes_nothing(plans):
    shared_up, to_dedicated, _, _ = plans
    assert deleted(to_dedicated, shared_up) == set()
    (ready,) = to_dedicated.commands("wait-datastore.sh")
    assert ready.urn in to_dedicated.upstream(control_plane(to_dedicated, "tenant-b").urn)


def test_the_move_back_removes_its_store_and_only_that(plans):
    _, _, dedicated_up, to_shared = plans
    gone = [dedicated_up.by_urn[urn] for urn in deleted(to_shared, dedicated_up)]
    own = {r.urn for r in dedicated_up.registrations if r.type == "kamaji-hami-lab:index:DedicatedDataStore"}
    assert own and gone
    assert all(r.urn in own or own & dedicated_up.ancestors(r.urn) for r in gone)
    assert etcd_release(dedicated_up).urn in {r.urn for r in gone}


def test_its_workers_wait_for_kamaji_to_run_it_on_the_store_the_stack_names(plans):
    _, to_dedicated, _, to_shared = plans
    for preview, key in ((to_dedicated, "dedicated"), (to_shared, "shared")):
        (wait,) = [c for c in preview.commands("wait-datastore-move.sh")
                   if c.inputs["environment"]["TENANT"] == "tenant-b"]
        environment = wait.inputs["environment"]
        assert environment["DATASTORE"] == control_plane(preview, "tenant-b").inputs["spec"]["dataStore"]
        assert environment["DATA_STORE_KEY"] == key
        assert control_plane(preview, "tenant-b").urn in wait.dependencies
        workers = [r for r in of_tenant(preview, "tenant-b") if r.type == "docker:index/container:Container"]
        assert workers and all(wait.urn in preview.upstream(worker.urn) for worker in workers)


# --- Kamaji's migration, as wait-datastore-move.sh sees it -------------------------------------------

MOVE = {"KUBECONFIG_DATA": MANAGEMENT_KUBECONFIG, "TENANT": "tenant-b", "NAMESPACE": "tenants",
        "DATASTORE": "etcd-tenant-b", "DATA_STORE_KEY": "dedicated", "WANTED_STATE": "Ready"}
TCP_STATE = r"-n tenants get tenantcontrolplanes\.kamaji\.clastix\.io tenant-b -o jsonpath="
JOBS = (r"get jobs\.batch --all-namespaces -l kamaji\.clastix\.io/component=migrate,"
        r"tcp\.kamaji\.clastix\.io/name=tenant-b,tcp\.kamaji\.clastix\.io/namespace=tenants ")
# The Job Kamaji creates (datastore_migrate.go@26.8.2-edge: migrate-<uid> in its namespace, these args).
ARGS = json.dumps(["migrate", "--tenant-control-plane=tenants/tenant-b", "--target-datastore=etcd-tenant-b",
                   "--cleanup-prior-migration=true"], separators=(",", ":"))
RUNNING = f"kamaji-system/migrate-0b6f||||{ARGS}|\n"
RETRIED = f"kamaji-system/migrate-0b6f||||{ARGS}|2\n"
# The Job controller's Failed condition (kubernetes pkg/controller/job/job_controller.go: BackoffLimitExceeded).
FAILED = f"kamaji-system/migrate-0b6f|True|BackoffLimitExceeded|Job has reached the specified backoff limit|{ARGS}|\n"
FAILED_ELSEWHERE = FAILED.replace("etcd-tenant-b", "etcd-other")


def test_done_at_once_when_kamaji_already_runs_it_there(fakes):
    for state in ("Ready", "Sleeping"):
        fakes.on("kubectl", TCP_STATE, f"etcd-tenant-b|{state}")
        result = fakes.run("wait-datastore-move.sh", **{**MOVE, "WANTED_STATE": state})
        assert result.returncode == 0, result.stderr
        assert "tenant tenant-b runs on DataStore etcd-tenant-b" in result.stderr
        fakes.rules.clear()


@pytest.mark.parametrize(("asked", "other"), [("Ready", "Sleeping"), ("Sleeping", "Ready")])
def test_waits_for_the_state_the_stack_asks_for_not_the_one_kamaji_reported_before(fakes, asked, other):
    # A tenant woken (or put to sleep) on its DataStore: Kamaji still reports the state it had, then the new one.
    fakes.on("kubectl", TCP_STATE, f"etcd-tenant-b|{other}", "etcd-tenant-b|NotReady", f"etcd-tenant-b|{asked}")
    fakes.on("kubectl", JOBS, "")
    result = fakes.run("wait-datastore-move.sh", **{**MOVE, "WANTED_STATE": asked})
    assert result.returncode == 0, result.stderr
    assert len(fakes.calls("kubectl", TCP_STATE)) == 3
    assert f"Kamaji to report tenant tenant-b {asked} on DataStore etcd-tenant-b (status NotReady)" in result.stderr


def test_a_state_other_than_ready_or_sleeping_is_refused_naming_it(fakes):
    result = fakes.run("wait-datastore-move.sh", **{**MOVE, "WANTED_STATE": "Migrating"})
    assert result.returncode == 1
    assert "WANTED_STATE must be Ready or Sleeping, got 'Migrating'" in result.stderr
    assert fakes.calls("kubectl") == []


def test_waits_through_kamajis_migration_until_it_reports_ready_on_the_new_store(fakes):
    # Not started yet, the Job copying, the API server moved but not ready, then done (the guide's `get tcp -w`).
    fakes.on("kubectl", TCP_STATE,
             "default|Ready", "default|Migrating", "etcd-tenant-b|Migrating", "etcd-tenant-b|Ready")
    fakes.on("kubectl", JOBS, "", RUNNING, "")
    result = fakes.run("wait-datastore-move.sh", **MOVE)
    assert result.returncode == 0, result.stderr
    assert len(fakes.calls("kubectl", TCP_STATE)) == 4
    running = "from default to etcd-tenant-b (status Migrating; its Job kamaji-system/migrate-0b6f is running)"
    assert running in result.stderr
    assert fakes.calls("kubectl", "delete") == []


def test_an_interrupted_job_that_kamaji_retries_is_waited_for(fakes):
    fakes.on("kubectl", TCP_STATE, "default|Migrating", "default|Migrating", "etcd-tenant-b|Ready")
    fakes.on("kubectl", JOBS, RETRIED)
    result = fakes.run("wait-datastore-move.sh", **MOVE)
    assert result.returncode == 0, result.stderr
    assert "after 2 failed attempts" in result.stderr
    assert fakes.calls("kubectl", "delete") == []


def test_a_move_whose_job_is_gone_midway_is_waited_for_while_kamaji_creates_it_again(fakes):
    # The Job deleted (by hand, or with its namespace) while Kamaji still reports Migrating: Kamaji's next
    # reconcile finds none and creates it (datastore_migrate.go, CreateOrUpdate).
    fakes.on("kubectl", TCP_STATE, "default|Migrating", "default|Migrating", "etcd-tenant-b|Ready")
    fakes.on("kubectl", JOBS, "", RUNNING)
    result = fakes.run("wait-datastore-move.sh", **MOVE)
    assert result.returncode == 0, result.stderr
    assert "to etcd-tenant-b (status Migrating)\n" in result.stderr
    assert fakes.calls("kubectl", "delete") == []


def test_a_move_that_fails_while_it_waits_stops_saying_how_to_finish_or_undo(fakes):
    fakes.on("kubectl", TCP_STATE, "default|Migrating")
    fakes.on("kubectl", JOBS, RUNNING, FAILED)
    result = fakes.run("wait-datastore-move.sh", **MOVE)
    assert result.returncode == 1
    (said,) = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert "could not move tenant tenant-b from DataStore default to etcd-tenant-b" in said
    assert "BackoffLimitExceeded: Job has reached the specified backoff limit" in said
    assert "kubectl -n kamaji-system logs job/migrate-0b6f" in said
    assert "The tenant runs on default, whole" in said
    assert "finish: run make up again" in said
    assert "set the tenant's dataStore back to shared and run make up" in said
    assert fakes.calls("kubectl", "delete") == [], "a failure seen now is reported, not retried"


def test_make_up_again_deletes_the_failed_job_so_kamaji_retries_the_move(fakes):
    fakes.on("kubectl", TCP_STATE, "default|Migrating", "default|Migrating", "etcd-tenant-b|Ready")
    fakes.on("kubectl", JOBS, FAILED, RUNNING)
    fakes.on("kubectl", r"-n kamaji-system delete job migrate-0b6f --ignore-not-found",
             'job.batch "migrate-0b6f" deleted\n')
    result = fakes.run("wait-datastore-move.sh", **MOVE)
    assert result.returncode == 0, result.stderr
    assert len(fakes.calls("kubectl", "delete")) == 1


def test_an_undo_leaves_a_job_that_failed_toward_another_store_to_kamaji(fakes):
    undo = {**MOVE, "DATASTORE": "default", "DATA_STORE_KEY": "shared"}
    fakes.on("kubectl", TCP_STATE, "default|Migrating", "default|Ready")
    fakes.on("kubectl", JOBS, FAILED_ELSEWHERE)
    result = fakes.run("wait-datastore-move.sh", **undo)
    assert result.returncode == 0, result.stderr
    assert fakes.calls("kubectl", "delete") == []


def test_a_move_still_running_at_the_timeout_says_kamaji_is_still_at_it(fakes):
    fakes.on("kubectl", TCP_STATE, "default|Migrating")
    fakes.on("kubectl", JOBS, RUNNING)
    result = fakes.run("wait-datastore-move.sh", **MOVE, WAIT_TIMEOUT="0")
    assert result.returncode == 1
    (said,) = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert "timed out after 0s waiting for Kamaji to move tenant tenant-b from default to etcd-tenant-b" in said
    assert "run make up again to keep waiting" in said and "back to shared" in said


def test_a_failed_job_toward_a_store_whose_name_only_begins_like_the_target_is_left_alone(fakes):
    fakes.on("kubectl", TCP_STATE, "default|Migrating", "etcd-tenant-b|Ready")
    fakes.on("kubectl", JOBS, FAILED.replace("etcd-tenant-b", "etcd-tenant-bb"))
    result = fakes.run("wait-datastore-move.sh", **MOVE)
    assert result.returncode == 0, result.stderr
    assert fakes.calls("kubectl", "delete") == []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reason=st.from_regex(r"[A-Za-z]{1,20}", fullmatch=True),
       message=st.text(st.characters(blacklist_characters="|\n\r\x00", blacklist_categories=("Cs",)), max_size=60))
def test_a_failed_jobs_reason_and_message_reach_the_user_as_the_job_controller_wrote_them(fakes, reason, message):
    fakes.rules.clear()
    if fakes.log.exists():
        fakes.log.unlink()
    fakes.on("kubectl", TCP_STATE, "default|Migrating")
    fakes.on("kubectl", JOBS, RUNNING, f"kamaji-system/migrate-0b6f|True|{reason}|{message}|{ARGS}|\n")
    result = fakes.run("wait-datastore-move.sh", **MOVE)
    assert result.returncode == 1
    assert f"failed ({reason}: {message}; its log:" in result.stderr


def test_an_unreadable_control_plane_is_never_taken_for_a_finished_move(fakes):
    fakes.on("kubectl", TCP_STATE, reply(exit=1, stderr="Unable to connect to the server\n"))
    result = fakes.run("wait-datastore-move.sh", **MOVE, WAIT_TIMEOUT="0")
    assert result.returncode == 1
    assert "waiting for the API server to answer" in result.stderr


# --- its DataStore: ready, and deleted only when no tenant's data is left there ----------------------

STORE = {"KUBECONFIG_DATA": MANAGEMENT_KUBECONFIG, "DATASTORE": "etcd-tenant-b"}
USERS = r"get tenantcontrolplanes\.kamaji\.clastix\.io --all-namespaces"


def test_wait_datastore_waits_for_kamaji_to_report_it_ready(fakes):
    fakes.on("kubectl", r"get datastores\.kamaji\.clastix\.io etcd-tenant-b --ignore-not-found", "", "false", "true")
    result = fakes.run("wait-datastore.sh", **STORE)
    assert result.returncode == 0, result.stderr
    assert len(fakes.calls("kubectl", "get datastores")) == 3


def test_wait_datastore_names_the_store_when_it_times_out(fakes):
    fakes.on("kubectl", r"get datastores", "false")
    result = fakes.run("wait-datastore.sh", **STORE, WAIT_TIMEOUT="0")
    assert result.returncode == 1
    assert ("waiting for DataStore etcd-tenant-b to report .status.ready=true "
            "(its etcd: kubectl -n etcd-tenant-b get pods)") in result.stderr


def test_a_dedicated_store_still_holding_a_tenant_is_not_deleted(fakes):
    fakes.on("kubectl", USERS, "tenants/tenant-b ")
    result = fakes.run("delete-datastore.sh", **STORE, REFUSE_IF_USED="true")
    assert result.returncode == 1
    assert "DataStore etcd-tenant-b still holds the data of: tenants/tenant-b; deleting nothing" in result.stderr
    assert fakes.calls("kubectl", "delete") == []


def test_a_dedicated_store_whose_users_cannot_be_listed_is_not_deleted(fakes):
    fakes.on("kubectl", USERS, reply(exit=1, stderr="Unable to connect to the server\n"))
    result = fakes.run("delete-datastore.sh", **STORE, REFUSE_IF_USED="true")
    assert result.returncode == 1
    assert fakes.calls("kubectl", "delete") == []


def test_an_unused_dedicated_store_is_deleted_by_its_own_name(fakes):
    fakes.on("kubectl", USERS, "")
    fakes.on("kubectl", r"delete datastores\.kamaji\.clastix\.io/etcd-tenant-b --ignore-not-found --wait=false$",
             'datastore.kamaji.clastix.io "etcd-tenant-b" deleted\n')
    fakes.on("kubectl", r"get datastores\.kamaji\.clastix\.io/etcd-tenant-b --ignore-not-found -o name", "")
    result = fakes.run("delete-datastore.sh", **STORE, REFUSE_IF_USED="true")
    assert result.returncode == 0, result.stderr
    assert "DataStore etcd-tenant-b deleted" in result.stderr
    (users,) = fakes.calls("kubectl", USERS)
    assert '@.status.storage.dataStoreName=="etcd-tenant-b"' in " ".join(users["argv"])


def test_make_check_config_names_the_tenant_whose_data_store_is_wrong(tmp_path):
    stack = ("config:\n  kamaji-hami-lab:tenants:\n    - name: tenant-a\n"
             "    - name: tenant-b\n      dataStore: Dedicated\n")
    run = checked(tmp_path, stack)
    assert run.returncode == 1
    assert "kamaji-hami-lab:tenants[tenant-b].dataStore: 'Dedicated' is not one of 'shared', 'dedicated'" in run.stdout


# --- the check before a move: check-datastore-move.sh -------------------------------------------------

CHECK = {"KUBECONFIG_DATA": MANAGEMENT_KUBECONFIG, "TENANT": "tenant-b", "NAMESPACE": "tenants",
         "DATASTORE": "etcd-tenant-b", "SHARED_DATASTORE": "default", "DEDICATED_DATASTORE": "etcd-tenant-b",
         "KUBERNETES_VERSION": "v1.35.2"}
TCP_NAMES = r"-n tenants get tenantcontrolplanes\.kamaji\.clastix\.io tenant-b --ignore-not-found -o jsonpath="
# The endpoints kamaji-etcd's chart gives its DataStore: <sts>-<n>.<service>.<namespace>.svc.cluster.local:2379
# (clastix/kamaji-etcd charts/kamaji-etcd/templates/etcd_datastore.yaml@92f31f0); the bundled one's release is
# kamaji-etcd in kamaji-system (clastix/kamaji charts/kamaji/values.yaml@26.8.2-edge).
SHARED_ETCD = "etcd|" + " ".join(f"kamaji-etcd-{n}.kamaji-etcd.kamaji-system.svc.cluster.local:2379" for n in range(3))
OWN_ETCD = "etcd|etcd-tenant-b-0.etcd-tenant-b.etcd-tenant-b.svc.cluster.local:2379"


def data_store_answer(name: str) -> str:
    return rf"get datastores\.kamaji\.clastix\.io {name} -o jsonpath="


def checked_move(fakes, tcp: str, stores: dict[str, str | dict] | None = None, **env):
    fakes.on("kubectl", TCP_NAMES, tcp)
    for name, answer in (stores or {}).items():
        fakes.on("kubectl", data_store_answer(name), answer)
    return fakes.run("check-datastore-move.sh", **{**CHECK, **env})


def refusal(result) -> str:
    assert result.returncode == 1, result.stderr
    (said,) = [line for line in result.stderr.splitlines() if "ERROR" in line]
    return said


@pytest.mark.parametrize(("tcp", "target"), [
    ("default|default|v1.35.2", "etcd-tenant-b"),
    ("etcd-tenant-b|etcd-tenant-b|v1.35.2", "default"),
], ids=["to-dedicated", "back-to-shared"])  # fmt: skip
def test_a_move_between_the_shared_store_and_its_own_two_etcds_is_allowed(fakes, tcp, target):
    result = checked_move(fakes, tcp, {"default": SHARED_ETCD, "etcd-tenant-b": OWN_ETCD}, DATASTORE=target)
    assert result.returncode == 0, result.stderr
    source = tcp.split("|")[1]
    assert result.stdout == f"tenant-b: {source} -> {target}\n"


def test_a_new_tenant_or_one_that_stays_or_goes_back_where_it_is_reads_no_datastore(fakes):
    for tcp in ("", "etcd-tenant-b|etcd-tenant-b|v1.35.2", "etcd-tenant-b|default|v1.36.0"):
        # New; unchanged; and the undo of a move to etcd-tenant-b that failed (the tenant still on default).
        target = "default" if tcp.endswith("v1.36.0") else "etcd-tenant-b"
        result = checked_move(fakes, tcp, DATASTORE=target)
        assert result.returncode == 0, result.stderr
        assert fakes.calls("kubectl", "datastores") == []
        fakes.rules.clear()


@pytest.mark.parametrize("own", [
    # The shared etcd's own pod, and its client Service: one etcd under another DataStore's name.
    "etcd|kamaji-etcd-1.kamaji-etcd.kamaji-system.svc.cluster.local:2379",
    "etcd|https://kamaji-etcd-client.kamaji-system.svc:2379",
], ids=["same-member", "its-service"])  # fmt: skip
def test_a_move_to_a_datastore_on_the_same_etcd_is_refused_before_kamaji_wipes_the_tenant(fakes, own):
    said = refusal(checked_move(fakes, "default|default|v1.35.2", {"default": SHARED_ETCD, "etcd-tenant-b": own}))
    assert "DataStores default and etcd-tenant-b are one etcd" in said
    assert own.split("|")[1] in said
    assert "kamaji-hami-lab:tenants[].dataStore of tenant tenant-b back" in said


def test_a_datastore_in_another_namespace_with_the_same_member_names_is_another_etcd(fakes):
    other = "etcd|kamaji-etcd-0.kamaji-etcd.etcd-tenant-b.svc.cluster.local:2379"
    result = checked_move(fakes, "default|default|v1.35.2", {"default": SHARED_ETCD, "etcd-tenant-b": other})
    assert result.returncode == 0, result.stderr


def test_a_changed_kamaji_datastore_is_refused_while_the_tenant_runs_on_the_old_one(fakes):
    said = refusal(checked_move(fakes, "default|default|v1.35.2", DATASTORE="other", SHARED_DATASTORE="other"))
    assert "tenant tenant-b runs on DataStore default, and the stack now names other for it" in said
    assert "Set kamaji-hami-lab:kamajiDataStore back to default" in said
    assert fakes.calls("kubectl", "datastores") == []


def test_a_move_to_a_store_neither_shared_nor_its_own_is_refused(fakes):
    said = refusal(checked_move(fakes, "etcd-tenant-b|etcd-tenant-b|v1.35.2", DATASTORE="etcd-tenant-a"))
    assert "only between the shared DataStore (default" in said and "its own (etcd-tenant-b" in said


def test_a_move_and_an_upgrade_in_one_run_are_refused(fakes):
    said = refusal(checked_move(fakes, "default|default|v1.35.2", KUBERNETES_VERSION="v1.36.0"))
    assert "from v1.35.2 to v1.36.0 in one run" in said
    assert "Keep its kubernetesVersion at v1.35.2 until the move is done" in said


def test_a_move_between_drivers_is_refused(fakes):
    said = refusal(checked_move(fakes, "default|default|v1.35.2",
                                {"default": SHARED_ETCD, "etcd-tenant-b": "PostgreSQL|db.example:5432"}))
    assert "from DataStore default (etcd) to etcd-tenant-b (PostgreSQL)" in said


def test_a_datastore_or_control_plane_that_cannot_be_read_stops_the_move_unsent(fakes):
    said = refusal(checked_move(fakes, "default|default|v1.35.2",
                                {"default": SHARED_ETCD, "etcd-tenant-b": reply(exit=1, stderr="timeout")}))
    assert "cannot read DataStore etcd-tenant-b" in said and "nothing was changed" in said
    fakes.rules.clear()
    fakes.on("kubectl", TCP_NAMES, reply(exit=1, stderr="connection refused"))
    said = refusal(fakes.run("check-datastore-move.sh", **CHECK))
    assert "cannot read its TenantControlPlane" in said


def test_the_move_is_checked_before_the_control_plane_names_the_new_store(plans):
    _, to_dedicated, _, to_shared = plans
    for preview in (to_dedicated, to_shared):
        tcp = control_plane(preview, "tenant-b")
        (check,) = [c for c in preview.commands("check-datastore-move.sh")
                    if c.inputs["environment"]["TENANT"] == "tenant-b"]
        environment = check.inputs["environment"]
        assert environment["DATASTORE"] == tcp.inputs["spec"]["dataStore"]
        assert environment["SHARED_DATASTORE"] == control_plane(preview, "tenant-a").inputs["spec"]["dataStore"]
        assert environment["DEDICATED_DATASTORE"] == control_plane(to_dedicated, "tenant-b").inputs["spec"]["dataStore"]
        assert environment["KUBERNETES_VERSION"] == tcp.inputs["spec"]["kubernetes"]["version"]
        assert check.urn in tcp.dependencies
    # Its own DataStore exists, and is ready, before the check reads it.
    (ready,) = to_dedicated.commands("wait-datastore.sh")
    (check,) = [c for c in to_dedicated.commands("check-datastore-move.sh")
                if c.inputs["environment"]["TENANT"] == "tenant-b"]
    assert ready.urn in to_dedicated.upstream(check.urn)


# --- a tenant removed: leave-datastores.sh ------------------------------------------------------------

LEAVE = {"KUBECONFIG_DATA": MANAGEMENT_KUBECONFIG, "TENANT": "tenant-b", "NAMESPACE": "tenants", "STACK": "dev"}
TCP_LEAVING = r"-n tenants get tenantcontrolplanes\.kamaji\.clastix\.io tenant-b --ignore-not-found -o jsonpath="


def leave(fakes, tmp_path, tcp: str, jobs: str = "", clean_exit: int = 0):
    """leave-datastores.sh with a stand-in for `python -m snapshot.leftovers` that records its arguments."""
    python, record = tmp_path / "lab-python", tmp_path / "leftovers.args"
    python.write_text(f'#!/bin/sh\necho "$@" > {record}\nexit {clean_exit}\n')
    python.chmod(0o755)
    fakes.on("kubectl", TCP_LEAVING, tcp)
    fakes.on("kubectl", JOBS, jobs)
    result = fakes.run("leave-datastores.sh", **LEAVE, LAB_PYTHON=str(python))
    return result, (record.read_text() if record.exists() else None)


def test_a_removed_tenant_on_one_datastore_has_what_it_left_elsewhere_cleared_first(fakes, tmp_path):
    result, cleaned = leave(fakes, tmp_path, "etcd-tenant-b|etcd-tenant-b|Ready")
    assert result.returncode == 0, result.stderr
    assert cleaned == "-m snapshot.leftovers --stack dev tenant-b\n"


@pytest.mark.parametrize(("tcp", "jobs"), [
    ("etcd-tenant-b|default|Migrating", ""),
    ("etcd-tenant-b|default|Ready", ""),  # the spec names another; Kamaji has not started
    ("etcd-tenant-b|etcd-tenant-b|Ready", "kamaji-system/migrate-0b6f "),
], ids=["migrating", "spec-and-status-differ", "job-runs"])  # fmt: skip
def test_a_tenant_removed_mid_move_is_refused_and_nothing_is_cleared(fakes, tmp_path, tcp, jobs):
    result, cleaned = leave(fakes, tmp_path, tcp, jobs)
    assert result.returncode == 1
    (said,) = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert "tenant tenant-b is between two DataStores" in said
    assert "would leave its data in one of them for good. Nothing was removed; finish or undo the move" in said
    assert cleaned is None


def test_a_clean_up_that_fails_stops_the_removal_naming_the_command(fakes, tmp_path):
    result, cleaned = leave(fakes, tmp_path, "default|default|Ready", clean_exit=1)
    assert result.returncode == 1 and cleaned is not None
    assert "Run make datastore-clean TENANT=tenant-b, then remove it again" in result.stderr


def test_a_tenant_whose_control_plane_is_gone_has_nothing_to_clear(fakes, tmp_path):
    result, cleaned = leave(fakes, tmp_path, "")
    assert result.returncode == 0, result.stderr
    assert cleaned is None


def test_the_move_wait_clears_the_tenant_from_other_datastores_when_it_is_removed(plans):
    shared_up, *_ = plans
    for tenant in ("tenant-a", "tenant-b"):
        (moved,) = [c for c in shared_up.commands("wait-datastore-move.sh")
                    if c.inputs["environment"]["TENANT"] == tenant]
        assert moved.inputs["delete"] == "exec bash scripts/leave-datastores.sh"
        assert moved.inputs["environment"]["STACK"]
        # Deleted before the control plane: it depends on it.
        assert control_plane(shared_up, tenant).urn in moved.dependencies
