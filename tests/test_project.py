"""The project file: every config key declared, with defaults the program accepts."""

import json
import re

import pytest
import yaml

from components import commands
from components.config import ConfigError, parse_settings
from tests.plan import ROOT, project_defaults

PROJECT_FILE = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
README = (ROOT / "README.md").read_text()
# The stack-file schema lists every key the program accepts (tests/test_config_schema.py keeps it current).
STACK_KEYS = [
    key.removeprefix("kamaji-hami-lab:")
    for key in json.loads((ROOT / "schema" / "stack-config.schema.json").read_text())["properties"]["config"][
        "properties"
    ]
]
TENANTS_KEY = "tenants"
# Objects, which Pulumi.yaml cannot declare.
SCALAR_KEYS = [key for key in STACK_KEYS if key not in (TENANTS_KEY, "sshPrivateKeys")]
PULUMI_TYPES = {"string": str, "integer": int, "boolean": bool}


def test_project_runs_python_from_the_venv_the_makefile_builds():
    assert PROJECT_FILE["name"] == "kamaji-hami-lab"
    runtime = PROJECT_FILE["runtime"]
    assert runtime["name"] == "python"
    assert runtime["options"] == {"toolchain": "pip", "virtualenv": ".venv"}


def test_every_scalar_key_is_declared_with_type_default_and_description():
    declared = PROJECT_FILE["config"]
    assert set(declared) == set(SCALAR_KEYS)
    for key, spec in declared.items():
        assert set(spec) == {"type", "default", "description"}, key
        assert isinstance(spec["default"], PULUMI_TYPES[spec["type"]]), key
        assert spec["description"].strip(), key


def test_defaults_alone_only_lack_tenants():
    with pytest.raises(ConfigError) as raised:
        parse_settings(project_defaults())
    problem, _more_may_follow = str(raised.value).splitlines()[1:]
    assert problem.strip().startswith(f"kamaji-hami-lab:{TENANTS_KEY}: required")


def test_the_configuration_doc_documents_every_config_key():
    configuration = (ROOT / "docs" / "configuration.md").read_text()
    for key in STACK_KEYS:
        assert f"`{key}`" in configuration, key


def test_the_documented_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    (command,) = re.findall(r"^make test$", (ROOT / "CONTRIBUTING.md").read_text(), flags=re.MULTILINE)[:1]
    assert re.search(rf"^\s*{command}\b", ci, flags=re.MULTILINE)


def test_scripts_the_program_runs_exist():
    source = "\n".join(path.read_text() for path in (ROOT / "components").glob("*.py"))
    referenced = set(re.findall(r'"([a-z-]+\.sh)"', source))
    assert referenced, "the program runs host-side scripts"
    for name in referenced:
        assert (ROOT / commands.SCRIPTS_DIR / name).is_file(), name


def test_dev_stack_disables_the_ambient_default_providers():
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    assert {"kubernetes", "docker"} <= set(stack["pulumi:disable-default-providers"])


def test_the_project_is_apache_2_licensed_and_the_readme_says_so():
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text, "the full text, not a pointer to it"
    assert "Apache License 2.0" in README and "](LICENSE)" in README
