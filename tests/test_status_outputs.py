"""One tenant's bad entry in the stack outputs: that tenant's row is UNHEALTHY and says why, every other
tenant is shown as usual (table and --json). Exit 2 only for a document no tenant can be read from."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_status import FIXTURES, FakeKubectl, tenant
from validation.exit_codes import EXIT_NO_OUTPUTS
from validation.stack_outputs import OutputsError, parse_fleet, parse_outputs
from validation.status.cli import main

TENANTS = ["tenant-a", "tenant-b", "tenant-c"]


def outputs_with(tmp_path: Path, change: Callable[[dict[str, Any]], Any]) -> Path:
    document = json.loads((FIXTURES / "outputs.json").read_text())
    change(document)
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(document))
    return path


def status(outputs: Path, *args: str, fake: FakeKubectl | None = None) -> tuple[int, str]:
    stdout = io.StringIO()
    fake = fake or healthy()
    code = main(["--outputs", str(outputs), *args], runner=fake, stdout=stdout, clock=fake)
    return code, stdout.getvalue()


def healthy() -> FakeKubectl:
    return FakeKubectl(unreachable=(), gpus_healthy=True)


def tenant_spec(name: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda document: document["tenants"][name].__setitem__(key, value)


# A bad entry of tenant-b, and the words (key path, what was wrong) its row must name.
BAD_ENTRIES: dict[str, tuple[Callable[[dict[str, Any]], Any], tuple[str, ...]]] = {
    "kubeconfig-missing": (lambda d: d["kubeconfigs"].pop("tenant-b"), ("kubeconfigs.tenant-b", "missing")),
    "kubeconfig-empty": (lambda d: d["kubeconfigs"].__setitem__("tenant-b", " \n"), ("kubeconfigs.tenant-b", "empty")),
    "kubeconfig-number": (lambda d: d["kubeconfigs"].__setitem__("tenant-b", 42), ("kubeconfigs.tenant-b", "int")),
    "kubeconfig-redacted": (
        lambda d: d["kubeconfigs"].__setitem__("tenant-b", "[secret]"),
        ("kubeconfigs.tenant-b", "--show-secrets"),
    ),
    "tenant-null": (lambda d: d["tenants"].__setitem__("tenant-b", None), ("tenants.tenant-b", "object")),
    "tenant-a-list": (lambda d: d["tenants"].__setitem__("tenant-b", []), ("tenants.tenant-b", "object")),
    "workers-a-string": (tenant_spec("tenant-b", "workers", "w1"), ("tenants.tenant-b.workers", "list")),
    "workers-numbers": (tenant_spec("tenant-b", "workers", [1, 2]), ("tenants.tenant-b.workers", "worker names")),
    "quotas-a-number": (tenant_spec("tenant-b", "quotas", 5), ("tenants.tenant-b.quotas", "list")),
    "endpoint-missing": (lambda d: d["tenants"]["tenant-b"].pop("endpoint"), ("tenants.tenant-b.endpoint", "missing")),
    "gpu-count-a-string": (
        lambda d: d["tenants"]["tenant-b"]["gpusPerWorker"][0].__setitem__("count", "2"),
        ("tenants.tenant-b.gpusPerWorker[0].count", "integer"),
    ),
    "sleeping-a-string": (tenant_spec("tenant-b", "sleeping", "yes"), ("tenants.tenant-b.sleeping", "true or false")),
}


@pytest.mark.parametrize(("change", "words"), BAD_ENTRIES.values(), ids=BAD_ENTRIES.keys())
def test_one_tenant_s_bad_entry_marks_its_row_and_keeps_every_other_tenant(tmp_path, change, words):
    outputs = outputs_with(tmp_path, change)
    fake = healthy()
    code, text = status(outputs, "--json", fake=fake)
    doc = json.loads(text)
    assert [row["name"] for row in doc["tenants"]] == TENANTS  # in the outputs' order
    bad = tenant(doc, "tenant-b")
    assert bad["healthy"] is False and bad["reachable"] is False
    assert all(word in bad["error"] for word in words), bad["error"]
    assert all(tenant(doc, name)["healthy"] for name in ("tenant-a", "tenant-c"))
    assert doc["management"]["reachable"] is True
    assert doc["ok"] is False and code == 1
    # Nothing was asked of a tenant whose entry cannot be used.
    assert not any(Path(path).stem == "tenant-b" for path in fake.kubeconfigs)

    code, table = status(outputs, fake=healthy())
    assert code == 1
    assert "tenant-b  -  UNHEALTHY" in table and words[0] in table
    assert "tenant-a  v1" in table and "tenant-c  v1" in table


def test_a_number_as_a_kubeconfig_is_named_by_type_not_by_value(tmp_path):
    outputs = outputs_with(tmp_path, lambda d: d["kubeconfigs"].__setitem__("tenant-b", 987654321))
    _, text = status(outputs, "--json")
    assert "987654321" not in text


@pytest.mark.parametrize("name", ["management", "Tenant_B", "../x"])
def test_a_tenant_with_an_unusable_name_is_a_row_of_its_own_and_no_file(tmp_path, name):
    def rename(document: dict[str, Any]) -> None:
        for key in ("tenants", "kubeconfigs"):
            document[key] = {name if old == "tenant-b" else old: value for old, value in document[key].items()}

    fake = healthy()
    code, text = status(outputs_with(tmp_path, rename), "--json", fake=fake)
    doc = json.loads(text)
    assert [row["name"] for row in doc["tenants"]] == ["tenant-a", name, "tenant-c"]
    assert repr(name) in tenant(doc, name)["error"] or "reserved" in tenant(doc, name)["error"]
    assert tenant(doc, "tenant-a")["healthy"] and tenant(doc, "tenant-c")["healthy"]
    assert sorted(Path(path).stem for path in fake.kubeconfigs) == ["management", "tenant-a", "tenant-c"]
    assert code == 1


def test_a_stray_kubeconfig_of_no_tenant_is_left_out_and_never_written(tmp_path):
    stray = outputs_with(tmp_path, lambda d: d["kubeconfigs"].__setitem__("../x", "apiVersion: v1\n"))
    fake = healthy()
    code, text = status(stray, "--json", fake=fake)
    doc = json.loads(text)
    assert [row["name"] for row in doc["tenants"]] == TENANTS
    assert doc["ok"] is True and code == 0
    assert all(path.name != "x.kubeconfig" and ".." not in str(path) for path in fake.kubeconfigs)


def test_no_management_kubeconfig_still_reads_every_tenant(tmp_path):
    code, text = status(outputs_with(tmp_path, lambda d: d.pop("managementKubeconfig")), "--json")
    doc = json.loads(text)
    assert doc["management"] == {
        "reachable": False,
        "error": "no managementKubeconfig in the stack outputs",
        "internalError": False,
    }
    assert all(row["reachable"] and row["controlPlaneReady"] is None for row in doc["tenants"])
    assert code == 1


def test_kubeconfigs_that_are_not_an_object_mark_every_tenant_and_still_print(tmp_path):
    code, text = status(outputs_with(tmp_path, lambda d: d.__setitem__("kubeconfigs", "oops")), "--json")
    doc = json.loads(text)
    assert [row["name"] for row in doc["tenants"]] == TENANTS
    assert all("outputs.kubeconfigs" in row["error"] and not row["healthy"] for row in doc["tenants"])
    assert code == 1


def test_the_tenant_option_names_a_tenant_whose_entry_is_bad(tmp_path):
    outputs = outputs_with(tmp_path, lambda d: d["tenants"].__setitem__("tenant-b", None))
    code, text = status(outputs, "--json", "--tenant", "tenant-b")
    assert [row["name"] for row in json.loads(text)["tenants"]] == ["tenant-b"] and code == 1


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.pop("tenants"),
        lambda d: d.__setitem__("tenants", ["tenant-a"]),
        lambda d: d.__setitem__("kubeconfigs", "[secret]"),
    ],
    ids=["no-tenants", "tenants-a-list", "kubeconfigs-redacted"],
)
def test_a_document_no_tenant_can_be_read_from_still_exits_2(tmp_path, change, capsys):
    code, text = status(outputs_with(tmp_path, change), "--json")
    assert (code, text) == (EXIT_NO_OUTPUTS, "")
    assert capsys.readouterr().err.startswith("status: ")


def test_unparseable_outputs_exit_2(tmp_path):
    broken = tmp_path / "outputs.json"
    broken.write_text('{"tenants": ')
    assert status(broken, "--json") == (EXIT_NO_OUTPUTS, "")


@pytest.mark.parametrize(("change", "words"), BAD_ENTRIES.values(), ids=BAD_ENTRIES.keys())
def test_validation_still_refuses_the_whole_document(tmp_path, change, words):
    """python -m validation checks every tenant: a run over a part of them could not prove the lab."""
    document = json.loads(outputs_with(tmp_path, change).read_text())
    with pytest.raises(OutputsError):
        parse_outputs(document)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
ENTRY_KEYS = ["endpoint", "workers", "gpusPerWorker", "gpuSlots", "quotas", "sleeping", "gpuDevices", "namespace"]


@settings(max_examples=200, deadline=None)
@given(
    entry=st.one_of(JSON, st.sampled_from(ENTRY_KEYS).flatmap(lambda key: st.tuples(st.just(key), JSON))),
    kubeconfig=st.one_of(st.none(), JSON),
    name=st.one_of(st.just("tenant-b"), st.text(max_size=12)),
)
def test_any_entry_of_one_tenant_leaves_the_others_readable(entry, kubeconfig, name):
    """Whatever one tenant's entry and kubeconfig hold, parse_fleet raises nothing and reads every other tenant."""
    document = json.loads((FIXTURES / "outputs.json").read_text())
    spec = document["tenants"].pop("tenant-b")
    kubeconfigs = document["kubeconfigs"]
    kubeconfigs.pop("tenant-b")
    if isinstance(entry, tuple):  # one field of a valid entry changed
        spec[entry[0]] = entry[1]
        entry = spec
    document["tenants"][name] = entry
    if kubeconfig is not None:
        kubeconfigs[name] = kubeconfig
    outputs = parse_fleet(document)
    others = {"tenant-a", "tenant-c"} - {name}
    assert others <= set(outputs.tenants)
    assert set(outputs.tenants) | set(outputs.unreadable) == set(document["tenants"])
    assert not set(outputs.tenants) & set(outputs.unreadable)
    # Only a readable tenant's kubeconfig is ever written, under a name that is a file name.
    assert set(outputs.kubeconfigs) == {"management", *outputs.tenants}
    assert all("/" not in written and written not in (".", "..") for written in outputs.kubeconfigs)


def test_a_bad_entry_s_row_has_one_problem_and_its_error_names_the_key(tmp_path):
    outputs = outputs_with(tmp_path, tenant_spec("tenant-b", "workers", "w1"))
    _, text = status(outputs, "--json")
    bad = tenant(json.loads(text), "tenant-b")
    assert bad["problems"] == ["unreadable in the stack outputs"]
    assert bad["error"] == "stack outputs: tenants.tenant-b.workers: expected a list, got str"
