"""The path a newcomer takes (issue 33, part 4): docs that bring up the right stack, with the tools they list,
an example that keeps its schema when copied, a GPU pod as a manifest, and config mistakes explained."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from components.addresses import parse_address_range
from components.config import ConfigError, parse_settings
from components.config.schema import SCHEMA_FILE
from tests import kube_schemas
from tests.plan import ROOT, dev_config
from tests.test_config import warnings_of
from tests.test_config_schema import editor_findings

README = (ROOT / "README.md").read_text()
EXAMPLE = ROOT / "examples" / "Pulumi.beyond-one-host.yaml"
GPU_POD = ROOT / "examples" / "gpu-pod.yaml"
# Pages a user follows on the host that runs Pulumi (CONTRIBUTING's tools are a contributor's).
USER_DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "validation" / "README.md")
# Shell builtins, POSIX utilities and sudo: on every Linux host the README's prerequisites describe.
ON_EVERY_HOST = frozenset({"cd", "cp", "export", "umask", "cat", "echo", "grep", "sed", "awk", "tee", "sudo", "rm",
                           "mkdir", "chmod", "ls", "head", "tail", "sort", "sleep", "printf", "true", "test"})
# The README's tools table names some tools by product; the commands each brings.
COMMANDS_OF = {"Pulumi CLI": {"pulumi"}, "Docker Engine": {"docker"}, "Python": {"python3"}, "Helm": {"helm"},
               "OpenSSH client": {"ssh", "ssh-keygen", "ssh-keyscan"}}


def shell_blocks(path: Path) -> Iterator[str]:
    """Each ```bash or ```sh block of a page, here-documents left out."""
    for body in re.findall(r"^```(?:bash|sh)\n(.*?)^```", path.read_text(), flags=re.MULTILINE | re.DOTALL):
        yield re.sub(r"<<-?'?(\w+)'?\n.*?^\1$", "", body, flags=re.MULTILINE | re.DOTALL)


def commands(line: str) -> Iterator[str]:
    """The programs a shell line runs: each pipeline stage's first word, also inside $(...)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    starts, skip_next = True, False
    for token in lexer:
        if skip_next:
            skip_next = False
        elif token in ("|", "||", "&&", ";", "(", ")", "&"):
            starts = True
        elif token in ("<", ">", ">>", "2>", "&>"):
            skip_next = True
        elif starts and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", token):  # VAR=value before a command
            pass
        elif starts:
            starts = False
            yield token
        if "$(" in token:
            yield from commands(token.split("$(", 1)[1].rsplit(")", 1)[0])


def shell_lines(block: str) -> Iterator[str]:
    """A block's command lines: continued lines joined, and so are lines a quoted string spans."""
    pending = ""
    for line in re.sub(r"\\\n", " ", block).splitlines():
        pending = f"{pending}\n{line}" if pending else line
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # a quote still open
            continue
        yield pending
        pending = ""
    assert not pending, f"a quote is never closed: {pending[:80]}"


def prerequisites() -> set[str]:
    section = README.split("## Prerequisites", 1)[1].split("\n## ", 1)[0]
    tools = {row.strip() for row in re.findall(r"^\| ([^|`]+?) \|", section, flags=re.MULTILINE)} - {"tool", "---"}
    named = {command for tool in tools for command in COMMANDS_OF.get(tool, {tool})}
    return named | set(re.findall(r"`(\w[\w-]*)`", section.split("### Required tools", 1)[0]))


def test_every_tool_the_docs_run_is_among_the_prerequisites():
    used: dict[str, set[str]] = {}
    for page in USER_DOCS:
        for block in shell_blocks(page):
            for line in shell_lines(block):
                for command in commands(line):
                    if "/" not in command and command not in ON_EVERY_HOST:  # paths are the project's own
                        used.setdefault(command, set()).add(page.name)

    assert {"pulumi", "kubectl", "jq", "helm", "make"} <= set(used), "the scan finds the docs' commands"
    missing = {command: sorted(pages) for command, pages in used.items() if command not in prerequisites()}
    assert missing == {}


def test_the_tool_scan_reads_a_quoted_string_over_several_lines_as_one_command():
    block = "kubectl run x --overrides='{\"a\":\n\"b\"}'\njq . f"
    assert [list(commands(line)) for line in shell_lines(block)] == [["kubectl"], ["jq"]]


def test_the_tool_scan_reads_pipelines_substitutions_and_assignments():
    line = ('KUBECONFIG=x pulumi up --replace "$(pulumi stack export | jq -r \'.a | select(.b)\')" '
            '&& (umask 077; helm get manifest k > out) | kubectl apply -f -')
    assert list(commands(line)) == ["pulumi", "pulumi", "jq", "umask", "helm", "kubectl"]


def make_dry_run(*arguments: str) -> str:
    env = {**os.environ, "PULUMI_CONFIG_PASSPHRASE": "x"}
    return subprocess.run(["make", "-n", *arguments], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True).stdout


def test_the_beyond_one_host_page_brings_up_its_own_stack():
    page = ROOT / "docs" / "beyond-one-host.md"
    (block,) = [block for block in shell_blocks(page) if "make up" in block]
    name = re.search(r"^make up STACK=([\w-]+)$", block, flags=re.MULTILINE)[1]

    assert f"cp examples/{EXAMPLE.name} Pulumi.{name}.yaml" in block
    assert f"pulumi stack select --create {name}" in block
    assert block.index("pulumi config set --secret") < block.index("make up")
    # make acts on that stack, never on dev.
    dry_run = make_dry_run("up", f"STACK={name}")
    assert f"pulumi stack select --create {name}" in dry_run and f"pulumi up --yes --stack {name}" in dry_run
    assert "--stack dev" not in dry_run


