"""A real OpenSSH server on loopback that plays a machine worker, with fake node tools.

Sessions run as the current user with key authentication only; the tools a
script runs on the machine (`sh`, kubeadm, kubectl, systemctl, ...) are
tests/fakebin shims first on the session's PATH, so every remote call is
recorded (tool names prefixed "machine-") and answered from the test's rules,
which reach the session through a file. The host side keeps its own fakes
(`Fakes`), plus an `ssh` that records its command line before running the real one.
"""

from __future__ import annotations

import getpass
import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.test_scripts import Fakes, write_shims

SSHD = Path("/usr/sbin/sshd")
MACHINE = "machine-"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def keygen(path: Path) -> tuple[str, str]:
    """(private key text, public key as '<type> <base64>')."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True)
    public = path.with_suffix(".pub").read_text().split()
    return path.read_text(), f"{public[0]} {public[1]}"


class MachineFakes(Fakes):
    """Host fakes plus a loopback sshd whose sessions find `remote_tools` as fakes."""

    def __init__(self, tmp_path: Path, remote_tools: tuple[str, ...]):
        super().__init__(tmp_path)
        self.rules_file = tmp_path / "rules.json"
        self.runtime = tmp_path / "runtime"
        self.runtime.mkdir()
        self.ssh_argv = tmp_path / "ssh-argv.log"
        real_ssh = shutil.which("ssh")
        (self.bin / "ssh").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >>"{self.ssh_argv}"\nexec {real_ssh} "$@"\n')
        (self.bin / "ssh").chmod(0o755)

        remote_bin = tmp_path / "machine-bin"
        remote_bin.mkdir()
        write_shims(remote_bin, remote_tools, label=MACHINE)

        self.private_key, client_public = keygen(tmp_path / "client")
        _, self.host_key = keygen(tmp_path / "host")
        # The session's home is the test's: bash run by sshd sources ~/.bashrc, and this host user's
        # (e.g. a pyenv init that waits on a lock) is no part of the machine being played.
        environment = {"PATH": f"{remote_bin}:/usr/local/bin:/usr/bin:/bin", "FAKE_LOG": str(self.log),
                       "FAKE_RULES_FILE": str(self.rules_file), "HOME": str(self.home)}
        options = ",".join(f'environment="{key}={value}"' for key, value in environment.items())
        (tmp_path / "authorized_keys").write_text(f"{options} {client_public}\n")
        self.port = free_port()
        config = tmp_path / "sshd_config"
        config.write_text(
            "\n".join([
                f"Port {self.port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {tmp_path / 'host'}",
                f"AuthorizedKeysFile {tmp_path / 'authorized_keys'}",
                f"PidFile {tmp_path / 'sshd.pid'}",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "PermitUserEnvironment yes",
                "StrictModes no",
                "UsePAM no",
                "",
            ])
        )
        self.sshd = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError as refused:
                if self.sshd.poll() is not None or time.monotonic() > deadline:
                    said = self.sshd.stderr.read() if self.sshd.stderr else ""
                    raise RuntimeError(f"sshd did not start: {said}") from refused
                time.sleep(0.05)

    def transport(self, **overrides: str) -> dict[str, str]:
        """What components/machine_worker.py hands every script."""
        return {
            "NODE_TRANSPORT": "ssh",
            "SSH_ADDRESS": "127.0.0.1",
            "SSH_PORT": str(self.port),
            "SSH_USER": getpass.getuser(),
            "SSH_PRIVATE_KEY": self.private_key,
            "SSH_HOST_KEY": self.host_key,
            **overrides,
        }

    def run(self, script, **env):
        self.rules_file.write_text(json.dumps(self.rules))
        return super().run(script, **{"XDG_RUNTIME_DIR": str(self.runtime), **env})

    def stop(self) -> None:
        self.sshd.terminate()
        self.sshd.wait(timeout=10)


def machine_fakes(tmp_path: Path, remote_tools: tuple[str, ...]):
    if not SSHD.exists() or not shutil.which("ssh-keygen"):
        pytest.skip("needs Debian's openssh-server (.ci/run installs it)")
    return MachineFakes(tmp_path, remote_tools)
