"""The `team-isolation` check on recorded answers: as the team, no pod onto the node, and no way to another tenant.

The FakeLab of tests/test_validation.py answers the admin and management calls; here the team credential's calls
(cluster `<tenant>-team`) and the probe pod's nc lines are added, healthy first, then broken one thing at a time.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.test_validation import (
    FakeLab,
    error,
    healthy_lab,
    ok,
    outputs_with,
    recorded,
    result,
    validate,
)
from validation.checks.team_isolation import PROBE_SCRIPT, probe_outcomes, reach
from validation.stack_outputs import OutputsError, parse_outputs

TENANTS = ("tenant-a", "tenant-b")
CHECK = "team-isolation"
# Each tenant's API address (outputs.json endpoint) and its worker's InternalIP (nodes-tenant-*.json).
API = {"tenant-a": ("172.18.255.200", 6443), "tenant-b": ("172.18.255.201", 6443)}
WORKER = {"tenant-a": "172.18.0.3", "tenant-b": "172.18.0.4"}
METADATA = ("169.254.169.254", 80)
# What kubectl prints when Pod Security refuses a pod: the API server's 403 with Pod Security's reason and detail
# (kubernetes/pod-security-admission admission/admission.go, policy/check_privileged.go, check_hostPathVolumes.go,
# check_hostNamespaces.go, policy/checks.go ForbiddenDetail @v0.36.2).
POD_SECURITY_DETAIL = {
    "privileged-probe": 'privileged (container "main" must not set securityContext.privileged=true)',
    "host-path-probe": 'hostPath volumes (volume "node-root")',
    "host-network-probe": "host namespaces (hostNetwork=true)",
}
UNAUTHORIZED = (
    "error: You must be logged in to the server (the server has asked for the client to provide credentials)\n"
)
# busybox nc -z -v -v's words (networking/nc_bloaty.c@1_36_1; glibc's strerror for the errno it reports).
NC_WORDS = {
    "open": "{host} ({host}) open",
    "timed out": "nc: {host} ({host}): Connection timed out",
    "refused": "nc: {host} ({host}): Connection refused",
    "unreachable": "nc: {host} ({host}): No route to host",
}
NC_STATUS = {"open": 0, "timed out": 1, "refused": 1, "unreachable": 1}


def pod_security_refusal(name: str, level: str = "baseline:latest") -> str:
    return (
        f'Error from server (Forbidden): error when creating "STDIN": pods "{name}" is forbidden: '
        f'violates PodSecurity "{level}": {POD_SECURITY_DETAIL[name]}\n'
    )


def network(overrides: dict[tuple[str, int], str] | None = None) -> Callable[[str], object]:
    """The probe pod's exec: each target's nc line; a tenant's own API answers, everything else times out."""
    own = {API["tenant-a"], API["tenant-b"]}

    def answer(command: str):
        pairs = command.split(f"{PROBE_SCRIPT} sh ", 1)[1].split()
        lines = []
        for host, port in zip(pairs[::2], pairs[1::2], strict=True):
            how = (overrides or {}).get((host, int(port)), "open" if (host, int(port)) in own else "timed out")
            words = NC_WORDS[how].format(host=host)
            lines.append(f"probe {host} {port} {NC_STATUS[how]} {words}")
        return ok("\n".join(lines) + "\n")

    return answer


def team_answers(lab: FakeLab, tenant: str, *, refusal: Callable[[str], object] | None = None) -> None:
    team = f"{tenant}-team"
    lab.on(team, r"^create -f - -n \S+ --dry-run=server -o json$", ok(recorded("pod-dry-run-mutated.json")))
    for name in POD_SECURITY_DETAIL:
        reply = refusal(name) if refusal else error(pod_security_refusal(name))
        lab.on(team, r"--dry-run=server", reply, stdin=f'"name": "{name}"')
    lab.on(team, r"^create -f - -n \S+$", ok())
    lab.on(team, r"^get pod probe ", ok(recorded("pod-probe-running.json")))
    lab.on(team, r"^exec -n \S+ probe -- sh -c ", network())


def team_lab() -> FakeLab:
    lab = healthy_lab()
    for tenant in TENANTS:
        team_answers(lab, tenant)
    return lab


