"""The README's commands, read as a first-time user would run them after `make up`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.plan import changed, dev_config, plan

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()
ENV_NOTE = "assume the two `export` lines of the\n[Quickstart](#quickstart)"


@dataclass(frozen=True)
class Block:
    section: str  # the "## " heading it stands under
    section_text: str
    lines: tuple[str, ...]  # commands, with continuation lines joined


def bash_blocks() -> list[Block]:
    blocks = []
    for section in re.split(r"^(?=## )", README, flags=re.MULTILINE)[1:]:
        heading = section.splitlines()[0]
        for body in re.findall(r"^```bash\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL):
            joined = re.sub(r"\\\n", " ", body)
            # Without comments: "  # ..." after a command, or a whole line.
            commands = (re.sub(r"\s+# .*$", "", line).strip() for line in joined.splitlines())
            lines = tuple(line for line in commands if line and not line.startswith("#"))
            blocks.append(Block(heading, section, lines))
    return blocks


def needs_lab_state(line: str) -> bool:
    """Commands that find the lab through Pulumi's backend."""
    return bool(re.search(r"(^|[|(;]\s*)pulumi ", line))


def test_the_quickstart_exports_the_backend_make_uses():
    quickstart = next(block for block in bash_blocks() if block.section == "## Quickstart")
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
        assert blocks.index(block) >= quickstart_at, block.section
        # A login would move the user's global backend away from the one make uses.
        assert not any("pulumi login" in line for line in block.lines), block.section
        # The reader is told, where the section starts, that these rely on the Quickstart's exports.
        assert block.section == "## Quickstart" or ENV_NOTE in block.section_text, block.section


def test_the_validation_suite_and_benchmark_run_from_the_venv():
    lines = [line for block in bash_blocks() for line in block.lines]
    for line in lines:
        if re.search(r"-m (validation|benchmarks)", line):
            assert re.search(r"\.venv/bin/python -m (validation|benchmarks)", line), line
    assert ".venv/bin/python -m\nbenchmarks.plan_scaling" in README or ".venv/bin/python -m benchmarks" in README


def test_every_kubectl_command_names_its_cluster():
    for block in bash_blocks():
        kubeconfig_exported = False
        for line in block.lines:
            kubeconfig_exported |= line.startswith("export KUBECONFIG=")
            if re.match(r"kubectl ", line):
                assert kubeconfig_exported or "--kubeconfig" in line, line


def test_using_a_tenant_waits_for_the_pod_and_cleans_up():
    (block,) = [block for block in bash_blocks() if any("kubectl run gpu-slice" in line for line in block.lines)]
    steps = [line.split()[1] if line.startswith("kubectl ") else line.split()[0] for line in block.lines]

    run, wait, read = (
        steps.index("run"),
        steps.index("wait"),
        block.lines.index(next(line for line in block.lines if "vgpu-devices-allocated" in line)),
    )
    assert run < wait < read
    assert "pod/gpu-slice" in block.lines[wait] and "--timeout=" in block.lines[wait]
    assert block.lines[-1].startswith("kubectl delete pod gpu-slice")


def test_the_readme_has_a_day_2_section_and_moves_reference_tables_out():
    assert "## Day 2: changing a running lab" in README
    assert "make preview" in README.split("## Day 2", 1)[1].split("\n## ", 1)[0]
    # The long tables live next to what they describe.
    assert "| `quota` |" not in README and "| `quota` |" in (ROOT / "validation" / "README.md").read_text()
    assert "nf_conntrack hash size" not in README
    assert "(docs/host-settings.md)" in README and (ROOT / "docs" / "host-settings.md").is_file()
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
