"""Stack config: bad input stops the program before anything is created, naming key and value."""

import ipaddress
import json

import pulumi
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from components.config import MORE_MAY_FOLLOW, ConfigError, parse_settings
from components.config.messages import key_path
from components.config.models import StackConfig
from components.config.rules import stack_warnings
from components.gpus import FULL_GPU_CORES
from components.settings import KAMAJI_IMAGE_TAG, GpuQuota, Provided, Versions, dedicated_data_store_name
from tests.plan import NODE_IMAGE, dev_config, plan
from tests.test_config_machines import HOST_KEY, KEY

A100 = {"model": "NVIDIA A100 80GB", "count": 1}


def config_error(**overrides) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(**overrides))
    return str(raised.value)


def tenants_error(*tenants) -> str:
    return config_error(tenants=list(tenants))


def test_dev_stack_parses_into_the_seed_layout():
    lab = parse_settings(dev_config())

    layout = {t.name: [(g.model, g.count) for g in t.gpus] for t in lab.tenants}
    assert layout == {"tenant-a": [("NVIDIA A100 80GB", 1)], "tenant-b": [("NVIDIA L4 24GB", 2)]}
    assert lab.versions.kubernetes == "v1.36.4"
    assert lab.node_image == NODE_IMAGE
    assert all(t.workers == 1 and t.control_plane_replicas == 1 for t in lab.tenants)


def test_tenants_may_arrive_as_json_text_as_the_cli_passes_them():
    lab = parse_settings(dev_config(tenants=json.dumps([{"name": "solo", "gpus": [A100]}])))
    assert [t.name for t in lab.tenants] == ["solo"]


def test_unknown_gpu_model_is_accepted_with_explicit_memory():
    lab = parse_settings(dev_config(tenants=[{"name": "lab", "gpus": [{"model": "ACME X1", "memoryMiB": 12000}]}]))
    assert lab.tenants[0].gpus[0].memory_mib == 12000


def test_settings_are_frozen():
    lab = parse_settings(dev_config())
    with pytest.raises(AttributeError):
        lab.tenants[0].workers = 3


@pytest.mark.parametrize("name", ["Tenant-A", "1st", "team_a", "a-", ""])
def test_tenant_name_must_be_a_dns_1035_label(name):
    message = tenants_error({"name": name, "gpus": [A100]})
    assert f"kamaji-hami-lab:tenants[0].name: {name!r}" in message
    assert "DNS-1035" in message


def test_tenant_name_too_long_for_its_worker_names():
    name = "t" * 55
    message = tenants_error({"name": name, "gpus": [A100]})
    assert f"kamaji-hami-lab:tenants[0].name: {name!r} is too long" in message
    assert f"kamaji-{name}-w1" in message


def test_tenant_name_reserved_for_the_management_cluster():
    message = tenants_error({"name": "management"})
    assert "kamaji-hami-lab:tenants[0].name: 'management' is reserved for the management cluster" in message


def test_duplicate_tenant_names():
    message = tenants_error({"name": "a"}, {"name": "a"})
    assert "kamaji-hami-lab:tenants[1].name: duplicate tenant name 'a'" in message


@pytest.mark.parametrize(
    ("tenant", "path"),
    [
        ({"name": "a", "gpu": [A100]}, "tenants[0].gpu"),
        ({"name": "a", "gpus": [{"model": "NVIDIA A100 80GB", "memory": 1}]}, "tenants[0].gpus[0].memory"),
        ({"name": "a", "quotas": [{"namespace": "x", "gpumem": 1}]}, "tenants[0].quotas[0].gpumem"),
    ],
)
def test_unknown_keys_are_typos(tenant, path):
    assert f"kamaji-hami-lab:{path}: unknown key" in tenants_error(tenant)


