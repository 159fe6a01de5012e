#!/usr/bin/env python3
"""Print one object of a Helm release's recorded manifest.

stdin:  a Helm release record as JSON (the decoded `release` of its storage Secret)
argv:   KIND NAME of the object wanted
stdout: that object's YAML document, with the ownership annotations Helm puts on
        what it installs (so a later upgrade still owns it); exit 1 when the
        manifest has none.
Needs only the Python standard library (it runs on the host, outside the venv).
"""

from __future__ import annotations

import json
import re
import sys


def manifest_object(release: dict, kind: str, name: str) -> str | None:
    """The document of `kind` named `name` in the release's rendered manifest."""
    # Helm joins rendered templates with "---" lines; each document starts at column 0.
    for document in re.split(r"^---\s*$", release.get("manifest", ""), flags=re.MULTILINE):
        if not re.search(rf"^kind:\s*{re.escape(kind)}\s*$", document, re.MULTILINE):
            continue
        metadata = re.search(r"^metadata:\s*\n((?:[ \t]+.*\n?)*)", document, re.MULTILINE)
        if metadata and re.search(rf"^  name:\s*['\"]?{re.escape(name)}['\"]?\s*$", metadata.group(1), re.MULTILINE):
            return document.strip() + "\n"
    return None


def with_ownership(document: str, release: dict) -> str:
    """The document with Helm's release-name/namespace annotations (helm/helm pkg/action/validate.go)."""
    owner = (
        f"    meta.helm.sh/release-name: {json.dumps(release['name'])}\n"
        f"    meta.helm.sh/release-namespace: {json.dumps(release['namespace'])}\n"
    )
    existing = re.search(r"^metadata:\s*\n(?:(?!  annotations:)[ \t]+.*\n)*  annotations:\s*\n", document, re.MULTILINE)
    if existing:
        return document[: existing.end()] + owner + document[existing.end() :]
    start = re.search(r"^metadata:\s*\n", document, re.MULTILINE)
    return document[: start.end()] + "  annotations:\n" + owner + document[start.end() :]


def main(argv: list[str]) -> int:
    kind, name = argv
    release = json.load(sys.stdin)
    document = manifest_object(release, kind, name)
    if document is None:
        print(f"the release manifest has no {kind} {name}", file=sys.stderr)
        return 1
    sys.stdout.write(with_ownership(document, release))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
