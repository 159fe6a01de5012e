"""`--json` without a file prints the JSON document on stdout (README: "JSON on stdout")."""

import io
import json

from tests.test_validation import OUTPUTS, FakeClock, healthy_lab
from validation.cli import main


def test_bare_json_flag_prints_the_document_on_stdout():
    stdout = io.StringIO()
    code = main(
        ["--outputs", str(OUTPUTS), "--json", "--only", "nodes"], runner=healthy_lab(), clock=FakeClock(), stdout=stdout
    )
    assert code == 0
    assert json.loads(stdout.getvalue())["ok"] is True
