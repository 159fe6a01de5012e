"""The audit trail: the policy as kube-apiserver applies it, the TenantControlPlane that writes the log, and
`make audit`'s reader on events shaped from audit.k8s.io/v1 at v1.36."""

from __future__ import annotations

import io
import json
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from components import audit as audit_component
from tests.plan import changed, dev_config, plan
from tests.test_validation import FIXTURES, OUTPUTS, FakeLab, audit_logs, healthy_lab
from validation import audit
from validation.exit_codes import EXIT_FAILED, EXIT_USAGE

TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
RECORDED_LOG = (FIXTURES / "audit-tenant-a.jsonl").read_text()
RECORDED_LINES = RECORDED_LOG.splitlines()


# --- the policy, as kube-apiserver picks a rule --------------------------------------------------------------


def level(
    verb: str,
    user: str = "kubernetes-super-admin",
    groups: tuple[str, ...] = ("system:masters", "system:authenticated"),
    resource: str = "",
    group: str = "",
    subresource: str = "",
    path: str = "",
) -> str:
    """The level the policy gives a request: the first rule that matches it, as kubernetes/apiserver
    pkg/audit/policy/checker.go@v0.36.0 (ruleMatches, ruleMatchesResource, pathMatches) matches; None without one."""
    combined = f"{resource}/{subresource}" if subresource else resource
    for rule in audit_component.policy()["rules"]:
        if rule.get("users") and user not in rule["users"]:
            continue
        if rule.get("userGroups") and not set(groups) & set(rule["userGroups"]):
            continue
        if rule.get("verbs") and verb not in rule["verbs"]:
            continue
        if rule.get("resources"):
            if not resource or not any(
                kinds["group"] in (group, "*") and combined in kinds["resources"] for kinds in rule["resources"]
            ):
                continue
        elif rule.get("nonResourceURLs") and (resource or not any(matches(path, u) for u in rule["nonResourceURLs"])):
            continue
        return rule["level"]
    return "None"


def matches(path: str, url: str) -> bool:
    return path == url or (url.endswith("*") and path.startswith(url[:-1]))


NODE = ("system:node:kamaji-tenant-a-w1", ("system:nodes", "system:authenticated"))
TEAM_SA = ("system:serviceaccount:team-a:builder", ("system:serviceaccounts", "system:serviceaccounts:team-a"))
CONTROLLERS = ("system:kube-controller-manager", ("system:authenticated",))
KUBE_SYSTEM_SA = ("system:serviceaccount:kube-system:coredns", ("system:serviceaccounts:kube-system",))


@pytest.mark.parametrize("verb", ["get", "list", "watch", "create", "update", "patch", "delete"])
@pytest.mark.parametrize(
    "resource, subresource, group",
    [("secrets", "", ""), ("configmaps", "", ""), ("serviceaccounts", "token", ""),
     ("tokenreviews", "", "authentication.k8s.io")],
)  # fmt: skip
@pytest.mark.parametrize("who", [("kubernetes-super-admin", ("system:masters",)), TEAM_SA])
def test_secrets_config_maps_and_tokens_are_logged_at_metadata_only(verb, resource, subresource, group, who):
    # Never Request or RequestResponse: their bodies would hold the secret values and tokens.
    assert level(verb, *who, resource=resource, subresource=subresource, group=group) == "Metadata"


def test_a_subresource_of_a_service_account_other_than_token_is_not_taken_for_a_token_request():
    assert level("create", resource="serviceaccounts") == "Request"


@pytest.mark.parametrize("verb", ["get", "list", "watch"])
@pytest.mark.parametrize("who", [NODE, CONTROLLERS, KUBE_SYSTEM_SA])
def test_the_control_planes_and_kubelets_reads_are_left_out(verb, who):
    assert level(verb, *who, resource="pods") == "None"
    assert level(verb, *who, resource="secrets") == "None"


@pytest.mark.parametrize("who", [NODE, CONTROLLERS, KUBE_SYSTEM_SA])
def test_the_systems_writes_stay_in_the_log(who):
    assert level("patch", *who, resource="nodes", subresource="status") == "Request"
    assert level("delete", *who, resource="pods") == "Request"


