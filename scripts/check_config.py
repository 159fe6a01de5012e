#!/usr/bin/env python3
"""Check a stack's config file offline, with the program's own models: no Pulumi CLI, no Docker, no state.

Reads Pulumi.<stack>.yaml (and Pulumi.yaml's defaults, as the CLI merges them), validates it as `pulumi up`
would, and prints every problem at once: in the order of the file, each tenant named by its name
(tenants[tenant-b].workers), not its place in the list. Secure values (`secure:`) cannot be decrypted
without the stack's passphrase: they are taken as present, and the output says which were not checked.
Exit status 1 on any problem; warnings alone exit 0.

usage: check_config.py [--stack dev] [--mode-json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
# Run as a file: make the program's components importable.
sys.path.insert(0, str(ROOT))

from components.config import MORE_MAY_FOLLOW, ConfigError, parse_settings  # noqa: E402
from components.config.messages import PROJECT, key_path  # noqa: E402
from components.config.models import StackConfig  # noqa: E402
from components.config.rules import stack_warnings  # noqa: E402

PREFIX = f"{PROJECT}:"
# What a problem line starts with: the key path up to the first ": " (docs never put one in a key).
_LINE = re.compile(rf"^\s*{re.escape(PREFIX)}(?P<path>\S*?): (?P<message>.*)$")
_PART = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")
# A tenant is named in a key path only by a name that reads as one there.
_NAMEABLE = re.compile(r"[a-z0-9][-a-z0-9]{0,62}")
# What a secure value is validated as: never shown, and its problems are dropped (it cannot be read offline).
_SECURE_STAND_IN = "<secure: not decrypted offline>"
_SECURE_HELD_BACK = ("the rules that join the secure values to other keys (an sshKey against sshPrivateKeys) "
                     "run only when `pulumi up` decrypts them")

Path_ = tuple[str | int, ...]


class StackFile:
    """A stack file's project keys: the values, where each key path starts in the file, and the secure ones."""

    def __init__(self, text: str, name: str):
        try:
            root = yaml.compose(text)
        except yaml.YAMLError as error:
            raise ValueError(f"{name} is not valid YAML: {str(error).splitlines()[0]}") from None
        config = _child(root, "config") if isinstance(root, yaml.MappingNode) else None
        if config is None:
            raise ValueError(f"{name} has no config: mapping (see docs/configuration.md)")
        if not isinstance(config, yaml.MappingNode):
            raise ValueError(f"{name}: config is not a mapping of key: value")
        self.lines: dict[Path_, int] = {}
        self.secure: list[Path_] = []
        self.values: dict[str, Any] = {}
        for key_node, value_node in config.value:
            key = key_node.value
            if isinstance(key, str) and key.startswith(PREFIX):
                path = (key[len(PREFIX):],)
                self.values[path[0]] = self._read(value_node, path)

    def _read(self, node: yaml.Node, path: Path_) -> Any:
        """The value of `node` as safe_load gives it, with secure values replaced and every path's line noted."""
        self.lines[path] = node.start_mark.line
        if isinstance(node, yaml.MappingNode):
            keys = [key.value for key, _ in node.value]
            if keys == ["secure"]:
                self.secure.append(path)
                return _SECURE_STAND_IN
            return {key.value: self._read(value, (*path, key.value)) for key, value in node.value}
        if isinstance(node, yaml.SequenceNode):
            return [self._read(item, (*path, index)) for index, item in enumerate(node.value)]
        if len(path) == 1:  # the CLI hands a key's scalar over as the text written (`true` is "true")
            return node.value
        return yaml.safe_load(yaml.serialize(node))

    def all_secure(self, path: Path_) -> bool:
        """Whether the value at `path` is secure, or lies in one, or holds only secure values (an sshPrivateKeys
        set one key at a time with --secret): a problem there is about a stand-in, not what the user wrote."""
        if any(path[: len(place)] == place for place in self.secure):
            return True
        value: Any = self.values
        for part in path:
            if not isinstance(value, dict | list) or (isinstance(value, list) and not isinstance(part, int)):
                return False
            try:
                value = value[part]
            except (KeyError, IndexError):
                return False
        leaves = list(_leaves(value))
        return bool(leaves) and all(leaf == _SECURE_STAND_IN for leaf in leaves)

    @property
    def secret_keys(self) -> set[str]:
        return {str(path[0]) for path in self.secure}

    def line(self, path: Path_) -> int | None:
        """Where the deepest part of `path` that the file holds starts; None for a key it does not hold."""
        for end in range(len(path), 0, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return None

    def tenant_names(self) -> dict[int, str]:
        """Tenants by place, for those whose name is unique and reads as a name in a key path."""
        tenants = self.values.get("tenants")
        if isinstance(tenants, str):  # `pulumi config set tenants '[...]'` writes the list as JSON text
            try:
                tenants = json.loads(tenants)
            except (ValueError, RecursionError):
                tenants = None
        names = [item.get("name") if isinstance(item, dict) else None
                 for item in (tenants if isinstance(tenants, list) else [])]
        return {index: name for index, name in enumerate(names)
                if isinstance(name, str) and _NAMEABLE.fullmatch(name) and names.count(name) == 1}


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict | list):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _leaves(item)
    else:
        yield value