def test_unknown_top_level_key_is_a_typo():
    assert "kamaji-hami-lab:tenant: unknown config key" in config_error(tenant=[{"name": "a"}])


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"gpuslots": 3}, "kamaji-hami-lab:gpuslots: unknown config key; did you mean 'gpuSlots'?"),
        ({"workerPerTenant": 2}, "workerPerTenant: unknown config key; did you mean 'workersPerTenant'?"),
        ({"tenants": [{"name": "a", "gpuSlot": 2}]}, "tenants[0].gpuSlot: unknown key; did you mean 'gpuSlots'?"),
        ({"tenants": [{"name": "a", "gpus": [{"modle": "x"}]}]}, "gpus[0].modle: unknown key; did you mean 'model'?"),
        ({"tenants": [{"name": "a", "quotas": [{"namespace": "n", "gpumem": 1}]}]},
         "quotas[0].gpumem: unknown key; did you mean 'gpumemMiB'?"),
    ],
)
def test_a_misspelt_key_is_told_the_closest_known_key(overrides, expected):
    assert expected in config_error(**overrides)


def test_a_key_like_no_other_gets_no_guess_and_the_known_keys_sorted():
    line = next(line for line in config_error(zzz=1).splitlines() if "zzz" in line)
    assert "did you mean" not in line
    known = line.split("(known: ", 1)[1].rstrip(")").split(", ")
    assert known == sorted(known) and "tenants" in known


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"tenants": {"name": "a"}}, 'tenants: expected a list of tenant objects, got {"name"'),
        ({"tenants": []}, "kamaji-hami-lab:tenants: expected a non-empty list"),
        ({"tenants": {}}, "kamaji-hami-lab:tenants: expected a list of tenant objects, got {}"),
        ({"tenants": "0"}, "kamaji-hami-lab:tenants: expected a list of tenant objects, got 0"),
        ({"tenants": "[{"}, "kamaji-hami-lab:tenants: not valid JSON"),
        ({"tenants": ["a"]}, "kamaji-hami-lab:tenants[0]: expected an object, got 'a'"),
        ({"tenants": [{"name": 7}]}, "kamaji-hami-lab:tenants[0].name: expected a string, got 7"),
        ({"tenants": [{"name": "a", "gpus": {"model": "x"}}]}, "kamaji-hami-lab:tenants[0].gpus: expected a list"),
        ({"tenants": [{"name": "a", "gpus": [{"model": "x", "count": "2"}]}]}, "count: expected a positive integer"),
        ({"workersPerTenant": "two"}, "kamaji-hami-lab:workersPerTenant: expected a positive integer, got 'two'"),
    ],
)
def test_wrong_types(overrides, expected):
    assert expected in config_error(**overrides)


@pytest.mark.parametrize(
    ("tenant", "path", "value"),
    [
        ({"name": "a", "gpus": [{"model": "NVIDIA L4 24GB", "count": 0}]}, "tenants[0].gpus[0].count", "0"),
        ({"name": "a", "workers": 0}, "tenants[0].workers", "0"),
        ({"name": "a", "gpuSlots": -1}, "tenants[0].gpuSlots", "-1"),
        ({"name": "a", "controlPlaneReplicas": 0}, "tenants[0].controlPlaneReplicas", "0"),
        ({"name": "a", "gpus": [{"model": "x", "memoryMiB": 0}]}, "tenants[0].gpus[0].memoryMiB", "0"),
        ({"name": "a", "quotas": [{"namespace": "x", "gpus": 0}]}, "tenants[0].quotas[0].gpus", "0"),
    ],
)
def test_counts_must_be_positive(tenant, path, value):
    assert f"kamaji-hami-lab:{path}: expected a positive integer, got {value}" in tenants_error(tenant)


def test_global_counts_must_be_positive():
    assert "kamaji-hami-lab:gpuSlots: expected a positive integer, got '0'" in config_error(gpuSlots="0")


