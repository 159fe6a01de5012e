"""What the validation tools say when the stack outputs cannot be used: where, and why, in the user's terms."""

from __future__ import annotations

import io
import json
import os

import pytest

from validation.host import CommandResult
from validation.stack_outputs import (
    OutputsError,
    kubeconfigs_in,
    parse_outputs,
    read_outputs_document,
    write_kubeconfig_files,
    write_private_file,
)


class Pulumi:
    def __init__(self, result: CommandResult):
        self.result, self.calls = result, []

    def run(self, argv, stdin=None, timeout=None, env=None):
        self.calls.append((tuple(argv), timeout, env))
        return self.result


def refused(call) -> str:
    with pytest.raises(OutputsError) as error:
        call()
    return str(error.value)


def test_a_failed_pulumi_call_is_named_with_its_backend_and_error(monkeypatch):
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    pulumi = Pulumi(CommandResult((), 255, "", "error: no stack named 'lab' found\n"))
    message = refused(lambda: read_outputs_document(None, pulumi, stack="lab"))
    assert message == (
        "`pulumi stack output --show-secrets --json --stack lab` (backend file://~) failed: "
        "error: no stack named 'lab' found"
    )
    (_, timeout, env), = pulumi.calls
    assert timeout is not None and env == {"PULUMI_BACKEND_URL": "file://~"}, "a hung CLI cannot hang the tools"


@pytest.mark.parametrize(
    ("source", "text", "message"),
    [
        (None, "[]", "pulumi stack output: expected a JSON object of stack outputs"),
        ("-", "[]", "standard input: expected a JSON object of stack outputs"),
        ("-", '"[secret]"', "standard input holds '[secret]' instead of kubeconfigs"),
        ("-", "{", "standard input is not valid JSON: "),
    ],
)
def test_unusable_outputs_name_where_they_came_from(source, text, message):
    pulumi = Pulumi(CommandResult((), 0, text, ""))
    assert refused(lambda: read_outputs_document(source, pulumi, io.StringIO(text))).startswith(message)


def test_an_outputs_file_is_named_when_it_cannot_be_read_or_used(tmp_path):
    missing = tmp_path / "none.json"
    assert refused(lambda: read_outputs_document(str(missing), Pulumi(None))) == (
        f"cannot read {missing}: No such file or directory"
    )
    listed = tmp_path / "list.json"
    listed.write_text("[]")
    assert refused(lambda: read_outputs_document(str(listed), Pulumi(None))) == (
        f"{listed}: expected a JSON object of stack outputs"
    )


def test_an_outputs_file_in_utf_8_is_read_whatever_the_locale(tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_bytes(json.dumps({"note": "Größe"}, ensure_ascii=False).encode())
    assert read_outputs_document(str(outputs), Pulumi(None)) == {"note": "Größe"}


@pytest.mark.parametrize("key", ["kubeconfigs", "managementKubeconfig"])
def test_redacted_kubeconfigs_name_the_output_and_the_fix(key):
    document = {"kubeconfigs": {"tenant-a": "apiVersion: v1"}, key: "[secret]"}
    message = refused(lambda: kubeconfigs_in(document))
    assert message.startswith(f"outputs.{key} holds '[secret]'") and "--show-secrets" in message


def test_outputs_without_tenants_or_kubeconfigs_say_which():
    assert refused(lambda: parse_outputs({})) == "outputs.tenants: missing"
    assert refused(lambda: parse_outputs({"tenants": {"management": {}}})).startswith(
        "tenants: a tenant is named 'management'"
    )
    assert refused(lambda: parse_outputs({"tenants": {}, "kubeconfigs": {}})) == (
        "no kubeconfig in the outputs for: management"
    )


def test_a_platform_output_of_the_wrong_shape_is_named():
    document = {"tenants": {}, "kubeconfigs": {}, "managementKubeconfig": "apiVersion: v1", "platform": {}}
    assert refused(lambda: parse_outputs(document)) == "platform.provided: missing"


def test_a_private_file_that_cannot_be_written_leaves_nothing_behind(tmp_path):
    target = tmp_path / "tenant-a.kubeconfig"
    with pytest.raises(TypeError):
        write_private_file(target, None)
    assert list(tmp_path.iterdir()) == []


def test_a_private_file_is_written_beside_its_target_and_replaces_it(tmp_path):
    target = tmp_path / "tenant-a.kubeconfig"
    target.write_text("old")
    write_private_file(target, "new ✓")
    assert [p.name for p in tmp_path.iterdir()] == ["tenant-a.kubeconfig"]
    assert target.read_bytes() == "new ✓".encode() and oct(target.stat().st_mode & 0o777) == "0o600"


def test_kubeconfig_files_go_to_a_new_nested_directory_only_the_owner_can_open(tmp_path):
    directory = tmp_path / "a" / "kubeconfigs"
    paths = write_kubeconfig_files(directory, {"tenant-a": "apiVersion: v1"})
    assert paths == {"tenant-a": directory / "tenant-a.kubeconfig"}
    assert oct(directory.stat().st_mode & 0o777) == "0o700"
    assert os.access(paths["tenant-a"], os.R_OK)
