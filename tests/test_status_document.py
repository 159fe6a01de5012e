"""The document `python -m validation.status --json` prints is the one validation/status/rows.py declares.

Every kind of row (read, unreachable, malformed, an internal error, asleep; the management cluster read or
not) is printed from the fixtures of tests/test_status.py and walked against the TypedDicts: each object
has exactly its type's keys, in the declared order, and each value the declared type.
"""

from __future__ import annotations

import io
import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_status import FakeKubectl, as_list, run_status, status_json
from tests.test_status_guards import ANSWERS, mutated, nodes_with_register, register
from tests.test_status_sleeping import fake_with, outputs_asleep
from validation.status import rows
from validation.status.cli import main


def bug_in_reading(cluster: str) -> FakeKubectl:
    fake = FakeKubectl()

    def before(name, args):
        if name == cluster:
            raise RuntimeError("a bug in the reader")

    fake.before = before
    return fake


def asleep_json(tmp_path: Path, fake: FakeKubectl) -> dict[str, Any]:
    stdout = io.StringIO()
    main(["--outputs", outputs_asleep(tmp_path), "--json"], runner=fake, stdout=stdout, clock=fake)
    return json.loads(stdout.getvalue())


NAMELESS_NODE = as_list([{"metadata": {}}])
# Each makes at least one row of its kind; tenant-a of the first has GPUs, pods on them, a Pending GPU pod,
# a quota and an unhealthy GPU, tenant-b is unreachable and tenant-c read without GPUs.
SCENARIOS = {
    "read-unreachable-and-without-gpus": lambda tmp: status_json()[1],
    "every-tenant-healthy": lambda tmp: status_json(fake=FakeKubectl(unreachable=(), gpus_healthy=True))[1],
    "worker-registers-fewer-gpus": lambda tmp: status_json(
        fake=FakeKubectl(answers={("tenant-a", "nodes"): nodes_with_register(register())})
    )[1],
    "malformed-answer": lambda tmp: status_json(fake=FakeKubectl(answers={("tenant-c", "nodes"): NAMELESS_NODE}))[1],
    "management-unreachable": lambda tmp: status_json(fake=FakeKubectl(unreachable=("management",)))[1],
    "internal-error-reading-a-tenant": lambda tmp: status_json(fake=bug_in_reading("tenant-c"))[1],
    "internal-error-reading-management": lambda tmp: status_json(fake=bug_in_reading("management"))[1],
    "asleep": lambda tmp: asleep_json(tmp, fake_with()),
    "asleep-not-sleeping-yet": lambda tmp: asleep_json(tmp, fake_with("Ready")),
    "asleep-management-unreachable": lambda tmp: asleep_json(tmp, FakeKubectl(unreachable=("management", "tenant-b"))),
}


def conforms(value: Any, declared: Any, where: str, seen: set[type]) -> None:
    """AssertionError naming the path where value is not of the declared type; seen gets every TypedDict met."""
    origin, args = typing.get_origin(declared), typing.get_args(declared)
    if typing.is_typeddict(declared):
        fields = typing.get_type_hints(declared)
        assert isinstance(value, dict), f"{where}: {value!r} is no {declared.__name__}"
        assert list(value) == list(fields), f"{where}: keys {list(value)}, {declared.__name__} declares {list(fields)}"
        for key, field in fields.items():
            conforms(value[key], field, f"{where}.{key}", seen)
        seen.add(declared)
    elif origin in (typing.Union, types.UnionType):
        failures = []
        for alternative in args:
            found: set[type] = set()
            try:
                conforms(value, alternative, where, found)
            except AssertionError as error:
                failures.append(str(error))
            else:
                seen |= found
                return
        raise AssertionError(" / ".join(failures))
    elif origin is list:
        assert isinstance(value, list), f"{where}: {value!r} is no list"
        for position, item in enumerate(value):
            conforms(item, args[0], f"{where}[{position}]", seen)
    elif origin is dict:
        assert isinstance(value, dict), f"{where}: {value!r} is no object"
        for key, item in value.items():
            conforms(key, args[0], f"{where} key", seen)
            conforms(item, args[1], f"{where}.{key}", seen)
    elif origin is typing.Literal:
        assert value in args, f"{where}: {value!r} is none of {args}"
    elif declared is type(None):
        assert value is None, f"{where}: {value!r} is not null"
    else:  # bool, int, str: exactly (JSON's true is no number of GPUs)
        assert type(value) is declared, f"{where}: {value!r} is no {declared.__name__}"


def declared_structures(declared: Any) -> set[type]:
    """Every TypedDict the document's type reaches."""
    if typing.is_typeddict(declared):
        return {declared}.union(*map(declared_structures, typing.get_type_hints(declared).values()))
    return set().union(*map(declared_structures, typing.get_args(declared)))


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_row_kind_prints_exactly_the_keys_and_types_its_structure_declares(scenario, tmp_path):
    doc = SCENARIOS[scenario](tmp_path)
    conforms(doc, rows.Document, "document", set())
    for row in doc["tenants"]:
        # A sleeping tenant's row is an AsleepRow, every other a TenantRow: no key of one in the other.
        conforms(row, rows.AsleepRow if row["asleep"] else rows.TenantRow, row["name"], set())


def test_the_scenarios_fill_every_declared_structure(tmp_path_factory):
    seen: set[type] = set()
    for scenario in SCENARIOS:
        conforms(SCENARIOS[scenario](tmp_path_factory.mktemp(scenario)), rows.Document, scenario, seen)
    # Each structure met at least once, so none is declared yet never printed (or only as an empty list).
    names = sorted(structure.__name__ for structure in declared_structures(rows.Document) - seen)
    assert names == []
    assert {rows.AsleepRow, rows.TenantRow, rows.GpuGap, rows.UnhealthyGpu, rows.PodSlice, rows.QuotaAmount} <= seen


def test_the_walk_refuses_a_key_too_many_or_too_few_and_a_value_of_another_type():
    _, doc = status_json()
    conforms(doc, rows.Document, "document", set())
    row = doc["tenants"][0]
    for changed in ({**row, "extra": 1}, {key: value for key, value in row.items() if key != "asleep"},
                    {**row, "reachable": 1}, {**row, "version": 1}, dict(reversed(row.items()))):
        with pytest.raises(AssertionError, match=row["name"]):
            conforms(changed, rows.TenantRow, row["name"], set())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_answers_still_print_the_declared_document(data):
    resource = data.draw(st.sampled_from(sorted(ANSWERS)), label="resource")
    answer = data.draw(mutated(ANSWERS[resource]), label="answer")
    _, text = run_status("--json", fake=FakeKubectl(answers={("tenant-a", resource): answer}))
    conforms(json.loads(text), rows.Document, "document", set())
