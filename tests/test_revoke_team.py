"""`make revoke-team TENANT=`: scripts/revoke_team.py against scripted kubectl and pulumi, on every failure path,
then `make up`.

kubectl's answers are shaped as kubectl prints them: `auth whoami` prints the user with -o jsonpath, and any 401 reads
"error: You must be logged in to the server (Unauthorized)" (kubernetes/kubectl pkg/cmd/util/helpers.go,
StandardErrorMessage). A ServiceAccount's legacy token is refused once its Secret is gone: the token
authenticator looks the Secret up on each request (kubernetes/kubernetes pkg/serviceaccount/legacy.go, the
lookup branch of Validate), which --service-account-lookup turns on by default and Kamaji leaves alone.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from components.team_access import TEAM_ACCOUNT, TEAM_NAMESPACE, TEAM_ROLE
from tests.plan import ROOT
from tests.script_module import script_module
from validation.host import CommandResult

revoke_team = script_module("revoke_team")

UNAUTHORIZED = "error: You must be logged in to the server (Unauthorized)\n"
ADMIN = {tenant: f"apiVersion: v1\nkind: Config\n# admin of {tenant}\n" for tenant in ("tenant-a", "tenant-b")}
TEAM = {tenant: f"apiVersion: v1\nkind: Config\n# team of {tenant}\n" for tenant in ("tenant-a", "tenant-b")}
URNS = {tenant: f"urn:pulumi:dev::kamaji-hami-lab::kamaji-hami-lab:index:Tenant$kamaji-hami-lab:index:TeamAccess$"
                f"kubernetes:core/v1:Secret::{tenant}-team-token" for tenant in ("tenant-a", "tenant-b")}
# Another tenant's Secret whose name ends the same way, and the observability reader's: only an exact name counts.
EXPORT = {"deployment": {"resources": [{"urn": urn} for urn in URNS.values()] + [
    {"urn": "urn:pulumi:dev::kamaji-hami-lab::kubernetes:core/v1:Secret::xtenant-a-team-token"},
    {"urn": "urn:pulumi:dev::kamaji-hami-lab::kubernetes:core/v1:Secret::observability-tenant-a-reader-token"},
]}}


RBAC = "rbac.authorization.k8s.io"


def rbac_binding(kind: str, name: str, role: str, *subjects: dict, namespace: str = "") -> dict:
    """A binding as `kubectl get clusterrolebindings,rolebindings -A -o json` prints it: each item with its kind;
    a ServiceAccount subject's apiGroup is "", left out (k8s.io/api rbac/v1 types.go Subject: omitempty)."""
    metadata = {"name": name, "uid": f"uid-{name}", "resourceVersion": "42", **({"namespace": namespace}
                                                                                  if namespace else {})}
    return {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": metadata,
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role}, "subjects": list(subjects)}


def service_account(namespace: str | None, name: str) -> dict:
    return {"kind": "ServiceAccount", "name": name, **({"namespace": namespace} if namespace else {})}


LABS_OWN = rbac_binding("ClusterRoleBinding", TEAM_ROLE, TEAM_ROLE, service_account(TEAM_NAMESPACE, TEAM_ACCOUNT))


def bindings_list(*items: dict) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                       "items": [LABS_OWN, *items]})


def outputs(teams: dict | None = None) -> str:
    document = {"kubeconfigs": ADMIN, "managementKubeconfig": "apiVersion: v1\n", "tenants": {}}
    if teams is not None:
        document["teamKubeconfigs"] = teams
    return json.dumps(document)


