"""JSON Schema of a stack file (`Pulumi.<stack>.yaml`), generated from the config models.

Editors use it (through a `yaml-language-server` comment) for completion and
checks of tenants, GPUs and quotas, which `Pulumi.yaml` cannot declare.
Regenerate after changing the models:

    .venv/bin/python -m components.config.schema
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from components.config.messages import PROJECT
from components.config.models import StackConfig

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema" / "stack-config.schema.json"


def stack_file_schema() -> dict[str, Any]:
    config = _tidy(StackConfig.model_json_schema(by_alias=True))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"Pulumi.<stack>.yaml of {PROJECT}",
        "description": f"Stack config of {PROJECT}; generated from components/config/models.py.",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": {f"{PROJECT}:{key}": spec for key, spec in config["properties"].items()},
                "required": [f"{PROJECT}:{key}" for key in config["required"]],
                # Pulumi's own keys, e.g. pulumi:disable-default-providers.
                "patternProperties": {"^pulumi:": {}},
                "additionalProperties": False,
            }
        },
        "$defs": config["$defs"],
    }


def _tidy(schema: Any) -> Any:
    # Pydantic's titles are Python names, and a null default means "absent": an editor should offer neither.
    if isinstance(schema, dict):
        return {
            key: _tidy(value)
            for key, value in schema.items()
            if key != "title" and not (key == "default" and value is None)
        }
    if isinstance(schema, list):
        return [_tidy(item) for item in schema]
    return schema


def rendered() -> str:
    return json.dumps(stack_file_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    SCHEMA_FILE.parent.mkdir(exist_ok=True)
    SCHEMA_FILE.write_text(rendered())
    print(f"wrote {SCHEMA_FILE}")
