"""The stack-file JSON Schema, Pulumi.yaml and docs/configuration.md's key table describe one config.

Also: values as the CLI and YAML hand them over keep their meaning, and every
problem line stays in the user's words (key path and value), never pydantic's.
"""

import json
import re
from typing import Annotated, ClassVar, Literal

import pytest
import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from pydantic import Field, ValidationError

from components.addresses import DEFAULT_KIND_SUBNET
from components.config import MORE_MAY_FOLLOW, ConfigError, parse_settings
from components.config.messages import problem_lines
from components.config.models import ConfigModel
from components.config.rules import KAMAJI_NEWEST_KUBERNETES
from components.config.schema import SCHEMA_FILE, rendered
from components.settings import KAMAJI_IMAGE_TAG
from tests.plan import ROOT, dev_config
from tests.test_config_machines import HOST_KEY, KEY

PREFIX = "kamaji-hami-lab:"
SCHEMA = json.loads((ROOT / "schema" / "stack-config.schema.json").read_text())
STACK_KEYS = {key.removeprefix(PREFIX): spec for key, spec in SCHEMA["properties"]["config"]["properties"].items()}
PROJECT_KEYS = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()
MODELINE = "# yaml-language-server: $schema=schema/stack-config.schema.json"


def readme_table() -> dict[str, tuple[str, str]]:
    """key -> (default cell, meaning cell) of the configuration doc's table of keys."""
    section = CONFIGURATION.split("\n## Every key\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \| (.*?) \|$", section, re.MULTILINE)
    return {key: (default, meaning) for key, default, meaning in rows}


def plain(text: str) -> str:
    return text.replace("`", "").rstrip(".")


def test_committed_schema_is_generated_from_the_models():
    assert SCHEMA_FILE == ROOT / "schema" / "stack-config.schema.json"
    assert SCHEMA_FILE.read_text() == rendered(), "stale: run .venv/bin/python -m components.config.schema"


def test_pulumi_yaml_declares_every_scalar_key_as_the_schema_does():
    # Pulumi.yaml declares no object types; a secret may also be {secure: ...} in the stack file.
    scalars = {key: spec for key, spec in STACK_KEYS.items() if key not in ("tenants", "sshPrivateKeys")}
    assert set(PROJECT_KEYS) == set(scalars)
    for key, spec in scalars.items():
        declared = PROJECT_KEYS[key]
        assert declared["default"] == spec["default"], key
        assert declared["description"] == spec["description"], key
        # Counts may also be written as text, which is how `pulumi config set` stores them.
        types = spec.get("type") or [option.get("type") for option in spec["anyOf"]]
        assert declared["type"] in ([types] if isinstance(types, str) else types), key


def test_readme_table_lists_every_key_with_its_default_and_description():
    table = readme_table()
    assert set(table) == set(STACK_KEYS)
    for key, spec in STACK_KEYS.items():
        default, meaning = table[key]
        if "default" not in spec:
            assert default == "(required)", key
        elif spec["default"] == "":
            assert default == "empty", key
        else:
            # As a stack file writes it: a boolean is `false`, not Python's False.
            written = json.dumps(spec["default"]) if isinstance(spec["default"], bool) else spec["default"]
            assert default == f"`{written}`", key
        assert plain(meaning).startswith(plain(spec["description"])), key


def test_stack_files_name_the_schema_for_editors():
    assert (ROOT / "Pulumi.dev.yaml").read_text().splitlines()[0] == MODELINE
    assert f"\n{MODELINE}\n" in CONFIGURATION


def test_schema_covers_what_pulumi_yaml_cannot_declare():
    tenant = SCHEMA["$defs"]["Tenant"]
    assert tenant["additionalProperties"] is False
    assert {"name", "gpus", "quotas", "workers"} <= set(tenant["properties"])
    config = SCHEMA["properties"]["config"]
    assert config["additionalProperties"] is False and "^pulumi:" in config["patternProperties"]
    assert config["required"] == [f"{PREFIX}tenants"]


def editor_findings(config: dict) -> list[tuple[str, str]]:
    """(key path, message) of what a JSON Schema validator finds in a stack file, as an editor lists them."""
    validator = Draft202012Validator(SCHEMA)
    document = {"config": {f"{PREFIX}{key}": value for key, value in config.items()}}
    found = [best_match([error]) for error in validator.iter_errors(document)]
    return [(".".join(map(str, e.absolute_path)).removeprefix(f"config.{PREFIX}"), e.message) for e in found]


