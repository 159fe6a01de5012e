"""What HAMi chart 2.10.0 and its mock device plugin 1.0.1 do with what the program sends them.

The facts below are the shapes and rules of the upstream binaries at those tags, written as
small typed data with their source; the tests hold the program's plan against them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, get_args, get_origin, get_type_hints

import pytest
import yaml

from tests.plan import dev_config, plan, resolve
from validation.checks.gpu_scheduling import SHARED_PODS, SHARING_TIMEOUT
from validation.stack_outputs import parse_outputs

RELEASE = "kubernetes:helm.sh/v3:Release"

# Resource names pods request (README) and HAMi's chart defaults (charts/hami/values.yaml@v2.10.0).
GPU_COUNT, GPU_MEMORY, GPU_CORES = "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"
GPU_MEMORY_PERCENTAGE = "nvidia.com/gpumem-percentage"


# --- The device config as each binary decodes it ---------------------------------------------
# Both read it with gopkg.in/yaml.v2 Unmarshal: unknown keys are ignored, a mapping where a list
# is expected (or the reverse) is an error, and both then exit (klog.Fatalf in InitDevices).
# `dict` stands for a struct whose fields the lab never sets: any mapping decodes into it.


@dataclass(frozen=True)
class MockVnpuTemplate:
    """Project-HAMi/mock-device-plugin internal/pkg/api/device/ascend/device.go@v1.0.1 Template."""

    name: str
    memory: int
    aiCore: int
    aiCPU: int


@dataclass(frozen=True)
class MockVnpuConfig:
    """Project-HAMi/mock-device-plugin internal/pkg/api/device/ascend/device.go@v1.0.1 VNPUConfig."""

    commonWord: str
    chipName: str
    resourceName: str
    resourceMemoryName: str
    memoryAllocatable: int
    memoryCapacity: int
    memoryFactor: int
    aiCore: int
    aiCPU: int
    templates: list[MockVnpuTemplate]


@dataclass(frozen=True)
class MockNvidiaConfig:
    """Project-HAMi/mock-device-plugin internal/pkg/api/device/nvidia/device.go@v1.0.1 NvidiaConfig."""

    deviceSplitCount: int
    deviceMemoryScaling: float
    deviceCoreScaling: float
    libCudaLogLevel: str
    resourceCountName: str
    resourceMemoryName: str
    resourceCoreName: str
    resourceMemoryPercentageName: str
    resourcePriorityName: str
    overwriteEnv: bool
    defaultMemory: int
    defaultCores: int
    defaultGPUNum: int
    memoryFactor: int
    disableCoreLimit: bool
    knownMigGeometries: list[dict]
    gpuCorePolicy: str
    runtimeClassName: str


@dataclass(frozen=True)
class MockDeviceConfig:
    """Project-HAMi/mock-device-plugin internal/pkg/config/config.go@v1.0.1 Config: `vnpus` is a list."""

    nvidia: MockNvidiaConfig
    metax: dict
    hygon: dict
    cambricon: dict
    mthreads: dict
    iluvatars: list[dict]
    enflame: dict
    kunlun: dict
    awsneuron: dict
    amd: dict
    vnpus: list[MockVnpuConfig]


@dataclass(frozen=True)
class SchedulerNvidiaConfig:
    """Project-HAMi/HAMi pkg/device/nvidia/device.go@v2.10.0 NvidiaConfig (NodeDefaultConfig inlined)."""

    deviceSplitCount: int
    deviceMemoryScaling: float
    deviceCoreScaling: float
    preConfiguredDeviceMemory: int
    libCudaLogLevel: str
    enableNumaTopology: bool
    resourceCountName: str
    resourceMemoryName: str
    resourceCoreName: str
    resourceMemoryPercentageName: str
    resourcePriorityName: str
    overwriteEnv: bool
    defaultMemory: int
    defaultCores: int
    defaultGPUNum: int
    memoryFactor: int
    disableCoreLimit: bool
    migProfileAllowlist: list[dict]
    gpuCorePolicy: str
    runtimeClassName: str


@dataclass(frozen=True)
class SchedulerVnpus:
    """Project-HAMi/HAMi pkg/device/ascend/vnpu.go@v2.10.0 VNPUs: a mapping since HAMi 2.9."""

    hamiVnpuCore: bool
    configs: list[dict]


@dataclass(frozen=True)
class SchedulerDeviceConfig:
    """Project-HAMi/HAMi pkg/scheduler/config/config.go@v2.10.0 Config (scheduler and webhook)."""

    nvidia: SchedulerNvidiaConfig
    metax: dict
    hygon: dict
    cambricon: dict
    mthreads: dict
    iluvatars: list[dict]
    enflame: dict
    kunlun: dict
    awsneuron: dict
    amd: dict
    vastai: dict
    biren: dict
    vnpus: SchedulerVnpus


class DecodeError(ValueError):
    pass


def decode(value: Any, shape: Any, path: str = "") -> None:
    """Raises DecodeError where yaml.v2 would fail to decode `value` into the Go type `shape`."""
    if value is None:  # null leaves the Go zero value
        return
    if is_dataclass(shape):
        if not isinstance(value, dict):
            raise DecodeError(f"{path or '.'}: a {type(value).__name__} where a mapping is expected")
        hints = get_type_hints(shape)
        for field in fields(shape):
            if field.name in value:
                decode(value[field.name], hints[field.name], f"{path}.{field.name}")
    elif get_origin(shape) is list:
        if not isinstance(value, list):
            raise DecodeError(f"{path}: a {type(value).__name__} where a list is expected")
        (item,) = get_args(shape)
        for index, element in enumerate(value):
            decode(element, item, f"{path}[{index}]")
    elif shape is dict:
        if not isinstance(value, dict):
            raise DecodeError(f"{path}: a {type(value).__name__} where a mapping is expected")
    elif shape is str:
        if isinstance(value, dict | list):
            raise DecodeError(f"{path}: a {type(value).__name__} where a string is expected")
    elif shape is bool:
        if not isinstance(value, bool):
            raise DecodeError(f"{path}: {value!r} where a bool is expected")
    elif shape in (int, float):
        if isinstance(value, bool) or not isinstance(value, int if shape is int else int | float):
            raise DecodeError(f"{path}: {value!r} where a number is expected")
    else:
        raise TypeError(f"no decoding rule for {shape!r}")


# --- Plans --------------------------------------------------------------------------------------

# A custom model, a CPU-only tenant, and slot counts other than the default 10.
MIXED_LAYOUT = [
    {
        "name": "mixed",
        "workers": 2,
        "gpuSlots": 4,
        "gpus": [{"model": "NVIDIA T4 16GB", "count": 2}, {"model": "ACME X1", "memoryMiB": 12000}],
    },
    {"name": "cpu"},
]


@pytest.fixture
def mixed_plan(shared):
    return shared("mixed", lambda: plan(dev_config(gpuSlots=3, tenants=MIXED_LAYOUT), preview=False))


def hami_values_by_tenant(plan_) -> dict[str, dict]:
    tenant_of_provider = {
        p.urn: p.name.removesuffix("-kubernetes")
        for p in plan_.of_type("pulumi:providers:kubernetes")
        if p.name != "management-kubernetes"
    }
    return {
        tenant_of_provider[r.provider_urn]: r.inputs["values"]
        for r in plan_.of_type(RELEASE)
        if r.inputs["chart"] == "hami"
    }


def device_config(values: dict) -> Any:
    """The hami-scheduler-device payload: chart 2.10.0 uses device-config.content verbatim
    (charts/hami/templates/scheduler/device-configmap.yaml@v2.10.0)."""
    content = (values.get("device-config") or {}).get("content")
    assert content, "no device-config.content: the chart would write its own config, with a `vnpus` map"
    return yaml.safe_load(content)


def registrations(plan_) -> dict[str, tuple[list[dict], int]]:
    return {
        c.inputs["environment"]["NODE"]: (
            json.loads(c.inputs["environment"]["GPU_REGISTER_JSON"]),
            int(c.inputs["environment"]["GPU_CAPACITY"]),
        )
        for c in plan_.commands("register-gpus.sh")
    }


# --- 1. The mock device plugin starts --------------------------------------------------------


def test_the_decoder_refuses_the_charts_own_vnpus_map():
    # The shape chart 2.10.0 writes by default (charts/hami/templates/scheduler/device-configmap.yaml@v2.10.0).
    charts_default = {"nvidia": {"resourceCountName": GPU_COUNT}, "vnpus": {"hamiVnpuCore": False, "configs": []}}
    decode(charts_default, SchedulerDeviceConfig)
    with pytest.raises(DecodeError, match=r"\.vnpus: a dict where a list is expected"):
        decode(charts_default, MockDeviceConfig)


@pytest.mark.parametrize("shape", [MockDeviceConfig, SchedulerDeviceConfig], ids=["mock-1.0.1", "scheduler-2.10.0"])
def test_every_tenants_device_config_decodes_in_both_binaries(dev_plan, mixed_plan, shape):
    for values in [*hami_values_by_tenant(dev_plan).values(), *hami_values_by_tenant(mixed_plan).values()]:
        config = device_config(values)
        decode(config, shape)
        # The scheduler refuses a config whose sections are all empty
        # (pkg/scheduler/config/config.go@v2.10.0 validateConfig).
        assert config["nvidia"]


def test_device_config_names_the_resources_pods_request_and_nodes_advertise(dev_plan):
    for values in hami_values_by_tenant(dev_plan).values():
        nvidia = device_config(values)["nvidia"]
        assert nvidia["resourceCountName"] == GPU_COUNT
        assert nvidia["resourceMemoryName"] == GPU_MEMORY
        assert nvidia["resourceCoreName"] == GPU_CORES
        # The mock advertises this one too; empty, it would register a nameless resource.
        assert nvidia["resourceMemoryPercentageName"] == GPU_MEMORY_PERCENTAGE
        # A pod asking only for gpumem gets one GPU from the webhook, as in the README's example
        # (pkg/device/nvidia/device.go@v2.10.0 mutateContainerResource).
        assert nvidia["defaultGPUNum"] == 1
        assert nvidia.get("memoryFactor", 1) == 1  # gpumem: 4096 means 4096 MiB
        assert "vnpus" not in device_config(values)


def test_the_mock_image_is_the_one_the_device_config_was_checked_against(dev_plan):
    for values in hami_values_by_tenant(dev_plan).values():
        image = values["mockDevicePlugin"]["image"]
        assert (image["registry"], image["repository"], image["tag"]) == (
            "docker.io",
            "projecthami/mock-device-plugin",
            "1.0.1",
        )


# --- 2. The node lock expires in time for the sharing check ----------------------------------

# kube-scheduler retries a pod whose bind failed after at most podMaxBackoffSeconds
# (kubernetes pkg/scheduler/apis/config/v1/defaults.go: 10 s; HAMi's chart does not change it).
SCHEDULER_MAX_BACKOFF_SECONDS = 10
_GO_DURATION = re.compile(r"^(\d+)(ms|s|m|h)$")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def node_lock_timeout_seconds(values: dict) -> float:
    """The extender's --node-lock-timeout: the only setting that takes effect in 2.10.0, because
    cmd/scheduler/main.go@v2.10.0 overwrites HAMI_NODELOCK_EXPIRE (scheduler.nodeLockExpire) with
    the flag, whose default is 5m."""
    args = (values["scheduler"].get("extender") or {}).get("extraArgs") or []
    flags = [arg.split("=", 1)[1] for arg in args if arg.startswith("--node-lock-timeout=")]
    assert len(flags) == 1, f"no --node-lock-timeout among the extender's args {args}: the lock lasts 5m"
    match = _GO_DURATION.match(flags[0])
    assert match, flags[0]
    return int(match[1]) * _SECONDS[match[2]]


def test_node_lock_expires_well_within_the_sharing_checks_wait(dev_plan):
    for values in hami_values_by_tenant(dev_plan).values():
        lock = node_lock_timeout_seconds(values)
        # The mock never releases the lock, so each further pod on the node waits for the
        # previous pod's lock to expire, plus a scheduler retry.
        worst_wait = (SHARED_PODS - 1) * (lock + SCHEDULER_MAX_BACKOFF_SECONDS)
        assert 0 < worst_wait <= SHARING_TIMEOUT / 2


# --- 3. Every registered GPU is one HAMi's scheduler keeps ----------------------------------


def test_every_registered_device_type_is_one_hamis_scheduler_keeps(dev_plan, mixed_plan):
    # pkg/scheduler/score.go@v2.10.0 getNodeResources: the type must contain "nvidia", any case.
    types = [d["type"] for p in (dev_plan, mixed_plan) for devices, _ in registrations(p).values() for d in devices]
    assert "NVIDIA-ACME X1" in types
    assert all("nvidia" in t.lower() for t in types), types


def test_models_are_named_the_way_hamis_real_plugin_names_them(mixed_plan):
    # pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go@v2.10.0: a model not starting
    # with "NVIDIA" is registered as "NVIDIA-<model>"; the others keep their name.
    devices, _ = registrations(mixed_plan)["kamaji-mixed-w1"]
    assert [d["type"] for d in devices] == ["NVIDIA T4 16GB", "NVIDIA T4 16GB", "NVIDIA-ACME X1"]


# --- A mixed stack agrees with itself --------------------------------------------------------


def test_mixed_stack_has_consistent_config_registration_and_outputs(mixed_plan):
    values = hami_values_by_tenant(mixed_plan)
    # What `pulumi stack output --show-secrets --json` prints, and how the validation suite reads it.
    document = json.loads(json.dumps(resolve(mixed_plan.outputs)))
    outputs, parsed = document["tenants"], parse_outputs(document).tenants
    nodes = registrations(mixed_plan)

    # The tenant's own gpuSlots everywhere: config, annotation, capacity, outputs.
    assert device_config(values["mixed"])["nvidia"]["deviceSplitCount"] == 4
    assert outputs["mixed"]["gpuSlots"] == 4
    assert sorted(nodes) == ["kamaji-mixed-w1", "kamaji-mixed-w2"]
    for devices, capacity in nodes.values():
        assert [d["count"] for d in devices] == [4, 4, 4]
        assert [(d["type"], d["devmem"]) for d in devices] == [
            (gpu["deviceType"], gpu["memoryMiB"])
            for gpu in outputs["mixed"]["gpusPerWorker"]
            for _ in range(gpu["count"])
        ]
        # What the validation suite expects each worker to advertise is what was registered.
        assert parsed["mixed"].expected_allocatable() == {
            GPU_COUNT: capacity,
            GPU_MEMORY: sum(d["devmem"] for d in devices),
            GPU_CORES: 100 * len(devices),
        }
    (mixed_ready,) = [c for c in mixed_plan.commands("wait-gpus.sh") if "mixed" in c.inputs["environment"]["NODES"]]
    assert mixed_ready.inputs["environment"]["EXPECTED_GPUMEM"] == str(2 * 15360 + 12000)

    # The CPU-only tenant: HAMi with a valid config (the stack's gpuSlots), nothing registered.
    assert device_config(values["cpu"])["nvidia"]["deviceSplitCount"] == 3
    assert outputs["cpu"]["gpusPerWorker"] == [] and outputs["cpu"]["gpuSlots"] == 3
    assert not parsed["cpu"].has_gpus
