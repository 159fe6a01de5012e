"""kubectl bound to one cluster, and small readers for what it returns."""

from __future__ import annotations

import json
import math
import re
import threading
from pathlib import Path
from typing import Any

from components.kubeconfig import KubeconfigCluster, current_cluster
from validation.answers import MalformedAnswer, listed, mapping, objects, one_object, text
from validation.host import Clock, CommandResult, Runner
from validation.results import CheckFailed, CheckSkipped, CheckUnproven

# Every API request gives up after this long (kubectl --request-timeout); longer than the
# 10 s an admission webhook gets by default, so a slow webhook is not cut short.
REQUEST_TIMEOUT = 15
# A whole kubectl call. Against a server that accepts connections and never answers,
# kubectl retries discovery several times, REQUEST_TIMEOUT each; this caps the total.
CALL_TIMEOUT = 30
NAMESPACE_DELETE_TIMEOUT = 90
# The shortest call worth starting against a deadline: kubectl's request timeout is whole seconds,
# at least one, and must end before the call is stopped.
MIN_CALL_SECONDS = 2
# How kubectl reports a request that never reached the API (a silent or refused
# connection, a TLS failure): kubernetes/kubectl pkg/cmd/util/helpers.go, StandardErrorMessage
# for a *url.Error (kubectl v1.32.4 printed the first against a silent loopback socket).
# Errors from the API server itself read "Error from server ...".
CANNOT_CONNECT = ("Unable to connect to the server", "was refused - did you specify the right host or port?")
# Where `make up` and `make kubeconfigs` write the kubeconfigs users run kubectl with.
USER_KUBECONFIG_DIR = "kubeconfigs"


def cannot_connect(result: CommandResult) -> bool:
    """True when kubectl could not talk to the API server at all (or the call ran out of time)."""
    return not result.ok and (result.timed_out or any(words in result.stderr for words in CANNOT_CONNECT))