def test_the_dev_stack_file_is_valid_under_the_schema():
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    assert list(Draft202012Validator(SCHEMA).iter_errors(stack)) == []


def test_an_unknown_gpu_model_is_flagged_at_its_model_not_as_a_missing_memory():
    tenants = [{"name": "a", "gpus": [{"model": "NVIDIA B200"}, {"model": "Mine", "memoryMiB": 1024}]}]
    ((path, message),) = editor_findings({"tenants": tenants})
    assert path == "tenants.0.gpus.0.model"
    assert message.startswith("'NVIDIA B200' is not one of ['NVIDIA A100 40GB'")
    assert "memoryMiB" not in message
    # yaml-language-server shows a schema's errorMessage in place of its own.
    then = SCHEMA["$defs"]["Gpu"]["then"]["properties"]["model"]
    assert then["errorMessage"].startswith("unknown GPU model")


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"gpuSlots": 0}, "gpuSlots"),
        ({"workersPerTenant": -1}, "workersPerTenant"),
        ({"tenants": [{"name": "a", "gpuSlots": 0}]}, "tenants.0.gpuSlots"),
        ({"tenants": [{"name": "a", "gpus": [{"model": "NVIDIA L4 24GB", "count": 0}]}]}, "tenants.0.gpus.0.count"),
    ],
)
def test_a_count_below_one_is_told_the_bound(config, path):
    config = {"tenants": [{"name": "a"}], **config}
    ((found_at, message),) = editor_findings(config)
    assert found_at == path and message.endswith("is less than the minimum of 1")


def test_counts_written_as_text_are_valid_in_a_stack_file():
    assert editor_findings({"gpuSlots": "4", "tenants": [{"name": "a"}]}) == []
    ((_, message),) = editor_findings({"gpuSlots": "0", "tenants": [{"name": "a"}]})
    assert "does not match" in message


def test_readme_tenant_example_is_a_valid_config():
    example = re.search(r"```yaml\nconfig:\n(.*?)```", CONFIGURATION, re.DOTALL).group(0)
    tenants = yaml.safe_load(example.removeprefix("```yaml\n").removesuffix("```"))["config"][f"{PREFIX}tenants"]
    tenant = parse_settings(dev_config(tenants=tenants)).tenants[0]
    assert (tenant.workers, tenant.gpu_slots, tenant.control_plane_replicas) == (2, 4, 2)
    assert [gpu.memory_mib for gpu in tenant.gpus] == [81920, 24576]


def test_counts_arrive_as_text_from_the_cli():
    lab = parse_settings(dev_config(workersPerTenant="2", gpuSlots=" 4 ", kamajiImageTag="26.8.2-edge"))
    assert {(t.workers, t.gpu_slots) for t in lab.tenants} == {(2, 4)}
    assert lab.versions.kamaji_image_tag == "26.8.2-edge"


def test_kamaji_image_tag_defaults_to_the_release_the_lab_was_checked_against():
    assert parse_settings(dev_config()).versions.kamaji_image_tag == ""  # which the platform resolves to it
    assert KAMAJI_IMAGE_TAG in STACK_KEYS["kamajiImageTag"]["description"]


@pytest.mark.parametrize("tag", ["", KAMAJI_IMAGE_TAG])
def test_a_tenant_newer_than_the_default_kamaji_supports_is_refused_with_or_without_naming_its_tag(tag):
    newer = f"v{KAMAJI_NEWEST_KUBERNETES[0]}.{KAMAJI_NEWEST_KUBERNETES[1] + 1}.0"
    with pytest.raises(ConfigError, match=f"{newer} is newer than Kamaji supports"):
        parse_settings(dev_config(kamajiImageTag=tag, tenants=[{"name": "a", "kubernetesVersion": newer}]))


def test_another_kamaji_tag_may_run_a_newer_tenant():
    newer = f"v{KAMAJI_NEWEST_KUBERNETES[0]}.{KAMAJI_NEWEST_KUBERNETES[1] + 1}.0"
    config = dev_config(kamajiImageTag="27.1.1-edge", tenants=[{"name": "a", "kubernetesVersion": newer}])
    assert parse_settings(config).tenants[0].kubernetes_version == newer


