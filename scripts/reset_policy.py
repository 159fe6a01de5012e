#!/usr/bin/env python3
"""Decide whether a join may reset a machine worker: join it as it is, reset it, or refuse.

scripts/join-worker.sh looks at the machine over ssh (the lab's mark and every sign of Kubernetes on it,
whoever put it there) and asks this, on the lab host, what to do before it joins. A reset deletes the
machine's Kubernetes containers and certificates, so only a machine proven to be this lab's is reset,
unless its config says adopt: true (docs/beyond-one-host.md, "Which machines a join may reset").

stdin:  what the machine printed: "mark=present" and "mark_<lab|id|tenant|binding>=<value>" lines when it
        carries the lab's mark (scripts/lib.sh lab_marker), and one "found=<sign>" line per sign of Kubernetes
argv:   --node NODE --lab-id LAB_ID --identity LAB_IDENTITY --binding "<host:port> sha256:<hex>" (the
        tenant this join binds it to) --bound-now BINDING (its kubelet's now; empty: none) --adopt ADOPT (only
        "true" adopts)
stdout: "<decision> <reason>": join (no reset), reset, adopt (a reset adopt: true allows, worth a warning)
        or refuse
Needs only the Python standard library (it runs on the host, outside the venv).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

# What the machine prints of the mark, one line per field, as "mark_<field>=<value>".
MARK_FIELDS = ("lab", "id", "tenant", "binding")


@dataclass(frozen=True)
class MachineState:
    """What a machine holds: the lab's mark (the fields it has; none when `marked` is false), the signs of
    Kubernetes found on it, and the binding ("<host:port> sha256:<hex>") of its kubelet now, empty for none."""

    marked: bool = False
    mark: dict[str, str] = field(default_factory=dict)
    found: tuple[str, ...] = ()
    bound_now: str = ""

    def of_mark(self, name: str) -> str:
        return self.mark.get(name, "")


@dataclass(frozen=True)
class ThisJoin:
    """Who asks: the node, this lab (its name and random identity), the binding the join makes, adopt: true."""

    node: str
    lab_id: str
    identity: str
    binding: str
    adopt: bool = False


@dataclass(frozen=True)
class Decision:
    action: str  # "join", "reset", "adopt" or "refuse"
    reason: str


def parse_state(printed: str, bound_now: str = "") -> MachineState:
    """The machine's state from what it printed; of a field printed twice the first counts, other lines none.
    Lines end at "\\n" only: a mark file written on Windows keeps its "\\r" in its values, as the shell read it."""
    marked, mark, found = False, {}, []
    for line in printed.split("\n"):
        key, separator, value = line.partition("=")
        if line == "mark=present":
            marked = True
        elif separator and key == "found":
            found.append(value)
        elif separator and key.startswith("mark_") and key[5:] in MARK_FIELDS:
            mark.setdefault(key[5:], value)
    return MachineState(marked, mark, tuple(found), bound_now)


def decide(state: MachineState, join: ThisJoin) -> Decision:
    node, found = join.node, ", ".join(state.found)
    lab, identity = state.of_mark("lab"), state.of_mark("id")
    if not state.marked:
        if not found:
            return Decision("join", f"{node} holds no Kubernetes state and no mark; joining it without a reset")
    elif identity == join.identity:
        tenant, marked_binding = state.of_mark("tenant"), state.of_mark("binding")
        # Bound to nothing, to what the lab bound it to, or to this tenant: still the lab's. Bound elsewhere,
        # it was reset by hand and joined to another cluster, which keeps the mark.
        if state.bound_now in ("", marked_binding, join.binding):
            return Decision("reset", f"{node} carries this lab's mark (tenant {tenant}); resetting it")
        if not join.adopt:
            return Decision(
                "refuse",
                f"{node} carries this lab's mark (tenant {tenant}, bound to {marked_binding}), but its kubelet is "
                f"now bound to {state.bound_now}, which this lab never joined it to (reset by hand and joined "
                "elsewhere?); a reset would take it from that cluster. If it may be wiped, set adopt: true on it",
            )
    elif not identity and not join.adopt and found:
        return Decision(
            "refuse",
            f"{node} carries the mark of an earlier kamaji-hami-lab (lab={lab}), which named a lab only by project, "
            "stack and cluster name: two clones with default names would take each other's machines. Marks now "
            "hold a random identity kept in this stack's state, which this mark lacks, so the lab cannot tell it "
            f"is its own. Found: {found}. If this machine is this lab's, set adopt: true on it for one pulumi up: "
            "the join then resets it and marks it as this stack's",
        )
    elif not found:
        return Decision("join", f"{node} holds no Kubernetes state (its mark names lab {lab}); joining it without "
                                "a reset")
    if join.adopt:
        return Decision("adopt", f"{node} holds Kubernetes state ({found or 'none'}) that is not provably this "
                                 f"lab's (mark: {lab} {identity}); adopt: true, so resetting it")
    return Decision(
        "refuse",
        f"{node} holds Kubernetes state that is not this lab's, and a reset would delete it: found {found}; bound "
        f"to {state.bound_now or 'no API server'}; lab mark: {lab} {identity} (this lab is {join.lab_id} "
        f"{join.identity}). Check the machine's address; if it may be wiped, set adopt: true on it",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--node", required=True)
    parser.add_argument("--lab-id", required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--binding", required=True)
    parser.add_argument("--bound-now", default="")
    parser.add_argument("--adopt", default="false", help="true lets a join reset what is not provably the lab's")
    args = parser.parse_args(argv)
    if not args.identity:
        parser.error("--identity is empty: an empty identity would match every mark without one")
    join = ThisJoin(args.node, args.lab_id, args.identity, args.binding, args.adopt == "true")
    # The mark is a file on someone's machine: bytes that are no UTF-8 must not stop the decision.
    printed = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    decision = decide(parse_state(printed, args.bound_now), join)
    print(f"{decision.action} {decision.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
