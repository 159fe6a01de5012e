"""A real OpenSSH server on loopback that plays a machine worker, with fake node tools.

Sessions run as the current user with key authentication only; the tools a
script runs on the machine (`sh`, kubeadm, kubectl, systemctl, ...) are
tests/fakebin shims first on the session's PATH, so every remote call is
recorded (tool names prefixed "machine-") and answered from the test's rules,
which reach the session through a file. The host side keeps its own fakes
(`Fakes`), plus an `ssh` that records its command line before running the real one.

A server (`Sshd`) is started once per worker and shared (conftest's `sshd`): each test's machine points
its sessions at that test's own tools, rules and log. A test that stops or reconfigures its sshd starts
one of its own (`machine_fakes` without a server).
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


def needs_sshd() -> None:
    if not SSHD.exists() or not shutil.which("ssh-keygen"):
        pytest.skip("needs Debian's openssh-server (.ci/run installs it)")


class Sshd:
    """A real OpenSSH server on loopback, with its host key and the one client key it takes.

    Which fake machine its sessions play is set by `serve`: sshd reads authorized_keys, and with it the
    session's environment, at each login, so one server can play each test's machine in turn.
    """

    def __init__(self, directory: Path, wrap: tuple[str, ...] = ()):
        """`wrap`: a command line sshd runs under (it must exec sshd's), e.g. in a namespace of its own."""
        directory.mkdir(parents=True, exist_ok=True)
        self.key_file = directory / "client"
        self.private_key, self.client_public = keygen(self.key_file)
        _, self.host_key = keygen(directory / "host")
        self.authorized_keys = directory / "authorized_keys"
        self.authorized_keys.write_text("")
        self.port = free_port()
        config = directory / "sshd_config"
        config.write_text(
            "\n".join([
                f"Port {self.port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {directory / 'host'}",
                f"AuthorizedKeysFile {self.authorized_keys}",
                f"PidFile {directory / 'sshd.pid'}",
                # OpenSSH 9.2 (Debian 12) offers sntrup761x25519 first (openssh-portable myproposal.h KEX_SERVER_KEX
                # @V_9_2_P1), about half of each login's time here; the scripts ask for no key exchange of their own.
                "KexAlgorithms curve25519-sha256",
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
        self.log = directory / "sshd.log"
        self.process = subprocess.Popen([*wrap, str(SSHD), "-D", "-E", str(self.log), "-f", str(config)])
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError as refused:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    said = self.log.read_text() if self.log.exists() else ""
                    raise RuntimeError(f"sshd did not start: {said}") from refused
                time.sleep(0.05)

    def serve(self, environment: dict[str, str]) -> int:
        """Sessions from the next login on get `environment`; returns where the log stands now (see `accepted`)."""
        if self.process.poll() is not None:
            raise RuntimeError("the shared sshd has stopped: a test that stops its machine's sshd needs one of its own")
        options = ",".join(f'environment="{key}={value}"' for key, value in environment.items())
        self.authorized_keys.write_text(f"{options} {self.client_public}\n")
        return self.log.stat().st_size if self.log.exists() else 0

    def accepted(self, since: int) -> int:
        """How many connections the server accepted after the log stood at `since`."""
        if not self.log.exists():
            return 0
        with self.log.open("rb") as log:
            log.seek(since)
            return log.read().decode(errors="replace").count("Accepted publickey")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


class MachineFakes(Fakes):
    """Host fakes plus a machine behind a loopback sshd whose sessions find `remote_tools` as fakes.

    Everything the machine's sessions see (tools, rules, call log, home) is this test's; only the server and its
    keys may be shared, and `own` says whether this machine started its server (then `stop` stops it).
    """

    def __init__(self, tmp_path: Path, remote_tools: tuple[str, ...], server: Sshd, own: bool):
        super().__init__(tmp_path)
        self.server, self.own = server, own
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

        self.private_key, self.host_key, self.port = server.private_key, server.host_key, server.port
        self.key_file = server.key_file
        # The session's home is the test's: bash run by sshd sources ~/.bashrc, and this host user's
        # (e.g. a pyenv init that waits on a lock) is no part of the machine being played.
        self.log_start = server.serve({"PATH": f"{remote_bin}:/usr/local/bin:/usr/bin:/bin", "FAKE_LOG": str(self.log),
                                       "FAKE_RULES_FILE": str(self.rules_file), "HOME": str(self.home)})

    def connections(self) -> int:
        """How many ssh connections the server accepted since this machine was set up."""
        return self.server.accepted(self.log_start)

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
        """Stops the machine's sshd: only one it started, never the one other tests share."""
        if not self.own:
            raise RuntimeError("this machine's sshd is shared with other tests; only one of its own may be stopped")
        self.server.stop()


def machine_fakes(tmp_path: Path, remote_tools: tuple[str, ...], server: Sshd | None = None,
                  wrap: tuple[str, ...] = ()) -> MachineFakes:
    """A fake machine behind `server` (e.g. conftest's `sshd`), else behind an sshd of its own run under `wrap`."""
    needs_sshd()
    own = server is None
    return MachineFakes(tmp_path, remote_tools, Sshd(tmp_path / "sshd", wrap) if own else server, own)