@pytest.mark.parametrize(
    ("tenant", "expected"),
    [
        ({"name": "a", "workers": True}, "tenants[0].workers: expected a positive integer, got true"),
        ({"name": "a", "workers": 2.0}, "tenants[0].workers: expected a positive integer, got 2.0"),
        ({"name": "a", "workers": None}, "tenants[0].workers: expected a positive integer, got null"),
        ({"name": "a", "gpus": [{"model": "x", "memoryMiB": None}]}, "tenants[0].gpus[0].memoryMiB: expected a"),
        ({"name": "a", "podCidr": "10.244.0.1/16"}, "tenants[0].podCidr: '10.244.0.1/16' is not an IPv4 CIDR"),
        ({"name": "a", "quotas": [{"namespace": "x", "gpus": 1}] * 2}, "tenants[0].quotas[1].namespace: duplicate"),
        ({"name": "a", "quotas": "x"}, "tenants[0].quotas: expected a list of quota objects, got 'x'"),
        ({"gpus": []}, "tenants[0].name: required"),
    ],
)
def test_nested_values_keep_their_strict_meaning(tenant, expected):
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(tenants=[tenant]))
    assert f"{PREFIX}{expected}" in str(raised.value)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"kamajiImageTag": "edge tag"}, "kamajiImageTag: 'edge tag' is not an image tag"),
        ({"nodeImage": 7}, "nodeImage: expected a string, got 7"),
        ({"kindSubnet": "fd00::/64"}, f"kindSubnet: 'fd00::/64' is not an IPv4 CIDR such as {DEFAULT_KIND_SUBNET}"),
        ({"managementClusterName": "Lab"}, "managementClusterName: 'Lab' is not a lower-case DNS label"),
    ],
)
def test_scalar_problems_name_key_and_value(overrides, expected):
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(**overrides))
    assert f"{PREFIX}{expected}" in str(raised.value)


def test_rules_between_tenants_and_stack_keys_are_checked_while_another_key_is_wrong():
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(kubernetesVersion="1.36", tenants=[{"name": "a"}, {"name": "a", "workers": 300}]))
    *lines, note = str(raised.value).splitlines()[1:]
    assert note == MORE_MAY_FOLLOW
    assert [line.split(": ")[0].strip() for line in lines] == [
        f"{PREFIX}kubernetesVersion",
        f"{PREFIX}tenants[1].name",
        f"{PREFIX}tenants[1].podCidr",
    ]


def test_problem_lines_never_show_pydantic_wording():
    bad = [
        {"name": "a", "gpus": [{"model": 3, "count": "x", "extra": 1}], "quotas": [7]},
        {"name": "a", "workers": [], "podCidr": 5},
        "tenant",
    ]
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(tenants=bad, gpuSlots="many", kubernetesVersion=None, surplus="1"))
    header, *lines, note = str(raised.value).splitlines()
    assert header == "invalid stack configuration:" and note == MORE_MAY_FOLLOW
    assert len(lines) >= 9
    for line in lines:
        assert re.match(r"  kamaji-hami-lab:[A-Za-z]+(\[\d+\]|\.[A-Za-z]+)*: \S", line), line
        assert "Input should" not in line and "('" not in line, line


class _Container(ConfigModel):
    noun: ClassVar[str] = "container"
    kind: Literal["container"]
    image: str


class _Machine(ConfigModel):
    noun: ClassVar[str] = "machine"
    kind: Literal["machine"]
    host: str


class _ModeStack(ConfigModel):
    """A stand-in for the modes the config will grow: a key that selects a model."""

    workers: Annotated[_Container | _Machine, Field(discriminator="kind")]
    fleet: list[Annotated[_Container | _Machine, Field(discriminator="kind")]] = []
    labels: dict[str, str] = {}
    replicas: Annotated[int, Field(gt=0)] = 1  # a constraint without a message of its own


@pytest.mark.parametrize(
    ("workers", "expected"),
    [
        ({"kind": "machine", "hots": "h"}, "workers.hots: unknown key; did you mean 'host'? (allowed: host, kind)"),
        ({"kind": "machine"}, "workers.host: required"),
        ({"kind": "vm"}, "workers.kind: 'vm' is not one of 'container', 'machine'"),
        ({"image": "i"}, "workers.kind: required; one of 'container', 'machine'"),
        ("w", "workers: expected an object, got 'w'"),
    ],
)
def test_mode_keys_read_as_the_user_wrote_them(workers, expected):
    with pytest.raises(ValidationError) as raised:
        _ModeStack.model_validate({"workers": workers})
    assert f"{PREFIX}{expected}" in list(problem_lines(raised.value, root=_ModeStack))


