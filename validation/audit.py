"""A tenant's audit trail, read through the management cluster: python -m validation.audit TENANT (make audit).

Each API server pod writes its own JSON-lines file on the tenant's audit volume (components/audit.py); this reads
every kept file through the reader container of a running API server pod, one file per call, and prints the events
as a table or as JSON. A line that is not a whole audit.k8s.io/v1 Event (cut short by a write in progress, or a
file's end) is skipped and counted.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from components import audit
from validation.answers import listed, mapping, named, objects
from validation.exit_codes import EXIT_FAILED, EXIT_NO_OUTPUTS, EXIT_USAGE, ArgumentParser
from validation.host import Clock, Runner, SubprocessRunner
from validation.lab import Lab
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import OneTenantUnusable, Tenant, add_outputs_arguments, outputs_with_tenant

# What each group says about the credential (kubeadm's admin.conf is in system:masters up to v1.28 and in
# kubeadm:cluster-admins from v1.29: kubernetes/kubernetes cmd/kubeadm/app/constants/constants.go@v1.36.0).
CREDENTIAL_KINDS = (
    ("system:masters", "admin"),
    ("kubeadm:cluster-admins", "admin"),
    ("system:nodes", "node"),
    ("system:serviceaccounts", "service account"),
)
CONTROL_PLANE_USERS = frozenset(
    {"system:kube-controller-manager", "system:kube-scheduler", "system:kube-proxy", "system:apiserver"}
)
SINCE = re.compile(r"(\d+)([smhd])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
COLUMNS = ("TIME", "USER", "VERB", "RESOURCE", "NAMESPACE/NAME", "CODE")


@dataclass(frozen=True)
class Event:
    """What one audit.k8s.io/v1 Event says (kubernetes/apiserver pkg/apis/audit/v1/types.go@v0.36.0: Event,
    ObjectReference; the user is authentication/v1 UserInfo, the code metav1.Status's)."""

    time: datetime
    user: str
    groups: tuple[str, ...]
    credential: str
    verb: str
    resource: str
    namespace: str
    name: str
    code: int | None
    source_ips: tuple[str, ...]
    request_uri: str
    audit_id: str

    @property
    def target(self) -> str:
        return "/".join(part for part in (self.namespace, self.name) if part) or "-"

    def as_json(self) -> dict[str, Any]:
        found = asdict(self)
        found["time"] = self.time.isoformat().replace("+00:00", "Z")
        found["groups"], found["source_ips"] = list(self.groups), list(self.source_ips)
        return found


@dataclass(frozen=True)
class Trail:
    events: list[Event]
    skipped: int
    """Lines that were not a whole Event."""


def credential_kind(user: str, groups: Sequence[str]) -> str:
    if user in CONTROL_PLANE_USERS:
        return "control plane"
    for group, kind in CREDENTIAL_KINDS:
        if group in groups:
            return kind
    return "user"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError("not a list of strings")
    return tuple(value)


def _object(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


def timestamp(value: Any) -> datetime:
    """A MicroTime (RFC 3339 in UTC with microseconds) as an aware datetime."""
    moment = datetime.fromisoformat(_text(value))
    if moment.tzinfo is None:
        raise ValueError("no time zone")
    return moment.astimezone(UTC)


def event(line: str) -> Event:
    """One JSON line of the log as an Event; ValueError when it is not one."""
    found = json.loads(line)
    if not isinstance(found, dict) or found.get("kind") != "Event" or found.get("apiVersion") != "audit.k8s.io/v1":
        raise ValueError("not an audit.k8s.io/v1 Event")
    user = _object(found.get("user"))
    reference = _object(found.get("objectRef"))
    status = _object(found.get("responseStatus"))
    code = status.get("code")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        raise ValueError("responseStatus.code is not a number")
    username, groups = _text(user.get("username")), _strings(user.get("groups"))
    resource, subresource = _text(reference.get("resource")), _text(reference.get("subresource"))
    verb = _text(found.get("verb"))
    if not username or not verb:
        raise ValueError("no user or verb")
    return Event(
        time=timestamp(found.get("stageTimestamp") or found.get("requestReceivedTimestamp")),
        user=username,
        groups=groups,
        credential=credential_kind(username, groups),
        verb=verb,
        resource="/".join(part for part in (resource, subresource) if part) or _text(found.get("requestURI")),
        namespace=_text(reference.get("namespace")),
        name=_text(reference.get("name")),
        code=code,
        source_ips=_strings(found.get("sourceIPs")),
        request_uri=_text(found.get("requestURI")),
        audit_id=_text(found.get("auditID")),
    )


def parse(texts: Iterable[str]) -> Trail:
    """Every Event of the files' texts, oldest first; any other non-empty line is counted, never raised."""
    events: list[Event] = []
    skipped = 0
    for text in texts:
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                events.append(event(line))
            except (ValueError, TypeError, OverflowError, RecursionError):
                skipped += 1
    events.sort(key=lambda found: found.time)
    return Trail(events, skipped)


def since(text: str) -> timedelta:
    """SINCE as make audit takes it: a whole number and s, m, h or d (30m, 1h, 7d)."""
    matched = SINCE.fullmatch(text)
    if not matched or int(matched.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"SINCE={text!r}: give a whole number and s, m, h or d, such as 30m or 1h")
    return timedelta(**{UNITS[matched.group(2)]: int(matched.group(1))})


def chosen(trail: Trail, now: datetime, within: timedelta | None, user: str, verb: str) -> list[Event]:
    return [
        found
        for found in trail.events
        if (within is None or found.time >= now - within)
        and (not user or found.user == user)
        and (not verb or found.verb == verb)
    ]


def printable(text: str) -> str:
    """Text from the log for the terminal: what a request could carry that is not printable, as an escape."""
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode() for char in text)


def table(events: Sequence[Event]) -> str:
    rows = [COLUMNS] + [
        (
            found.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
            found.user,
            found.verb,
            found.resource,
            found.target,
            "-" if found.code is None else str(found.code),
        )
        for found in events
    ]
    rows = [tuple(printable(cell) for cell in row) for row in rows]
    widths = [max(len(row[column]) for row in rows) for column in range(len(COLUMNS))]
    lines = ("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)


def reader_pod(lab: Lab, tenant: Tenant) -> str:
    """A running API server pod of the tenant, whose reader container sees every kept file. Kamaji names the
    Deployment after the TenantControlPlane and selects its pods by matchLabels (clastix/kamaji
    internal/builders/controlplane/deployment.go@26.8.2-edge: setSelector)."""
    namespace = tenant.namespace
    deployment = lab.management.get("deployment", tenant.name, "-n", namespace)
    labels = _object(_object(_object(deployment.get("spec")).get("selector")).get("matchLabels"))
    if not labels:  # an empty selector would match every pod in the namespace
        raise CheckFailed(f"deployment {namespace}/{tenant.name} has no spec.selector.matchLabels")
    selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
    where = f"pods of {tenant.name}"
    for pod in listed(lab.management.get("pods", "-n", namespace, "-l", selector), where):
        statuses = objects(mapping(pod, "status", where), "containerStatuses", where)
        if any(s.get("name") == audit.READER_CONTAINER and "running" in mapping(s, "state", where) for s in statuses):
            return named(pod, where)[1]
    raise CheckFailed(
        f"no API server pod of {tenant.name} runs its {audit.READER_CONTAINER} container (asleep, starting, or made "
        "before the audit trail): its log is kept, and readable once the tenant is awake"
    )


def read(lab: Lab, tenant: Tenant, within: timedelta | None = None) -> Trail:
    """The tenant's kept log files, each read whole by its own call (one file stays under its rotation size)."""
    pod = reader_pod(lab, tenant)
    exec_ = ("exec", "-n", tenant.namespace, pod, "-c", audit.READER_CONTAINER, "--")
    # A file last written before the window holds nothing in it.
    recent = ["-mmin", f"-{int(within.total_seconds() // 60) + 1}"] if within else []
    listing = lab.management.checked(
        lab.management.run(
            *exec_, "find", audit.LOG_ROOT, "-mindepth", "2", "-maxdepth", "2", "-type", "f", "-name", "*.log", *recent
        )
    )
    texts = []
    for path in sorted(listing.stdout.split()):
        # A file rotated away between the listing and its read is gone; what it held is in its backup, listed too.
        read_file = lab.management.run(*exec_, "cat", path)
        if read_file.ok:
            texts.append(read_file.stdout)
    return parse(texts)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="python -m validation.audit",
        description="Print a tenant's recent audit events, read through the management cluster.",
        epilog=f"exit status: 0 done, {EXIT_FAILED} the log could not be read, {EXIT_NO_OUTPUTS} the stack outputs "
        f"could not be read, {EXIT_USAGE} wrong arguments",
    )
    parser.add_argument("tenant")
    add_outputs_arguments(parser)
    parser.add_argument("--since", type=since, help="only events this recent: 30m, 1h, 7d")
    parser.add_argument("--user", default="", help="only this user (exactly as the log names it)")
    parser.add_argument("--verb", default="", help="only this verb: get, list, create, delete, ...")
    parser.add_argument("--json", action="store_true", help="one JSON document: the events and the skipped count")
    return parser.parse_args(argv)


def main(
    argv: Sequence[str] | None = None,
    runner: Runner | None = None,
    clock: Clock | None = None,
    stdout: TextIO | None = None,
) -> int:
    args = parse_args(argv)
    out = stdout or sys.stdout
    runner = runner or SubprocessRunner()
    try:
        outputs = outputs_with_tenant(args.outputs, runner, args.stack, args.tenant)
    except OneTenantUnusable as problem:
        print(f"audit: {problem}", file=sys.stderr)
        return problem.code
    with tempfile.TemporaryDirectory(prefix="audit-") as workdir:
        lab = Lab.open(outputs, runner, Path(workdir), clock)
        try:
            trail = read(lab, outputs.tenants[args.tenant], args.since)
        except (CheckFailed, CheckSkipped) as problem:
            print(f"audit: cannot read the log of {args.tenant}: {problem}", file=sys.stderr)
            return EXIT_FAILED
    events = chosen(trail, lab.clock.wall(), args.since, args.user, args.verb)
    if args.json:
        json.dump({"events": [found.as_json() for found in events], "skipped": trail.skipped}, out, indent=2)
        print(file=out)
    else:
        print(table(events), file=out)
        if trail.skipped:
            print(f"({trail.skipped} malformed or partial lines skipped)", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
