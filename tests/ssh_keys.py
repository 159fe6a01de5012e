"""Private keys made by the real ssh-keygen, for config that names machines (each made once per run)."""

from __future__ import annotations

import functools
import subprocess
import tempfile
from pathlib import Path


@functools.cache
def made_key(kind: str = "ed25519", comment: str = "", *options: str, passphrase: str = "") -> str:
    """The private key file ssh-keygen writes, as `pulumi config set --secret` stores it (stripped)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "key"
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", passphrase, "-C", comment, "-f", str(path), *options],
                       check=True, capture_output=True)
        return path.read_text().strip()


def public_key(private_key: str) -> str:
    """The public half, as ssh-keygen -y prints it from the private key."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "key"
        path.write_text(private_key + "\n")
        path.chmod(0o600)
        return subprocess.run(["ssh-keygen", "-y", "-f", str(path)], check=True, capture_output=True,
                              text=True).stdout.strip()
