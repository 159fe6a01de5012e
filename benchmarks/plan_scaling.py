"""How the plan scales with the number of tenants (a benchmark, not a test).

Evaluates the real program under Pulumi mocks for several tenant counts and
prints, per count: resources per tenant, evaluation seconds, and the longest
dependency chain weighted by rough live durations (STEP_SECONDS). Because
tenants never wait on each other, that chain -- the bring-up time on a host
with enough CPU -- should not grow with the number of tenants.

    .venv/bin/python -m benchmarks.plan_scaling [--counts 1 2 8 32] [--check]

--check exits 1 when a target is missed: 32 tenants evaluate in under 10 s,
and the chain for 8 tenants is within 15% of the chain for one.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import cache

from tests.plan import Plan, dev_config, plan, tenants

# Rough seconds each step takes on a laptop-class Linux host with warm image
# caches; used only to weight the dependency chain. Anything not listed is
# bookkeeping (providers, components, small objects) and counts as 1 s.
STEP_SECONDS = {
    "kind-up.sh": 60,
    "kind-subnet.sh": 1,
    "wait-metallb.sh": 30,
    "wait-kamaji.sh": 30,
    "tenant-kubeconfig.sh": 15,
    "check-tenant-version.sh": 2,
    "join-worker.sh": 45,
    # Draining a worker with a few pods that evict without delay, and removing its node.
    "leave-worker.sh": 30,
    "install-cni.sh": 10,
    "register-gpus.sh": 10,
    "wait-gpus.sh": 60,
    "docker:index/remoteImage:RemoteImage": 30,
    "docker:index/container:Container": 5,
    "kamaji.clastix.io/v1alpha1:TenantControlPlane": 90,
    "release:cert-manager": 60,
    "release:metallb": 45,
    "release:kamaji": 120,
    "release:hami": 90,
    # With observability on: pulling Prometheus' and Grafana's images (a guess, like the others).
    "release:prometheus": 60,
    "release:grafana": 45,
}
DEFAULT_STEP_SECONDS = 1
NO_TIME = ("pulumi:providers:", "kamaji-hami-lab:index:")
TARGET_EVALUATION_SECONDS = 10.0
TARGET_CHAIN_GROWTH = 0.15


def step_seconds(plan_: Plan, urn: str) -> int:
    resource = plan_.by_urn[urn]
    if resource.type.startswith(NO_TIME):
        return 0
    if resource.type == "command:local:Command":
        if "create" not in resource.inputs:
            return 0  # runs only on an update (components/datastore_move.py), never in a first up
        return STEP_SECONDS.get(resource.inputs["create"].rsplit("/", 1)[-1], DEFAULT_STEP_SECONDS)
    if resource.type == "kubernetes:helm.sh/v3:Release":
        return STEP_SECONDS[f"release:{resource.inputs['chart']}"]
    return STEP_SECONDS.get(resource.type.removeprefix("kubernetes:"), DEFAULT_STEP_SECONDS)


def longest_chain(plan_: Plan, cost: Callable[[str], int] | None = None) -> tuple[int, list[str]]:
    """The most expensive path through the plan's dependencies (seconds, resource names).

    `cost` gives a resource's seconds by URN; by default `step_seconds`.
    """
    by_urn = plan_.by_urn
    cost = cost or (lambda urn: step_seconds(plan_, urn))

    @cache
    def finish(urn: str) -> tuple[int, tuple[str, ...]]:
        resource = by_urn[urn]
        waits_for = (resource.all_dependencies | {resource.provider_urn}) & by_urn.keys()
        before = max((finish(dep) for dep in waits_for), default=(0, ()))
        return before[0] + cost(urn), (*before[1], resource.name)

    seconds, names = max(finish(urn) for urn in by_urn)
    return seconds, list(names)


def measure(count: int) -> dict:
    started = time.perf_counter()
    # With the collector on, as the language host runs the program.
    plan_ = plan(dev_config(tenants=tenants(count, gpus=[{"model": "NVIDIA L4 24GB"}])), preview=False,
                 pause_collector=False)
    elapsed = time.perf_counter() - started
    chain_seconds, chain = longest_chain(plan_)
    return {
        "tenants": count,
        "resources": len(plan_.registrations),
        "seconds": elapsed,
        "chain": chain_seconds,
        "path": chain,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 8, 32])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)

    rows = [measure(count) for count in args.counts]
    base = rows[0]
    # "per tenant": resources each tenant beyond the first row's adds; the first row has no such figure.
    print(f"{'tenants':>7} {'resources':>9} {'per tenant':>10} {'eval s':>7} {'chain s':>8} {'vs first':>8}")
    for row in rows:
        added = row["tenants"] - base["tenants"]
        per_tenant = f"{(row['resources'] - base['resources']) / added:.1f}" if added else "-"
        print(
            f"{row['tenants']:>7} {row['resources']:>9} {per_tenant:>10} {row['seconds']:>7.2f} "
            f"{row['chain']:>8} {row['chain'] / base['chain']:>8.2f}"
        )
    print("longest chain:", " -> ".join(rows[-1]["path"]))

    misses = [
        f"{row['tenants']} tenants evaluate in {row['seconds']:.1f} s (target < {TARGET_EVALUATION_SECONDS} s)"
        for row in rows
        if row["tenants"] >= 32 and row["seconds"] >= TARGET_EVALUATION_SECONDS
    ] + [
        f"chain for {row['tenants']} tenants is {row['chain'] / base['chain']:.2f}x the chain for {base['tenants']}"
        for row in rows
        if row["tenants"] <= 8 and row["chain"] > base["chain"] * (1 + TARGET_CHAIN_GROWTH)
    ]
    for miss in misses:
        print("MISSED:", miss)
    return 1 if args.check and misses else 0


if __name__ == "__main__":
    sys.exit(main())
