"""A Python script of scripts/ as a module: scripts/ is no package, so it is loaded from its file, once."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def script_module(name: str) -> ModuleType:
    """scripts/<name>.py, registered in sys.modules as `import` would (its dataclasses need that)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]
