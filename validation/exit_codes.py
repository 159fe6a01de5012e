"""Exit statuses shared by the lab's command-line tools (standard library only)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

EXIT_FAILED = 1
EXIT_NO_OUTPUTS = 2
EXIT_UNPROVEN = 3  # nothing failed, but a check could not finish its proof
EXIT_USAGE = 64  # EX_USAGE of sysexits.h; 2, argparse's own, means "no outputs" here
EXIT_INTERNAL = 70  # EX_SOFTWARE of sysexits.h: a bug of the tool, not a finding about the lab


class ArgumentParser(argparse.ArgumentParser):
    """argparse with wrong arguments exiting EXIT_USAGE."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")