def test_the_example_keeps_its_schema_where_it_is_and_where_its_comment_copies_it():
    text = EXAMPLE.read_text()
    schema_path = re.match(r"# yaml-language-server: \$schema=(\S+)\n", text)[1]
    assert "Copy it to the project root as Pulumi.<stack>.yaml" in " ".join(text.split())

    # yaml-language-server reads a relative $schema from the stack file's own directory.
    for directory in (EXAMPLE.parent, ROOT):
        found = directory / schema_path
        assert found.is_file() and found.resolve() == SCHEMA_FILE.resolve(), directory
        schema = yaml.safe_load(found.read_text())
        assert list(Draft202012Validator(schema).iter_errors(yaml.safe_load(text))) == []


def gpu_pod() -> dict:
    return yaml.safe_load(GPU_POD.read_text())


def test_the_gpu_pod_is_a_pod_kubernetes_takes_asking_hami_for_a_slice():
    pod = gpu_pod()
    assert kube_schemas.problems(pod) == []
    (container,) = pod["spec"]["containers"]
    assert container["resources"]["limits"] == {
        "nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096", "nvidia.com/gpucores": "25"}


def test_the_readme_applies_the_gpu_pod_and_reads_it_by_its_name():
    use = README.split("## Use a tenant", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"^```bash\n(.*?)^```", use, flags=re.MULTILINE | re.DOTALL)
    name = gpu_pod()["metadata"]["name"]

    assert f"kubectl apply -f {GPU_POD.relative_to(ROOT)}" in block
    assert f"kubectl wait pod/{name} " in block and f"kubectl get pod {name} " in block
    assert f"kubectl delete -f {GPU_POD.relative_to(ROOT)}" in block
    assert "--overrides" not in block


@pytest.mark.parametrize(("model", "closest"), [
    ("NVIDIA A100 80G", ["NVIDIA A100 80GB"]),
    ("nvidia l4 24gb", ["NVIDIA L4 24GB"]),
    ("A100", ["NVIDIA A100 40GB", "NVIDIA A100 80GB"]),
    ("H100", ["NVIDIA H100 80GB", "NVIDIA H100 NVL 94GB"]),
])
def test_an_unknown_gpu_model_is_told_the_closest_known_models(model, closest):
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(tenants=[{"name": "a", "gpus": [{"model": model}]}]))
    (line,) = [line for line in str(raised.value).splitlines() if ".gpus[0].model: " in line]
    suggested = re.search(r"\(did you mean (.*?)\?\)", line)[1]
    for known in closest:
        assert repr(known) in suggested, line
    assert "set memoryMiB for it or use one of: " in line


def test_a_gpu_model_like_none_known_gets_no_guess():
    with pytest.raises(ConfigError, match="unknown GPU model 'Tesla K80'; set memoryMiB"):
        parse_settings(dev_config(tenants=[{"name": "a", "gpus": [{"model": "Tesla K80"}]}]))


def test_a_cores_quota_beyond_the_tenants_gpus_is_warned_about_past_100_per_gpu(monkeypatch):
    # Two workers (warnings_of's workersPerTenant) with two L4s each: four GPUs, 400 % of cores in all.
    l4 = {"model": "NVIDIA L4 24GB", "count": 2}
    quotas = [{"namespace": "fits", "gpucores": 400}, {"namespace": "team", "gpucores": 401}]
    warned = warnings_of(monkeypatch, [{"name": "a", "gpus": [l4], "quotas": quotas}])
    assert warned == [
        "kamaji-hami-lab:tenants[0].quotas[1].gpucores: 401 is more GPU cores than the tenant's GPUs have (400: "
        "4 GPU(s) of 100 on 2 worker(s)); the quota never limits anything"
    ]


def test_a_cores_quota_in_a_tenant_without_gpus_is_warned_about(monkeypatch):
    (warning,) = warnings_of(monkeypatch, [{"name": "a", "quotas": [{"namespace": "n", "gpucores": 1}]}])
    assert warning.startswith("kamaji-hami-lab:tenants[0].quotas[0].gpucores: 1 is more GPU cores")


@pytest.mark.parametrize("pool", ["10.0.0.300-10.0.0.310", "300.0.0.1-300.0.0.9", "10.0.0.1-10.0.0.256",
                                  "10.0.0.0/33", "10.0.0.01-10.0.0.9", "10.0.0-10.0.1"])
def test_the_schema_refuses_a_pool_with_an_octet_or_prefix_out_of_range(pool):
    ((path, _),) = editor_findings({"metallbAddressRange": pool, "tenants": [{"name": "a"}]})
    assert path == "metallbAddressRange"
    with pytest.raises(ConfigError, match="metallbAddressRange"):
        parse_settings(dev_config(metallbAddressRange=pool))


@pytest.mark.parametrize("pool", ["", "10.0.0.250-10.0.0.255", "172.18.255.200 - 172.18.255.250", "10.0.0.0/28",
                                  "0.0.0.0/32", "255.255.255.0/24", "192.168.1.199-192.168.1.249"])
def test_the_schema_takes_every_pool_shape_the_program_takes(pool):
    if pool:
        parse_address_range(pool)
    assert editor_findings({"metallbAddressRange": pool, "tenants": [{"name": "a"}]}) == []
