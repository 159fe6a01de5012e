"""Which Docker daemon the docker CLI (and so kind and the scripts) talks to.

The pulumi-docker provider reads only DOCKER_HOST; the docker CLI also follows
its current context. Resolving the address here, from the environment and the
CLI's own files, gives the provider the scripts' daemon without asking any
daemon, so a preview stays deterministic.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

# docker/cli: the endpoint of the built-in "default" context without DOCKER_HOST.
DEFAULT_DAEMON = "unix:///var/run/docker.sock"


def docker_daemon_address(env: Mapping[str, str] | None = None) -> str:
    """DOCKER_HOST, else the endpoint of DOCKER_CONTEXT or the CLI's current context."""
    env = os.environ if env is None else env
    if env.get("DOCKER_HOST"):
        return env["DOCKER_HOST"]
    config_dir = Path(env.get("DOCKER_CONFIG") or Path(env.get("HOME", "~")).expanduser() / ".docker")
    context = env.get("DOCKER_CONTEXT") or _read_json(config_dir / "config.json").get("currentContext")
    if not context or context == "default":
        return DEFAULT_DAEMON
    # docker/cli cli/context/store: a context's metadata lives under the SHA-256 of its name.
    meta = _read_json(config_dir / "contexts" / "meta" / hashlib.sha256(context.encode()).hexdigest() / "meta.json")
    address = meta.get("Endpoints", {}).get("docker", {}).get("Host")
    if not address:
        raise ValueError(
            f"docker context {context!r} (from DOCKER_CONTEXT or {config_dir / 'config.json'}) has no Docker "
            "endpoint; run `docker context use default` or set DOCKER_HOST"
        )
    return address


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}
