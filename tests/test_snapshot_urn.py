"""python -m snapshot.urn: the URN `make rejoin` hands to `pulumi up --replace`, from a `pulumi stack export`."""

from __future__ import annotations

import io
import json

import pytest

from snapshot.urn import main
from validation.exit_codes import EXIT_FAILED, EXIT_USAGE

# URNs as `pulumi stack export` lists them: urn:pulumi:<stack>::<project>::<parent types $-joined>::<name>
# (pulumi/pulumi sdk/go/common/resource/urn.go).
ADMIN_A = (
    "urn:pulumi:dev::kamaji-hami-lab::kamaji-hami-lab:index:Tenant$kamaji-hami-lab:index:TenantControlPlane"
    "$command:local:Command::tenant-a-admin-kubeconfig"
)
EXPORT = {
    "version": 3,
    "deployment": {
        "resources": [
            {"urn": "urn:pulumi:dev::kamaji-hami-lab::pulumi:pulumi:Stack::kamaji-hami-lab-dev"},
            {"urn": ADMIN_A},
            {"urn": ADMIN_A.replace("tenant-a", "tenant-b")},
            # A resource whose name merely ends like the wanted one is not it.
            {"urn": ADMIN_A.replace("::tenant-a-", "::old-tenant-a-")},
        ]
    },
}


def urn(document, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(args), stdin=io.StringIO(json.dumps(document)), stdout=out), out.getvalue()


def test_the_one_resource_of_that_name_is_printed():
    assert urn(EXPORT, "tenant-a-admin-kubeconfig") == (0, ADMIN_A + "\n")


@pytest.mark.parametrize(
    ("document", "words"),
    [
        (EXPORT | {"deployment": {"resources": []}}, "the stack has no resource(s) named tenant-a-admin-kubeconfig"),
        (EXPORT | {"deployment": {"resources": [{"urn": ADMIN_A}, {"urn": ADMIN_A.replace("dev", "lab2", 1)}]}},
         "the stack has 2 resource(s) named tenant-a-admin-kubeconfig"),
        ({"version": 3}, "not a `pulumi stack export` document"),
        ([1, 2], "not a `pulumi stack export` document"),
    ],
)
def test_none_or_several_or_no_export_is_a_failure_that_says_why(document, words, capsys):
    code, printed = urn(document, "tenant-a-admin-kubeconfig")
    assert (code, printed) == (EXIT_FAILED, "") and words in capsys.readouterr().err


def test_input_that_is_not_json_is_a_failure(capsys):
    assert main(["x"], stdin=io.StringIO("Enter your passphrase"), stdout=io.StringIO()) == EXIT_FAILED
    assert "snapshot.urn:" in capsys.readouterr().err


def test_exactly_one_name_is_required(capsys):
    assert urn(EXPORT) == (EXIT_USAGE, "") and "usage:" in capsys.readouterr().err
