"""Stand-in for docker, kind, kubectl and hostname in tests/test_scripts.py.

A shim named after the tool runs `python fake_tool.py TOOL ARGS...`. Each call
is appended to $FAKE_LOG as one JSON line: tool, argv, stdin, the content of
every file named in argv (scratch files are gone by the time tests look), the
path, mode and content of the kubeconfig that $KUBECONFIG points at (if any),
and the KIND_* and DOCKER_* variables the tool was given.

The reply comes from the first rule in $FAKE_RULES (a JSON list; or the file
$FAKE_RULES_FILE, for tools run where the environment cannot reach) whose `tool`
matches and whose regex `match` is found in the space-joined argv, and, if it
has an `after` regex, once an earlier call ("<tool> <argv>") matched that: a
fake then changes its answers once a command changed its state (a network
exists once `docker network create` made it). A rule's
`replies` ({"stdout", "stderr", "exit"}) are used in call order, the last one
repeating; a rule with `steps_on` (a regex) instead picks its reply by how many earlier calls of
its tool matched that regex, modelling state that another call changes (an object that a delete
makes a controller write again). A call no rule models fails loudly (exit 97, naming the call), so a
script cannot silently depend on an answer the test never gave. Like the real
`docker exec`, one without -i hands the command no stdin.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path


def matching_rule(rules: list[dict], tool: str, argv: list[str], earlier: list[str]) -> int | None:
    """The first rule for this call; `earlier`: the calls before it, as "<tool> <argv>"."""
    joined = " ".join(argv)
    for index, rule in enumerate(rules):
        if rule["tool"] != tool or not re.search(rule["match"], joined):
            continue
        if "after" not in rule or any(re.search(rule["after"], call) for call in earlier):
            return index
    return None


def takes_stdin(tool: str, argv: list[str]) -> bool:
    if tool == "docker" and argv[:1] == ["exec"]:
        options = argv[1 : next((i for i, arg in enumerate(argv[1:], 1) if not arg.startswith("-")), len(argv))]
        return any(re.fullmatch(r"-[a-z]*i[a-z]*|--interactive", option) for option in options)
    return True


def kubeconfig_seen() -> dict | None:
    path = os.environ.get("KUBECONFIG")
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        content = handle.read()
    return {"path": path, "mode": stat.S_IMODE(os.stat(path).st_mode), "content": content}


def main() -> int:
    tool, argv = sys.argv[1], sys.argv[2:]
    stdin = "" if sys.stdin is None or sys.stdin.isatty() or not takes_stdin(tool, argv) else sys.stdin.read()
    rules_file = os.environ.get("FAKE_RULES_FILE")
    rules = json.loads(Path(rules_file).read_text() if rules_file else os.environ.get("FAKE_RULES", "[]"))
    log_path = os.environ["FAKE_LOG"]

    history = []
    if os.path.exists(log_path):
        with open(log_path, encoding="utf-8") as log:
            history = [json.loads(line) for line in log]
    said = [" ".join([call["tool"], *call["argv"]]) for call in history]
    rule = matching_rule(rules, tool, argv, said)
    earlier_calls = 0
    if rule is not None:
        steps_on = rules[rule].get("steps_on")
        for index, call in enumerate(history):
            if steps_on is None:
                earlier_calls += matching_rule(rules, call["tool"], call["argv"], said[:index]) == rule
            else:
                earlier_calls += call["tool"] == tool and re.search(steps_on, " ".join(call["argv"])) is not None

    with open(log_path, "a", encoding="utf-8") as log:
        files = {arg: Path(arg).read_text(encoding="utf-8") for arg in argv if os.path.isfile(arg)}
        env = {key: value for key, value in os.environ.items() if key.startswith(("KIND_", "DOCKER_"))}
        record = {
            "tool": tool,
            "argv": argv,
            "stdin": stdin,
            "files": files,
            "kubeconfig": kubeconfig_seen(),
            "env": env,
        }
        log.write(json.dumps(record) + "\n")

    if rule is None:
        sys.stderr.write(f"fake {tool}: no rule models `{tool} {' '.join(argv)}`\n")
        return 97
    replies = rules[rule]["replies"]
    reply = replies[min(earlier_calls, len(replies) - 1)]
    sys.stdout.write(reply.get("stdout", ""))
    sys.stderr.write(reply.get("stderr", ""))
    return reply.get("exit", 0)


if __name__ == "__main__":
    sys.exit(main())