def test_unknown_gpu_model_without_memory_lists_the_catalogue():
    message = tenants_error({"name": "a", "gpus": [{"model": "NVIDIA A100"}]})
    assert "kamaji-hami-lab:tenants[0].gpus[0].model: unknown GPU model 'NVIDIA A100'" in message
    assert "set memoryMiB" in message and "NVIDIA A100 80GB" in message
    catalogue = message.split("use one of: ", 1)[1].splitlines()[0].split(", ")
    assert "NVIDIA A100 80GB" in catalogue and "NVIDIA L4 24GB" in catalogue


@pytest.mark.parametrize(
    ("written", "suggested"),
    [
        ("T4 16", " (did you mean 'NVIDIA T4 16GB'?)"),
        ("a100", " (did you mean 'NVIDIA A100 40GB' or 'NVIDIA A100 80GB'?)"),
        # Every catalogue model names NVIDIA: three are offered, not nine.
        ("NVIDIA", " (did you mean 'NVIDIA A100 40GB', 'NVIDIA A100 80GB' or 'NVIDIA H100 80GB'?)"),
        ("Tesla K80", ""),
    ],
)
def test_an_unknown_gpu_model_suggests_at_most_three_catalogue_models_like_it(written, suggested):
    message = tenants_error({"name": "a", "gpus": [{"model": written}]})
    (line,) = [line for line in message.splitlines() if "tenants[0].gpus[0].model: " in line]
    assert line.split(".model: ", 1)[1].split("; set memoryMiB", 1)[0] == f"unknown GPU model {written!r}{suggested}"


def test_more_gpu_memory_per_worker_than_the_mock_plugin_can_advertise():
    message = tenants_error({"name": "a", "gpus": [{"model": "NVIDIA A100 80GB", "count": 2}]})
    assert "kamaji-hami-lab:tenants[0].gpus: 163840 MiB of GPU memory per worker exceeds" in message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("kubernetesVersion", "1.36.4"),
        ("kubernetesVersion", "v1.36"),
        ("certManagerVersion", "latest"),
        ("metallbVersion", "0.16"),
        ("hamiChartVersion", "2.10"),
        ("kamajiChartVersion", "edge"),
    ],
)
def test_malformed_versions(key, value):
    assert f"kamaji-hami-lab:{key}: {value.strip()!r} is not" in config_error(**{key: value})


@pytest.mark.parametrize("value", ["172.18.255.250-172.18.255.200", "not-an-ip", "172.18.255.0/33", "fd00::1-fd00::9"])
def test_malformed_address_ranges(value):
    message = config_error(metallbAddressRange=value)
    assert f"kamaji-hami-lab:metallbAddressRange: {value!r} is not an IPv4 range" in message


def test_pool_outside_a_known_kind_subnet():
    message = config_error(metallbAddressRange="10.0.0.10-10.0.0.60", kindSubnet="172.18.0.0/16")
    assert "metallbAddressRange: 10.0.0.10-10.0.0.60 lies outside the lab's docker network 172.18.0.0/16" in message


def test_pool_inside_a_known_kind_subnet_is_accepted():
    lab = parse_settings(dev_config(metallbAddressRange="172.18.200.0/28", kindSubnet="172.18.0.0/16"))
    assert str(lab.address_pool) == "172.18.200.0-172.18.200.15"


def test_pool_must_hold_one_address_per_tenant_and_grafanas():
    # The dev stack has two tenants: three addresses are enough, two are not.
    message = config_error(metallbAddressRange="172.18.255.200-172.18.255.201", kindSubnet="172.18.0.0/16")
    assert (
        "  kamaji-hami-lab:metallbAddressRange: 172.18.255.200-172.18.255.201 has 2 addresses but 2 tenants need "
        "one each, and the last is kept for Grafana" in message.splitlines()
    )
    assert parse_settings(dev_config(metallbAddressRange="172.18.255.200-172.18.255.202",
                                     kindSubnet="172.18.0.0/16")).address_pool


def test_a_known_kind_subnet_large_enough_for_the_carved_pool_is_accepted():
    assert str(parse_settings(dev_config(kindSubnet="172.18.0.0/16")).kind_subnet) == "172.18.0.0/16"