class Lab:
    """Scripted replies by command, in call order (the last repeats); records each call and the kubeconfig it
    was given (read at call time: the script's scratch files are gone afterwards)."""

    def __init__(self, **replies: list[tuple[int, str, str]]):
        self.replies = {"output": [(0, outputs(TEAM), "")], "delete": [(0, 'secret "team" deleted\n', "")],
                        "export": [(0, json.dumps(EXPORT), "")], "taint": [(0, "", "")],
                        "whoami": [(1, "", UNAUTHORIZED)], "bindings": [(0, bindings_list(), "")], **replies}
        self.calls: list[tuple[str, tuple[str, ...], str | None]] = []

    @staticmethod
    def kind(argv: tuple[str, ...]) -> str:
        joined = " ".join(argv)
        for kind, pattern in (("output", r"^pulumi stack output "), ("export", r"^pulumi stack export "),
                              ("taint", r"^pulumi state taint "), ("delete", r"^kubectl .* delete secret "),
                              ("whoami", r"^kubectl .* auth whoami "),
                              ("bindings",
                               r"^kubectl .* get clusterrolebindings,rolebindings --all-namespaces -o json$")):
            if re.search(pattern, joined):
                return kind
        raise AssertionError(f"unscripted command: {joined}")

    def run(self, argv, stdin=None, timeout=60, env=None) -> CommandResult:
        argv = tuple(argv)
        kind = self.kind(argv)
        kubeconfig = None
        if "--kubeconfig" in argv:
            with open(argv[argv.index("--kubeconfig") + 1]) as handle:
                kubeconfig = handle.read()
        self.calls.append((kind, argv, kubeconfig))
        replies = self.replies[kind]
        code, stdout, stderr = replies.pop(0) if len(replies) > 1 else replies[0]
        return CommandResult(argv, code, stdout, stderr)

    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.calls]

    def call(self, kind: str) -> tuple[tuple[str, ...], str | None]:
        (found,) = [(argv, kubeconfig) for found_kind, argv, kubeconfig in self.calls if found_kind == kind]
        return found


class FakeClock:
    def __init__(self):
        self.time = 0.0

    def now(self) -> float:
        return self.time

    def sleep(self, seconds: float) -> None:
        self.time += seconds


def run(lab: Lab, tenant: str = "tenant-a", clock: FakeClock | None = None) -> int:
    return revoke_team.main([tenant, "--stack", "dev"], runner=lab, clock=clock or FakeClock())


def test_the_token_secret_is_deleted_with_the_admin_kubeconfig_tainted_and_the_old_token_proven_refused(capsys):
    lab = Lab()

    assert run(lab, "tenant-b") == 0

    assert lab.kinds() == ["output", "delete", "export", "taint", "whoami", "bindings"]
    delete, kubeconfig = lab.call("delete")
    assert kubeconfig == ADMIN["tenant-b"]
    assert delete[delete.index("--namespace") + 1] == TEAM_NAMESPACE
    assert delete[delete.index("secret") + 1] == TEAM_ACCOUNT and "--ignore-not-found" in delete
    taint, _ = lab.call("taint")
    assert taint == ("pulumi", "state", "taint", "--yes", "--stack", "dev", URNS["tenant-b"])
    _, kubeconfig = lab.call("whoami")
    assert kubeconfig == TEAM["tenant-b"], "the proof uses the old team credential, not the admin one"
    err = capsys.readouterr().err
    assert "refuses the old team token (401)" in err
    assert "token-of" not in err and "admin of" not in err
    assert f"no binding but the lab's holds ClusterRole {TEAM_ROLE} in tenant tenant-b" in err
    _, kubeconfig = lab.call("bindings")
    assert kubeconfig == ADMIN["tenant-b"]


def test_bindings_of_the_team_role_that_outlive_the_revocation_are_listed_and_none_deleted(capsys):
    made = [
        rbac_binding("ClusterRoleBinding", "ci-admin", TEAM_ROLE, service_account("team-a", "ci")),
        rbac_binding("RoleBinding", "bot", TEAM_ROLE, service_account(None, "bot"),
                     {"kind": "User", "apiGroup": RBAC, "name": "alice"}, namespace="team-b"),
    ]
    others = [
        rbac_binding("ClusterRoleBinding", "viewers", "view", service_account("team-a", "viewer")),
        rbac_binding("ClusterRoleBinding", "lab-team-x", "lab-team-x", service_account("team-a", "x")),
        rbac_binding("RoleBinding", TEAM_ROLE, "edit", service_account("team-a", "y"), namespace="team-a"),
    ]
    lab = Lab(bindings=[(0, bindings_list(*made, *others), "")])

    assert run(lab) == 0

    err = capsys.readouterr().err
    listed = err.split(f"these bindings of ClusterRole {TEAM_ROLE} stay")[1].splitlines()[1:]
    assert listed == ["  ClusterRoleBinding ci-admin: ServiceAccount team-a/ci",
                      "  RoleBinding team-b/bot: ServiceAccount team-b/bot, User alice"]
    assert [kind for kind in lab.kinds() if kind == "delete"] == ["delete"], "only the token Secret is deleted"