@pytest.mark.parametrize("who", [NODE, CONTROLLERS, TEAM_SA, ("kubernetes-super-admin", ("system:masters",))])
def test_leases_are_left_out_for_everyone(who):
    for verb in ("get", "update", "create"):
        assert level(verb, *who, resource="leases", group="coordination.k8s.io") == "None"


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz", "/readyz/etcd", "/livez/ping", "/metrics"])
def test_health_probes_and_scrapes_are_left_out(path):
    assert level("get", path=path) == "None"


def test_people_and_team_credentials_are_logged_reads_at_metadata_writes_with_their_body():
    for who in (("kubernetes-super-admin", ("system:masters",)), TEAM_SA):
        assert level("get", *who, resource="pods") == "Metadata"
        assert level("list", *who, resource="namespaces") == "Metadata"
        assert level("create", *who, resource="pods") == "Request"
        assert level("delete", *who, resource="namespaces") == "Request"
        assert level("create", *who, resource="pods", subresource="exec") == "Request"
        assert level("create", *who, resource="clusterrolebindings", group="rbac.authorization.k8s.io") == "Request"
    # A non-resource path other than the probes, e.g. discovery or an unknown one, still says who asked.
    assert level("get", path="/apis") == "Metadata"


def test_no_rule_logs_a_response_body():
    # RequestResponse would write what a read returned: a list of pods' environments, a role's rules.
    assert {rule["level"] for rule in audit_component.policy()["rules"]} <= {"None", "Metadata", "Request"}


def test_the_policy_document_is_an_audit_v1_policy_with_one_event_per_request():
    document = yaml.safe_load(audit_component.policy_document())
    assert (document["apiVersion"], document["kind"]) == ("audit.k8s.io/v1", "Policy")
    assert document["omitStages"] == ["RequestReceived"]
    assert document["rules"][-1] == {"level": "Metadata"}, "a catch-all last, so nothing goes unrecorded"


# --- the TenantControlPlane and its companions, under the mocks -----------------------------------------------


def beside(plan_, type_: str, tcp, named: str = ""):
    """The one resource of this type (whose Pulumi name ends in `named`) the TenantControlPlane's component makes
    beside it."""
    (found,) = [r for r in plan_.of_type(type_) if r.parent == tcp.parent and r.name.endswith(named)]
    return found


def flag_values(args: list[str]) -> dict[str, str]:
    return dict(arg.split("=", 1) for arg in args)


def audit_flags(deployment: dict) -> dict[str, str]:
    """The --audit-* flags among a TenantControlPlane deployment's API server extraArgs."""
    flags = flag_values(deployment.get("extraArgs", {}).get("apiServer", []))
    return {flag: value for flag, value in flags.items() if flag.startswith("--audit-")}


def test_every_api_server_writes_its_log_on_the_tenants_own_claim_following_the_policy_config_map(up_plan):
    for tcp in up_plan.of_type(TCP):
        deployment = tcp.inputs["spec"]["controlPlane"]["deployment"]
        flags = flag_values(deployment["extraArgs"]["apiServer"])
        volumes = {volume["name"]: volume for volume in deployment["additionalVolumes"]}
        mounts = {mount["mountPath"]: mount["name"] for mount in deployment["additionalVolumeMounts"]["apiServer"]}

        # The policy file is the ConfigMap's key, mounted where the flag says.
        policy_dir, policy_file = flags["--audit-policy-file"].rsplit("/", 1)
        config_map = beside(up_plan, CONFIG_MAP, tcp, "-audit-policy")
        assert volumes[mounts[policy_dir]]["configMap"]["name"] == config_map.inputs["metadata"]["name"]
        assert volumes[mounts[policy_dir]] is volumes["audit-policy"]
        assert yaml.safe_load(config_map.inputs["data"][policy_file]) == audit_component.policy()
        assert config_map.inputs["metadata"]["namespace"] == tcp.inputs["metadata"]["namespace"]

        # The log goes through this pod's link, which the init container points into the tenant's claim.
        log_dir = flags["--audit-log-path"].rsplit("/", 1)[0]
        link_root = log_dir.rsplit("/", 1)[0]
        assert volumes[mounts[link_root]]["emptyDir"]
        (init,) = deployment["additionalInitContainers"]
        env = {variable["name"]: variable for variable in init["env"]}
        assert env["THIS_POD"]["value"] == log_dir
        assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        claim = beside(up_plan, CLAIM, tcp)
        log_root = env["LOG_ROOT"]["value"]
        assert volumes[mounts[log_root]]["persistentVolumeClaim"]["claimName"] == claim.inputs["metadata"]["name"]
        assert claim.inputs["metadata"]["namespace"] == tcp.inputs["metadata"]["namespace"]
        assert {mount["mountPath"] for mount in init["volumeMounts"]} == {log_root, link_root}

        # Bounded rotation, and the claim asks for what rotation lets the log grow to.
        assert int(flags["--audit-log-maxsize"]) > 0 and int(flags["--audit-log-maxbackup"]) >= 0
        asked = claim.inputs["spec"]["resources"]["requests"]["storage"]
        assert int(asked.removesuffix("Gi")) * 2**30 >= audit_component.log_bytes(deployment["replicas"])
        # The reader sees the same claim, read-only.
        (reader,) = deployment["additionalContainers"]
        assert reader["volumeMounts"] == [{"name": mounts[log_root], "mountPath": log_root, "readOnly": True}]


