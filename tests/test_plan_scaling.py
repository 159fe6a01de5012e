"""The benchmark's chain arithmetic, and the property it measures: tenants add no waiting."""

import pytest

from benchmarks import upgrade_time
from benchmarks.plan_scaling import longest_chain, main
from benchmarks.upgrade_time import main as upgrade_main
from benchmarks.upgrade_time import per_worker_seconds
from tests.plan import Plan, Registration


def command(name, script, dependencies=()):
    return Registration(
        urn=f"urn:{name}",
        type="command:local:Command",
        name=name,
        parent="",
        provider="",
        dependencies=list(dependencies),
        property_dependencies={},
        inputs={"create": f"bash scripts/{script}"},
        secret_inputs=set(),
        secret_outputs=[],
        delete_before_replace=False,
        replace_on_changes=[],
        ignore_changes=[],
        custom=True,
    )


def test_longest_chain_follows_the_most_expensive_dependencies():
    kind = command("kind", "kind-up.sh")  # 60 s
    cheap = command("cheap", "kind-subnet.sh", ["urn:kind"])  # 1 s
    dear = command("dear", "wait-kamaji.sh", ["urn:kind"])  # 30 s
    last = command("last", "wait-gpus.sh", ["urn:cheap", "urn:dear"])  # 60 s
    seconds, path = longest_chain(Plan([kind, cheap, dear, last]))
    assert (seconds, path) == (150, ["kind", "dear", "last"])


def test_eight_tenants_take_no_longer_than_one(tenants_preview):
    one = longest_chain(tenants_preview(1))[0]
    eight = longest_chain(tenants_preview(8))[0]
    assert eight == one


def test_the_table_gives_resources_per_added_tenant_and_none_for_the_first_row(capsys):
    assert main(["--counts", "1", "2"]) == 0

    header, first, second = capsys.readouterr().out.splitlines()[:3]
    assert header.split()[:4] == ["tenants", "resources", "per", "tenant"]
    assert first.split()[2] == "-"  # one row alone says nothing about what a tenant adds
    one, two = int(first.split()[1]), int(second.split()[1])
    assert float(second.split()[2]) == two - one > 0


@pytest.fixture
def upgrade_seconds(shared, monkeypatch):
    """The benchmark's upgrade_seconds, each (workers, others) measured once for the session: the table's too."""
    measure = upgrade_time.upgrade_seconds

    def measured(workers: int, others: int) -> tuple[int, list[str]]:
        return shared(f"upgrade-{workers}-{others}", lambda: measure(workers, others))

    monkeypatch.setattr(upgrade_time, "upgrade_seconds", measured)
    return measured


def test_an_upgrade_takes_one_worker_replacement_more_per_worker_and_nothing_per_other_tenant(upgrade_seconds):
    one, _ = upgrade_seconds(workers=1, others=0)
    one_among_three, _ = upgrade_seconds(workers=1, others=3)
    two, chain = upgrade_seconds(workers=2, others=0)

    assert one_among_three == one
    assert two - one == per_worker_seconds()
    # The control plane first, then the workers one after the other, HAMi last.
    assert chain.index("up-control-plane") < chain.index("kamaji-up-w1-join") < chain.index("kamaji-up-w2-join")
    assert chain[0] == "up-version-check"


def test_the_upgrade_table_has_a_row_per_worker_count_and_a_column_per_other_tenant_count(capsys, upgrade_seconds):
    assert upgrade_main(["--workers", "1", "2", "--others", "0", "--check"]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["workers", "0", "others"]
    one, two = (line.split() for line in lines[2:4])
    assert (one[0], two[0]) == ("1", "2")
    assert int(two[1]) - int(one[1]) == per_worker_seconds()
    assert "MISSED" not in "\n".join(lines)