def test_kind_subnet_too_small_for_a_pool():
    assert "kamaji-hami-lab:kindSubnet: subnet 172.18.0.0/27 is too small" in config_error(kindSubnet="172.18.0.0/27")


@pytest.mark.parametrize(
    ("quota", "expected"),
    [
        ({"namespace": "kube-system", "gpus": 1}, "quotas[0].namespace: 'kube-system' is a system namespace"),
        ({"namespace": "team-a"}, "quotas[0]: set at least one of gpumemMiB, gpucores, gpus"),
        ({"namespace": "Team A", "gpus": 1}, "quotas[0].namespace: 'Team A' is not a DNS label"),
    ],
)
def test_bad_quotas(quota, expected):
    assert f"kamaji-hami-lab:tenants[0].{expected}" in tenants_error({"name": "a", "quotas": [quota]})


def test_overlapping_pod_and_service_cidrs():
    message = tenants_error({"name": "a", "podCidr": "10.0.0.0/8", "serviceCidr": "10.96.0.0/16"})
    assert "kamaji-hami-lab:tenants[0].serviceCidr: 10.96.0.0/16 overlaps podCidr 10.0.0.0/8" in message


def test_every_problem_is_reported_at_once():
    message = config_error(kubernetesVersion="1.36", tenants=[{"name": "A"}, {"name": "b", "workers": 0}])
    assert "kubernetesVersion" in message and "tenants[0].name" in message and "tenants[1].workers" in message


@pytest.mark.parametrize("preview", [True, False])
def test_bad_config_registers_no_resource(preview):
    with pytest.raises(ConfigError) as raised:
        plan(dev_config(tenants=[{"name": "Bad"}]), preview=preview)
    assert "kamaji-hami-lab:tenants[0].name: 'Bad'" in str(raised.value)
    assert raised.value.plan.registrations == []


def test_pod_cidr_must_give_every_worker_a_slash_24():
    message = tenants_error({"name": "a", "workers": 3, "podCidr": "10.244.0.0/23"})
    assert "kamaji-hami-lab:tenants[0].podCidr: 10.244.0.0/23 cannot give each of 3 workers a /24" in message


def test_service_cidr_must_hold_the_dns_address():
    message = tenants_error({"name": "a", "serviceCidr": "10.96.0.0/29"})
    assert "kamaji-hami-lab:tenants[0].serviceCidr: 10.96.0.0/29 is too small" in message


def test_more_tenants_than_the_carved_pool_needs_an_explicit_range():
    many = [{"name": f"t{index}"} for index in range(51)]
    assert (
        "  kamaji-hami-lab:tenants: 51 tenants need more than the 50 addresses carved from the lab's docker network by "
        "default (of 51, the last is kept for Grafana); set kamaji-hami-lab:metallbAddressRange"
        in config_error(tenants=many).splitlines()
    )
    assert len(parse_settings(dev_config(tenants=many[:50])).tenants) == 50
    lab = parse_settings(dev_config(tenants=many, metallbAddressRange="172.18.200.0/24", kindSubnet="172.18.0.0/16"))
    assert len(lab.tenants) == 51


def test_node_image_pinned_by_digest_is_accepted():
    pinned = "kindest/node:v1.36.4@sha256:" + "0" * 64
    assert parse_settings(dev_config(nodeImage=pinned)).node_image == pinned


def test_node_image_must_run_the_tenants_kubernetes_version():
    message = config_error(nodeImage="kindest/node:v1.37.0")
    assert (
        "kamaji-hami-lab:nodeImage: 'kindest/node:v1.37.0' runs Kubernetes v1.37.0, but kubernetesVersion is v1.36.4"
        in message
    )


