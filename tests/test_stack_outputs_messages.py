"""What the validation tools say when the stack outputs cannot be used: where, and why, in the user's terms."""

from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
from pathlib import Path

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
    # README "Validating a lab": a pulumi that has not answered within 2 minutes is given up on.
    assert timeout == 120 and env == {"PULUMI_BACKEND_URL": "file://~"}, "a hung CLI cannot hang the tools"


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


# Python's own ASCII locale: no UTF-8 mode, no coercion to C.UTF-8 (PEP 538, PEP 540).
ASCII_LOCALE = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


def in_ascii_locale(code: str, path: Path) -> subprocess.CompletedProcess:
    """Runs `code` with `path` as sys.argv[1] from the project root, where mutated modules find mutmut's config."""
    environment = {**os.environ, **ASCII_LOCALE, "PYTHONPATH": os.getcwd()}
    return subprocess.run(
        [sys.executable, "-c", code, str(path)], env=environment, capture_output=True, text=True, timeout=60
    )


def test_an_outputs_file_in_utf_8_is_read_whatever_the_locale(tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_bytes(json.dumps({"note": "Größe"}, ensure_ascii=False).encode())
    read = in_ascii_locale(
        "import sys\n"
        "from validation.stack_outputs import read_outputs_document\n"
        "print(ascii(read_outputs_document(sys.argv[1], None)))",
        outputs,
    )
    assert read.stdout == "{'note': 'Gr\\xf6\\xdfe'}\n", read.stderr


def test_a_private_file_is_written_in_utf_8_whatever_the_locale(tmp_path):
    written = in_ascii_locale(
        "import sys\n"
        "from pathlib import Path\n"
        "from validation.stack_outputs import write_private_file\n"
        "write_private_file(Path(sys.argv[1]), 'user: \\u2713')",
        tmp_path / "tenant-a.kubeconfig",
    )
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "tenant-a.kubeconfig").read_bytes() == "user: ✓".encode()


@pytest.mark.parametrize("key", ["kubeconfigs", "managementKubeconfig"])
def test_redacted_kubeconfigs_name_the_output_and_the_fix(key):
    document = {"kubeconfigs": {"tenant-a": "apiVersion: v1"}, key: "[secret]"}
    assert refused(lambda: kubeconfigs_in(document)) == (
        f"outputs.{key} holds '[secret]' instead of kubeconfigs: the outputs were printed without --show-secrets; "
        "use `pulumi stack output --show-secrets --json`"
    )


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


def test_a_private_file_is_written_beside_its_target_and_replaces_it(tmp_path, monkeypatch):
    # Written next to the target under a hidden name, so the final rename is atomic on one filesystem.
    target = tmp_path / "tenant-a.kubeconfig"
    target.write_text("old")
    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda source, destination: (
        replaced.append(Path(source)), real_replace(source, destination)))

    write_private_file(target, "new ✓")

    (temporary,) = replaced
    assert temporary.parent == tmp_path and temporary.name.startswith(".tenant-a.kubeconfig.")
    assert [p.name for p in tmp_path.iterdir()] == ["tenant-a.kubeconfig"]
    assert target.read_bytes() == "new ✓".encode() and oct(target.stat().st_mode & 0o777) == "0o600"


def test_kubeconfig_files_go_to_a_new_nested_directory_only_the_owner_can_open(tmp_path):
    directory = tmp_path / "a" / "kubeconfigs"
    paths = write_kubeconfig_files(directory, {"tenant-a": "apiVersion: v1"})
    assert paths == {"tenant-a": directory / "tenant-a.kubeconfig"}
    assert oct(directory.stat().st_mode & 0o777) == "0o700"
    assert os.access(paths["tenant-a"], os.R_OK)


def recorded_outputs() -> dict:
    return json.loads(Path("tests/fixtures/validation/outputs.json").read_text(encoding="utf-8"))


def tenant_a(change):
    def apply(document: dict) -> None:
        change(document["tenants"]["tenant-a"])

    return apply


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (tenant_a(lambda t: t.pop("endpoint")), "tenants.tenant-a.endpoint: missing"),
        (lambda d: d["tenants"].update({"tenant-a": []}), "tenants.tenant-a: expected an object"),
        (tenant_a(lambda t: t["gpusPerWorker"][0].update(model=7)),
         "tenants.tenant-a.gpusPerWorker[0].model: expected a string, got int"),
        (tenant_a(lambda t: t["gpusPerWorker"][0].pop("memoryMiB")),
         "tenants.tenant-a.gpusPerWorker[0].memoryMiB: missing"),
        # JSON true is never a count, though Python's bool is an int.
        (tenant_a(lambda t: t["gpusPerWorker"][0].update(count=True)),
         "tenants.tenant-a.gpusPerWorker[0].count: expected an integer, got bool"),
        (tenant_a(lambda t: t.update(gpuSlots=True)), "tenants.tenant-a.gpuSlots: expected an integer, got bool"),
        (tenant_a(lambda t: t.update(gpusPerWorker=["NVIDIA A100 80GB"])),
         "tenants.tenant-a.gpusPerWorker[0].model: missing"),
        (tenant_a(lambda t: t.update(gpusPerWorker={})), "tenants.tenant-a.gpusPerWorker: expected a list, got dict"),
        (tenant_a(lambda t: t["quotas"][0].update(gpus="4")),
         "tenants.tenant-a.quotas[0].gpus: expected an integer, got str"),
        (tenant_a(lambda t: t["quotas"][0].pop("namespace")), "tenants.tenant-a.quotas[0].namespace: missing"),
        (tenant_a(lambda t: t.update(kubernetesVersion=1.36)),
         "tenants.tenant-a.kubernetesVersion: expected a string, got float"),
        (tenant_a(lambda t: t.pop("namespace")), "tenants.tenant-a.namespace: missing"),
        (tenant_a(lambda t: t.pop("dataStoreSchema")), "tenants.tenant-a.dataStoreSchema: missing"),
        (tenant_a(lambda t: t.update(gpuDevices="gpu")),
         "tenants.tenant-a.gpuDevices: expected 'mock' or 'real', got 'gpu'"),
        (lambda d: d.update(kubeconfigs=[]), "outputs.kubeconfigs: expected an object, got list"),
        (lambda d: d["kubeconfigs"].update(Tenant_C="apiVersion: v1"),
         "kubeconfigs: 'Tenant_C' is not usable as a tenant name (expected a lowercase DNS label, e.g. tenant-a)"),
        (lambda d: d["kubeconfigs"].update({"tenant-a": " "}), "kubeconfigs.tenant-a: expected kubeconfig YAML"),
        (lambda d: d.update(kubeconfigs={}), "no kubeconfig in the outputs for: tenant-a, tenant-b"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_each_unusable_output_is_named_by_its_path_and_type(change, message):
    document = copy.deepcopy(recorded_outputs())
    change(document)

    assert refused(lambda: parse_outputs(document)) == message