def with_team(document: dict, pod_security: dict[str, str] | None = None) -> None:
    document["teamKubeconfigs"] = {name: text for name, text in document["kubeconfigs"].items()}
    for tenant, level in (pod_security or {}).items():
        document["tenants"][tenant]["podSecurity"] = level


def run(lab: FakeLab, tmp_path, change: Callable[[dict], None] = with_team) -> dict:
    code, report = validate(lab, "--only", CHECK, outputs=outputs_with(tmp_path, change))
    return report


def exec_targets(lab: FakeLab, tenant: str) -> list[tuple[str, int]]:
    (call,) = lab.commands(f"{tenant}-team", r"^exec ")
    pairs = call.command.split(f"{PROBE_SCRIPT} sh ", 1)[1].split()
    return [(host, int(port)) for host, port in zip(pairs[::2], pairs[1::2], strict=True)]


# --- a lab whose guards hold ---------------------------------------------------------------


def test_each_tenant_passes_as_its_team_and_says_what_was_refused_and_what_stayed_silent(tmp_path):
    lab = team_lab()
    report = run(lab, tmp_path)

    for tenant, other in (("tenant-a", "tenant-b"), ("tenant-b", "tenant-a")):
        found = result(report, CHECK, tenant)
        assert found["status"] == "pass", found
        evidence = found["evidence"]
        for access in ("privileged", "host-path", "host-network"):
            assert f'{access} refused (403, Pod Security "baseline:latest")' in evidence
        own = ":".join(map(str, API[tenant]))
        assert f"own API server {own} answers" in evidence
        assert f"{other}'s kubelet on kamaji-{other}-w1 {WORKER[other]}:10250 timed out" in evidence
        assert f"{WORKER[other]}:10256 timed out" in evidence and "169.254.169.254:80 timed out" in evidence
        # The probes go to the tenant's own API, the other tenant's worker (never its own) and the metadata address.
        assert sorted(exec_targets(lab, tenant)) == sorted(
            [API[tenant], (WORKER[other], 10250), (WORKER[other], 10256), METADATA]
        )
    assert report["ok"]


def test_everything_is_done_with_the_team_credential_but_the_scratch_namespace(tmp_path):
    lab = team_lab()
    run(lab, tmp_path)

    for tenant in TENANTS:
        team_calls = [call.command.split()[0] for call in lab.calls if call.cluster == f"{tenant}-team"]
        assert set(team_calls) == {"create", "get", "exec"}
        # Four dry runs (an ordinary pod, then the three host-access pods), one real pod: the probe.
        dry_runs = lab.commands(f"{tenant}-team", r"--dry-run=server")
        assert [json.loads(call.stdin)["metadata"]["name"] for call in dry_runs] == [
            "ordinary-probe", "privileged-probe", "host-path-probe", "host-network-probe"
        ]
        [namespace] = [json.loads(c.stdin)["metadata"]["name"] for c in lab.commands(tenant, r"^create -f -$")]
        assert [call.command.split()[2] for call in lab.commands(tenant, r"^delete namespace ")] == [namespace]
        assert {call.kubeconfig_mode for call in lab.calls if call.cluster == f"{tenant}-team"} == {0o600}


def test_each_host_access_pod_asks_for_exactly_the_one_thing_baseline_forbids(tmp_path):
    lab = team_lab()
    run(lab, tmp_path)
    pods = {json.loads(c.stdin)["metadata"]["name"]: json.loads(c.stdin) for c in lab.commands("tenant-a-team", "dry")}

    privileged = pods["privileged-probe"]["spec"]
    assert privileged["containers"][0]["securityContext"] == {"privileged": True}
    assert "hostNetwork" not in privileged and "volumes" not in privileged
    host_path = pods["host-path-probe"]["spec"]
    assert host_path["volumes"] == [{"name": "node-root", "hostPath": {"path": "/"}}]
    assert "privileged" not in host_path["containers"][0]["securityContext"] and "hostNetwork" not in host_path
    host_network = pods["host-network-probe"]["spec"]
    assert host_network["hostNetwork"] is True and "volumes" not in host_network