def test_duplicate_names_are_reported_with_the_other_problems_not_after_them():
    # Every problem at once: a malformed tenant or quota must not hide a duplicate next to it.
    tenants = [
        {"name": "a", "quotas": [{"namespace": "x", "gpus": 1}, {"namespace": "y"}, {"namespace": "x", "gpus": 2}]},
        {"name": "b", "workers": "many"},
        {"name": "a"},
    ]
    with pytest.raises(ConfigError) as error:
        parse_settings(dev_config(tenants=tenants))
    lines = str(error.value).splitlines()[1:]
    assert [line.strip() for line in lines] == [
        "kamaji-hami-lab:tenants[0].quotas[1]: set at least one of gpumemMiB, gpucores, gpus",
        "kamaji-hami-lab:tenants[0].quotas[2].namespace: duplicate quota namespace 'x'",
        "kamaji-hami-lab:tenants[1].workers: expected a positive integer, got 'many'",
        "kamaji-hami-lab:tenants[2].name: duplicate tenant name 'a'",
        MORE_MAY_FOLLOW,
    ]


def test_a_malformed_tenant_does_not_hide_another_tenants_broken_rules():
    tenants = [
        {"name": "a", "gpus": [{"model": "NVIDIA L4 24GB", "count": "x"}]},
        {"name": "b", "workers": 3, "podCidr": "10.0.0.0/24", "kubernetesVersion": "v1.40.0"},
        {"name": "c", "machines": [{"name": "m", "address": "h", "sshKey": "missing", "hostKey": HOST_KEY}]},
        {"name": "b"},
    ]
    lines = [line.strip() for line in config_error(tenants=tenants, sshPrivateKeys={"k": KEY}).splitlines()[1:]]
    assert lines[0] == "kamaji-hami-lab:tenants[0].gpus[0].count: expected a positive integer, got 'x'"
    assert "kamaji-hami-lab:tenants[3].name: duplicate tenant name 'b'" in lines
    assert "kamaji-hami-lab:tenants[1].podCidr: 10.0.0.0/24 cannot give each of 3 workers a /24" in lines
    assert any(line.startswith("kamaji-hami-lab:tenants[1].kubernetesVersion: v1.40.0 is newer") for line in lines)
    assert any(line.startswith("kamaji-hami-lab:tenants[2].machines[0].sshKey: 'missing'") for line in lines)
    # The lab's own rules (a pool against its subnet) wait for every key to be valid, and the message says so.
    assert lines[-1] == MORE_MAY_FOLLOW


def test_only_the_stacks_own_broken_rules_leave_nothing_to_follow():
    message = config_error(dockerNetwork="lab")
    assert "kamaji-hami-lab:dockerNetwork: only used with managementCluster existing" in message
    assert MORE_MAY_FOLLOW not in message


@pytest.mark.parametrize("wrong", [
    {"tenants": [{"name": "a", "podCidr": "10.0.0.0/24", "workers": 3}, {"name": "a"}]},  # rules across tenants
    {"tenants": [{"name": "a", "gpus": [{"model": "no such GPU"}]}]},  # a GPU's own rule (issue 50's fuzz finding)
    {"kamajiDataStore": 2147483648},  # a value of the wrong type
])
def test_a_problem_that_holds_back_the_stacks_rules_says_more_may_follow(wrong):
    # dockerNetwork under kind is one of the stack's own rules: it waits for every other problem, and the note
    # says so, rather than its problem vanishing without a word.
    message = config_error(dockerNetwork="lab", **wrong)
    assert "kamaji-hami-lab:dockerNetwork" not in message
    assert message.splitlines()[-1] == MORE_MAY_FOLLOW


def test_an_edge_release_as_kamaji_chart_version_points_at_the_image_tag():
    # clastix/kamaji tags edge releases (26.8.2-edge) on git and images; its chart stays 0.0.0+latest.
    with pytest.raises(ConfigError) as error:
        parse_settings(dev_config(kamajiChartVersion="26.8.2-edge"))
    assert (
        "kamaji-hami-lab:kamajiChartVersion: '26.8.2-edge' is a Kamaji edge release, an image tag rather than a "
        "chart version; keep 0.0.0+latest and set kamaji-hami-lab:kamajiImageTag to 26.8.2-edge"
    ) in str(error.value)


