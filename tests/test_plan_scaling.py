"""The benchmark's chain arithmetic, and the property it measures: tenants add no waiting."""

from benchmarks.plan_scaling import longest_chain
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
