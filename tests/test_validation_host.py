"""The real process runner and the polling loop every wait of the validation suite uses."""

import os
import sys

from validation.host import TIMED_OUT, Clock, CommandResult, SubprocessRunner, poll

PY = sys.executable


class StepClock:
    """Time moves only when the poller sleeps."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def test_stdin_reaches_the_command_and_both_streams_come_back_as_text():
    script = "import sys; data = sys.stdin.read(); print(data.upper()); print('note', file=sys.stderr)"
    result = SubprocessRunner().run([PY, "-c", script], stdin="hello")
    assert result == CommandResult((PY, "-c", script), 0, "HELLO\n", "note\n")


def test_env_adds_to_the_callers_environment_instead_of_replacing_it():
    script = "import os; print(os.environ['EXTRA'], os.environ['PATH'] == os.environ['EXPECTED_PATH'])"
    result = SubprocessRunner().run([PY, "-c", script], env={"EXTRA": "x", "EXPECTED_PATH": os.environ["PATH"]})
    assert result.stdout == "x True\n"


def test_a_failing_command_is_a_result_not_an_exception():
    result = SubprocessRunner().run([PY, "-c", "raise SystemExit(3)"])
    assert result.returncode == 3 and not result.ok


def test_a_missing_program_and_a_hung_one_get_shell_exit_codes():
    missing = SubprocessRunner().run(["no-such-program-kamaji-hami-lab"])
    assert missing == CommandResult(
        ("no-such-program-kamaji-hami-lab",), 127, "", "no-such-program-kamaji-hami-lab: command not found on PATH"
    )
    sleeper = (PY, "-c", "import time; time.sleep(30)")
    hung = SubprocessRunner().run(sleeper, timeout=1)
    assert hung == CommandResult(sleeper, TIMED_OUT, "", f"{PY} timed out after 1s") and hung.timed_out


def test_a_wait_asks_again_at_least_every_3_seconds_and_not_after_its_timeout():
    # Every 3 s: a pod or namespace that is ready is noticed within 3 s; the last ask is at the deadline.
    clock, asked = StepClock(), []

    def probe():
        asked.append(clock.now())
        return False, None

    assert poll(clock, 9, probe) == (False, None)
    assert asked == [0, 3, 6, 9]


def test_the_real_clock_waits_as_long_as_it_is_asked():
    clock = Clock()
    start = clock.now()
    clock.sleep(0.05)
    assert 0.05 <= clock.now() - start < 1