def test_limits_are_inclusive_the_largest_accepted_values_pass():
    # HAMi's mock plugin advertises up to 120 GiB per node; a /28 holds the DNS service's .10;
    # a /23 gives two workers a /24 each.
    tenant = {
        "name": "edge",
        "workers": 2,
        "podCidr": "10.244.0.0/23",
        "serviceCidr": "10.96.0.0/28",
        "gpus": [{"model": "ACME X1", "memoryMiB": 120 * 1024}],
    }
    (parsed,) = parse_settings(dev_config(tenants=[tenant])).tenants
    assert (parsed.workers, parsed.service_cidr) == (2, "10.96.0.0/28")


@pytest.mark.parametrize(
    ("tenant", "line"),
    [
        (
            {"name": "a", "serviceCidr": "10.96.0.0/29"},
            "tenants[0].serviceCidr: 10.96.0.0/29 is too small; use a /28 or larger (the cluster DNS service takes "
            "its .10 address)",
        ),
        (
            {"name": "a", "quotas": [{"namespace": "team-a", "gpus": 1}, {"namespace": "team-a", "gpus": 2}]},
            "tenants[0].quotas[1].namespace: duplicate quota namespace 'team-a'",
        ),
        (
            {"name": "a", "kubernetesVersion": "v1.37.0"},
            "tenants[0].kubernetesVersion: v1.37.0 is newer than Kamaji supports (v1.36.x with Kamaji 26.8.2-edge, the "
            "default; its webhook would refuse the control plane); choose a v1.36 release or pin a newer Kamaji with "
            "kamajiImageTag",
        ),
    ],
    ids=["service-cidr", "quota-namespace", "kamaji-version"],
)
def test_tenant_rules_read_as_whole_lines(tenant, line):
    assert f"  kamaji-hami-lab:{line}" in tenants_error(tenant).splitlines()


def test_a_bad_default_worker_count_does_not_hide_a_later_tenants_problem():
    message = config_error(
        workersPerTenant=0, tenants=[{"name": "a"}, {"name": "b", "workers": 3, "podCidr": "10.244.0.0/23"}]
    )
    assert "kamaji-hami-lab:workersPerTenant: " in message
    too_small = "  kamaji-hami-lab:tenants[1].podCidr: 10.244.0.0/23 cannot give each of 3 workers a /24"
    assert too_small in message.splitlines()


def warnings_of(monkeypatch, tenants: list[dict]) -> list[str]:
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    plan(dev_config(tenants=tenants, workersPerTenant=2), preview=True)
    return warned


def stack_warnings_of(**overrides) -> list[str]:
    """The warnings the program logs for a valid dev config with overrides, read without a plan."""
    config = StackConfig.model_validate(dev_config(**overrides), context={"secret_keys": None})
    return [f"{key_path(path)}: {message}" for path, message in stack_warnings(config)]


def test_a_gpu_cores_quota_is_warned_about_only_above_every_card_of_every_worker():
    # Two workers with one card each: 2 full cards' cores fit, one more core does not.
    a100 = {"model": "NVIDIA A100 80GB", "count": 1}
    quotas = [{"namespace": "fits", "gpucores": 2 * FULL_GPU_CORES},
              {"namespace": "team", "gpucores": 2 * FULL_GPU_CORES + 1}]
    assert stack_warnings_of(tenants=[{"name": "a", "workers": 2, "gpus": [a100], "quotas": quotas}]) == [
        f"kamaji-hami-lab:tenants[0].quotas[1].gpucores: {2 * FULL_GPU_CORES + 1} is more GPU cores than the "
        f"tenant's GPUs have ({2 * FULL_GPU_CORES}: 2 GPU(s) of {FULL_GPU_CORES} on 2 worker(s)); the quota never "
        "limits anything"
    ]


