"""Stand-in for `crictl info` that renders its --template the way crictl v1.36.0 does.

crictl decodes the runtime's verbose status into generic JSON values and executes the
Go template with missingkey=error (kubernetes-sigs/cri-tools cmd/crictl/templates.go
tmplExecuteRawJSON and util.go outputStatusData @v1.36.0). This fake evaluates the part
of Go's text/template a probe may use (text, `{{with}}`/`{{end}}`, `{{range $k, $v := ...}}`
over a map in sorted key order or a list in order, `.a.b` and `$v.a.b` field chains, `$`, string
literals and `index`) with Go's rules for generic values, and fails loudly on anything else.
The status is the JSON file named by the first argument; a failure is
reported as crictl's logrus fatal line, exit 1 (cmd/crictl/info.go @v1.36.0).

usage: fake_crictl.py STATUS_JSON [crictl arguments...]
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

MISSING = object()


class TemplateError(Exception):
    pass


def parse(template: str) -> list:
    """The template as a tree: strings, ("print", words), ("with", words, body) and
    ("range", (key variable, value variable), words, body)."""
    root: list = []
    stack = [root]
    parts = re.split(r"\{\{(.*?)\}\}", template, flags=re.S)
    for index, part in enumerate(parts):
        if index % 2 == 0:
            if part:
                stack[-1].append(part)
            continue
        action = part.strip()
        words = shlex.split(action, posix=False)
        if words[0] == "with":
            node = ("with", words[1:], [])
            stack[-1].append(node)
            stack.append(node[2])
        elif (words[0] == "range" and len(words) == 5 and words[3] == ":="
              and re.fullmatch(r"\$\w+,", words[1]) and re.fullmatch(r"\$\w+", words[2])):
            node = ("range", (words[1][:-1], words[2]), words[4:], [])
            stack[-1].append(node)
            stack.append(node[3])
        elif words == ["end"]:
            if len(stack) == 1:
                raise TemplateError("unexpected {{end}}")
            stack.pop()
        elif words[0] in ("if", "range", "else", "define", "template", "block") or ":=" in words:
            raise NotImplementedError(f"fake crictl cannot render {{{{{action}}}}}")
        else:
            stack[-1].append(("print", words))
    if len(stack) != 1:
        raise TemplateError("unexpected EOF")
    return root


def field(value, name: str):
    if isinstance(value, dict):
        if name not in value:
            raise TemplateError(f'map has no entry for key "{name}"')
        return value[name]
    raise TemplateError(f"can't evaluate field {name} in type {type(value).__name__}")


def term(word: str, dot, root, variables: dict | None = None):
    if word.startswith('"'):
        return json.loads(word)
    name = re.match(r"\$\w*", word)
    if name and name.group(0) != "$":
        if name.group(0) not in (variables or {}):
            raise TemplateError(f'undefined variable "{name.group(0)}"')
        value, chain = variables[name.group(0)], word[name.end():]
    else:
        value, chain = (root, word[1:]) if word.startswith("$") else (dot, word)
    for name in [part for part in chain.split(".") if part]:
        value = field(value, name)
    return value


def evaluate(words: list[str], dot, root, variables: dict | None = None):
    if words[0] == "index":
        item = term(words[1], dot, root, variables)
        for key in words[2:]:
            if item is None:
                raise TemplateError("error calling index: index of untyped nil")
            item = item.get(term(key, dot, root, variables)) if isinstance(item, dict) \
                else item[int(term(key, dot, root, variables))]
        return item
    if len(words) != 1:
        raise NotImplementedError(f"fake crictl cannot call {words[0]}")
    return term(words[0], dot, root, variables)


def truth(value) -> bool:
    return value not in (None, False, "") and not (isinstance(value, (dict, list)) and not value)


def shown(value) -> str:
    if value is None:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise NotImplementedError(f"fake crictl cannot print {value!r}")


def render(nodes: list, dot, root, variables: dict | None = None) -> str:
    out = []
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        elif node[0] == "print":
            out.append(shown(evaluate(node[1], dot, root, variables)))
        elif node[0] == "range":
            value = evaluate(node[2], dot, root, variables)
            if value is None:
                continue
            if isinstance(value, dict):
                items = sorted(value.items())
            elif isinstance(value, list):
                items = list(enumerate(value))
            else:
                raise TemplateError(f"range can't iterate over {shown(value)}")
            (key_name, value_name) = node[1]
            for key, item in items:
                out.append(render(node[3], item, root, {**(variables or {}), key_name: key, value_name: item}))
        else:
            value = evaluate(node[1], dot, root, variables)
            if truth(value):
                out.append(render(node[2], value, root, variables))
    return "".join(out)


def main() -> int:
    status, args = json.loads(Path(sys.argv[1]).read_text()), sys.argv[2:]
    if "info" not in args:
        sys.stderr.write(f"fake crictl: only info is modelled, not {args}\n")
        return 97
    if "--template" not in args:
        print(json.dumps(status, indent=2))
        return 0
    template = args[args.index("--template") + 1]
    try:
        print(render(parse(template), status, status))
    except TemplateError as error:
        sys.stderr.write('time="2026-12-04T10:00:00Z" level=fatal msg="getting status of runtime: execute template: '
                         f'failed to template data: template: tmplExecuteRawJSON:1: {error}"\n')
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
