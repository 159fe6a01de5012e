"""The docs and the scripts' and config's messages describe the lab's own docker network, not kind's (issue 50).

The lab runs on its own network `kamaji-hami-lab` (components/kind_management_cluster.py), on the subnet
kindSubnet or, empty, components/addresses.py's default; kind's own `kind` network is where an older lab ran.
"""

from __future__ import annotations

import ast
import ipaddress
import re
from pathlib import Path

import pytest

from components.addresses import DEFAULT_KIND_SUBNET, tenant_addresses
from components.config import parse_settings
from tests.plan import dev_config
from tests.test_docs import PAGES, ROOT, preflight, rows

# Kind's own network by name, in prose or in a command. "kind's own `kind` network" names it as what the lab is
# not on, and stays allowed.
RETIRED_NETWORK = re.compile(
    r"(?<!kind's own )(?:`kind`|\bkind)(?: docker)? network\b|--network[= ]kind\b|docker network \w+ kind\b",
    re.IGNORECASE)
# Docker's default address pools (172.17.0.0/16 up), where kind's network lands and an old example's addresses lie.
DOCKER_POOLS = ipaddress.IPv4Network("172.16.0.0/12")
ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,2})?\b")
# Addresses of other networks, named as such: kind's own network, which the lab's default subnet keeps clear of.
OTHER_NETWORKS = {("docs/architecture.md", "172.18.0.0/16")}


def python_messages(path: Path) -> str:
    """Every string a Python script may print: its literals and f-strings' text, not its comments."""
    tree = ast.parse(path.read_text())
    return "\n".join(node.value for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str))


def shell_messages(path: Path) -> str:
    """A shell script without its comment lines (its header documents; the rest runs and prints)."""
    return "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))


def texts() -> list[tuple[str, str]]:
    """(name, text) of every page a user reads and every message the scripts and the validation suite print."""
    pages = [(str(path.relative_to(ROOT)), path.read_text()) for path in PAGES]
    # The config's refusals too: they name the network a pool or an address must lie in.
    scripts = [(str(path.relative_to(ROOT)), python_messages(path))
               for path in sorted([*(ROOT / "scripts").glob("*.py"), *(ROOT / "validation").glob("*.py"),
                                   *(ROOT / "components" / "config").glob("*.py")])]
    shells = [(str(path.relative_to(ROOT)), shell_messages(path)) for path in sorted((ROOT / "scripts").glob("*.sh"))]
    return pages + scripts + shells


@pytest.mark.parametrize(("name", "text"), texts(), ids=[name for name, _ in texts()])
def test_no_page_or_message_puts_the_lab_on_kinds_own_network(name, text):
    said = [match.group(0) for match in RETIRED_NETWORK.finditer(" ".join(text.split()))]
    assert not said, f"{name} names kind's network as the lab's: {said}"


@pytest.mark.parametrize(("name", "text"), texts(), ids=[name for name, _ in texts()])
def test_lab_addresses_in_pages_and_messages_lie_in_the_default_subnet(name, text):
    outside = []
    for found in ADDRESS.findall(text):
        try:
            network = ipaddress.IPv4Network(found, strict=False)
        except ValueError:
            continue  # a version number or the like
        if network.subnet_of(DOCKER_POOLS) and not network.subnet_of(DEFAULT_KIND_SUBNET) and (
                name, found) not in OTHER_NETWORKS:
            outside.append(found)
    assert not outside, f"{name}: {outside} lie outside the lab's default subnet {DEFAULT_KIND_SUBNET}"


@pytest.mark.parametrize("line", ["the tenants live on the kind network", "MetalLB on the `kind` docker network",
                                  "docker run --network kind img", "docker network inspect kind",
                                  "on the Kind\nnetwork"])
def test_the_retired_name_is_caught_however_it_is_written(line):
    assert RETIRED_NETWORK.search(" ".join(line.split()))


@pytest.mark.parametrize("line", ["kind's own `kind` network is left alone", "the lab's network kamaji-hami-lab",
                                  "a kind cluster you run yourself", "--network kamaji-hami-lab"])
def test_the_labs_own_network_and_kinds_named_as_such_pass(line):
    assert not RETIRED_NETWORK.search(line)


def test_the_readme_status_example_shows_the_addresses_the_default_config_gives():
    readme = (ROOT / "README.md").read_text()
    example = readme.split("## Status at a glance", 1)[1].split("```\n", 2)[1]
    # A header line: name, version, health, address, then the tenant's DataStore.
    shown = dict(re.findall(r"^(tenant-[\w-]+)\s.*https://([\d.]+):6443(?:  datastore \S+)?$", example,
                            flags=re.MULTILINE))
    config = dev_config()
    dev_tenants = [tenant["name"] for tenant in config["tenants"]]
    assert list(shown)[:len(dev_tenants)] == dev_tenants, "the example starts with the dev stack's tenants"
    # Tenants beyond the dev stack's are added to it, in the example's order, as a user would list them.
    extra = [{"name": name} for name in shown if name not in dev_tenants]
    settings = parse_settings({**config, "tenants": [*config["tenants"], *extra]})

    expected = tenant_addresses(settings.address_pool, [tenant.name for tenant in settings.tenants], {})
    assert shown == {name: str(address) for name, address in expected.items()}
    for address in re.findall(r"dial tcp\s+([\d.]+):6443", example):
        assert address in shown.values(), f"the unreachable tenant's error names {address}, no tenant's address"


def finding_sites() -> dict[str, int]:
    """Each preflight.py function that makes Findings, with how many distinct places in it make one."""
    tree = ast.parse((ROOT / "scripts" / "preflight.py").read_text())
    sites = {}
    for function in tree.body:
        if isinstance(function, ast.FunctionDef):
            count = sum(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Finding"
                        for node in ast.walk(function))
            if count:
                sites[function.name] = count
    return sites


def checks_table() -> list[list[str]]:
    text = (ROOT / "docs" / "host-settings.md").read_text()
    table = text[text.index("| problem | why | fix |"):]
    return rows(table.split("\n\n", 1)[0])


def test_every_preflight_finding_has_a_row_in_the_host_settings_table():
    # Each row names, in a comment, the preflight function whose finding it explains.
    named = [re.search(r"<!-- (\w+) -->", row[-1]) for row in checks_table()]
    assert all(named), "every row names its check"
    per_function: dict[str, int] = {}
    for match in named:
        per_function[match[1]] = per_function.get(match[1], 0) + 1
    sites = finding_sites()

    assert set(per_function) == set(sites), "a row for each check, and no row for a check that is gone"
    for function, count in sites.items():
        assert per_function[function] >= count, f"{function} reports {count} problems, the table explains fewer"
    for function in per_function:
        assert callable(getattr(preflight, function)), function