def test_a_tenant_of_real_gpus_does_not_end_the_quota_warnings_of_the_tenants_after_it():
    machine = {"name": "gpu-1", "address": "10.0.0.11", "hostKey": HOST_KEY}
    real = {"name": "a", "machines": [machine], "gpuDevices": "real", "quotas": [{"namespace": "n", "gpumemMiB": 1}]}
    mock = {"name": "b", "workers": 1, "quotas": [{"namespace": "n", "gpumemMiB": 1}]}
    warned = stack_warnings_of(tenants=[real, mock], sshPrivateKeys={"default": KEY})
    assert [line.split(": ")[0] for line in warned] == ["kamaji-hami-lab:tenants[1].quotas[0].gpumemMiB"]


def test_a_quota_above_the_tenants_gpu_memory_is_warned_about(monkeypatch):
    # Two workers with one A100 80GB each: 163840 MiB in all.
    a100 = {"model": "NVIDIA A100 80GB", "count": 1}
    quotas = [{"namespace": "fits", "gpumemMiB": 163840}, {"namespace": "team", "gpumemMiB": 163841}]
    warned = warnings_of(monkeypatch, [{"name": "a", "gpus": [a100], "quotas": quotas}])
    assert warned == [
        "kamaji-hami-lab:tenants[0].quotas[1].gpumemMiB: 163841 MiB is more GPU memory than the tenant's GPUs "
        "have (163840 MiB on 2 worker(s)); the quota never limits anything"
    ]


def test_a_gpu_memory_quota_in_a_tenant_without_gpus_is_warned_about(monkeypatch):
    (warning,) = warnings_of(monkeypatch, [{"name": "a", "workers": 1, "quotas": [{"namespace": "n", "gpumemMiB": 1}]}])
    assert warning.startswith("kamaji-hami-lab:tenants[0].quotas[0].gpumemMiB: 1 MiB is more")
    assert "(0 MiB on 1 worker(s))" in warning


def test_a_quota_in_a_tenant_of_real_gpus_is_not_warned_about(monkeypatch):
    # The machines' GPUs are known only once they join: no size to compare the quota with.
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    machine = {"name": "gpu-1", "address": "10.0.0.11", "hostKey": HOST_KEY}
    real = {"name": "a", "machines": [machine], "gpuDevices": "real", "quotas": [{"namespace": "n", "gpumemMiB": 1}]}
    plan(dev_config(tenants=[real]), preview=True, secrets={"sshPrivateKeys": {"default": KEY}})
    assert warned == []


# One wrong key each, of every kind: a value, a rule of the stack, a rule of a tenant or of a GPU.
ONE_WRONG = {
    "kamajiDataStore": {"kamajiDataStore": "2147483648"},
    "dockerNetwork": {"dockerNetwork": "true"},
    "kindSubnet": {"kindSubnet": "8.8.0.0/16"},
    "workersPerTenant": {"workersPerTenant": "0"},
    "metallbAddressRange": {"metallbAddressRange": "10.0.0.10-10.0.0.60"},
    "gpu model": {"tenants": [{"name": "a", "gpus": [{"model": "no such GPU"}]}]},
    "repeated tenants": {"tenants": [{"name": "a"}, {"name": "a"}]},
    "pod CIDR": {"tenants": [{"name": "a", "workers": 3, "podCidr": "10.0.0.0/24"}]},
}


def problems_of(overrides: dict) -> list[str]:
    try:
        parse_settings(dev_config(**overrides))
    except ConfigError as error:
        return str(error).splitlines()[1:]
    return []


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(ONE_WRONG)), st.sampled_from(sorted(ONE_WRONG)))
def test_no_problem_of_one_key_vanishes_beside_another_without_the_note(first, second):
    assume(first == second or not ONE_WRONG[first].keys() & ONE_WRONG[second].keys())
    together = problems_of({**ONE_WRONG[first], **ONE_WRONG[second]})
    alone = [line for name in (first, second) for line in problems_of(ONE_WRONG[name]) if line != MORE_MAY_FOLLOW]
    assert together, "two wrong keys are refused"
    missing = [line for line in alone if line not in together]
    assert not missing or together[-1] == MORE_MAY_FOLLOW, missing


