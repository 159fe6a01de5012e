"""A fuzzer over the sample stacks: every bad input is refused before any resource, in the program's own words.

Hypothesis mutates one value of the dev stack or of examples/Pulumi.beyond-one-host.yaml (its secrets included)
into something hostile: huge or negative numbers, floats beyond range, deep JSON, 10,000-character text, wrong
shapes of a kubeconfig. The real __main__.py then runs under Pulumi mocks. It either plans the lab, or refuses
with a ConfigError whose every line names a key, shows no value in full beyond a few hundred characters, and
comes before the first registration.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.config import MORE_MAY_FOLLOW, ConfigError
from tests.plan import ROOT, dev_config, plan
from tests.render_charts_module import project_defaults, stack_config
from tests.test_machines import SECRETS

LONG = "x" * 10_000
DEEP = "[" * 3_000 + "]" * 3_000
# The longest line a refusal may print: a key path, its problem and a shortened value.
LONGEST_LINE = 800
KUBECONFIG = "managementKubeconfig"

SAMPLES = {
    "dev": (dev_config(), {}),
    "beyond-one-host": ({**project_defaults(), **stack_config("beyond-one-host", root=ROOT / "examples")}, SECRETS),
}

HOSTILE = st.sampled_from([
    None, "", " ", LONG, 0, -1, 2**31, 2**63, 10**400, 1.5, 1e308, math.inf, True, [], {}, [1, [2]], {"a": {"b": 1}},
    "010.0.1.21", "0x7f.1", "300.1.1.1", "0.0.0.0/0", "v1.36.4" + "9" * 5000, "kindest/node", "a" * 300,
])
# Text only the CLI's JSON can carry: nesting beyond Python's recursion limit, numbers beyond float range.
RAW = st.sampled_from([DEEP, "1e999", "-1e999", "9" * 5000, "{\"a\": " * 3_000 + "1" + "}" * 3_000])


def paths(value: Any, above: tuple = ()) -> list[tuple]:
    """Every place in a config value one mutation can hit."""
    found = [above] if above else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*above, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*above, index))
    return found


def replaced(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    copy = list(value) if isinstance(value, list) else dict(value)
    copy[path[0]] = replaced(value[path[0]], path[1:], new)
    return copy


def as_cli_text(value: Any, raw: str | None) -> str:
    """The value as the CLI hands it over: text, objects as JSON; `raw` stands in for the marker."""
    text = value if isinstance(value, str) else json.dumps(value)
    return text if raw is None else text.replace(json.dumps(MARK), raw)


MARK = "\x00raw\x00"


@st.composite
def mutated_stacks(draw) -> tuple[dict[str, str], dict[str, str], str | None]:
    """(config, secrets, the raw text put in) with one value replaced."""
    config, secrets = SAMPLES[draw(st.sampled_from(sorted(SAMPLES)))]
    values = {**config, **secrets}
    if KUBECONFIG in values and draw(st.booleans()):  # the kubeconfig's own structure
        values[KUBECONFIG] = yaml.safe_load(values[KUBECONFIG])
    places = [(key,) for key in values] + [(key, *path) for key in values for path in paths(values[key])]
    where = draw(st.sampled_from(places))
    raw = draw(st.none() | RAW)
    new = MARK if raw is not None else draw(HOSTILE)
    mutated = replaced(values, where, new) if draw(st.booleans()) or len(where) > 1 else \
        {key: value for key, value in values.items() if key != where[0]}  # or the key left out
    if isinstance(mutated.get(KUBECONFIG), dict | list):
        mutated[KUBECONFIG] = yaml.safe_dump(mutated[KUBECONFIG])
    text = {key: as_cli_text(value, raw) for key, value in mutated.items() if value is not None}
    return ({k: v for k, v in text.items() if k not in secrets},
            {k: v for k, v in text.items() if k in secrets}, raw)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_stacks(), st.booleans())
def test_a_mutated_stack_plans_or_is_refused_before_anything_exists(stack, preview):
    config, secrets, raw = stack
    try:
        plan(config, preview=preview, secrets=secrets)
    except ConfigError as refused:
        message = str(refused)
        assert refused.plan.registrations == [], "refused after resources were registered"
        lines = message.splitlines()
        assert lines[0] == "invalid stack configuration:"
        for line in lines[1:]:
            assert re.match(r"  kamaji-hami-lab:\w", line) or line == MORE_MAY_FOLLOW, line
            assert len(line) <= LONGEST_LINE, line[:200]
        assert LONG not in message and (raw is None or raw not in message)
