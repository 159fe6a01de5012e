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
import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.real_etcd import free_port
from tests.test_scripts import Fakes, write_shims

SSHD = Path("/usr/sbin/sshd")
MACHINE = "machine-"
# What kubeadm join looks up in PATH, mandatory or not (kubernetes/kubernetes
# cmd/kubeadm/app/preflight/checks_linux.go addExecChecks, as indexed for v1.36).
KUBEADM_EXECUTABLES = ("ip", "iptables", "mount", "nsenter", "ebtables", "ethtool", "socat", "tc", "touch")


def keygen(path: Path) -> tuple[str, str]:
    """(private key text, public key as '<type> <base64>')."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True)
    public = path.with_suffix(".pub").read_text().split()
    return path.read_text(), f"{public[0]} {public[1]}"


class MachineFakes(Fakes):
    """Host fakes plus a loopback sshd whose sessions find `remote_tools` as fakes."""

    def __init__(self, tmp_path: Path, remote_tools: tuple[str, ...], wrap: tuple[str, ...] = ()):
        """`wrap`: a command line sshd runs under (it must exec sshd's), e.g. in a namespace of its own."""
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
        # Its log ("Accepted publickey ..." per connection) goes to a file a test can read while it runs.
        self.sshd_log = tmp_path / "sshd.log"
        self.sshd = subprocess.Popen([*wrap, str(SSHD), "-D", "-E", str(self.sshd_log), "-f", str(config)])
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError as refused:
                if self.sshd.poll() is not None or time.monotonic() > deadline:
                    said = self.sshd_log.read_text() if self.sshd_log.exists() else ""
                    raise RuntimeError(f"sshd did not start: {said}") from refused
                time.sleep(0.05)

    def connections(self) -> int:
        """How many ssh connections the server accepted so far."""
        return self.sshd_log.read_text().count("Accepted publickey") if self.sshd_log.exists() else 0

    def ssh_runs(self) -> int:
        """How many times the scripts ran ssh (each logged command line starts with its options)."""
        if not self.ssh_argv.exists():
            return 0
        return sum(1 for line in self.ssh_argv.read_text().splitlines() if line.startswith(("-i ", "-n -i ")))

    def with_ssh_config(self, config: str) -> Path:
        """Every ssh the scripts run reads `config` as the user's own ~/.ssh/config.

        ssh finds ~ through the password database, not $HOME, so the user's home directory is
        replaced by a scratch one in a private mount namespace of each ssh (needs root).
        Returns that home directory.
        """
        home = self.bin.parent / "ssh-user-home"
        (home / ".ssh").mkdir(parents=True, exist_ok=True)
        (home / ".ssh" / "config").write_text(config)
        real_ssh = shutil.which("ssh", path="/usr/local/bin:/usr/bin:/bin")
        user_home = pwd.getpwuid(os.getuid()).pw_dir
        (self.bin / "ssh").write_text(
            f'#!/bin/sh\nprintf "%s\\n" "$*" >>"{self.ssh_argv}"\n'
            f'exec unshare --mount --propagation private sh -c \'mount --bind "$0" "$1" && shift && exec "$@"\' '
            f'"{home}" "{user_home}" {real_ssh} "$@"\n'
        )
        return home

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


def machine_fakes(tmp_path: Path, remote_tools: tuple[str, ...], wrap: tuple[str, ...] = ()):
    if not SSHD.exists() or not shutil.which("ssh-keygen"):
        pytest.skip("needs Debian's openssh-server (.ci/run installs it)")
    return MachineFakes(tmp_path, remote_tools, wrap)
