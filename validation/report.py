"""Presenting results: aligned lines for people, a JSON document for machines."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, TextIO

from validation.results import CheckResult, Status


class TextReport:
    """A line per result as it comes (tenants run side by side, so theirs interleave), then per target."""

    def __init__(self, stream: TextIO, check_names: Iterable[str], targets: Iterable[str]):
        self.stream = stream
        self.check_width = max(map(len, check_names), default=0)
        self.targets = list(targets)
        self.target_width = max(map(len, self.targets), default=0)

    def line(self, result: CheckResult) -> None:
        detail = result.evidence if result.status is Status.PASS else result.reason
        print(
            f"{result.status.value.upper():<4}  {result.check:<{self.check_width}}  "
            f"{result.target:<{self.target_width}}  {detail}",
            file=self.stream,
            flush=True,
        )

    def finish(self, results: list[CheckResult], warnings: list[str]) -> None:
        print("by target:", file=self.stream)
        for target in self.targets:
            mine = [result for result in results if result.target == target]
            if mine:
                print(f"  {target:<{self.target_width}}  {by_status(mine)}", file=self.stream)
        for warning in warnings:
            print(f"WARN  cleanup: {warning}", file=self.stream)
        print(summary(results), file=self.stream)


def by_status(results: list[CheckResult]) -> str:
    """ "FAIL nodes; UNPROVEN datastore; SKIP quota; PASS control-plane": failures first, then unfinished proofs."""
    groups = [
        (status, [result.check for result in results if result.status is status])
        for status in (Status.FAIL, Status.UNPROVEN, Status.SLEEPING, Status.SKIP, Status.PASS)
    ]
    return "; ".join(f"{status.value.upper()} {', '.join(checks)}" for status, checks in groups if checks)


def counts(results: list[CheckResult]) -> Counter[Status]:
    return Counter(result.status for result in results)


def verdict(results: list[CheckResult]) -> Status:
    """The run's outcome: a failure outranks an unfinished proof, which is never OK."""
    tally = counts(results)
    return Status.FAIL if tally[Status.FAIL] else Status.UNPROVEN if tally[Status.UNPROVEN] else Status.PASS


def summary(results: list[CheckResult]) -> str:
    tally = counts(results)
    words = {Status.FAIL: "FAILED", Status.UNPROVEN: "UNPROVEN", Status.PASS: "OK"}[verdict(results)]
    line = f"{words}: {tally[Status.PASS]} passed, {tally[Status.FAIL]} failed, {tally[Status.SKIP]} skipped"
    line += f", {tally[Status.UNPROVEN]} unproven" if tally[Status.UNPROVEN] else ""
    return line + (f", {tally[Status.SLEEPING]} asleep" if tally[Status.SLEEPING] else "")


def json_document(results: list[CheckResult], warnings: list[str]) -> dict[str, Any]:
    tally = counts(results)
    return {
        "ok": verdict(results) is Status.PASS,
        "summary": {status.value: tally[status] for status in Status},
        "results": [result.to_json() for result in results],
        "warnings": warnings,
    }
