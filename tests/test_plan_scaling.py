"""The benchmark's chain arithmetic, and the property it measures: tenants add no waiting."""

from benchmarks.plan_scaling import longest_chain, main
from tests.plan import Plan, Registration, dev_config, plan, tenants


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


def test_eight_tenants_take_no_longer_than_one():
    one = longest_chain(plan(dev_config(tenants=tenants(1)), preview=True))[0]
    eight = longest_chain(plan(dev_config(tenants=tenants(8)), preview=True))[0]
    assert eight == one


def test_the_table_gives_resources_per_added_tenant_and_none_for_the_first_row(capsys):
    assert main(["--counts", "1", "2"]) == 0

    header, first, second = capsys.readouterr().out.splitlines()[:3]
    assert header.split()[:4] == ["tenants", "resources", "per", "tenant"]
    assert first.split()[2] == "-"  # one row alone says nothing about what a tenant adds
    one, two = int(first.split()[1]), int(second.split()[1])
    assert float(second.split()[2]) == two - one > 0
