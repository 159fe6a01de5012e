"""Input that once ended in a traceback, or echoed itself in full, is refused in the program's own words."""

from __future__ import annotations

import json

import pytest
import yaml

from components.config import ConfigError, parse_settings
from tests.plan import dev_config, fake_kubeconfig, plan
from tests.test_machines import EXISTING as MACHINES_EXISTING
from tests.test_machines import MOCK_GPU_TENANT, SECRETS

KUBECONFIG = fake_kubeconfig("https://10.20.0.1:6443", "platform-admin")
SECRET_MARKER = "secret-key-of-platform-admin"  # the client key inside KUBECONFIG
EXISTING = {"managementCluster": "existing", "dockerNetwork": "lab-net",
            "metallbAddressRange": "192.168.50.240-192.168.50.250"}
DEEP = "[" * 5_000 + "]" * 5_000
INT32_MAX = 2**31 - 1  # a Deployment's replicas, HAMi's DeviceInfo count and devmem are int32


def refusal(config: dict, secrets: dict | None = None) -> list[str]:
    """The lines of the program's refusal; none may come after a registration."""
    with pytest.raises(ConfigError) as raised:
        plan(config, preview=True, secrets=secrets)
    assert raised.value.plan.registrations == []
    return str(raised.value).splitlines()


def kubeconfig_with(**changes) -> str:
    config = yaml.safe_load(KUBECONFIG)
    return yaml.safe_dump({**config, **changes})


@pytest.mark.parametrize(("kubeconfig", "problem"), [
    (kubeconfig_with(contexts=5), "has contexts that are not a list"),
    (kubeconfig_with(contexts=["a", "b"]), "has contexts[0] that is not an object with a name and a context object"),
    (kubeconfig_with(contexts=[{"name": "ctx", "context": "x"}]),
     "has contexts[0] that is not an object with a name and a context object"),
    (kubeconfig_with(clusters=7), "has clusters that are not a list"),
    (kubeconfig_with(clusters=[{"name": "lab", "cluster": ["x"]}]),
     "has clusters[0] that is not an object with a name and a cluster object"),
    (kubeconfig_with(**{"current-context": ["ctx"]}), "names no current context"),
    ("[" * 5_000, "is not valid YAML"),
])
def test_a_kubeconfig_of_the_wrong_shape_is_refused_without_showing_it(kubeconfig, problem):
    lines = refusal(dev_config(**EXISTING), {"managementKubeconfig": kubeconfig})

    assert any(line.startswith(f"  kamaji-hami-lab:managementKubeconfig: {problem}") for line in lines), lines
    assert SECRET_MARKER not in "\n".join(lines)


@pytest.mark.parametrize("key", ["tenants", "sshPrivateKeys"])
def test_json_nested_too_deeply_is_refused(key):
    config, secrets = dev_config(tenants=[MOCK_GPU_TENANT], **MACHINES_EXISTING), dict(SECRETS)
    (secrets if key in secrets else config)[key] = DEEP
    secrets["managementKubeconfig"] = KUBECONFIG

    lines = refusal(config, secrets)

    assert any(line.startswith(f"  kamaji-hami-lab:{key}: not valid JSON") for line in lines), lines


def test_a_number_too_long_to_read_is_refused():
    lines = refusal(dev_config(tenants='[{"name": "a", "workers": ' + "9" * 5000 + "}]"))
    assert lines[1] == "  kamaji-hami-lab:tenants: not valid JSON: a number too long to read"


@pytest.mark.parametrize(("key", "value"), [
    ("controlPlaneReplicas", str(INT32_MAX + 1)), ("gpuSlots", str(2**63)), ("workersPerTenant", str(10**400)),
])
def test_a_count_past_its_32_bit_field_is_refused_before_any_resource(key, value):
    lines = refusal(dev_config(**{key: value}))
    assert lines[1].startswith(f"  kamaji-hami-lab:{key}: expected a count of at most {INT32_MAX}"), lines


@pytest.mark.parametrize(("field", "where"), [
    ({"gpuSlots": INT32_MAX + 1}, "gpuSlots"),
    ({"controlPlaneReplicas": 10**400}, "controlPlaneReplicas"),
    ({"gpus": [{"model": "X", "memoryMiB": INT32_MAX + 1}]}, "gpus[0].memoryMiB"),
    ({"quotas": [{"namespace": "q", "gpumemMiB": 2**63}]}, "quotas[0].gpumemMiB"),
])
def test_a_tenants_count_past_its_32_bit_field_is_refused_before_any_resource(field, where):
    lines = refusal(dev_config(tenants=[{"name": "a", **field}]))
    assert any(line.startswith(f"  kamaji-hami-lab:tenants[0].{where}: expected a count of at most") for line in lines)


def test_the_largest_count_is_taken():
    lab = parse_settings(dev_config(controlPlaneReplicas=str(INT32_MAX), gpuSlots=str(INT32_MAX)))
    assert {(t.control_plane_replicas, t.gpu_slots) for t in lab.tenants} == {(INT32_MAX, INT32_MAX)}


@pytest.mark.parametrize(("config", "key"), [
    ({"kindSubnet": "x" * 10_000}, "kindSubnet"),
    ({"managementContext": "c" * 10_000, **EXISTING}, "managementContext"),
    ({"tenants": [{"name": "n" * 10_000}]}, "tenants[0].name"),
    ({"tenants": [{"name": "a", "gpus": [{"model": "m" * 10_000}]}]}, "tenants[0].gpus[0].model"),
    ({"tenants": [{"name": "a", "gpus": ["g" * 10_000]}]}, "tenants[0].gpus[0]"),
    ({"certManager": "p" * 10_000}, "certManager"),
    ({"tenants": [{"name": "a", "workers": 10**400}]}, "tenants[0].workers"),
])
def test_a_long_value_is_echoed_shortened(config, key):
    secrets = {"managementKubeconfig": KUBECONFIG} if "managementContext" in config else None
    lines = refusal(dev_config(**config), secrets)

    (line,) = [line for line in lines if line.startswith(f"  kamaji-hami-lab:{key}: ")]
    assert len(line) < 400 and "characters)" in line, line


def test_a_short_value_is_echoed_whole():
    line = refusal(dev_config(kindSubnet="10.0.0.0/33"))[1]
    assert line.startswith("  kamaji-hami-lab:kindSubnet: '10.0.0.0/33' is not an IPv4 CIDR")


def test_json_of_tenants_is_read_with_its_own_message():
    lines = refusal(dev_config(tenants=json.dumps([{"name": "a"}])[:-1]))
    assert lines[1].startswith("  kamaji-hami-lab:tenants: not valid JSON (")
