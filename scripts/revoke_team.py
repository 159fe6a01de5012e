#!/usr/bin/env python3
"""Take a tenant's team credential back: its token stops working now, the tenant's CA stays.

`make revoke-team TENANT=<name>` runs this, then `make up`, which issues a new team credential and writes it to
kubeconfigs/<tenant>-team.kubeconfig. This script:

1. deletes the team's token Secret with the tenant's admin kubeconfig: the API server checks that a legacy token's
   Secret still exists on every request (--service-account-lookup, on by default), so the token is refused from
   then on;
2. marks that Secret in the stack's state to be replaced (`pulumi state taint`): the next `pulumi up`, this one's
   or a later one if it fails, makes a new Secret, whose token the next kubeconfigs carry;
3. proves the revocation: the old team kubeconfig must be refused (401) within REVOKED_WITHIN seconds;
4. lists, and leaves, every binding of the team's ClusterRole but the lab's own: a ServiceAccount the team
   bound to it keeps the team's rights, and its tokens keep working, until the operator deletes it.

A revocation does not undo what the credential did: objects, roles and bindings the team made stay
(docs/operations.md, "Team credentials").
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

# Run as a file, so make the repository importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.team_access import TEAM_ACCOUNT, TEAM_NAMESPACE, TEAM_ROLE, token_resource_name  # noqa: E402
from snapshot.urn import urn_named  # noqa: E402
from validation.exit_codes import EXIT_FAILED, EXIT_NO_OUTPUTS, EXIT_USAGE, ArgumentParser  # noqa: E402
from validation.host import Clock, Runner, SubprocessRunner, poll  # noqa: E402
from validation.stack_outputs import (  # noqa: E402
    DEFAULT_STACK,
    OutputsError,
    kubeconfigs_in,
    pulumi_environment,
    read_outputs_document,
    team_kubeconfigs_in,
    write_private_file,
)

REVOKED_WITHIN = 60.0
PROBE_INTERVAL = 5.0
KUBECTL_TIMEOUT = "20s"
UNAUTHORIZED = "You must be logged in to the server"


class RevokeFailed(Exception):
    """A step failed: the message says what holds now."""


def main(argv: Sequence[str] | None = None, runner: Runner | None = None, clock: Clock | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tenant", metavar="TENANT")
    parser.add_argument("--stack", default=DEFAULT_STACK, help=f"the stack to read (default: {DEFAULT_STACK})")
    args = parser.parse_args(argv)
    runner = runner or SubprocessRunner()
    try:
        document = read_outputs_document(None, runner, stack=args.stack)
        admin, teams = kubeconfigs_in(document), team_kubeconfigs_in(document) or {}
    except OutputsError as error:
        print(f"revoke_team: {error}", file=sys.stderr)
        return EXIT_NO_OUTPUTS
    if args.tenant not in teams or args.tenant not in admin:
        known = ", ".join(sorted(teams)) or "none"
        print(f"revoke_team: stack {args.stack} has no team credential of tenant {args.tenant!r} (its tenants with "
              f"one: {known})", file=sys.stderr)
        return EXIT_USAGE
    with tempfile.TemporaryDirectory(prefix="revoke-team-") as scratch:  # mode 0700
        admin_file, team_file = Path(scratch) / "admin", Path(scratch) / "team"
        write_private_file(admin_file, admin[args.tenant])
        write_private_file(team_file, teams[args.tenant])
        try:
            revoke(args.tenant, args.stack, admin_file, team_file, runner, clock or Clock())
        except RevokeFailed as error:
            print(f"revoke_team: {error}", file=sys.stderr)
            return EXIT_FAILED
    return 0


def revoke(tenant: str, stack: str, admin_file: Path, team_file: Path, runner: Runner, clock: Clock) -> None:
    secret = f"{TEAM_NAMESPACE}/{TEAM_ACCOUNT}"
    deleted = runner.run(
        ["kubectl", "--kubeconfig", str(admin_file), "--request-timeout", KUBECTL_TIMEOUT, "--namespace",
         TEAM_NAMESPACE, "delete", "secret", TEAM_ACCOUNT, "--ignore-not-found", "--wait=true"],
        timeout=90,
    )
    if not deleted.ok:
        raise RevokeFailed(
            f"could not delete the team's token Secret {secret} in tenant {tenant}: {deleted.error}. Nothing "
            "changed: the team credential still works (a sleeping tenant must be woken first: make wake)"
        )
    print(f"revoke_team: deleted the team's token Secret {secret} in tenant {tenant}", file=sys.stderr)
    tainted = taint(tenant, stack, runner)
    proven, answer = poll(clock, REVOKED_WITHIN, lambda: refused(team_file, runner), PROBE_INTERVAL)
    if not proven:
        raise RevokeFailed(
            f"the Secret is gone, but tenant {tenant}'s API server did not refuse the old team token within "
            f"{REVOKED_WITHIN:.0f}s (last answer: {answer}); do not count it as revoked"
        )
    print(f"revoke_team: tenant {tenant}'s API server refuses the old team token (401)", file=sys.stderr)
    report_bindings(tenant, admin_file, runner)
    if not tainted:
        raise RevokeFailed(
            "the old team token is refused, but the stack was not told to issue a new one: run "
            f"make revoke-team TENANT={tenant} again (the Secret is gone, so its delete is skipped)"
        )


def taint(tenant: str, stack: str, runner: Runner) -> bool:
    """Marks the token Secret for replacement in the stack; False (and says why) when it could not."""
    environment = pulumi_environment()
    exported = runner.run(["pulumi", "stack", "export", "--stack", stack], timeout=120, env=environment)
    try:
        if not exported.ok:
            raise ValueError(f"`pulumi stack export` failed: {exported.error}")
        urn = urn_named(json.loads(exported.stdout), token_resource_name(tenant))
    except ValueError as error:  # JSONDecodeError is one
        print(f"revoke_team: cannot find the team token in stack {stack}: {error}", file=sys.stderr)
        return False
    tainted = runner.run(["pulumi", "state", "taint", "--yes", "--stack", stack, urn], timeout=120, env=environment)
    if not tainted.ok:
        print(f"revoke_team: `pulumi state taint` failed: {tainted.error}", file=sys.stderr)
        return False
    return True


LAB_SUBJECT = ("ServiceAccount", TEAM_NAMESPACE, TEAM_ACCOUNT)


def report_bindings(tenant: str, admin_file: Path, runner: Runner) -> None:
    """Says which bindings of the team's ClusterRole outlive the revocation; deletes none (they are the team's
    or the operator's to judge). The lab's own binding counts too once it names anyone but the team account."""
    answer = runner.run(
        ["kubectl", "--kubeconfig", str(admin_file), "--request-timeout", KUBECTL_TIMEOUT, "get",
         "clusterrolebindings,rolebindings", "--all-namespaces", "-o", "json"],
        timeout=30,
    )
    try:
        if not answer.ok:
            raise ValueError(answer.error)
        found = [describe(binding) for binding in json.loads(answer.stdout)["items"] if holds_team_role(binding)]
    # JSONDecodeError is a ValueError; an item or subject that is no object has no .get.
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        print(f"revoke_team: could not list the bindings of ClusterRole {TEAM_ROLE} in tenant {tenant} ({error}); "
              "ServiceAccounts the team bound to it keep its rights: look with kubectl get clusterrolebindings,"
              "rolebindings -A", file=sys.stderr)
        return
    if not found:
        print(f"revoke_team: no binding but the lab's holds ClusterRole {TEAM_ROLE} in tenant {tenant}",
              file=sys.stderr)
        return
    lines = "".join(f"\n  {binding}" for binding in found)
    print(f"revoke_team: these bindings of ClusterRole {TEAM_ROLE} stay, and their subjects keep the team's rights "
          f"(tokens included) until you delete them with the admin kubeconfig:{lines}", file=sys.stderr)


def holds_team_role(binding: dict) -> bool:
    role = binding.get("roleRef") or {}
    if role.get("kind") != "ClusterRole" or role.get("name") != TEAM_ROLE:
        return False
    metadata = binding.get("metadata") or {}
    lab_own = binding.get("kind") == "ClusterRoleBinding" and metadata.get("name") == TEAM_ROLE
    return not lab_own or any((subject.get("kind"), subject.get("namespace"), subject.get("name")) != LAB_SUBJECT
                              for subject in binding.get("subjects") or [])


def describe(binding: dict) -> str:
    metadata = binding.get("metadata") or {}
    name = "/".join(part for part in (metadata.get("namespace"), metadata.get("name")) if part)
    # A RoleBinding's ServiceAccount without a namespace is of the binding's namespace.
    subjects = ", ".join(
        f"{subject.get('kind')} " + "/".join(part for part in (
            subject.get("namespace") or (metadata.get("namespace") if subject.get("kind") == "ServiceAccount" else ""),
            subject.get("name")) if part)
        for subject in binding.get("subjects") or []
    ) or "no subjects"
    return f"{binding.get('kind')} {name}: {subjects}"


def refused(team_file: Path, runner: Runner) -> tuple[bool, str]:
    """Whether the API server refuses the team's token (401), and what it answered."""
    answer = runner.run(
        ["kubectl", "--kubeconfig", str(team_file), "--request-timeout", KUBECTL_TIMEOUT, "auth", "whoami",
         "-o", "jsonpath={.status.userInfo.username}"],
        timeout=30,
    )
    if answer.ok:
        return False, f"still accepted as {answer.stdout.strip() or 'a user'}"
    # kubectl's message for any 401, whatever the server's text (kubernetes/kubectl pkg/cmd/util/helpers.go,
    # StandardErrorMessage, IsUnauthorized).
    return UNAUTHORIZED in answer.stderr, answer.error


if __name__ == "__main__":
    sys.exit(main())
