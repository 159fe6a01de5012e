"""Everything the suite takes from the host: processes and time.

All kubectl and pulumi invocations go through a Runner, and every wait goes
through a Clock, so tests can replay recorded responses without sleeping.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

DEFAULT_TIMEOUT = 60.0
TIMED_OUT = 124  # the exit status timeout(1) uses; given to a command the runner had to kill
# kubectl repeats client-go's log lines ("E1202 10:11:31.341365 ...") before its own message.
_KLOG_LINE = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ ")

T = TypeVar("T")


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def timed_out(self) -> bool:
        return self.returncode == TIMED_OUT

    @property
    def error(self) -> str:
        """The command's complaint on one line, without client-go's log lines when there is more."""
        lines = self.stderr.splitlines()
        message = [line for line in lines if not _KLOG_LINE.match(line)] or lines
        text = " ".join(" ".join(message).split()) or f"exit code {self.returncode}"
        return text if len(text) <= 300 else text[:297] + "..."


class Runner(Protocol):
    def run(
        self,
        argv: Sequence[str],
        stdin: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run argv; env adds variables to (or overrides them in) this process's environment."""
        ...


class SubprocessRunner:
    def run(
        self,
        argv: Sequence[str],
        stdin: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        args = tuple(argv)
        environment = {**os.environ, **env} if env else None
        try:
            done = subprocess.run(
                args, input=stdin, capture_output=True, text=True, timeout=timeout, check=False, env=environment
            )
        except FileNotFoundError:
            return CommandResult(args, 127, "", f"{args[0]}: command not found on PATH")
        except subprocess.TimeoutExpired:
            return CommandResult(args, TIMED_OUT, "", f"{args[0]} timed out after {timeout:.0f}s")
        return CommandResult(args, done.returncode, done.stdout, done.stderr)


class Clock:
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def strand(self) -> Clock:
        """The clock for one of several strands of work that run side by side (real time is shared)."""
        return self

    def wall(self) -> datetime.datetime:
        """The time of day, for people (now() only measures intervals)."""
        return datetime.datetime.now(datetime.UTC)


def poll(clock: Clock, timeout: float, probe: Callable[[], tuple[bool, T]], interval: float = 3.0) -> tuple[bool, T]:
    """Call probe until it reports done or timeout seconds pass.

    Returns (done, last observation) so a caller can explain a timeout.
    """
    deadline = clock.now() + timeout
    while True:
        done, observation = probe()
        if done or clock.now() >= deadline:
            return done, observation
        clock.sleep(interval)