@pytest.mark.parametrize(
    ("others", "expected"),
    [
        ({"fleet": "x"}, "fleet: expected a list of container or machine objects, got 'x'"),
        ({"labels": 5}, "labels: expected an object, got 5"),
        ({"replicas": 0}, "replicas: input should be greater than 0, got 0"),
    ],
)
def test_pydantic_findings_without_a_message_of_ours_are_still_keyed_lines(others, expected):
    with pytest.raises(ValidationError) as raised:
        _ModeStack.model_validate({"workers": {"kind": "machine", "host": "h"}, **others})
    assert list(problem_lines(raised.value, root=_ModeStack)) == [f"{PREFIX}{expected}"]


def test_a_stack_without_tenants_is_told_what_to_set():
    config = {key: value for key, value in dev_config().items() if key != "tenants"}
    with pytest.raises(ConfigError) as raised:
        parse_settings(config)
    assert str(raised.value).splitlines()[1:] == [
        "  kamaji-hami-lab:tenants: required; set at least one tenant (see docs/configuration.md)",
        MORE_MAY_FOLLOW,
    ]


def test_a_missing_nested_key_is_required_without_the_tenants_hint():
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(tenants=[{"gpus": []}]))
    assert "  kamaji-hami-lab:tenants[0].name: required" in str(raised.value).splitlines()


def test_an_unknown_top_level_key_lists_every_known_key_comma_separated():
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(tenantz=[]))
    known = str(raised.value).split("(known: ", 1)[1].split(")")[0].split(", ")
    assert {"managementClusterName", "tenants", "gpuSlots", "sshPrivateKeys"} <= set(known)
    assert known == sorted(known)


# docs/configuration.md ("what only `pulumi preview` catches"): one mistake of each kind it lists,
# which an editor's schema check lets through and the program refuses before creating anything.
A = {"name": "a"}
ONLY_THE_PROGRAM_CATCHES = [
    ({"tenants": [A, A]}, "tenants[1].name: duplicate tenant name 'a'"),
    ({"tenants": [{"name": "a", "quotas": [{"namespace": "n", "gpus": 1}] * 2}]}, "duplicate quota namespace"),
    ({"tenants": [{"name": "a", "serviceCidr": "10.244.0.0/24"}]}, "tenants[0].serviceCidr: 10.244.0.0/24 overlaps"),
    ({"tenants": [{"name": "a", "workers": 2, "podCidr": "10.0.0.0/24"}]}, "cannot give each of 2 workers a /24"),
    ({"kindSubnet": "172.18.0.0/16", "metallbAddressRange": "10.0.0.1-10.0.0.5", "tenants": [A]}, "lies outside"),
    ({"metallbAddressRange": f"{DEFAULT_KIND_SUBNET[10]}-{DEFAULT_KIND_SUBNET[20]}", "tenants": [A]},
     "reaches into the lower half"),
    ({"kindSubnet": "10.1.0.0/28", "metallbAddressRange": "10.1.0.8-10.1.0.14",
      "tenants": [{"name": "a", "workers": 5}]}, "would get the fixed address"),
    ({"metallbAddressRange": "172.30.200.1-172.30.200.3", "tenants": [{"name": "a", "apiAddress": "172.30.200.9"}]},
     "tenants[0].apiAddress: 172.30.200.9 lies outside the lab's MetalLB pool"),
    ({"tenants": [{"name": "a", "nodeImage": "kindest/node:v1.35.7"}]}, "runs Kubernetes v1.35.7"),
    ({"tenants": [{"name": "a", "kubernetesVersion": "v1.37.0"}]}, "newer than Kamaji supports"),
    ({"certManager": "provided", "tenants": [A]}, "certManager: 'provided' needs managementCluster existing"),
    ({"tenants": [{"name": "a", "gpuDevices": "real"}]}, "'real' needs machines"),
    ({"tenants": [{"name": "a", "gpus": [{"model": "NVIDIA A100 80GB", "count": 2}]}]}, "mock device plugin's limit"),
    ({"tenants": [{"name": "a" * 60}]}, "would exceed 63 characters"),
    ({"sshPrivateKeys": {"k": KEY}, "tenants": [{"name": "a", "machines": [{"name": "m", "address": "h",
                                                                             "hostKey": HOST_KEY}]}]},
     "'default' is not in sshPrivateKeys"),
]


@pytest.mark.parametrize(("config", "expected"), ONLY_THE_PROGRAM_CATCHES)
def test_what_only_the_program_catches_passes_the_schema(config, expected):
    assert editor_findings(config) == []
    with pytest.raises(ConfigError, match=re.escape(expected)):
        parse_settings(dev_config(**config))
