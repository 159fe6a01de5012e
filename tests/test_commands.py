"""Host-side commands: a timeout or cancel stops the script itself, not only the shell around it."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from components.commands import script
from tests.plan import reveal


def test_every_command_line_execs_its_script(up_plan):
    commands = up_plan.of_type("command:local:Command")
    assert commands
    for command in commands:
        for verb in ("create", "delete"):
            line = reveal(command.inputs).get(verb)
            if line:
                assert line.startswith("exec bash scripts/"), (command.name, line)


def test_signalling_the_shell_stops_the_script(tmp_path):
    # pulumi-command runs `/bin/sh -c "<create>"` and signals that process on a timeout or cancel.
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "probe.sh").write_text('echo "$$" >"$PROBE_PID"; sleep 30\n')
    pid_file = tmp_path / "pid"
    shell = subprocess.Popen(
        ["/bin/sh", "-c", script("probe.sh")], cwd=tmp_path, env={**os.environ, "PROBE_PID": str(pid_file)}
    )
    deadline = time.monotonic() + 10
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)

    script_pid = int(pid_file.read_text())
    assert script_pid == shell.pid  # the script is the signalled process, so no bash outlives the shell
    shell.send_signal(signal.SIGTERM)
    assert shell.wait(timeout=10) == -signal.SIGTERM