def test_the_labs_own_binding_is_listed_once_it_names_anyone_but_the_team_account(capsys):
    widened = rbac_binding("ClusterRoleBinding", TEAM_ROLE, TEAM_ROLE, service_account(TEAM_NAMESPACE, TEAM_ACCOUNT),
                           service_account("team-a", "ci"))
    lab = Lab(bindings=[(0, json.dumps({"apiVersion": "v1", "kind": "List", "items": [widened]}), "")])

    assert run(lab) == 0
    assert (f"  ClusterRoleBinding {TEAM_ROLE}: ServiceAccount {TEAM_NAMESPACE}/{TEAM_ACCOUNT}, "
            "ServiceAccount team-a/ci") in capsys.readouterr().err


@pytest.mark.parametrize("reply", [
    (1, "", "Unable to connect to the server: dial tcp 172.18.255.201:6443: i/o timeout\n"),
    (0, "{", ""),
    (0, json.dumps({"kind": "Status"}), ""),
    (0, json.dumps({"items": ["not a binding"]}), ""),
    (0, json.dumps({"items": [{"kind": "RoleBinding", "roleRef": {"kind": "ClusterRole", "name": TEAM_ROLE},
                               "subjects": ["not a subject"]}]}), ""),
], ids=["unreachable", "not-json", "no-items", "an-item-no-object", "a-subject-no-object"])
def test_bindings_that_could_not_be_listed_are_never_reported_as_none(capsys, reply):
    lab = Lab(bindings=[reply])

    assert run(lab) == 0, "the token is revoked all the same"

    err = capsys.readouterr().err
    assert f"could not list the bindings of ClusterRole {TEAM_ROLE} in tenant tenant-a" in err
    assert "no binding but the lab's" not in err


def test_a_token_still_accepted_for_a_while_is_probed_until_refused():
    lab = Lab(whoami=[(0, TEAM_NAMESPACE, ""), (0, TEAM_NAMESPACE, ""), (1, "", UNAUTHORIZED)])
    clock = FakeClock()

    assert run(lab, clock=clock) == 0
    assert lab.kinds().count("whoami") == 3 and clock.time < revoke_team.REVOKED_WITHIN


@pytest.mark.parametrize("answer, shown", [
    ((0, "system:serviceaccount:lab-team-access:team", ""), "still accepted as system:serviceaccount"),
    ((1, "", "Unable to connect to the server: dial tcp 172.18.255.201:6443: connect: connection refused\n"),
     "connection refused"),
    ((1, "", "error: You must be logged in\n"), "You must be logged in"),
], ids=["accepted", "unreachable", "other-message"])
def test_a_revocation_that_cannot_be_proven_within_a_minute_fails_and_is_not_claimed(capsys, answer, shown):
    lab = Lab(whoami=[answer])
    clock = FakeClock()

    assert run(lab, clock=clock) == 1

    err = capsys.readouterr().err
    assert "did not refuse the old team token within 60s" in err and shown in err
    assert "do not count it as revoked" in err and "refuses the old team token (401)" not in err
    assert clock.time >= revoke_team.REVOKED_WITHIN
    assert "taint" in lab.kinds(), "the Secret is gone either way: the next up must make a new one"


def test_a_failed_delete_changes_nothing_and_says_the_credential_still_works(capsys):
    lab = Lab(delete=[(1, "", "Unable to connect to the server: dial tcp 172.18.255.201:6443: i/o timeout\n")])

    assert run(lab) == 1

    assert lab.kinds() == ["output", "delete"]
    err = capsys.readouterr().err
    assert "could not delete the team's token Secret lab-team-access/team in tenant tenant-a" in err
    assert "i/o timeout" in err and "the team credential still works" in err and "make wake" in err


