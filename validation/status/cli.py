"""The command line: arguments, one refresh or a --watch loop, and the exit status."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TextIO

from validation.exit_codes import EXIT_FAILED as EXIT_UNHEALTHY
from validation.exit_codes import EXIT_INTERNAL, EXIT_NO_OUTPUTS, EXIT_USAGE, ArgumentParser
from validation.host import Clock, Runner
from validation.stack_outputs import DEFAULT_STACK, OutputsError, parse_fleet, read_outputs_document
from validation.status.gather import kubectl_runner, refresh
from validation.status.render import WIDTH, Style, render, terminal_width
from validation.status.rows import Document


def exit_status(doc: Document) -> int:
    if doc["management"]["internalError"] or any(row["internalError"] for row in doc["tenants"]):
        return EXIT_INTERNAL
    return 0 if doc["ok"] else EXIT_UNHEALTHY


def _positive_seconds(text: str) -> float:
    try:
        if (seconds := float(text)) > 0:
            return seconds
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="python -m validation.status",
        description="Show every tenant's control plane, nodes, GPU slices and quotas (read-only).",
        epilog=f"exit status: 0 every tenant healthy, {EXIT_UNHEALTHY} a tenant unhealthy or unreachable, "
        f"{EXIT_NO_OUTPUTS} the stack outputs could not be read, {EXIT_USAGE} wrong arguments, "
        f"{EXIT_INTERNAL} an internal error (a tenant's row names it). The layout fits the terminal's width, "
        f"{WIDTH} columns when not on a terminal.",
    )
    parser.add_argument(
        "--outputs",
        metavar="FILE|-",
        help="stack outputs JSON; default: run `pulumi stack output --show-secrets --json --stack STACK`",
    )
    parser.add_argument("--stack", default=DEFAULT_STACK, help=f"the stack to read (default: {DEFAULT_STACK})")
    parser.add_argument("--tenant", nargs="+", metavar="NAME", help="show only these tenants")
    parser.add_argument("--json", action="store_true", help="print the same data as JSON")
    parser.add_argument(
        "--wide", action="store_true", help="full node names, GPU UUIDs and MiB, on lines as long as they get"
    )
    parser.add_argument(
        "--watch", type=_positive_seconds, metavar="SECONDS", help="refresh every SECONDS until interrupted"
    )
    return parser.parse_args(argv)


def main(
    argv: Sequence[str] | None = None,
    runner: Runner | None = None,
    stdout: TextIO | None = None,
    stdin: TextIO | None = None,
    clock: Clock | None = None,
) -> int:
    args = parse_args(argv)
    stdout = stdout or sys.stdout
    runner = runner or kubectl_runner()
    clock = clock or Clock()
    try:
        # Each tenant on its own: one tenant's bad entry is shown in its row, not as exit 2 for all.
        outputs = parse_fleet(read_outputs_document(args.outputs, runner, stdin, args.stack))
    except OutputsError as error:
        print(f"status: {error}", file=sys.stderr)
        return EXIT_NO_OUTPUTS
    known = [*outputs.tenants, *outputs.unreadable]
    unknown = sorted(set(args.tenant or ()) - set(known))
    if unknown:
        print(f"status: no tenant named {', '.join(unknown)}; tenants: {', '.join(known)}", file=sys.stderr)
        return EXIT_USAGE
    style = Style.for_stream(stdout)
    # Redraw in place only on a terminal; redirected, each refresh appends one frame.
    redraw = bool(args.watch) and not args.json and stdout.isatty()
    while True:
        # A fresh lab each refresh: a cluster unreachable last time is asked again.
        doc = refresh(outputs, args.tenant, runner, clock)
        if args.json:
            stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            if redraw:
                stdout.write("\033[H\033[2J")  # cursor home, erase the screen (ECMA-48 CUP, ED 2)
            stdout.write(render(doc, style, args.wide, terminal_width(stdout)))  # read again: a terminal resizes
        stdout.flush()
        if not args.watch:
            return exit_status(doc)
        clock.sleep(args.watch)
