"""The tools' --help is user documentation: it changes only on purpose.

The expected texts are in tests/fixtures/help/; after a deliberate change, rewrite them with
    COLUMNS=100 .venv/bin/python -m validation --help > tests/fixtures/help/validation.txt
(and the same for validation.status), and read the diff. Formatting is that of Python 3.11, as in CI.
"""

from pathlib import Path

import pytest

from validation import cli
from validation.status import cli as status

HELP = Path(__file__).parent / "fixtures" / "help"


@pytest.mark.parametrize("tool", [cli, status], ids=["validation", "validation.status"])
def test_help_is_the_reviewed_text(tool, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps at the terminal width
    with pytest.raises(SystemExit) as done:
        tool.parse_args(["--help"])
    assert done.value.code == 0
    name = "validation" if tool is cli else "validation.status"
    assert capsys.readouterr().out == (HELP / f"{name}.txt").read_text()