# --- guards that do not hold -----------------------------------------------------------------


@pytest.mark.parametrize("admitted", list(POD_SECURITY_DETAIL))
def test_a_host_access_pod_the_team_may_create_fails_naming_it(tmp_path, admitted):
    lab = team_lab()
    lab.on("tenant-a-team", r"--dry-run=server", ok(recorded("pod-dry-run-mutated.json")), stdin=f'"{admitted}"')
    report = run(lab, tmp_path)

    found = result(report, CHECK, "tenant-a")
    access = admitted.removesuffix("-probe")
    assert found["status"] == "fail"
    assert f"a {access} pod was admitted" in found["reason"] and "tenant-a-team.kubeconfig" in found["reason"]
    assert result(report, CHECK, "tenant-b")["status"] == "pass"


@pytest.mark.parametrize(("how", "status"), [("open", "fail"), ("refused", "fail"), ("unreachable", "pass")])
def test_another_tenants_kubelet_that_answers_fails_and_one_that_stays_silent_passes(tmp_path, how, status):
    lab = team_lab()
    lab.on("tenant-a-team", r"^exec ", network({(WORKER["tenant-b"], 10250): how}))
    report = run(lab, tmp_path)

    found = result(report, CHECK, "tenant-a")
    assert found["status"] == status
    if status == "fail":
        assert found["reason"] == (
            f"from a pod of the tenant, tenant-b's kubelet on kamaji-tenant-b-w1 at {WORKER['tenant-b']}:10250 "
            f"answered ({how})"
        )
    else:
        assert f"{WORKER['tenant-b']}:10250 unreachable" in found["evidence"]


def test_the_metadata_address_answering_fails(tmp_path):
    lab = team_lab()
    lab.on("tenant-b-team", r"^exec ", network({METADATA: "open"}))
    found = result(run(lab, tmp_path), CHECK, "tenant-b")
    assert found["status"] == "fail" and "the metadata address at 169.254.169.254:80 answered (open)" in found["reason"]


# --- proofs that could not finish: never a pass ----------------------------------------------


@pytest.mark.parametrize("how", ["timed out", "refused", "unreachable"])
def test_a_pod_that_cannot_reach_its_own_api_server_proves_nothing(tmp_path, how):
    lab = team_lab()
    lab.on("tenant-a-team", r"^exec ", network({API["tenant-a"]: how}))
    found = result(run(lab, tmp_path), CHECK, "tenant-a")
    assert found["status"] == "unproven"
    assert found["reason"].startswith(f"the probe pod could not reach its own API server at 172.18.255.200:6443 ({how}")


def test_without_the_team_output_the_check_is_skipped_saying_how_to_get_it(tmp_path):
    report = run(team_lab(), tmp_path, change=lambda document: None)
    for tenant in TENANTS:
        found = result(report, CHECK, tenant)
        assert found["status"] == "skip"
        assert "no teamKubeconfigs" in found["reason"] and "make up" in found["reason"]


def test_a_tenant_missing_from_the_team_output_is_unproven(tmp_path):
    def without_b(document: dict) -> None:
        with_team(document)
        del document["teamKubeconfigs"]["tenant-b"]

    report = run(team_lab(), tmp_path, change=without_b)
    assert result(report, CHECK, "tenant-a")["status"] == "pass"
    found = result(report, CHECK, "tenant-b")
    assert found["status"] == "unproven"
    assert found["reason"].startswith("teamKubeconfigs holds no kubeconfig for tenant-b")


def test_a_revoked_team_credential_is_unproven_and_says_how_to_get_a_new_one(tmp_path):
    lab = team_lab()
    lab.on("tenant-a-team", r".", error(UNAUTHORIZED))
    found = result(run(lab, tmp_path), CHECK, "tenant-a")
    assert found["status"] == "unproven"
    assert "revoke-team" in found["reason"] and "make kubeconfigs" in found["reason"]
    assert not lab.commands("tenant-a-team", r"^exec ")


