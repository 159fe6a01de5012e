"""The README and docs/: links that resolve, and tables that mirror the code they describe."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from components.gpus import GPU_CATALOGUE
from tests.script_module import script_module
from validation.checks import CHECKS

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "CONTRIBUTING.md",
         ROOT / "validation" / "README.md")
preflight = script_module("preflight")


def prose(path: Path) -> str:
    """The page without its fenced code, where a # starts a comment, not a heading."""
    return re.sub(r"^```.*?^```", "", path.read_text(), flags=re.MULTILINE | re.DOTALL)


def anchors(path: Path) -> set[str]:
    """GitHub's ids for the page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", prose(path), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def section(path: Path, heading: str) -> str:
    return path.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def rows(text: str) -> list[list[str]]:
    """The cells of each row of the tables in `text`, header and rule left out."""
    found = [[cell.strip() for cell in line.strip().strip("|").split("|")]
             for line in text.splitlines() if line.startswith("|")]
    return [row for row in found if not set("".join(row)) <= set("- ")][1:]


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_heading(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(page)):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        assert linked.exists(), f"{target} in {page.name}"
        if anchor:
            assert anchor in anchors(linked), f"{target} in {page.name}"


def test_the_gpu_catalogue_table_is_the_programs():
    table = rows(section(ROOT / "docs" / "configuration.md", "GPU catalogue"))
    assert [(model, int(memory)) for model, memory in table] == list(GPU_CATALOGUE.items())


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_make_targets_table_is_what_make_help_prints():
    printed = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "help"], capture_output=True,
                             text=True, check=True).stdout
    helps = [re.match(r"\s*make (\S+)\s+(.*)$", line).groups() for line in printed.splitlines()]
    table = rows(section(ROOT / "docs" / "operations.md", "Make targets"))
    assert [(target.strip("`").removeprefix("make "), text) for target, text in table] == helps


def test_the_validation_readme_lists_every_check_in_the_order_they_run():
    table = rows((ROOT / "validation" / "README.md").read_text().split("\n## ", 1)[0])
    assert [row[0].strip("`") for row in table] == [check.name for check in CHECKS]


def test_the_sizing_tables_are_the_preflights_figures_and_sums():
    text = section(ROOT / "docs" / "architecture.md", "Sizing: what a tenant costs")
    parts, totals = rows(text.split("For tenants of one")[0]), rows(text.split("For tenants of one")[1])
    figures = {row[0]: (row[1], row[2]) for row in parts}
    gib = preflight.SIZING_GIB
    assert figures["the management cluster (its kind node)"] == (
        f"{gib['management_memory']:g} GiB", f"{gib['management_var_disk']:g} GiB (its `/var`)")
    assert figures["each tenant control-plane replica"] == (
        f"{gib['control_plane_memory']:g} GiB", f"{gib['audit_log_disk']:g} GiB (its share of the tenant's audit log)")
    assert figures["each container worker"] == (
        f"{gib['worker_memory']:g} GiB", f"{gib['worker_var_disk']:g} GiB (its `/var`)")
    assert figures["the `kindest/node` image, once"][1] == f"{gib['node_image_disk']:g} GiB"
    assert figures["each tenant with `dataStore: dedicated` (its own etcd)"] == (
        f"{gib['dedicated_datastore_memory']:g} GiB", f"{gib['dedicated_datastore_disk']:g} GiB (its volume)")
    assert totals, "the sums for a few lab sizes"
    for tenants, memory, disk in totals:
        mode = preflight.Mode(control_planes=int(tenants), container_workers=int(tenants))
        need_memory, _, need_disk, _ = preflight.estimate(mode)
        assert (memory, disk) == (f"{need_memory:g} GiB", f"{need_disk:g} GiB"), tenants
