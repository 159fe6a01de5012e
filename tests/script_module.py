"""A Python script of scripts/ as a module: scripts/ is no package, so it is loaded from its file, once."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def script_module(name: str) -> ModuleType:
    """scripts/<name>.py, registered in sys.modules as `import` would (its dataclasses need that). Its module is
    named scripts.<name>, as `make mutants` names the mutants of scripts/ (mutmut activates a mutant by its module)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(f"scripts.{name}", SCRIPTS / f"{name}.py")
        module = sys.modules[name] = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]
