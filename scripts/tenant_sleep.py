#!/usr/bin/env python3
"""Put one tenant to sleep, or wake it, in the stack config: what `make sleep` and `make wake` do before `up`.

sleep sets `sleeping: true` on the tenant named TENANT in Pulumi.<STACK>.yaml's `kamaji-hami-lab:tenants`;
wake removes the key (absent means awake). Both go through `pulumi config`, which keeps the file's other keys
and its secrets as they are; with --path it stores "true" as a boolean. A tenant already in the asked state is
left alone. The next `pulumi up` does the rest (docs/operations.md, "Sleeping tenants").
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

# Run as a file, so make the repository (and its validation package) importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from validation.exit_codes import EXIT_FAILED, EXIT_USAGE, ArgumentParser  # noqa: E402
from validation.host import Runner, SubprocessRunner  # noqa: E402
from validation.stack_outputs import DEFAULT_STACK, pulumi_environment  # noqa: E402

TENANTS_KEY = "kamaji-hami-lab:tenants"


class SleepError(Exception):
    """The config cannot be changed as asked; the message says why."""


def tenant_index(stack_file: Path, tenant: str) -> tuple[int, bool]:
    """(position of the tenant in the stack file's tenants, whether it is set to sleep there)."""
    try:
        config = (yaml.safe_load(stack_file.read_text()) or {}).get("config") or {}
    except (OSError, yaml.YAMLError) as error:
        raise SleepError(f"cannot read {stack_file}: {error}") from error
    tenants = config.get(TENANTS_KEY) or []
    names = [entry.get("name") for entry in tenants if isinstance(entry, dict)]
    if tenant not in names:
        known = ", ".join(str(name) for name in names) or "none"
        raise SleepError(f"{stack_file} has no tenant {tenant!r} in {TENANTS_KEY} (its tenants: {known})")
    index = names.index(tenant)
    return index, tenants[index].get("sleeping") is True


def config_command(action: str, stack: str, index: int, asleep: bool) -> list[str] | None:
    """The `pulumi config` call that makes it so; None when the config already says so."""
    key = f"tenants[{index}].sleeping"
    if action == "sleep":
        return None if asleep else ["pulumi", "config", "set", "--path", "--stack", stack, key, "true"]
    return ["pulumi", "config", "rm", "--path", "--stack", stack, key] if asleep else None


def main(argv: Sequence[str] | None = None, runner: Runner | None = None, root: Path | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("sleep", "wake"))
    parser.add_argument("--tenant", required=True, help="the tenant's name")
    parser.add_argument("--stack", default=DEFAULT_STACK, help=f"the stack (default: {DEFAULT_STACK})")
    args = parser.parse_args(argv)
    if not args.tenant:
        print("tenant_sleep: name the tenant: make sleep TENANT=<name>", file=sys.stderr)
        return EXIT_USAGE
    stack_file = (root or Path.cwd()) / f"Pulumi.{args.stack}.yaml"
    try:
        index, asleep = tenant_index(stack_file, args.tenant)
    except SleepError as error:
        print(f"tenant_sleep: {error}", file=sys.stderr)
        return EXIT_USAGE
    command = config_command(args.action, args.stack, index, asleep)
    state = "asleep" if args.action == "sleep" else "awake"
    if command is None:
        print(f"tenant {args.tenant} is already {state} in the stack config")
        return 0
    done = (runner or SubprocessRunner()).run(command, env=pulumi_environment())
    if not done.ok:
        print(f"tenant_sleep: {' '.join(command)} failed: {done.error}", file=sys.stderr)
        return EXIT_FAILED
    print(f"tenant {args.tenant}: {state} in the stack config; pulumi up makes it so")
    return 0


if __name__ == "__main__":
    sys.exit(main())