def test_every_lab_key_reaches_the_settings_as_written():
    versions = {"certManagerVersion": "v1.20.0", "metallbVersion": "v0.15.3", "kamajiChartVersion": "1.0.0",
                "kamajiImageTag": "v1.0.0", "hamiChartVersion": "2.9.0",
                "mockDevicePluginImage": "registry.example/mock-device-plugin:2.0.0"}
    lab = parse_settings(dev_config(**versions))
    assert lab.versions == Versions(kubernetes="v1.36.4", cert_manager="v1.20.0", metallb="v0.15.3",
                                    kamaji_chart="1.0.0", kamaji_image_tag="v1.0.0", hami_chart="2.9.0",
                                    mock_device_plugin="registry.example/mock-device-plugin:2.0.0")
    assert lab.provided == Provided(cert_manager=False, load_balancer=False, kamaji=False)
    assert lab.observability is True
    assert parse_settings(dev_config(observability=False)).observability is False


def test_a_tenant_without_version_or_image_runs_the_labs_pinned_image_and_another_version_its_kindest_node():
    lab = parse_settings(dev_config(tenants=[{"name": "same"}, {"name": "older", "kubernetesVersion": "v1.35.2"}]))
    same, older = lab.tenants
    assert (same.kubernetes_version, same.node_image) == ("v1.36.4", NODE_IMAGE)
    assert (older.kubernetes_version, older.node_image) == ("v1.35.2", "kindest/node:v1.35.2")


def test_every_tenant_key_reaches_its_settings_as_written():
    pool = "172.30.200.0-172.30.200.20"
    quota = {"namespace": "team", "gpumemMiB": 1000, "gpucores": 50, "gpus": 2}
    own = {"name": "own", "dataStore": "dedicated", "sleeping": True, "podSecurity": "restricted",
           "podCidr": "10.200.0.0/16", "apiAddress": "172.30.200.7", "quotas": [quota]}
    lab = parse_settings(dev_config(metallbAddressRange=pool, tenants=[own, {"name": "shared"}]))
    mine, shared = lab.tenants
    assert mine.quotas == (GpuQuota(namespace="team", gpumem_mib=1000, gpucores=50, gpus=2),)
    assert (mine.data_store, mine.dedicated_data_store) == (dedicated_data_store_name("own"), True)
    assert (shared.data_store, shared.dedicated_data_store) == ("default", False)
    assert (mine.sleeping, shared.sleeping) == (True, False)
    assert (mine.pod_security, shared.pod_security) == ("restricted", "baseline")
    assert (mine.pod_cidr, mine.api_address) == ("10.200.0.0/16", "172.30.200.7")
    assert ipaddress.IPv4Address(shared.api_address) in lab.address_pool and shared.api_address != mine.api_address


def test_the_labs_version_is_checked_against_kamaji_only_while_a_tenant_runs_it():
    newer = {"kubernetesVersion": "v1.37.0", "nodeImage": ""}
    message = config_error(**newer, tenants=[{"name": "pinned", "kubernetesVersion": "v1.36.4"}, {"name": "lab"}])
    assert (f"  kamaji-hami-lab:kubernetesVersion: v1.37.0 is newer than Kamaji supports (v1.36.x with Kamaji "
            f"{KAMAJI_IMAGE_TAG}, the default; its webhook would refuse the control plane); choose a v1.36 release or "
            "pin a newer Kamaji with kamajiImageTag") in message.splitlines()
    lab = parse_settings(dev_config(**newer, tenants=[{"name": "pinned", "kubernetesVersion": "v1.36.4"}]))
    assert [t.kubernetes_version for t in lab.tenants] == ["v1.36.4"]
