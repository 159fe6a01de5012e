"""What a check concludes."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    UNPROVEN = "unproven"  # part of the proof could not run: never a pass, and not a finding either
    SLEEPING = "sleeping"
    """The tenant sleeps (its stack config says so, and Kamaji agrees): not a failure, nothing to check."""


class CheckFailed(Exception):
    """The lab is not as the outputs say; the message is the reason shown to the user."""


class CheckSkipped(Exception):
    """The check does not apply to this target (for example a tenant without GPUs)."""


class CheckUnproven(Exception):
    """What the check could test held, but a part of its proof could not run; the message says which and why."""


class TenantAsleep(Exception):
    """The tenant sleeps; the message says what showed it."""


@dataclass(frozen=True)
class CheckResult:
    check: str
    target: str  # "management", a tenant name, or "all tenants"
    status: Status
    evidence: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status.value}
