"""Per-module tally of a `mutmut run` (reads ./mutants; `make mutants` prints it last).

    python tests/mutation_score.py [module-substring ...]

"score" is killed (timeouts included) over all checked mutants; docs/mutation-report.md
subtracts the survivors it lists as equivalent.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

ROOT = Path(__file__).resolve().parent.parent


def tally(meta: Path) -> Counter[str]:
    codes = json.loads(meta.read_text())["exit_code_by_key"].values()
    return Counter(status_by_exit_code[code] for code in codes)


def main(words: list[str]) -> None:
    total: Counter[str] = Counter()
    print(f"{'module':38} {'killed':>6} {'surv.':>6} {'other':>6} {'unrun':>6}  score")
    for meta in sorted((ROOT / "mutants").glob("**/*.py.meta")):
        module = str(meta.relative_to(ROOT / "mutants")).removesuffix(".py.meta")
        counts = tally(meta)
        if not counts or (words and not any(word in module for word in words)):
            continue
        total += counts
        row(module, counts)
    row("total", total)


def row(module: str, counts: Counter[str]) -> None:
    killed = counts["killed"] + counts["timeout"]
    survived = counts["survived"]
    unrun = counts["not checked"]
    other = sum(counts.values()) - killed - survived - unrun
    checked = killed + survived + other
    score = f"{100 * killed / checked:5.1f} %" if checked else "   -"
    print(f"{module:38} {killed:6} {survived:6} {other:6} {unrun:6}  {score}")


if __name__ == "__main__":
    main(sys.argv[1:])