def test_a_credential_revoked_during_the_check_is_unproven_not_a_finding(tmp_path):
    lab = team_lab()
    lab.on("tenant-a-team", r"--dry-run=server", error(UNAUTHORIZED), stdin='"host-network-probe"')
    found = result(run(lab, tmp_path), CHECK, "tenant-a")
    assert found["status"] == "unproven" and "revoke-team" in found["reason"]


def test_a_team_that_may_not_create_pods_fails(tmp_path):
    lab = team_lab()
    rbac = (
        'Error from server (Forbidden): error when creating "STDIN": pods "ordinary-probe" is forbidden: User '
        '"system:serviceaccount:lab-team:team" cannot create resource "pods" in API group "" in the namespace "x"\n'
    )
    lab.on("tenant-a-team", r"--dry-run=server", error(rbac), stdin='"ordinary-probe"')
    found = result(run(lab, tmp_path), CHECK, "tenant-a")
    # Otherwise its 403s for the host-access pods would be RBAC's, proving nothing about Pod Security.
    assert found["status"] == "fail" and "may not create an ordinary pod" in found["reason"]


def test_a_dry_run_that_ends_without_an_admission_verdict_is_unproven(tmp_path):
    lab = team_lab()
    invalid = 'The Pod "host-path-probe" is invalid: spec.volumes[0].hostPath.path: Required value\n'
    lab.on("tenant-a-team", r"--dry-run=server", error(invalid), stdin='"host-path-probe"')
    found = result(run(lab, tmp_path), CHECK, "tenant-a")
    assert found["status"] == "unproven" and "host-path pod ended without an admission verdict" in found["reason"]


def test_a_probe_without_an_outcome_for_a_target_is_unproven(tmp_path):
    lab = team_lab()
    partial = ok(f"probe {API['tenant-a'][0]} 6443 0 {API['tenant-a'][0]} ({API['tenant-a'][0]}) open\n")
    lab.on("tenant-a-team", r"^exec ", partial)
    found = result(run(lab, tmp_path), CHECK, "tenant-a")
    assert found["status"] == "unproven" and found["reason"].startswith("the probe pod printed no outcome for")


def test_an_exec_the_team_may_not_run_is_unproven(tmp_path):
    lab = team_lab()
    lab.on("tenant-a-team", r"^exec ", error('Error from server (Forbidden): pods "probe" is forbidden: exec\n'))
    found = result(run(lab, tmp_path), CHECK, "tenant-a")
    assert found["status"] == "unproven" and found["reason"].startswith("the probes could not run in pod probe")


def test_another_tenant_whose_workers_cannot_be_listed_leaves_the_proof_unfinished(tmp_path):
    lab = team_lab()
    lab.on("tenant-b", r"^get nodes ", error('Error from server (InternalError): an error on the server\n'))
    found = result(run(lab, tmp_path), CHECK, "tenant-a")
    assert found["status"] == "unproven" and found["reason"].startswith("tenant-b's worker addresses could not be read")


# --- what the check can and cannot claim -------------------------------------------------------


def test_a_tenant_that_opted_out_of_pod_security_is_never_a_pass(tmp_path):
    lab = team_lab()
    report = run(lab, tmp_path, change=lambda document: with_team(document, {"tenant-a": "privileged"}))

    found = result(report, CHECK, "tenant-a")
    assert found["status"] == "skip"
    assert found["reason"].startswith("tenant-a opted out of Pod Security")
    # No host-access pod is tried there; the network is still probed, and tenant-b is checked as usual.
    assert [json.loads(c.stdin)["metadata"]["name"] for c in lab.commands("tenant-a-team", "dry")] == []
    assert "own API server 172.18.255.200:6443 answers" in found["reason"]
    assert result(report, CHECK, "tenant-b")["status"] == "pass"


def test_a_restricted_tenant_is_checked_like_a_baseline_one(tmp_path):
    lab = healthy_lab()
    team_answers(lab, "tenant-a", refusal=lambda name: error(pod_security_refusal(name, "restricted:latest")))
    team_answers(lab, "tenant-b")
    report = run(lab, tmp_path, change=lambda document: with_team(document, {"tenant-a": "restricted"}))
    found = result(report, CHECK, "tenant-a")
    assert found["status"] == "pass" and 'Pod Security "restricted:latest"' in found["evidence"]


