"""How a check is declared and how its outcome becomes a CheckResult."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from validation.host import wait_for
from validation.lab import Lab
from validation.results import CheckFailed, CheckResult, CheckSkipped, CheckUnproven, Status, TenantAsleep
from validation.stack_outputs import Tenant

ALL_TENANTS = "all tenants"


@dataclass(frozen=True)
class Check:
    name: str
    summary: str
    run: Callable[[Lab], list[CheckResult]]
    for_tenant: Callable[[Lab, Tenant], CheckResult] | None = None  # set for a check that runs per tenant


def conclude(check: str, target: str, attempt: Callable[[], str]) -> CheckResult:
    """Run one attempt; it returns evidence, or raises CheckFailed / CheckSkipped / CheckUnproven."""
    try:
        return CheckResult(check, target, Status.PASS, evidence=attempt())
    except CheckSkipped as skipped:
        return CheckResult(check, target, Status.SKIP, reason=str(skipped))
    except CheckUnproven as unproven:
        return CheckResult(check, target, Status.UNPROVEN, reason=str(unproven))
    except TenantAsleep as asleep:
        return CheckResult(check, target, Status.SLEEPING, reason=str(asleep))
    except CheckFailed as failed:
        return CheckResult(check, target, Status.FAIL, reason=str(failed))
    except Exception as error:  # a bug or an odd API answer must not hide the other results
        return CheckResult(check, target, Status.FAIL, reason=f"unexpected {type(error).__name__}: {error}")


def not_checked_asleep(lab: Lab, tenant: Tenant) -> str:
    """What a check does for a sleeping tenant: nothing, its API server does not run."""
    raise TenantAsleep(f"{tenant.name} sleeps (sleeping: true); checked again once it wakes")


def per_tenant(
    name: str, summary: str, asleep: Callable[[Lab, Tenant], str] = not_checked_asleep
) -> Callable[[Callable[[Lab, Tenant], str]], Check]:
    """Declare a check that runs once for every tenant; `asleep` runs instead for a sleeping one."""

    def declare(attempt: Callable[[Lab, Tenant], str]) -> Check:
        def for_tenant(lab: Lab, tenant: Tenant) -> CheckResult:
            return conclude(name, tenant.name, lambda: (asleep if tenant.sleeping else attempt)(lab, tenant))

        def run(lab: Lab) -> list[CheckResult]:
            return [for_tenant(lab, tenant) for tenant in lab.tenants]

        return Check(name, summary, run, for_tenant)

    return declare


def once(name: str, summary: str, target: str) -> Callable[[Callable[[Lab], str]], Check]:
    """Declare a check that runs once, against the management cluster or across tenants."""

    def declare(attempt: Callable[[Lab], str]) -> Check:
        return Check(name, summary, lambda lab: [conclude(name, target, lambda: attempt(lab))])

    return declare


def run_checks(lab: Lab, checks: Sequence[Check], report: Callable[[CheckResult], None]) -> list[CheckResult]:
    """Run the checks in order; each run of consecutive per-tenant checks, tenants side by side.

    A tenant goes through its checks of such a run in order, in its own thread and on its own
    strand of the clock, so the run lasts as long as its slowest tenant, not the sum of them. A
    check that runs once (platform, isolation) waits for every tenant before it and holds back
    those after it. report sees each result as it comes; the list returned is in check order,
    then in the order of the tenants.
    """
    lock = threading.Lock()  # one report line at a time

    def reported(result: CheckResult) -> CheckResult:
        with lock:
            report(result)
        return result

    results: list[CheckResult] = []
    for stage in stages(checks):
        if stage[0].for_tenant is None:
            results += [reported(result) for result in stage[0].run(lab)]
        else:
            results += tenants_side_by_side(lab, stage, reported)
    return results


def stages(checks: Sequence[Check]) -> list[list[Check]]:
    """A once check alone, consecutive per-tenant checks together."""
    grouped: list[list[Check]] = []
    for check in checks:
        if check.for_tenant is not None and grouped and grouped[-1][0].for_tenant is not None:
            grouped[-1].append(check)
        else:
            grouped.append([check])
    return grouped


def tenants_side_by_side(
    lab: Lab, stage: list[Check], reported: Callable[[CheckResult], CheckResult]
) -> list[CheckResult]:
    by_tenant: dict[str, list[CheckResult]] = {tenant.name: [] for tenant in lab.tenants}

    interrupted = threading.Event()
    # Awaited instead of Thread.join: a join that Ctrl-C interrupts can mark a running thread as ended
    # (CPython 3.11 Lib/threading.py, _wait_for_tstate_lock), and the cleanup would not be awaited.
    done = {tenant.name: threading.Event() for tenant in lab.tenants}

    def work(tenant: Tenant, strand: Lab) -> None:
        try:
            for check in stage:
                if interrupted.is_set():
                    return
                by_tenant[tenant.name].append(reported(check.for_tenant(strand, tenant)))
        finally:
            done[tenant.name].set()

    # Every strand starts now, before any of them runs: the same clusters and warnings, its own waits.
    strands = [replace(lab, clock=lab.clock.strand()) for _ in lab.tenants]
    threads = [
        threading.Thread(target=work, args=(tenant, strand), name=f"checks-{tenant.name}")
        for tenant, strand in zip(lab.tenants, strands, strict=True)
    ]
    try:
        for thread in threads:
            thread.start()  # inside the try: Ctrl-C may come while the first tenants already run
        for finished in done.values():
            wait_for(finished)
    except BaseException:  # Ctrl-C or SIGTERM reach this thread only
        # No tenant starts another check; the running ones end at once, their kubectl calls stopped,
        # while the kubeconfigs still exist (the namespaces they leave are named in lab.warnings).
        interrupted.set()
        lab.interrupt()
        for thread, finished in zip(threads, done.values(), strict=True):
            if thread.ident is not None:  # started
                finished.wait()
        raise
    return [by_tenant[tenant.name][position] for position in range(len(stage)) for tenant in lab.tenants]
