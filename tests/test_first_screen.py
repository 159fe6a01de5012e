"""The README's first screen says what the lab needs, by the preflight's own sizing (issue 50)."""

from __future__ import annotations

import json
import re

from tests.plan import dev_config
from tests.test_docs import ROOT, preflight

README = (ROOT / "README.md").read_text()
FIRST_SCREEN = "\n".join(README.splitlines()[:40])
SIZE = r"about ([\d.]+) GiB of memory and ([\d.]+) GiB of disk"


def stack_mode(config: dict) -> preflight.Mode:
    """What the preflight makes of a stack with this config, read as `pulumi config --json` prints it."""
    document = {f"kamaji-hami-lab:{key}": {"value": value if isinstance(value, str) else json.dumps(value),
                                           "secret": False}
                for key, value in config.items() if value is not None}
    host = preflight.Host(which=lambda tool: f"/usr/bin/{tool}", run=lambda argv: (0, json.dumps(document)))
    mode, notes = preflight.stack_mode(host, "dev")
    assert not notes
    return mode


def test_the_first_screen_gives_the_dev_stacks_memory_and_disk_as_the_preflight_estimates_them():
    (shipped, more) = re.findall(SIZE, FIRST_SCREEN)
    mode = stack_mode(dev_config())
    memory, _, disk, _ = preflight.estimate(mode)
    assert mode.observability, "the dev stack as shipped runs Prometheus and Grafana, counted in"

    assert shipped == (f"{memory:g}", f"{disk:g}")
    config = dev_config()
    bigger = stack_mode({**config, "tenants": [*config["tenants"], {"name": "one-more"}]})
    more_memory, _, more_disk, _ = preflight.estimate(bigger)
    assert more == (f"{more_memory - memory:g}", f"{more_disk - disk:g}"), "each tenant more, alike"


def test_the_first_screen_names_the_host_and_how_long_make_up_takes():
    needs = FIRST_SCREEN.split("**What it needs**", 1)[1]
    assert "Linux" in needs and "rootful Docker" in needs
    assert re.search(r"`make up` takes .*minutes", " ".join(needs.split()))
    assert "make up" in FIRST_SCREEN.splitlines(), "the command itself is on the first screen too"


def test_the_readme_says_how_long_make_test_takes_and_which_packages_its_real_tools_come_from():
    quickstart = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    testing = " ".join(quickstart.split("`make test` runs", 1)[1].split("\n\n", 1)[0].split())
    assert re.search(r"minutes on \d+ cores", testing)
    # The packages CI installs for the tests that run real upstream tools.
    ci = (ROOT / ".ci" / "run").read_text()
    packages = re.search(r"apt-get install -y -qq ([\w\s-]+?)>", ci)[1].split()
    assert packages
    for package in packages:
        assert f"`{package}`" in testing, package
