"""Everything the suite takes from the host: processes and time.

All kubectl and pulumi invocations go through a Runner, and every wait goes
through a Clock, so tests can replay recorded responses without sleeping.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

DEFAULT_TIMEOUT = 60.0
# What one command may print before it is stopped: a flooding command must not fill memory. The
# largest expected answer is a big cluster's `kubectl get pods -o json`, a few MiB; errors are lines.
STDOUT_LIMIT = 64 * 2**20
STDERR_LIMIT = 64 * 2**10
READ_CHUNK = 64 * 2**10
PIPE_GRACE = 2.0  # how long the output of a stopped command is still awaited
TIMED_OUT = 124  # the exit status timeout(1) uses; given to a command the runner had to kill
INTERRUPTED = 130  # the exit status of a shell's command ended by Ctrl-C; given to commands of a stopped runner
# kubectl repeats client-go's log lines ("E1202 10:11:31.341365 ...") before its own message.
_KLOG_LINE = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ ")

# How long a wait blocks before it looks for a signal. The kernel may hand Ctrl-C or SIGTERM to any thread;
# Python then runs its handler in the main thread at that thread's next step, which a wait blocked in the
# kernel only takes when it ends: without slices, a hanging kubectl would hold back Ctrl-C until its timeout.
SIGNAL_CHECK = 0.1

T = TypeVar("T")


def wait_for(event: threading.Event, timeout: float | None = None) -> bool:
    """event.wait(timeout), in slices, so that a signal ends the wait at once in the main thread."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not event.is_set():
        left = SIGNAL_CHECK if deadline is None else min(SIGNAL_CHECK, deadline - time.monotonic())
        if left <= 0:
            return False
        event.wait(left)
    return True


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    truncated: int = 0  # the stdout limit in bytes when the command printed more and was stopped, else 0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def timed_out(self) -> bool:
        return self.returncode == TIMED_OUT

    @property
    def interrupted(self) -> bool:
        """Stopped, or never started, by a runner stopped on Ctrl-C or SIGTERM."""
        return self.returncode == INTERRUPTED

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
    """Runs commands with their output bounded: past its byte limit a command is stopped and its result
    says so (truncated), so a command that floods its output can never exhaust memory."""

    def __init__(self, stdout_limit: int = STDOUT_LIMIT, stderr_limit: int = STDERR_LIMIT):
        self.stdout_limit, self.stderr_limit = stdout_limit, stderr_limit
        self._stopped = threading.Event()
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    def stop(self) -> None:
        """Ctrl-C or SIGTERM: stop every command running now, in any thread, and start no more.

        A command the run is waiting for may hang until its own timeout; after an interruption nothing
        is worth that wait, and a command left running would outlive the program.
        """
        with self._lock:
            self._stopped.set()
            running = list(self._running)
        for process in running:
            _stop(process)

    def run(
        self,
        argv: Sequence[str],
        stdin: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        args = tuple(argv)
        environment = {**os.environ, **env} if env else None
        with self._lock:  # so that stop() sees every command started before it
            if self._stopped.is_set():
                return _interrupted(args)
            try:
                process = subprocess.Popen(
                    args,
                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=environment,
                    process_group=0,  # its own group, so stopping it stops whatever it started too
                )
            except FileNotFoundError:
                return CommandResult(args, 127, "", f"{args[0]}: command not found on PATH")
            self._running.add(process)
        # Set when the process ends or floods its stdout or stderr, whichever comes first.
        finished = threading.Event()
        stdio = ((process.stdout, self.stdout_limit), (process.stderr, self.stderr_limit))
        out, err = (_Capture(pipe, limit, finished) for pipe, limit in stdio)
        waiter = threading.Thread(target=lambda: (process.wait(), finished.set()), daemon=True)
        feeder = threading.Thread(target=_feed, args=(process.stdin, stdin), daemon=True) if stdin is not None else None
        for thread in (out, err, waiter, feeder):
            if thread:
                thread.start()
        try:
            timed_out = not wait_for(finished, timeout)
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C or SIGTERM in this thread: the whole run is over
            self.stop()
            raise
        finally:
            if process.poll() is None:  # timed out or flooding
                _stop(process)
            with self._lock:
                self._running.discard(process)
        for thread in (out, err, feeder):
            if thread:
                thread.join(PIPE_GRACE)  # a grandchild may hold a pipe open; its reader still discards
        if self._stopped.is_set():
            return _interrupted(args)
        if timed_out:
            return CommandResult(args, TIMED_OUT, "", f"{args[0]} timed out after {timeout:.0f}s")
        # First, so that a shortened error message still says it.
        stderr = (f"[stderr cut short at {self.stderr_limit} bytes]\n" if err.over else "") + err.text()
        return CommandResult(args, process.returncode, out.text(), stderr, self.stdout_limit if out.over else 0)


def _interrupted(args: tuple[str, ...]) -> CommandResult:
    return CommandResult(args, INTERRUPTED, "", f"{args[0]} not run to its end: interrupted")


def _stop(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _feed(pipe, text: str) -> None:
    try:
        pipe.write(text.encode())
        pipe.close()
    except (BrokenPipeError, OSError):  # the command ended without reading all of it
        pass


class _Capture(threading.Thread):
    """Reads one pipe to its end, keeping at most limit bytes; past it, sets flooded and discards the rest."""

    def __init__(self, pipe, limit: int, flooded: threading.Event):
        super().__init__(daemon=True)
        self.pipe, self.limit, self.flooded = pipe, limit, flooded
        self.kept = bytearray()
        self.over = False

    def run(self) -> None:
        with self.pipe:
            while chunk := self.pipe.read1(READ_CHUNK):
                room = self.limit - len(self.kept)
                self.kept += chunk[:room]
                if len(chunk) > room and not self.over:
                    self.over = True
                    self.flooded.set()

    def text(self) -> str:
        return self.kept.decode(errors="replace")


class Clock:
    def __init__(self) -> None:
        self._interrupted = threading.Event()

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        wait_for(self._interrupted, seconds)  # time.sleep, but interrupt() ends it in every thread

    def interrupt(self) -> None:
        """Ctrl-C or SIGTERM: every wait, now or later, ends at once."""
        self._interrupted.set()

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
