"""python -m snapshot.urn NAME < `pulumi stack export`: the URN of the one resource called NAME, for
`pulumi up --replace` (`make rejoin` looks up the tenant's admin-kubeconfig step with it)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TextIO

from validation.exit_codes import EXIT_FAILED, EXIT_USAGE


def urn_named(document: object, name: str) -> str:
    """The URN ending in ::NAME in a stack export; ValueError unless there is exactly one."""
    resources = document.get("deployment", {}).get("resources") if isinstance(document, dict) else None
    if not isinstance(resources, list):
        raise ValueError("the input is not a `pulumi stack export` document")
    found = sorted({
        resource["urn"] for resource in resources
        if isinstance(resource, dict) and isinstance(resource.get("urn"), str) and resource["urn"].endswith(f"::{name}")
    })  # fmt: skip
    if len(found) != 1:
        listed = f": {', '.join(found)}" if found else ""
        raise ValueError(f"the stack has {len(found) or 'no'} resource(s) named {name}{listed}")
    return found[0]


def main(argv: Sequence[str] | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: pulumi stack export | python -m snapshot.urn NAME", file=sys.stderr)
        return EXIT_USAGE
    try:
        print(urn_named(json.load(stdin or sys.stdin), args[0]), file=stdout or sys.stdout)
    except ValueError as problem:
        print(f"snapshot.urn: {problem}", file=sys.stderr)
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
