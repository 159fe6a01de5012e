"""Mock-GPU catalogue and HAMi's node registration format.

HAMi's scheduler learns a node's GPUs from the node annotation
``hami.io/node-nvidia-register`` (a JSON list, one entry per physical GPU) and
only trusts the node while its allocatable ``nvidia.com/gpu`` is positive
(Project-HAMi/HAMi pkg/device/nvidia/device.go@v2.10.0 CheckHealth). The mock
device plugin turns the same annotation into the ``nvidia.com/gpumem`` and
``nvidia.com/gpucores`` node resources that pods request, but only while the
node's capacity of ``nvidia.com/gpu`` is positive (Project-HAMi/mock-device-plugin
internal/pkg/api/device/device.go@v1.0.1 CheckHealthy). kubelet copies the
capacity into allocatable, so one patch of the capacity serves both.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

# Memory in MiB as NVML reports it on the real card, so a mock node looks like a real one.
GPU_CATALOGUE: dict[str, int] = {
    "NVIDIA A100 40GB": 40960,
    "NVIDIA A100 80GB": 81920,
    "NVIDIA H100 80GB": 81559,
    "NVIDIA H100 NVL 94GB": 95830,
    "NVIDIA L4 24GB": 23034,
    "NVIDIA L40S 48GB": 46068,
    "NVIDIA A10 24GB": 23028,
    "NVIDIA T4 16GB": 15360,
    "NVIDIA V100 32GB": 32768,
}

# The mock device plugin advertises one fake kubelet device per MiB; above roughly
# 120 GiB per node it reports 0 and the node silently gets no GPU memory.
MAX_MOCK_MEMORY_PER_NODE_MIB = 120 * 1024

FULL_GPU_CORES = 100

# HAMi's scheduler only matches devices whose type contains this, case-insensitively
# (Project-HAMi/HAMi pkg/scheduler/score.go@v2.10.0 getNodeResources).
HAMI_NVIDIA_TYPE = "NVIDIA"


@dataclass(frozen=True)
class GpuSpec:
    """`count` identical GPUs of one model on every worker of a tenant."""

    model: str
    count: int
    memory_mib: int

    @property
    def device_type(self) -> str:
        """The type HAMi's real NVIDIA plugin would register for this model.

        It prefixes a model name that does not start with "NVIDIA", so the scheduler
        keeps the device (Project-HAMi/HAMi
        pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go@v2.10.0).
        """
        return self.model if self.model.startswith(HAMI_NVIDIA_TYPE) else f"{HAMI_NVIDIA_TYPE}-{self.model}"


def node_gpu_memory_mib(gpus: Sequence[GpuSpec]) -> int:
    return sum(gpu.memory_mib * gpu.count for gpu in gpus)


def node_gpu_count(gpus: Sequence[GpuSpec]) -> int:
    return sum(gpu.count for gpu in gpus)


def register_annotation(node_name: str, gpus: Sequence[GpuSpec], slots_per_gpu: int) -> str:
    """HAMi's device list for one node, as the value of its register annotation.

    Each GPU gets a stable UUID derived from the node name and its index, so the
    value (and therefore the Pulumi plan) does not change between runs.
    """
    devices = []
    index = 0
    for gpu in gpus:
        for _ in range(gpu.count):
            devices.append(
                {
                    "id": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node_name}.gpu{index}')}",
                    "index": index,
                    "count": slots_per_gpu,
                    "devmem": gpu.memory_mib,
                    "devcore": FULL_GPU_CORES,
                    "type": gpu.device_type,
                    "numa": 0,
                    "mode": "hami-core",
                    "health": True,
                }
            )
            index += 1
    return json.dumps(devices, separators=(",", ":"))
