"""The stack outputs the program exports are what the validation suite and kubeconfig writer read."""

import re

import pytest

from tests.plan import ROOT, dev_config, exported_json, is_secret, plan
from validation.stack_outputs import Platform, parse_outputs, write_kubeconfig_files

LAYOUT = [
    {"name": "tenant-a", "gpus": [{"model": "NVIDIA A100 80GB"}]},
    {
        "name": "tenant-b",
        "workers": 2,
        "gpus": [{"model": "NVIDIA L4 24GB", "count": 2}],
        "quotas": [{"namespace": "team-a", "gpumemMiB": 8192, "gpus": 4}],
    },
]


@pytest.fixture
def exported_document(shared):
    """The document of an up of LAYOUT (a fresh copy for each test: the plan is shared, the document is not)."""
    lab = shared("outputs-layout-up", lambda: plan(dev_config(tenants=LAYOUT), preview=False))
    return exported_json(lab.outputs)


def test_validation_reads_the_programs_outputs(exported_document):
    parsed = parse_outputs(exported_document)

    tenant_b = parsed.tenants["tenant-b"]
    assert tenant_b.workers == ("kamaji-tenant-b-w1", "kamaji-tenant-b-w2")
    assert tenant_b.expected_allocatable() == {
        "nvidia.com/gpu": 20,
        "nvidia.com/gpumem": 2 * 23034,
        "nvidia.com/gpucores": 200,
    }
    (quota,) = tenant_b.quotas
    assert quota.namespace == "team-a"
    assert quota.hard == {"limits.nvidia.com/gpumem": 8192, "requests.nvidia.com/gpu": 4}
    assert parsed.tenants["tenant-a"].data_store_schema == "tenants_tenant_a"


def test_kubeconfig_writer_gets_one_private_file_per_cluster(tmp_path, exported_document):
    parsed = parse_outputs(exported_document)

    written = write_kubeconfig_files(tmp_path, parsed.kubeconfigs)

    assert sorted(path.name for path in written.values()) == [
        "management.kubeconfig",
        "tenant-a.kubeconfig",
        "tenant-b.kubeconfig",
    ]
    assert all(path.stat().st_mode & 0o777 == 0o600 for path in written.values())


def test_validation_learns_which_platform_pieces_were_provided(existing_plan):
    outputs = existing_plan("provided", preview=False).outputs
    assert not is_secret(outputs["platform"]), "it names modes and a DataStore, nothing secret"
    platform = parse_outputs(exported_json(outputs)).platform
    assert platform.provided == {"certManager", "loadBalancer", "kamaji"}
    assert platform.data_store == "shared-etcd"


def test_a_lab_that_installs_its_platform_says_so(exported_document):
    platform = parse_outputs(exported_document).platform
    assert not platform.provided
    assert platform.data_store == Platform().data_store, "the installed chart's DataStore"


def documented_outputs() -> dict[str, str]:
    """output -> content cell of the outputs table in the docs."""
    section = (ROOT / "docs" / "operations.md").read_text().split("\n## Outputs\n", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| (?:yes|no) \| (.*) \|$", section, re.MULTILINE))


def test_the_outputs_table_lists_every_output_and_every_fact_of_a_tenant(exported_document):
    table = documented_outputs()
    assert set(table) == set(exported_document)
    # Top-level facts only: what a fact holds is named in parentheses after it.
    named = set(re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", table["tenants"])))
    (facts,) = {frozenset(tenant) for tenant in exported_document["tenants"].values()}
    assert named == set(facts)


def test_an_existing_management_cluster_also_gets_management_kubeconfig(existing_plan, tmp_path):
    document = exported_json(existing_plan("installed", preview=False).outputs)
    written = write_kubeconfig_files(tmp_path, parse_outputs(document).kubeconfigs)
    assert "management.kubeconfig" in {path.name for path in written.values()}
