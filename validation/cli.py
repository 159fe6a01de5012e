"""python -m validation: run the checks and report."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from validation.checks import CHECKS, CHECKS_BY_NAME
from validation.checks.base import ALL_TENANTS, run_checks
from validation.exit_codes import EXIT_FAILED, EXIT_NO_OUTPUTS, EXIT_UNPROVEN, EXIT_USAGE, ArgumentParser
from validation.host import Clock, Runner, SubprocessRunner
from validation.lab import Lab
from validation.report import TextReport, json_document, verdict
from validation.results import Status
from validation.stack_outputs import (
    DEFAULT_STACK,
    MANAGEMENT,
    OutputsError,
    parse_outputs,
    read_outputs_document,
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    width = max(len(check.name) for check in CHECKS)
    parser = ArgumentParser(
        prog="python -m validation",
        description="Check a running kamaji-hami-lab against its Pulumi stack outputs.",
        epilog="checks, in the order they run:\n"
        + "\n".join(f"  {check.name:<{width}}  {check.summary}" for check in CHECKS)
        + f"\n\nexit status: 0 every check passed or skipped, {EXIT_FAILED} a check failed, {EXIT_NO_OUTPUTS} the "
        f"stack outputs could not be read, {EXIT_UNPROVEN} a check UNPROVEN (none failed), "
        f"{EXIT_USAGE} wrong arguments\n"
        "details and what to do when a check fails: validation/README.md",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--outputs",
        metavar="FILE|-",
        help="stack outputs JSON; default: run `pulumi stack output --show-secrets --json --stack STACK`",
    )
    parser.add_argument(
        "--stack",
        default=DEFAULT_STACK,
        help=f"the stack to read, on the backend make uses (PULUMI_BACKEND_URL, else file://~); "
        f"default: {DEFAULT_STACK}",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="CHECK",
        choices=list(CHECKS_BY_NAME),
        help="run only these checks",
    )
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="FILE",
        help="print the results as JSON; with FILE, write the JSON there and print the table too",
    )
    return parser.parse_args(argv)


def main(
    argv: Sequence[str] | None = None,
    runner: Runner | None = None,
    clock: Clock | None = None,
    stdout: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    args = parse_args(argv)
    stdout = stdout or sys.stdout
    runner = runner or SubprocessRunner()
    try:
        outputs = parse_outputs(read_outputs_document(args.outputs, runner, stdin, args.stack))
    except OutputsError as error:
        print(f"validation: {error}", file=sys.stderr)
        return EXIT_NO_OUTPUTS

    checks = [check for check in CHECKS if not args.only or check.name in args.only]
    # The table shows progress; when JSON takes stdout, the table goes to stderr.
    table = TextReport(
        sys.stderr if args.json == "-" else stdout,
        [check.name for check in checks],
        [MANAGEMENT, ALL_TENANTS, *outputs.tenants],
    )
    with tempfile.TemporaryDirectory(prefix="kamaji-hami-lab-validation-") as workdir:
        lab = Lab.open(outputs, runner, Path(workdir), clock)
        try:
            results = run_checks(lab, checks, table.line)
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C or SIGTERM: end now, saying what was left behind
            lab.interrupt()
            print("validation: interrupted", file=sys.stderr)
            for warning in lab.warnings:
                print(f"validation: {warning}", file=sys.stderr)
            raise
    table.finish(results, lab.warnings)

    document = json_document(results, lab.warnings)
    if args.json == "-":
        json.dump(document, stdout, indent=2)
        stdout.write("\n")
    elif args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return {Status.FAIL: EXIT_FAILED, Status.UNPROVEN: EXIT_UNPROVEN, Status.PASS: 0}[verdict(results)]
