"""tests/plan.py itself: each plan is a run of its own, as each `pulumi preview` or `up` is a process of its own."""

import gc

import pytest

from components.config import ConfigError
from tests.plan import dev_config, plan


def test_a_plans_outputs_are_its_own_and_not_an_earlier_plans(preview_plan):
    # The dev stack exports Grafana's URL; a lab without observability exports none, whatever ran before it.
    assert "grafanaUrl" in preview_plan.outputs
    off = plan(dev_config(observability=False), preview=True)
    assert "grafanaUrl" not in off.outputs and "grafanaAdminPassword" not in off.outputs
    assert "kubeconfigs" in off.outputs


@pytest.mark.parametrize("enabled", [True, False], ids=["on", "off"])
def test_a_plan_leaves_the_garbage_collector_as_it_found_it_even_when_refused(enabled):
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with pytest.raises(ConfigError):
            plan(dev_config(observability="maybe"), preview=True)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