@pytest.mark.parametrize("failing, replies, shown", [
    ("export", [(255, "", "error: passphrase must be set\n")], "passphrase must be set"),
    ("export", [(0, "not json", "")], "cannot find the team token"),
    ("export", [(0, json.dumps({"deployment": {"resources": []}}), "")], "no resource(s) named tenant-a-team-token"),
    ("taint", [(255, "", "error: the stack is locked\n")], "the stack is locked"),
])
def test_a_stack_not_told_still_proves_the_revocation_and_asks_to_run_it_again(capsys, failing, replies, shown):
    lab = Lab(**{failing: replies})

    assert run(lab) == 1

    assert lab.kinds()[-2:] == ["whoami", "bindings"]
    err = capsys.readouterr().err
    assert shown in err
    assert "the old team token is refused, but the stack was not told to issue a new one" in err
    assert "make revoke-team TENANT=tenant-a again" in err


def test_an_unknown_tenant_is_refused_before_anything_changes(capsys):
    lab = Lab()

    assert run(lab, "tenant-c") == 64

    assert lab.kinds() == ["output"]
    assert "no team credential of tenant 'tenant-c' (its tenants with one: tenant-a, tenant-b)" in (
        capsys.readouterr().err)


def test_a_lab_made_before_team_credentials_is_refused(capsys):
    lab = Lab(output=[(0, outputs(None), "")])

    assert run(lab) == 64
    assert lab.kinds() == ["output"] and "its tenants with one: none" in capsys.readouterr().err


@pytest.mark.parametrize("reply, shown", [
    ((255, "", "error: no stack named 'dev' found\n"), "no stack named 'dev' found"),
    ((0, outputs({"tenant-a": "[secret]"}), ""), "--show-secrets"),
    ((0, "{", ""), "not valid JSON"),
])
def test_unreadable_outputs_change_nothing(capsys, reply, shown):
    lab = Lab(output=[reply])

    assert run(lab) == 2
    assert lab.kinds() == ["output"] and shown in capsys.readouterr().err


def test_make_revokes_then_runs_up_which_writes_the_new_kubeconfigs(tmp_path):
    dry = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "-n", "revoke-team", "TENANT=tenant-b",
         f"VENV={tmp_path / 'venv'}"],
        capture_output=True, text=True, check=False,
    )
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    revoke = next(i for i, line in enumerate(lines) if line.endswith("scripts/revoke_team.py tenant-b --stack dev"))
    up = next(i for i, line in enumerate(lines) if line == "pulumi up --yes --stack dev")
    write = next(i for i, line in enumerate(lines) if "write_kubeconfigs.py" in line)
    assert revoke < up < write
    assert "pulumi stack select dev" in lines[:revoke], "an existing stack: revoke-team never creates one"


def test_make_revoke_team_without_a_tenant_does_nothing_but_say_so(tmp_path):
    done = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "revoke-team",
                           f"VENV={tmp_path / 'venv'}"], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "name the tenant: make revoke-team TENANT=<name>" in done.stderr


def test_the_live_lab_hits_the_guards_with_the_team_credential_then_revokes_it():
    from tests.test_make_and_workflows import position, workflow

    (job,) = workflow("live.yml")["jobs"].values()
    names = [step.get("run", step.get("uses", "")) for step in job["steps"]]
    up, revoke, down = position(names, "make up"), position(names, "make revoke-team TENANT="), position(names,
                                                                                                        "make down")
    assert up < revoke < down
    script = names[revoke].splitlines()
    order = ["cp kubeconfigs/tenant-a-team.kubeconfig", "team create namespace", "pod-security.kubernetes.io/enforce",
             "team -n kube-system create", "make revoke-team TENANT=tenant-a", "old-team.kubeconfig\" auth whoami",
             "team auth whoami"]
    assert [position(script, fragment) for fragment in order] == sorted(position(script, f) for f in order)
