"""Reading the clusters: the management cluster and every tenant side by side, each within its bound."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from validation.answers import named
from validation.checks.tenancy import TCP_RESOURCE, kubernetes_version
from validation.host import Clock, Runner, SubprocessRunner, wait_for
from validation.kube import Kubectl
from validation.lab import Lab
from validation.results import CheckFailed
from validation.stack_outputs import MANAGEMENT, StackOutputs, Tenant, UnreadableTenant
from validation.status.rows import ControlPlanes, Document, document

T = TypeVar("T")

# What one kubectl call may print: a few MiB is a big tenant's pod list; sixteen tenants' worst stays bounded.
STATUS_STDOUT_LIMIT = 16 * 2**20
STATUS_STDERR_LIMIT = 64 * 2**10

# Bounds of one refresh. A call's --request-timeout stays below the call's own limit
# (validation/kube.py, request_timeout_within); a cluster's bound is above one call's limit, so
# a cluster that cannot be reached at all is shown with kubectl's own reason, not just "no answer".
STATUS_REQUEST_TIMEOUT = 5
STATUS_CALL_TIMEOUT = 8
CLUSTER_BOUND = 12
# How much longer than its bound a reader is awaited; its calls end on their own limits.
GRACE = 3


def kubectl_runner() -> SubprocessRunner:
    return SubprocessRunner(STATUS_STDOUT_LIMIT, STATUS_STDERR_LIMIT)


def read_side_by_side(readers: dict[str, Callable[[], T]], wait: float) -> dict[str, T | Exception]:
    """Run every reader in its own thread; what each returned or raised, or TimeoutError past wait.

    A reader still running when wait ends is left behind (a daemon thread): its answer is dropped.
    """
    answers: dict[str, T | Exception] = {}
    finished = {name: threading.Event() for name in readers}

    def run(name: str, reader: Callable[[], T]) -> None:
        try:
            answers[name] = reader()
        except Exception as error:  # shown in that cluster's row, never raised into the others'
            answers[name] = error
        finished[name].set()

    deadline = time.monotonic() + wait  # real time: the threads run in it, whatever clock the readers use
    for name, reader in readers.items():
        threading.Thread(target=run, args=(name, reader), name=f"status-{name}", daemon=True).start()
    for done in finished.values():
        wait_for(done, max(0.0, deadline - time.monotonic()))
    return {
        name: answers[name] if finished[name].is_set() else TimeoutError(f"no answer within {wait:g}s")
        for name in readers
    }


def bounded(kubectl: Kubectl, clock: Clock) -> Kubectl:
    kubectl.request_timeout, kubectl.call_timeout = STATUS_REQUEST_TIMEOUT, STATUS_CALL_TIMEOUT
    kubectl.deadline = (clock, clock.now() + CLUSTER_BOUND)
    return kubectl


def read_management(kubectl: Kubectl, clock: Clock) -> ControlPlanes:
    """Every TenantControlPlane by (namespace, name), in one call."""
    tcps = bounded(kubectl, clock).items(TCP_RESOURCE, "--all-namespaces")
    return {named(tcp, f"TenantControlPlane {position}", namespaced=True): tcp for position, tcp in enumerate(tcps)}


def no_management() -> ControlPlanes:
    raise CheckFailed("no managementKubeconfig in the stack outputs")


def read_tenant(kubectl: Kubectl, clock: Clock) -> dict[str, Any]:
    """The tenant's answers, each a list of objects (their fields are checked where tenant_status reads them)."""
    kubectl = bounded(kubectl, clock)
    return {
        "version": kubernetes_version(kubectl.get_raw("/version"), "/version"),
        "nodes": kubectl.items("nodes"),
        "pods": kubectl.items("pods", "--all-namespaces"),
        "quotas": kubectl.items("resourcequotas", "--all-namespaces"),
    }


def refresh(outputs: StackOutputs, names: Sequence[str] | None, runner: Runner, clock: Clock) -> Document:
    """Read the management cluster and the tenants side by side; the fleet as plain data."""
    with tempfile.TemporaryDirectory(prefix="kamaji-hami-lab-status-") as workdir:
        lab = Lab.open(outputs, runner, Path(workdir))
        # A tenant the outputs do not describe gets its row too, saying why; nothing of it is read.
        everyone: list[Tenant | UnreadableTenant] = list(lab.tenants)
        for unreadable in sorted(outputs.unreadable.values(), key=lambda tenant: tenant.position):
            everyone.insert(unreadable.position, unreadable)
        tenants = [tenant for tenant in everyone if not names or tenant.name in names]
        readers: dict[str, Callable[[], Any]] = {MANAGEMENT: lambda: read_management(lab.management, clock)}
        if MANAGEMENT not in lab.clusters:  # the tenants are still read; only their control planes are unknown
            readers[MANAGEMENT] = no_management
        # A sleeping tenant's API server does not run: only Kamaji is asked about it.
        for tenant in (tenant for tenant in tenants if isinstance(tenant, Tenant) and not tenant.sleeping):
            readers[tenant.name] = lambda tenant=tenant: read_tenant(lab.kubectl(tenant), clock)
        try:
            answers = read_side_by_side(readers, CLUSTER_BOUND + GRACE)
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C, SIGTERM: no reader's kubectl may outlive the view
            lab.interrupt()
            raise
    return document(tenants, answers, answers[MANAGEMENT], clock.wall())
