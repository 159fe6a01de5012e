"""Modelled time of upgrading one tenant's Kubernetes version (a benchmark, not a test).

Brings a lab up under Pulumi mocks with the tenant `up` (N workers) and some other
tenants on OLD, then previews `up` on NEW against it, as `pulumi preview` would on the
running lab. Only resources whose inputs change take time; each weighs what
plan_scaling.STEP_SECONDS says, and a replaced worker's join also pays for the drain
that precedes it (leave-worker.sh, its delete step, not a registration of its own). The
longest dependency chain through them is the modelled upgrade time: it grows with N,
because workers are replaced one at a time, and not with the number of other tenants.

    .venv/bin/python -m benchmarks.upgrade_time [--workers 1 2 4] [--others 0 1 7] [--check]

--check exits 1 when the time depends on the number of other tenants, or when a further
worker adds anything but one worker's replacement.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.plan_scaling import STEP_SECONDS, longest_chain, step_seconds
from tests.plan import changed, dev_config, plan

OLD, NEW = "v1.35.9", "v1.36.1"
GPUS = [{"model": "NVIDIA L4 24GB"}]
# One worker's turn: drained and removed, a new container, joined, GPUs registered.
WORKER_STEPS = ("leave-worker.sh", "docker:index/container:Container", "join-worker.sh", "register-gpus.sh")


def lab(workers: int, others: int, version: str) -> dict:
    tenants = [{"name": "up", "workers": workers, "kubernetesVersion": version, "gpus": GPUS}]
    tenants += [{"name": f"other{index}", "kubernetesVersion": OLD, "gpus": GPUS} for index in range(others)]
    return dev_config(tenants=tenants)


def upgrade_seconds(workers: int, others: int) -> tuple[int, list[str]]:
    """Modelled seconds of upgrading tenant `up` from OLD to NEW, and the chain that takes them."""
    running = plan(lab(workers, others, OLD), preview=False)
    upgrade = plan(lab(workers, others, NEW), preview=True, previous=running)
    moving = changed(upgrade, running)

    def cost(urn: str) -> int:
        if urn not in moving:
            return 0
        seconds = step_seconds(upgrade, urn)
        if upgrade.by_urn[urn].inputs.get("create", "").endswith("/join-worker.sh"):
            seconds += STEP_SECONDS["leave-worker.sh"]
        return seconds

    seconds, chain = longest_chain(upgrade, cost)
    moving_names = {upgrade.by_urn[urn].name for urn in moving}
    return seconds, [name for name in chain if name in moving_names]


def per_worker_seconds() -> int:
    return sum(STEP_SECONDS[step] for step in WORKER_STEPS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--others", type=int, nargs="+", default=[0, 1, 7])
    parser.add_argument("--check", action="store_true", help="exit 1 when the model's claims do not hold")
    args = parser.parse_args(argv)

    print(f"upgrade of one tenant {OLD} -> {NEW}, modelled seconds (estimates, see STEP_SECONDS)")
    print(f"{'workers':>7} " + " ".join(f"{f'{n} others':>10}" for n in args.others))
    times: dict[tuple[int, int], int] = {}
    for workers in args.workers:
        for others in args.others:
            times[workers, others], chain = upgrade_seconds(workers, others)
        print(f"{workers:>7} " + " ".join(f"{times[workers, others]:>10}" for others in args.others))
    print("chain of the last:", " -> ".join(chain))

    misses = [
        f"{workers} workers: {sorted({times[workers, others] for others in args.others})} s vary with other tenants"
        for workers in args.workers
        if len({times[workers, others] for others in args.others}) > 1
    ]
    step = per_worker_seconds()
    ordered = sorted(args.workers)
    misses += [
        f"{more} workers take {times[more, args.others[0]] - times[fewer, args.others[0]]} s more than {fewer}, "
        f"expected {(more - fewer) * step} s (one replacement after another)"
        for fewer, more in zip(ordered, ordered[1:], strict=False)
        if times[more, args.others[0]] - times[fewer, args.others[0]] != (more - fewer) * step
    ]
    for miss in misses:
        print("MISSED:", miss)
    return 1 if args.check and misses else 0


if __name__ == "__main__":
    sys.exit(main())
