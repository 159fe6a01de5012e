"""scripts/render_charts.py as a module: it reads the stack config the way the CLI hands it over."""

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "render_charts", Path(__file__).resolve().parent.parent / "scripts" / "render_charts.py"
)
render_charts = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # as `import` would
_spec.loader.exec_module(render_charts)

project_defaults = render_charts.project_defaults
stack_config = render_charts.stack_config