def test_two_tenants_never_share_a_log_or_a_policy(up_plan):
    claims = [r.inputs["metadata"]["name"] for r in up_plan.of_type(CLAIM)]
    maps = [r.inputs["metadata"]["name"] for r in up_plan.of_type(CONFIG_MAP) if r.name.endswith("-audit-policy")]
    assert len(claims) == len(set(claims)) == len(up_plan.of_type(TCP)) == len(set(maps))


def test_the_control_plane_waits_for_its_policy_and_claim_and_the_claim_does_not_wait_to_bind(up_plan):
    for tcp in up_plan.of_type(TCP):
        claim, config_map = beside(up_plan, CLAIM, tcp), beside(up_plan, CONFIG_MAP, tcp, "-audit-policy")
        assert {claim.urn, config_map.urn} <= set(tcp.dependencies)
        # kind's StorageClass binds on first use, by the API server pod the TenantControlPlane makes.
        assert claim.inputs["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
        assert claim.provider_urn == tcp.provider_urn == config_map.provider_urn


@pytest.mark.parametrize("replicas", [1, 2, 5])
def test_the_init_script_keeps_this_many_pods_logs_and_the_bound_counts_them(replicas):
    script = audit_component.link_script(replicas)
    kept = audit_component.pod_logs_kept(replicas)
    # `tail -n +N` drops the N-1 newest other pods' logs from deletion; with its own that is `kept`.
    assert f"tail -n +{kept}" in script
    assert audit_component.log_bytes(replicas) == kept * (audit_component.MAX_BACKUPS + 1) * (
        audit_component.MAX_SIZE_MB << 20
    )
    assert kept >= replicas + 1, "every running API server's log and a starting pod's"


def test_the_preflight_counts_at_least_the_bound_per_replica():
    from tests.test_docs import preflight

    per_replica = preflight.SIZING_GIB["audit_log_disk"] * 2**30
    for replicas in range(1, 10):
        assert audit_component.log_bytes(replicas) <= replicas * per_replica, replicas


def test_more_replicas_leave_the_claim_as_it_is():
    # A bound claim can neither shrink nor (on kind's StorageClass) grow: a change would stop `pulumi up`.
    one, three = (
        plan(dev_config(tenants=[{"name": "a", "controlPlaneReplicas": replicas}]), preview=False)
        for replicas in (1, 3)
    )
    (claim_one,), (claim_three,) = one.of_type(CLAIM), three.of_type(CLAIM)
    assert claim_one.inputs == claim_three.inputs
    asked = claim_three.inputs["spec"]["resources"]["requests"]["storage"]
    assert int(asked.removesuffix("Gi")) * 2**30 >= audit_component.log_bytes(3)


@pytest.fixture(scope="module")
def before_audit():
    """The dev lab as it ran before its API servers wrote an audit log."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(audit_component, "deployment_spec", lambda *args: {})
        return plan(dev_config(), preview=False)


def test_adding_the_audit_log_updates_every_control_plane_in_place(before_audit):
    after = plan(dev_config(), preview=True, previous=before_audit)
    for tcp in before_audit.of_type(TCP):
        now = after.by_urn[tcp.urn]
        assert not audit_flags(tcp.inputs["spec"]["controlPlane"]["deployment"])
        assert audit_flags(now.inputs["spec"]["controlPlane"]["deployment"])
        # Same identity: the engine updates it (and so keeps its uid, CA and datastore) rather than replacing it.
        assert now.outputs["metadata"]["uid"] == tcp.outputs["metadata"]["uid"]
        assert not now.replace_on_changes and not now.delete_before_replace
    # The admin kubeconfigs are not read again: workers and users keep their credentials.
    assert not {read.urn for read in after.commands("tenant-kubeconfig.sh")} & changed(after, before_audit)


# --- the reader -------------------------------------------------------------------------------------------------


def test_the_recorded_log_reads_as_its_events_and_its_cut_last_line_is_counted():
    trail = audit.parse([RECORDED_LOG])

    assert trail.skipped == 1
    assert [(e.credential, e.user, e.verb, e.resource, e.target, e.code) for e in trail.events] == [
        ("admin", "kubernetes-super-admin", "delete", "namespaces", "team-a", 200),
        ("service account", "system:serviceaccount:team-a:builder", "get", "secrets", "team-a/registry", 403),
        ("node", "system:node:kamaji-tenant-a-w1", "patch", "nodes/status", "kamaji-tenant-a-w1", 200),
        ("node", "system:node:kamaji-tenant-a-w1", "create", "serviceaccounts/token", "kube-system/coredns", 201),
    ]
    secret_read = trail.events[1]
    assert secret_read.source_ips == ("10.244.1.7",)
    assert secret_read.time == datetime(2026, 12, 6, 8, 5, 40, 104512, tzinfo=UTC)
    assert secret_read.groups == ("system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated")


def test_events_from_several_files_come_oldest_first_whatever_the_file_order():
    first, second = "\n".join(RECORDED_LINES[:2]), "\n".join(RECORDED_LINES[2:4])
    trail = audit.parse([second, first])
    assert [e.time for e in trail.events] == sorted(e.time for e in trail.events)
    assert trail.skipped == 0 and len(trail.events) == 4


def test_the_table_shows_time_user_verb_resource_target_and_code():
    trail = audit.parse([RECORDED_LOG])
    lines = audit.table(trail.events[:2]).splitlines()
    assert lines[0].split() == ["TIME", "USER", "VERB", "RESOURCE", "NAMESPACE/NAME", "CODE"]
    assert lines[1].split() == [
        "2026-12-06T08:01:12Z", "kubernetes-super-admin", "delete", "namespaces", "team-a", "200"
    ]  # fmt: skip
    assert lines[2].split() == [
        "2026-12-06T08:05:40Z", "system:serviceaccount:team-a:builder", "get", "secrets", "team-a/registry", "403"
    ]  # fmt: skip
    # Columns line up: each header starts where its values do.
    assert lines[0].index("VERB") == lines[1].index("delete") == lines[2].index("get ")


def test_what_a_request_carries_cannot_act_on_the_terminal():
    line = json.loads(RECORDED_LINES[0])
    line["objectRef"]["name"] = "x\x1b[2J\u202eevil"
    (found,) = audit.parse([json.dumps(line)]).events
    shown = audit.table([found])
    assert "\x1b" not in shown and "\u202e" not in shown and "\\x1b[2J" in shown


NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


def at(moment: datetime) -> str:
    line = json.loads(RECORDED_LINES[0])
    line["stageTimestamp"] = moment.isoformat().replace("+00:00", "Z")
    return json.dumps(line)


def test_since_keeps_an_event_exactly_at_the_limit_and_drops_one_a_microsecond_older():
    hour = timedelta(hours=1)
    trail = audit.parse([at(NOW - hour), at(NOW - hour - timedelta(microseconds=1)), at(NOW)])
    assert [e.time for e in audit.chosen(trail, NOW, hour, "", "")] == [NOW - hour, NOW]
    assert len(audit.chosen(trail, NOW, None, "", "")) == 3


def test_user_and_verb_filters_match_whole_names_not_prefixes():
    trail = audit.parse([RECORDED_LOG])
    assert {e.user for e in audit.chosen(trail, NOW, None, "system:node:kamaji-tenant-a-w1", "")} == {
        "system:node:kamaji-tenant-a-w1"
    }
    assert audit.chosen(trail, NOW, None, "system:node:kamaji-tenant-a", "") == []
    assert [e.verb for e in audit.chosen(trail, NOW, None, "", "get")] == ["get"]
    assert audit.chosen(trail, NOW, None, "", "ge") == []
    both = audit.chosen(trail, NOW, None, "system:node:kamaji-tenant-a-w1", "create")
    assert [e.resource for e in both] == ["serviceaccounts/token"]


@pytest.mark.parametrize("text, expected", [("1h", timedelta(hours=1)), ("30m", timedelta(minutes=30)),
                                            ("45s", timedelta(seconds=45)), ("7d", timedelta(days=7))])  # fmt: skip
def test_since_takes_a_whole_number_and_a_unit(text, expected):
    assert audit.since(text) == expected


@pytest.mark.parametrize("text", ["", "1", "h", "1.5h", "-1h", "0h", "1w", "1h ", "1h30m"])
def test_a_since_it_cannot_read_is_refused_naming_it(text):
    with pytest.raises(Exception, match=f"SINCE={text!r}"):
        audit.since(text)


def test_an_event_without_user_or_verb_or_of_another_kind_is_skipped():
    base = json.loads(RECORDED_LINES[0])
    broken = [
        {**base, "verb": ""},
        {**base, "user": {}},
        {**base, "kind": "Status"},
        {**base, "apiVersion": "audit.k8s.io/v1beta1"},
        {**base, "stageTimestamp": "yesterday", "requestReceivedTimestamp": None},
        {**base, "stageTimestamp": "2026-12-06T08:00:00"},  # no zone: its moment is unknown
        {**base, "responseStatus": {"code": "200"}},
        {**base, "responseStatus": {"code": True}},
        {**base, "user": {"username": "a", "groups": "system:masters"}},
        {**base, "objectRef": ["namespaces"]},
    ]
    trail = audit.parse([json.dumps(line) for line in broken] + ["[]", "null", "{", "\x00"])
    assert trail.events == [] and trail.skipped == len(broken) + 4


@given(st.text())
def test_any_text_is_read_without_crashing(text):
    trail = audit.parse([text])
    assert trail.skipped + len(trail.events) <= len([line for line in text.splitlines() if line.strip()])


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
FIELDS = ["verb", "user", "objectRef", "responseStatus", "stageTimestamp", "requestReceivedTimestamp", "sourceIPs"]


@given(st.sampled_from(FIELDS), JSON_VALUES)
def test_an_event_with_any_field_of_any_shape_is_read_or_counted(field, value):
    line = {**json.loads(RECORDED_LINES[0]), field: value}
    trail = audit.parse([json.dumps(line)])
    assert len(trail.events) + trail.skipped == 1


@given(st.integers(min_value=0, max_value=len(RECORDED_LINES) - 2), st.data())
def test_a_line_cut_anywhere_is_counted_and_the_whole_ones_still_read(index, data):
    line = RECORDED_LINES[index]
    cut = data.draw(st.integers(min_value=1, max_value=len(line) - 1))
    trail = audit.parse(["\n".join(RECORDED_LINES[:index] + [line[:cut]])])
    assert (len(trail.events), trail.skipped) == (index, 1)


# --- make audit, through the management cluster -------------------------------------------------------------


def make_audit(lab: FakeLab, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = audit.main(["--outputs", str(OUTPUTS), *args], runner=lab, stdout=out)
    return code, out.getvalue()


def reading_lab() -> FakeLab:
    lab = FakeLab()
    audit_logs(lab)
    return lab


def test_make_audit_prints_the_table_and_the_skipped_count():
    code, printed = make_audit(reading_lab(), "tenant-a")
    lines = printed.splitlines()
    assert code == 0
    assert lines[0].split() == list(audit.COLUMNS)
    assert len(lines) == 1 + 4 + 1
    assert lines[-1] == "(1 malformed or partial lines skipped)"


def test_make_audit_reads_each_file_through_the_reader_container_of_the_tenants_api_server():
    lab = reading_lab()
    make_audit(lab, "tenant-a", "--since", "1h")
    (listing,) = lab.commands("management", r"^exec .* find ")
    assert listing.command.startswith("exec -n tenants tenant-a-6d8f7c9b5-x2k4p -c audit-reader -- find ")
    # With SINCE, files last written before the window are not read at all (61 minutes covers a started one).
    assert shlex.split(listing.command)[-2:] == ["-mmin", "-61"]
    (cat,) = lab.commands("management", r"^exec .* cat ")
    assert cat.command.endswith(
        f" -- cat {audit_component.LOG_ROOT}/tenant-a-6d8f7c9b5-x2k4p/{audit_component.LOG_FILE}"
    )
    assert not [call for call in lab.calls if call.cluster != "management"], "never through the tenant"


def test_make_audit_json_keeps_every_field_for_scripts():
    code, printed = make_audit(reading_lab(), "tenant-a", "--json", "--verb", "get")
    document = json.loads(printed)
    assert code == 0 and document["skipped"] == 1
    (event,) = document["events"]
    assert event == {
        "time": "2026-12-06T08:05:40.104512Z",
        "user": "system:serviceaccount:team-a:builder",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"],
        "credential": "service account",
        "verb": "get",
        "resource": "secrets",
        "namespace": "team-a",
        "name": "registry",
        "code": 403,
        "source_ips": ["10.244.1.7"],
        "request_uri": "/api/v1/namespaces/team-a/secrets/registry",
        "audit_id": "2c4e6a8b-0d1f-4a3c-8e5d-7f9a1b2c3d4e",
    }


def test_make_audit_of_an_unknown_tenant_names_the_ones_there_are(capsys):
    code, _ = make_audit(reading_lab(), "tenant-z")
    assert code == EXIT_USAGE
    assert "no tenant 'tenant-z'; the stack has tenant-a, tenant-b" in capsys.readouterr().err


def test_make_audit_without_a_running_reader_fails_saying_why(capsys):
    from tests.test_validation import api_server_pods, ok

    lab = healthy_lab()
    lab.on("management", r"^get pods -n tenants -l kamaji.clastix.io/name=tenant-a ", ok(api_server_pods()))
    code, printed = make_audit(lab, "tenant-a")
    assert code == EXIT_FAILED and printed == ""
    assert "audit: cannot read the log of tenant-a: no API server pod of tenant-a runs" in capsys.readouterr().err


def test_make_audit_with_a_listing_that_fails_names_the_command(capsys):
    from tests.test_validation import error

    lab = reading_lab()
    lab.on("management", r"^exec .* find ", error("error: unable to upgrade connection: container not found\n"))
    code, _ = make_audit(lab, "tenant-a")
    assert code == EXIT_FAILED
    assert "container not found" in capsys.readouterr().err


def test_a_file_rotated_away_between_listing_and_read_is_passed_over():
    from tests.test_validation import error, ok

    lab = reading_lab()
    pod_dir = f"{audit_component.LOG_ROOT}/tenant-a-6d8f7c9b5-x2k4p"
    lab.on("management", r"^exec .* find ", ok(f"{pod_dir}/audit-2026-12-06T08-00-00.000.log\n{pod_dir}/audit.log\n"))
    lab.on("management", r"^exec .* cat .*/audit-2026", error("cat: can't open: No such file or directory\n"))
    code, printed = make_audit(lab, "tenant-a", "--json")
    assert code == 0 and len(json.loads(printed)["events"]) == 4


def test_make_audit_on_a_malformed_pod_answer_names_the_field_instead_of_crashing(capsys):
    from tests.test_validation import ok

    lab = reading_lab()
    broken = {"kind": "List", "items": [{"metadata": {"name": "p"}, "status": {"containerStatuses": "running"}}]}
    lab.on("management", r"^get pods -n tenants -l kamaji.clastix.io/name=tenant-a ", ok(broken))
    code, _ = make_audit(lab, "tenant-a")
    assert code == EXIT_FAILED
    assert "containerStatuses is a string, not a list" in capsys.readouterr().err


# --- what kube-apiserver takes, at the oldest minor a tenant may run and the newest -------------------------------

KUBE_APISERVER = json.loads((Path(__file__).parent / "fixtures" / "kube-apiserver-audit.json").read_text())["versions"]


def test_the_recorded_versions_are_the_oldest_a_tenant_may_run_and_the_current():
    from tests.test_object_schemas import oldest_tenant_version

    oldest = ".".join(oldest_tenant_version().split(".")[:2])
    assert {oldest, "v1.36"} <= set(KUBE_APISERVER)


@pytest.mark.parametrize("version", sorted(KUBE_APISERVER))
def test_every_audit_flag_is_one_that_kube_apiserver_of_this_version_takes(version, up_plan):
    known = KUBE_APISERVER[version]
    for tcp in up_plan.of_type(TCP):
        flags = audit_flags(tcp.inputs["spec"]["controlPlane"]["deployment"])
        assert flags
        for flag, value in flags.items():
            kind = known["flags"][flag.removeprefix("--")]
            if kind == "int":
                assert int(value) >= 0, flag
        assert flags["--audit-log-format"] in known["log_formats"]
        assert flags["--audit-log-path"].startswith("/") and flags["--audit-policy-file"].startswith("/")


@pytest.mark.parametrize("version", sorted(KUBE_APISERVER))
def test_the_policy_has_only_fields_kube_apiserver_of_this_version_reads(version):
    known = KUBE_APISERVER[version]
    document = yaml.safe_load(audit_component.policy_document())
    assert set(document) <= set(known["policy_fields"])
    for rule in document["rules"]:
        assert set(rule) <= set(known["rule_fields"]), rule
        assert rule["level"] in known["levels"]
        for kinds in rule.get("resources", []):
            assert set(kinds) <= set(known["group_resources_fields"]), kinds


# --- the init container's script, run by this host's sh (busybox's sh, ls, tail and rm take the same options) ------


def run_link_script(tmp_path: Path, replicas: int, pods: dict[str, int], starting: str) -> Path:
    """Run the script for a pod `starting`, on a volume holding `pods` (name: seconds since its last write)."""
    import os
    import subprocess
    import time

    log_root, this_pod = tmp_path / "volume", tmp_path / "run" / "this-pod"
    this_pod.parent.mkdir(parents=True, exist_ok=True)
    log_root.mkdir(exist_ok=True)
    now = time.time()
    for pod, age in pods.items():
        (log_root / pod).mkdir()
        for name in (audit_component.LOG_FILE, "audit-2026-12-06T08-00-00.000.log"):
            (log_root / pod / name).write_text("{}\n")
            os.utime(log_root / pod / name, (now - age, now - age))
    env = {"PATH": os.environ["PATH"], "POD_NAME": starting, "LOG_ROOT": str(log_root), "THIS_POD": str(this_pod)}
    subprocess.run(["sh", "-c", audit_component.link_script(replicas)], env=env, check=True, timeout=30)
    return log_root


def test_a_starting_pod_links_its_own_directory_and_keeps_the_newest_others(tmp_path):
    old = {f"api-{age}": age for age in (10, 20, 30, 4000, 5000)}
    log_root = run_link_script(tmp_path, replicas=2, pods=old, starting="api-new")

    this_pod = tmp_path / "run" / "this-pod"
    assert this_pod.is_symlink() and this_pod.resolve() == (log_root / "api-new").resolve()
    # Two replicas: the three most recently written other pods stay (the running ones and one generation), with
    # their backups; older pods' directories go.
    assert sorted(path.name for path in log_root.iterdir()) == ["api-10", "api-20", "api-30", "api-new"]
    assert len(list((log_root / "api-30").iterdir())) == 2


def test_a_pod_restarting_keeps_its_own_log_and_relinks(tmp_path):
    log_root = run_link_script(tmp_path, replicas=1, pods={"api-a": 5, "api-b": 50}, starting="api-a")
    assert sorted(path.name for path in log_root.iterdir()) == ["api-a", "api-b"]
    assert (log_root / "api-a" / audit_component.LOG_FILE).read_text() == "{}\n"
    # The other pod's next start finds the link of a pod that ran here before: replaced, not followed.
    run_link_script(tmp_path, replicas=1, pods={}, starting="api-b")
    assert (tmp_path / "run" / "this-pod").resolve() == (log_root / "api-b").resolve()
    assert not (log_root / "api-a" / "api-b").exists()


def test_the_first_pod_on_an_empty_volume_starts_cleanly(tmp_path):
    log_root = run_link_script(tmp_path, replicas=1, pods={}, starting="api-first")
    assert [path.name for path in log_root.iterdir()] == ["api-first"]


def test_a_sleeping_tenant_keeps_its_audit_fields_so_sleep_and_wake_roll_nothing_else():
    awake, asleep = (
        plan(dev_config(tenants=[{"name": "a", "controlPlaneReplicas": 2, "sleeping": sleeping}]), preview=False)
        for sleeping in (False, True)
    )
    (tcp_awake,), (tcp_asleep,) = awake.of_type(TCP), asleep.of_type(TCP)
    deployment_awake = tcp_awake.inputs["spec"]["controlPlane"]["deployment"]
    deployment_asleep = tcp_asleep.inputs["spec"]["controlPlane"]["deployment"]
    assert (deployment_awake["replicas"], deployment_asleep["replicas"]) == (2, 0)
    assert {**deployment_asleep, "replicas": 2} == deployment_awake
    assert [r.inputs for r in awake.of_type(CLAIM)] == [r.inputs for r in asleep.of_type(CLAIM)]
