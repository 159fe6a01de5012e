"""How a check is declared and how its outcome becomes a CheckResult."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from validation.lab import Lab
from validation.results import CheckFailed, CheckResult, CheckSkipped, Status
from validation.stack_outputs import Tenant

ALL_TENANTS = "all tenants"


@dataclass(frozen=True)
class Check:
    name: str
    summary: str
    run: Callable[[Lab], list[CheckResult]]


def conclude(check: str, target: str, attempt: Callable[[], str]) -> CheckResult:
    """Run one attempt; it returns evidence, or raises CheckFailed / CheckSkipped."""
    try:
        return CheckResult(check, target, Status.PASS, evidence=attempt())
    except CheckSkipped as skipped:
        return CheckResult(check, target, Status.SKIP, reason=str(skipped))
    except CheckFailed as failed:
        return CheckResult(check, target, Status.FAIL, reason=str(failed))
    except Exception as error:  # a bug or an odd API answer must not hide the other results
        return CheckResult(check, target, Status.FAIL, reason=f"unexpected {type(error).__name__}: {error}")


def per_tenant(name: str, summary: str) -> Callable[[Callable[[Lab, Tenant], str]], Check]:
    """Declare a check that runs once for every tenant."""

    def declare(attempt: Callable[[Lab, Tenant], str]) -> Check:
        def run(lab: Lab) -> list[CheckResult]:
            return [conclude(name, tenant.name, lambda tenant=tenant: attempt(lab, tenant)) for tenant in lab.tenants]

        return Check(name, summary, run)

    return declare


def once(name: str, summary: str, target: str) -> Callable[[Callable[[Lab], str]], Check]:
    """Declare a check that runs once, against the management cluster or across tenants."""

    def declare(attempt: Callable[[Lab], str]) -> Check:
        return Check(name, summary, lambda lab: [conclude(name, target, lambda: attempt(lab))])

    return declare
