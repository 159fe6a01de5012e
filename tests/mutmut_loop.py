"""pytest plugin for mutation runs by hand: many mutmut mutants in ONE pytest session, module by module.

mutmut starts a fresh pytest per mutant, with the tests sorted by duration across modules, so a module's fixtures
(its real etcd servers) start again for every mutant and module switch; on the datastore check that is most of the
cost. Here each module's fixtures start once, and every pending mutant runs that module's tests before the next
module. A mutant's tests are those mutmut's stats run recorded for its function, quickest first (after the one
that killed the function's previous mutant); its first failing test decides it. That kill counts only if the test
fails again with the mutant (not a flake under load) and passes with no mutant active (not state an earlier mutant
left behind); else it is "polluted" and undecided.

Run inside mutmut's ./mutants after `mutmut run` has written mutmut-stats.json:

    MUTLOOP_NAMES=names.txt MUTLOOP_OUT=verdicts.txt python -m pytest -p tests.mutmut_loop -q <test files>

names.txt: mutant names, one a line. verdicts.txt gets "name verdict test" lines (verdict: killed, timeout,
polluted, survived, or untested when none of the files reaches its function); a second run skips names it has.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from _pytest.runner import runtestprotocol

TEST_LIMIT = 120  # seconds; a test a mutant makes hang kills it by timeout, as mutmut counts it


class Hang(Exception):
    pass


def _hang(signum, frame):
    raise Hang(f"over {TEST_LIMIT} s")


def passes(item: pytest.Item, mutant: str) -> bool | None:
    """Whether the test passes (or skips) with mutant active ("" for none); None if it hung. Keeps the module's
    fixtures up: nextitem is the module, so only the test's own (and its class's) are torn down."""
    os.environ["MUTANT_UNDER_TEST"] = mutant
    signal.signal(signal.SIGALRM, _hang)
    signal.alarm(TEST_LIMIT)
    try:
        reports = runtestprotocol(item, nextitem=item.getparent(pytest.Module), log=False)
    except Hang:
        return None
    finally:
        signal.alarm(0)
        os.environ["MUTANT_UNDER_TEST"] = ""
    return not any(report.failed for report in reports)


def verdict(item: pytest.Item, mutant: str) -> str | None:
    """killed, timeout or polluted once the test tells the mutant apart; None while it does not."""
    first = passes(item, mutant)
    if first:
        return None
    if not passes(item, ""):
        return "polluted"
    if passes(item, mutant):
        return None  # a flake: the mutant passes it the second time
    return "timeout" if first is None else "killed"


def pytest_runtestloop(session: pytest.Session) -> bool:
    out = Path(os.environ["MUTLOOP_OUT"])
    done = {line.split()[0] for line in out.read_text().splitlines() if line.strip()} if out.exists() else set()
    pending = [name for name in Path(os.environ["MUTLOOP_NAMES"]).read_text().split() if name not in done]
    stats = json.loads(Path("mutmut-stats.json").read_text())
    tests_of, duration = stats["tests_by_mangled_function_name"], stats["duration_by_test"]
    modules: dict[str, list[pytest.Item]] = {}
    for item in session.items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = sorted(modules, key=lambda path: sum(duration.get(item.nodeid, 0) for item in modules[path]))
    decided: set[str] = set()
    tested: set[str] = set()
    # The test that last killed a mutant of a function goes first for its next: neighbours often fall to it.
    killer: dict[str, str] = {}
    with out.open("a") as verdicts:
        for index, path in enumerate(order):
            for mutant in (name for name in pending if name not in decided):
                function = mutant.rsplit("__mutmut_", 1)[0]
                wanted = set(tests_of.get(function, ()))
                chosen = [item for item in modules[path] if item.nodeid in wanted]
                if chosen:
                    tested.add(mutant)
                first = killer.get(function)
                for item in sorted(chosen, key=lambda item: (item.nodeid != first, duration.get(item.nodeid, 0))):
                    if found := verdict(item, mutant):
                        verdicts.write(f"{mutant} {found} {item.nodeid}\n")
                        verdicts.flush()
                        decided.add(mutant)
                        killer[function] = item.nodeid
                        break
            following = modules[order[index + 1]][0] if index + 1 < len(order) else None
            session._setupstate.teardown_exact(following)  # this module's fixtures, before the next module's
        for mutant in pending:
            if mutant not in decided:
                verdicts.write(f"{mutant} {'survived' if mutant in tested else 'untested'} -\n")
    return True