def test_with_the_other_tenant_asleep_the_cross_tenant_part_is_said_to_be_unproven(tmp_path):
    def b_asleep(document: dict) -> None:
        with_team(document)
        document["tenants"]["tenant-b"]["sleeping"] = True

    lab = team_lab()
    lab.on("management", r"^get tenantcontrolplanes\.kamaji\.clastix\.io tenant-b ", ok(asleep_tcp()))
    report = run(lab, tmp_path, change=b_asleep)
    found = result(report, CHECK, "tenant-a")
    assert found["status"] == "pass"
    assert "tenant-b sleeps" in found["evidence"]
    assert "isolation between tenants is not proven here" in found["evidence"]
    assert sorted(exec_targets(lab, "tenant-a")) == sorted([API["tenant-a"], METADATA])
    assert result(report, CHECK, "tenant-b")["status"] == "sleeping"


def asleep_tcp() -> dict:
    tcp = recorded("tcp-tenant-b.json")
    tcp["status"]["kubernetesResources"]["version"]["status"] = "Sleeping"
    return tcp


def test_an_unknown_pod_security_level_in_the_outputs_is_refused_naming_the_key():
    document = recorded("outputs.json")
    with_team(document, {"tenant-a": "lenient"})
    with pytest.raises(OutputsError) as refused:
        parse_outputs(document)
    assert str(refused.value) == (
        "tenants.tenant-a.podSecurity: expected one of privileged, baseline, restricted, got 'lenient'"
    )


@pytest.mark.parametrize("written", ["[secret]", {"tenant-a": "[secret]"}, {"tenant-a": ""}, {"management": "x"}])
def test_team_kubeconfigs_that_cannot_be_used_are_refused(written):
    document = recorded("outputs.json")
    document["teamKubeconfigs"] = written
    with pytest.raises(OutputsError, match="teamKubeconfigs"):
        parse_outputs(document)


# --- the parser of the probe pod's output --------------------------------------------------------


@pytest.mark.parametrize(("status", "words", "expected"), [
    (0, "172.18.0.4 (172.18.0.4) open", "open"),
    (1, "nc: 172.18.0.4 (172.18.0.4): Connection timed out", "timed out"),
    (1, "nc: 172.18.0.4 (172.18.0.4): Operation timed out", "timed out"),  # musl's strerror
    (1, "nc: 172.18.0.4 (172.18.0.4): Connection refused", "refused"),
    (1, "nc: 172.18.0.4 (172.18.0.4): No route to host", "unreachable"),
    (1, "nc: 172.18.0.4 (172.18.0.4): Network unreachable", "unreachable"),
    (0, "", "unclear"),  # a status 0 without nc's "open" is no proof of a connection
    (1, "nc: bad address 'x'", "unclear"),
    (1, "", "unclear"),
])
def test_each_way_an_nc_attempt_ends_is_read_as_such(status, words, expected):
    assert reach(status, words) == expected


_HOSTS = st.from_regex(r"[0-9a-z.:-]{1,30}", fullmatch=True)
_WORDS = st.text(alphabet=string.printable.replace("\n", "").replace("\r", "").replace("\x0b", "").replace(
    "\x0c", ""), max_size=60)


@given(st.lists(st.tuples(_HOSTS, st.integers(0, 65535), st.integers(0, 255), _WORDS), max_size=6),
       st.lists(st.text(max_size=40), max_size=4))
def test_the_parser_reads_every_probe_line_and_nothing_else(probes, noise):
    lines = [f"probe {host} {port} {status} {words}".rstrip() for host, port, status, words in probes]
    noise = [line for line in noise if not re.match(r"\s*probe ", line)]
    outcomes = probe_outcomes("\n".join(noise + lines))
    expected = {}
    for host, port, status, words in probes:
        expected[(host, port)] = reach(status, words.strip())
    assert {key: how for key, (how, _) in outcomes.items()} == expected


@given(st.text(max_size=200))
def test_the_parser_never_fails_on_any_output(printed):
    for (host, port), (how, _) in probe_outcomes(printed).items():
        assert host and 0 <= port <= 99999 and how in {"open", "refused", "timed out", "unreachable", "unclear"}
