"""pytest plugin for `make mutants` only (pyproject's [tool.mutmut]): quickest tests first.

mutmut runs a mutant's tests with -x, so a killed mutant costs the tests before the first
failure. Ordering by the durations mutmut recorded in its stats run makes that the cheap
ones; a survivor still runs them all.
"""

import json
from pathlib import Path

STATS = Path("mutmut-stats.json")  # mutmut runs pytest inside ./mutants, where it keeps this file


def pytest_collection_modifyitems(items):
    if not STATS.exists():
        return
    duration = json.loads(STATS.read_text()).get("duration_by_test", {})
    items.sort(key=lambda item: duration.get(item.nodeid, float("inf")))
