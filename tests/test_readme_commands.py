"""The commands of the README and docs/, read as a first-time user would run them after `make up`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.plan import changed, dev_config, plan

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()
# The README's own commands follow its Quickstart; a doc under docs/ says at its top that its commands need it.
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "CONTRIBUTING.md")
DOCS_ENV_NOTE = "assume the two `export` lines of the\n[Quickstart](../README.md#quickstart)"


@dataclass(frozen=True)
class Block:
    doc: str  # the file's path in the repository
    section: str  # the "## " heading it stands under
    doc_text: str
    lines: tuple[str, ...]  # commands, with continuation lines joined


def bash_blocks() -> list[Block]:
    blocks = []
    for path in DOCS:
        text = path.read_text()
        for section in re.split(r"^(?=## )", text, flags=re.MULTILINE)[1:]:
            heading = section.splitlines()[0]
            for body in re.findall(r"^```bash\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL):
                joined = re.sub(r"\\\n", " ", body)
                # Without comments: "  # ..." after a command, or a whole line.
                commands = (re.sub(r"\s+# .*$", "", line).strip() for line in joined.splitlines())
                lines = tuple(line for line in commands if line and not line.startswith("#"))
                blocks.append(Block(str(path.relative_to(ROOT)), heading, text, lines))
    return blocks


def needs_lab_state(line: str) -> bool:
    """Commands that find the lab through Pulumi's backend."""
    return bool(re.search(r"(^|[|(;]\s*)pulumi ", line))


def test_the_quickstart_exports_the_backend_make_uses():
    quickstart = next(block for block in bash_blocks() if block.section == "## Quickstart")
    assert quickstart.doc == "README.md"
    make_default = re.search(r"^export PULUMI_BACKEND_URL \?= (\S+)$", MAKEFILE, flags=re.MULTILINE)[1]

    assert f"export PULUMI_BACKEND_URL={make_default}" in quickstart.lines
    assert any(line.startswith("export PULUMI_CONFIG_PASSPHRASE=") for line in quickstart.lines)
    assert quickstart.lines[-1] == "make up"


def test_every_pulumi_command_runs_where_make_put_the_lab():
    blocks = bash_blocks()
    quickstart_at = next(index for index, block in enumerate(blocks) if block.section == "## Quickstart")
    with_state = [block for block in blocks if any(needs_lab_state(line) for line in block.lines)]

    assert with_state, "the README shows pulumi commands"
    for block in with_state:
        # A login would move the user's global backend away from the one make uses.
        assert not any("pulumi login" in line for line in block.lines), block.section
        if block.doc == "README.md":  # the Quickstart asks to keep its exports for what follows
            assert blocks.index(block) >= quickstart_at, block.section
        else:  # a doc says at its top that its commands rely on the Quickstart's exports
            assert DOCS_ENV_NOTE in block.doc_text.split("\n## ", 1)[0], block.doc


def test_the_validation_suite_and_benchmark_run_from_the_venv():
    lines = [line for block in bash_blocks() for line in block.lines]
    for line in lines:
        if re.search(r"-m (validation|benchmarks)", line):
            assert re.search(r"\.venv/bin/python -m (validation|benchmarks)", line), line
    # In prose too, where a line may break between the interpreter and the module.
    prose = "\n".join(path.read_text() for path in DOCS)
    mentions = re.findall(r"(\S*)\s+-m\s+benchmarks\.", prose)
    assert mentions and {mention.lstrip("`") for mention in mentions} == {".venv/bin/python"}


def test_every_kubectl_command_names_its_cluster():
    for block in bash_blocks():
        kubeconfig_exported = False
        for line in block.lines:
            kubeconfig_exported |= line.startswith("export KUBECONFIG=")
            if re.match(r"kubectl ", line):
                assert kubeconfig_exported or "--kubeconfig" in line, line