def _child(mapping: yaml.MappingNode, key: str) -> yaml.Node | None:
    return next((value for name, value in mapping.value if name.value == key), None)


def parsed_path(text: str) -> Path_:
    """'tenants[1].gpus[0].model' -> ('tenants', 1, 'gpus', 0, 'model')."""
    return tuple(int(index) if index else name for name, index in _PART.findall(text))


def project_defaults(root: Path = ROOT) -> dict[str, Any]:
    """Pulumi.yaml's config defaults, which the CLI merges into every stack."""
    declared = yaml.safe_load((root / "Pulumi.yaml").read_text())["config"]
    return {key: spec["default"] for key, spec in declared.items() if "default" in spec}


def check(stack: StackFile, defaults: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """(errors, warnings, notes), each a line to print; errors in the order of the file."""
    raw = {**defaults, **stack.values}
    notes = [f"{key_path(path)}: secure, so taken as present and not checked offline (`pulumi up` decrypts it)"
             for path in stack.secure]
    try:
        parse_settings(raw, stack.secret_keys)
    except ConfigError as refused:
        lines = [line for line in str(refused).splitlines()[1:] if _LINE.match(line)]
        held_back = str(refused).splitlines()[-1] == MORE_MAY_FOLLOW
        problems = [problem for problem in _problems(lines) if not stack.all_secure(problem[0])]
        if not problems:  # only the stand-ins were refused; the rules they held back run at `pulumi up`
            return [], [], notes + ([_SECURE_HELD_BACK] if held_back else [])
        errors = [_named(path, message, stack) for path, message in _in_file_order(problems, stack)]
        return errors + ([MORE_MAY_FOLLOW] if held_back else []), [], notes
    config = StackConfig.model_validate(raw, context={"secret_keys": stack.secret_keys})
    warnings = [_named(path, message, stack) for path, message in stack_warnings(config)]
    return [], warnings, notes


def _problems(lines: list[str]) -> Iterator[tuple[Path_, str]]:
    for line in lines:
        match = _LINE.match(line)
        yield parsed_path(match["path"]), match["message"]


def _in_file_order(problems: list[tuple[Path_, str]], stack: StackFile) -> list[tuple[Path_, str]]:
    # Keys the file does not hold (a default's problem) come last, in the program's order.
    unplaced = 1 << 30
    return sorted(problems, key=lambda problem: (stack.line(problem[0]) if stack.line(problem[0]) is not None
                                                 else unplaced))


def _named(path: Path_, message: str, stack: StackFile) -> str:
    names = stack.tenant_names()
    shown = key_path(path)
    if len(path) > 1 and path[0] == "tenants" and path[1] in names:
        shown = shown.replace(f"{PREFIX}tenants[{path[1]}]", f"{PREFIX}tenants[{names[path[1]]}]", 1)
    return f"{shown}: {message}"


def mode_json(stack: StackFile, defaults: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The config as `pulumi config --json` shows it without --show-secrets, for the preflight to read the mode
    of a stack that may not exist yet: every value as text, no secret's value."""
    shown = {}
    for key, value in {**defaults, **stack.values}.items():
        if key in stack.secret_keys:
            shown[PREFIX + key] = {"secret": True}
        else:
            text = value if isinstance(value, str) else json.dumps(value)
            shown[PREFIX + key] = {"value": text, "secret": False}
    return shown


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", default="dev", help="checks Pulumi.<STACK>.yaml (default: dev)")
    parser.add_argument("--mode-json", type=Path, metavar="FILE",
                        help="also write the config, secrets left out, as `pulumi config --json` would, to FILE")
    args = parser.parse_args(argv)
    name = f"Pulumi.{args.stack}.yaml"
    try:
        stack = StackFile((root / name).read_text(), name)
    except OSError as error:
        print(f"check-config: cannot read {name} ({error.strerror}); write the stack's config there "
              "(docs/configuration.md)", file=sys.stderr)
        return 1
    except ValueError as error:
        print(f"check-config: {error}", file=sys.stderr)
        return 1
    defaults = project_defaults(root)
    if args.mode_json:
        args.mode_json.write_text(json.dumps(mode_json(stack, defaults)))
    errors, warnings, notes = check(stack, defaults)
    for note in notes:
        print(f"NOTE    {note}")
    for warning in warnings:
        print(f"WARNING {warning}")
    if errors:
        print(f"check-config: {name} is invalid:", *errors, sep="\n  ")
        return 1
    print(f"check-config: {name} is valid" + (" (secure values not checked)" if notes else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