class Kubectl:
    def __init__(self, runner: Runner, kubeconfig: Path, cluster: str):
        self.runner = runner
        self.kubeconfig = kubeconfig
        self.cluster = cluster
        # None: the module's REQUEST_TIMEOUT and CALL_TIMEOUT, read at each call; the status view sets shorter ones.
        self.request_timeout: float | None = None
        self.call_timeout: float | None = None
        self.deadline: tuple[Clock, float] | None = None  # (clock, time) after which no call starts
        self.unreachable = ""  # why, once a call could not reach this cluster's API
        self._lock = threading.Lock()  # checks for several tenants share one management cluster

    @property
    def hint(self) -> str:
        """kubectl as a user runs it against this cluster, for copy-pasting from a report."""
        return f"kubectl --kubeconfig {USER_KUBECONFIG_DIR}/{self.cluster}.kubeconfig"

    def run(self, *args: str, stdin: str | None = None, timeout: float | None = None) -> CommandResult:
        """One kubectl call against this cluster; an unreachable cluster is reported once, then skipped."""
        if self.unreachable:
            raise CheckSkipped(f"{self.cluster} was unreachable earlier in this run ({self.unreachable})")
        result = self.call(*args, stdin=stdin, timeout=timeout)
        if result.interrupted:  # the run is ending: neither a finding nor worth another try
            raise CheckUnproven(f"`{self.hint} {' '.join(args)}` was interrupted")
        if cannot_connect(result):
            with self._lock:  # calls in flight side by side: the first to fail reports, the others skip
                first, self.unreachable = not self.unreachable, self.unreachable or result.error
            if not first:
                raise CheckSkipped(f"{self.cluster} was unreachable earlier in this run ({self.unreachable})")
            raise CheckFailed(f"cannot reach the {self.cluster} API server: {result.error}")
        return result

    def call(self, *args: str, stdin: str | None = None, timeout: float | None = None) -> CommandResult:
        """kubectl with this cluster's kubeconfig and bounded requests, whatever server args name."""
        timeout = timeout or self.call_timeout or CALL_TIMEOUT
        if self.deadline:
            clock, end = self.deadline
            remaining = end - clock.now()
            if remaining < MIN_CALL_SECONDS:
                raise CheckFailed(f"{self.cluster} ran out of time before `kubectl {' '.join(args)}`")
            timeout = min(timeout, remaining)
        request = request_timeout_within(self.request_timeout or REQUEST_TIMEOUT, timeout)
        argv = ("kubectl", "--kubeconfig", str(self.kubeconfig), f"--request-timeout={request}s", *args)
        return self.runner.run(argv, stdin=stdin, timeout=timeout)

    def checked(self, result: CommandResult) -> CommandResult:
        if not result.ok:
            command = " ".join(result.argv[4:])  # the temporary kubeconfig is gone once the run ends
            raise CheckFailed(f"`{self.hint} {command}` failed: {result.error}")
        return result

    def query(self, *args: str, stdin: str | None = None) -> Any:
        """Run a kubectl command that prints JSON and return the parsed document."""
        result = self.run(*args, stdin=stdin)
        if result.truncated:  # stopped at the runner's byte limit: what it printed is no whole answer
            raise CheckFailed(f"`{self.hint} {' '.join(args)}` printed more than {result.truncated} bytes: cut short")
        self.checked(result)
        try:
            return json.loads(result.stdout)
        except json.JSONDecodeError:
            raise CheckFailed(f"`{self.hint} {' '.join(args)}` did not print JSON") from None

    def get(self, *args: str) -> dict[str, Any]:
        """`kubectl get ARGS -o json`: a JSON object; one object, not a list, when ARGS name one (TYPE NAME)."""
        answer = self.query("get", *args, "-o", "json")
        what = f"`kubectl get {' '.join(args)}` on {self.cluster}"
        if len(args) > 1 and not args[1].startswith("-"):
            return one_object(answer, what)
        if not isinstance(answer, dict):
            raise MalformedAnswer(f"{what}: expected a JSON object, got {type(answer).__name__}")
        return answer

    def items(self, *args: str) -> list[dict[str, Any]]:
        """The items of `kubectl get ARGS -o json`, each an object (validation/answers.py)."""
        return listed(self.get(*args), f"`kubectl get {' '.join(args)}` on {self.cluster}")

    def get_raw(self, path: str) -> dict[str, Any]:
        return self.query("get", "--raw", path)

    def create(self, manifest: dict[str, Any], *flags: str) -> CommandResult:
        return self.run("create", "-f", "-", *flags, stdin=json.dumps(manifest))

    def must_create(self, manifest: dict[str, Any], *flags: str) -> None:
        self.checked(self.create(manifest, *flags))

    def admit(self, manifest: dict[str, Any], namespace: str) -> dict[str, Any]:
        """The object as admission webhooks would store it; a server-side dry run creates nothing."""
        args = ("create", "-f", "-", "-n", namespace, "--dry-run=server", "-o", "json")
        answer = self.query(*args, stdin=json.dumps(manifest))
        return one_object(answer, f"`kubectl {' '.join(args)}` on {self.cluster}")

    def delete_namespace(self, name: str) -> CommandResult:
        """Ask for the namespace to go; the caller waits for it (namespace_gone), one short request at a time."""
        return self.run("delete", "namespace", name, "--ignore-not-found", "--wait=false")

    def namespace_gone(self, name: str) -> tuple[bool, CommandResult]:
        """Whether the namespace is gone; MalformedAnswer when kubectl printed neither nothing nor its name,
        an answer that waiting will not change."""
        result = self.run("get", "namespace", name, "--ignore-not-found", "-o", "name")
        # -o name prints kind/name for a core kind (kubernetes/cli-runtime pkg/printers/name.go@v0.36.2, printObj).
        if result.ok and result.stdout.strip() not in ("", f"namespace/{name}"):
            raise MalformedAnswer(f"`{self.hint} get namespace {name} -o name` printed neither nothing nor its name")
        return result.ok and not result.stdout.strip(), result


def request_timeout_within(wanted: float, call_timeout: float) -> int:
    """kubectl's --request-timeout in whole seconds, ending before the call itself is stopped."""
    return max(1, min(math.ceil(wanted), math.ceil(call_timeout) - 1))


def kubeconfig_cluster(text: str) -> KubeconfigCluster:
    """The cluster entry that the kubeconfig's current context uses."""
    try:
        return current_cluster(text)
    except ValueError as problem:
        raise CheckFailed(str(problem)) from None


_QUANTITY = re.compile(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?")
_MULTIPLIERS = {
    None: 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def parse_quantity(text: str) -> int | None:
    """A whole-number Kubernetes quantity ("81920", "4k", "8Gi"), or None if it is not one.

    The API server re-serialises quantities in canonical form, so 2000 may come back as "2k".
    """
    match = _QUANTITY.fullmatch(str(text).strip())
    return int(match[1]) * _MULTIPLIERS[match[2]] if match else None


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The status condition of the given type, or {} if the object has none."""
    where = name_of(obj)
    for item in objects(mapping(obj, "status", where), "conditions", where):
        if item.get("type") == kind:
            return item
    return {}


def name_of(obj: dict[str, Any]) -> str:
    """The object's name for messages; "?" when it has none that reads as one."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) and name else "?"


def explain(item: dict[str, Any]) -> str:
    """Join reason and message of a condition, event or container state."""
    return ": ".join(part for part in (text(item, "reason", "condition"), text(item, "message", "condition")) if part)
