#!/usr/bin/env python3
"""Write each kubeconfig from the Pulumi stack outputs to <dir>/<name>.kubeconfig, mode 0600.

SOURCE is a JSON file of the stack outputs (all of them, or only the
`kubeconfigs` output), or - for standard input. Without SOURCE the script runs
`pulumi stack output --show-secrets --json --stack STACK` on the backend make
uses (PULUMI_BACKEND_URL, else local state under ~/.pulumi). Tenants get
<tenant>.kubeconfig (the operator's) and <tenant>-team.kubeconfig (the team's); the
management cluster (kind's, or the existing one) gets management.kubeconfig; those two
whenever SOURCE holds all outputs, as `make kubeconfigs` reads them.
Needs only the Python standard library.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

# Run as a file, so make the repository (and its validation package) importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from validation.exit_codes import EXIT_FAILED, EXIT_NO_OUTPUTS, ArgumentParser  # noqa: E402
from validation.host import Runner, SubprocessRunner  # noqa: E402
from validation.stack_outputs import (  # noqa: E402
    DEFAULT_STACK,
    OutputsError,
    files_of,
    read_outputs_document,
    write_kubeconfig_files,
)


def main(argv: Sequence[str] | None = None, runner: Runner | None = None) -> int:
    # Exit status as the validation suite's: 2 no readable outputs, 64 wrong arguments.
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", nargs="?", metavar="SOURCE", help="outputs JSON file, or - for stdin")
    parser.add_argument("--dir", default="kubeconfigs", help="where to write them, made private (0700) when yours "
                        "(default: ./kubeconfigs)")
    parser.add_argument("--stack", default=DEFAULT_STACK, help=f"the stack to read (default: {DEFAULT_STACK})")
    args = parser.parse_args(argv)
    try:
        document = read_outputs_document(args.source, runner or SubprocessRunner(), stack=args.stack)
        kubeconfigs = files_of(document)
    except OutputsError as error:
        print(f"write_kubeconfigs: {error}", file=sys.stderr)
        return EXIT_NO_OUTPUTS
    if not kubeconfigs:
        print("write_kubeconfigs: the outputs hold no kubeconfig", file=sys.stderr)
        return EXIT_NO_OUTPUTS
    try:
        paths = write_kubeconfig_files(Path(args.dir), kubeconfigs)
    except OSError as error:
        print(f"write_kubeconfigs: cannot write the kubeconfigs to {args.dir}: {error.strerror or error}; choose "
              "a directory of yours with --dir (make: KUBECONFIG_DIR=...)", file=sys.stderr)
        return EXIT_FAILED
    for path in paths.values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