def test_using_a_tenant_waits_for_the_pod_and_cleans_up():
    (block,) = [block for block in bash_blocks() if any("kubectl apply -f examples/gpu-pod.yaml" in line
                                                        for line in block.lines)]
    steps = [line.split()[1] if line.startswith("kubectl ") else line.split()[0] for line in block.lines]

    run, wait, read = (
        steps.index("apply"),
        steps.index("wait"),
        block.lines.index(next(line for line in block.lines if "vgpu-devices-allocated" in line)),
    )
    assert run < wait < read
    assert "pod/gpu-slice" in block.lines[wait] and "--timeout=" in block.lines[wait]
    assert block.lines[-1] == "kubectl delete -f examples/gpu-pod.yaml"


def test_the_readme_is_read_in_minutes_and_starts_with_make_up():
    lines = README.splitlines()
    assert len(lines) <= 300
    assert "make up" in lines[:40]
    headings = re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
    for heading in ("Quickstart", "Prerequisites", "Use a tenant", "Validate", "Status at a glance",
                    "Change the lab", "Clean up", "Where to go next"):
        assert heading in headings, heading
    assert headings.index("Quickstart") < headings.index("Use a tenant") < headings.index("Clean up")
    assert "make down" in README.split("## Clean up", 1)[1].split("\n## ", 1)[0]


def test_the_rest_lives_in_docs_each_linked_from_the_readme():
    where_next = README.split("## Where to go next", 1)[1].split("\n## ", 1)[0]
    for doc in ("configuration", "operations", "architecture", "beyond-one-host", "host-settings"):
        assert (ROOT / "docs" / f"{doc}.md").is_file() and f"(docs/{doc}.md)" in where_next, doc
    assert "(CONTRIBUTING.md)" in where_next
    # The long tables live next to what they describe.
    assert "| `quota` |" not in README and "| `quota` |" in (ROOT / "validation" / "README.md").read_text()
    assert "| `gpuSlots` |" not in README and "make mutants" not in README
    assert "nf_conntrack hash size" not in README
    assert "seed" not in README.lower()  # wording only the project's authors would know


def test_the_upgrade_example_creates_a_tenant_at_an_older_minor_and_upgrades_it():
    (block,) = [block for block in bash_blocks() if any("kubernetesVersion" in line for line in block.lines)]
    config, stages = dev_config(), []
    for line in block.lines:
        if setting := re.fullmatch(r"pulumi config set --path 'tenants\[(\d+)\]\.(\w+)' (\S+)", line):
            index, key, value = int(setting[1]), setting[2], setting[3]
            tenants = [dict(tenant) for tenant in config["tenants"]] + [{}]
            tenants[index] = {**tenants[index], key: value}
            config = {**config, "tenants": [tenant for tenant in tenants if tenant]}
        elif line == "make up":
            stages.append(config)
    first, second = stages
    (name,) = {tenant["name"] for tenant in second["tenants"]} - {tenant["name"] for tenant in dev_config()["tenants"]}

    def version(stage: dict) -> tuple[int, ...]:
        text = next(t["kubernetesVersion"] for t in stage["tenants"] if t["name"] == name)
        return tuple(int(part) for part in text.lstrip("v").split("."))

    lab = tuple(int(part) for part in first["kubernetesVersion"].lstrip("v").split("."))
    assert version(first)[:2] == (lab[0], lab[1] - 1), "created one minor below the lab"
    assert version(second) == lab, "then raised to the lab's version"
    running = plan(first, preview=False)
    upgrade = plan(second, preview=True, previous=running)
    tenant = next(r.urn for r in upgrade.of_type("kamaji-hami-lab:index:Tenant") if r.name == name)
    moved = changed(upgrade, running)
    assert moved and all(tenant in upgrade.ancestors(urn) for urn in moved), "only that tenant changes"


def test_the_replace_example_finds_a_worker_containers_urn(dev_plan):
    (line,) = [line for block in bash_blocks() for line in block.lines if "--replace" in line]
    suffix = re.search(r'endswith\("(::[\w-]+)"\)', line)[1]
    assert "pulumi stack export" in line and line.startswith("pulumi up --replace ")
    (urn,) = [r.urn for r in dev_plan.of_type("docker:index/container:Container") if r.urn.endswith(suffix)]
    assert "kamaji-tenant-a-w1" in urn


def test_the_quickstart_names_the_test_command_next_to_make_up():
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert "`make test` runs the offline test suite" in quickstart
