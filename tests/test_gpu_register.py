"""HAMi's register annotation for a worker with several GPUs of one model."""

import json

from components.gpus import GpuSpec, register_annotation

L4 = GpuSpec("NVIDIA L4 24GB", 3, 23034)


def test_each_gpu_of_a_worker_has_its_own_index_and_uuid():
    devices = json.loads(register_annotation("lab-tenant-a-w1", [L4], slots_per_gpu=4))
    assert [d["index"] for d in devices] == [0, 1, 2]
    assert len({d["id"] for d in devices}) == 3


def test_mock_gpus_sit_on_numa_node_0():
    # HAMi's plugin reports node 0 for a GPU without NUMA information (Project-HAMi/HAMi
    # pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go@v2.10.0, GetNumaNode).
    devices = json.loads(register_annotation("lab-tenant-a-w1", [L4], slots_per_gpu=4))
    assert {d["numa"] for d in devices} == {0}
