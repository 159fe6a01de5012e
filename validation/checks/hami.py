"""Checks 6-7: HAMi's webhook mutates GPU pods, and workers advertise their GPUs."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from validation.answers import MalformedAnswer, annotations, mapping
from validation.checks.base import per_tenant
from validation.kube import name_of, parse_quantity
from validation.lab import Lab
from validation.manifests import gpu_pod
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import Gpu, Tenant

HAMI_SCHEDULER = "hami-scheduler"
REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
# hami-scheduler stamps "Requesting_<time>" here when it takes the node into its cache;
# nothing in the lab writes it, so its presence shows the scheduler has seen the node.
HANDSHAKE_ANNOTATION = "hami.io/node-handshake"
HANDSHAKE_PREFIX = "Requesting_"


def with_gpus(lab: Lab, tenant: Tenant) -> Tenant:
    """The tenant with the GPUs of its workers; skips a check for a tenant without mock GPUs.

    Mock GPUs are the configured ones; real GPUs are what HAMi's NVIDIA plugin
    registered on the nodes, one entry per card, whatever the config says.
    """
    if tenant.real_gpus:
        nodes = worker_nodes(lab, tenant)
        cards = [card for worker in tenant.workers for card in registered_cards(nodes.get(worker))]
        tenant = replace(tenant, gpus_per_worker=tuple(Gpu(card.type, card.devmem, 1) for card in cards))
    if tenant.real_gpus and not tenant.has_gpus:
        # The machines were checked for GPUs before they joined: none registered means the plugin is broken.
        raise CheckFailed(
            f"no worker reports a GPU: HAMi's NVIDIA plugin registered none in {REGISTER_ANNOTATION} "
            "(kubectl -n kube-system logs ds/hami-device-plugin)"
        )
    if not tenant.has_gpus:
        raise CheckSkipped("the tenant has no mock GPUs")
    return tenant


def worker_nodes(lab: Lab, tenant: Tenant) -> dict[str, dict[str, Any]]:
    return {name_of(node): node for node in lab.kubectl(tenant).items("nodes")}


# The fields of HAMi's DeviceInfo that a JSON register entry may carry, with the Go type json.Unmarshal
# needs (Project-HAMi/HAMi pkg/device/devices.go@v2.10.0): (python type, smallest, largest) or a type.
_INT32 = (-(2**31), 2**31 - 1)
REGISTER_FIELDS: dict[str, tuple[type, tuple[int, int] | None]] = {
    "id": (str, None),
    "index": (int, (0, 2**64 - 1)),  # uint
    "count": (int, _INT32),
    "devmem": (int, _INT32),
    "devcore": (int, _INT32),
    "type": (str, None),
    "numa": (int, (-(2**63), 2**63 - 1)),
    "mode": (str, None),
    "health": (bool, None),
    "devicevendor": (str, None),
    "custominfo": (dict, None),
    "migProfiles": (list, None),
}


@dataclass(frozen=True)
class RegisteredGpu:
    """One entry of a node's register annotation; an absent field is Go's zero value (all are omitempty)."""

    id: str = ""
    index: int = 0
    count: int = 0  # slots: how many containers may share it
    devmem: int = 0  # MiB
    devcore: int = 0
    type: str = ""
    health: bool = False  # HAMi's scheduler places nothing on a card without it (CardNotHealth)


def decode_register(raw: str) -> list[RegisteredGpu]:
    """The one decoder of hami.io/node-nvidia-register; MalformedAnswer when HAMi could not read it either.

    HAMi's scheduler reads it with json.Unmarshal into []*DeviceInfo (UnMarshalNodeDevices,
    pkg/device/devices.go@v2.10.0), which fails as a whole on any entry or field of the wrong type:
    then no GPU of that node is usable, so none is shown as registered. A null is Go's zero value.
    """
    try:
        entries = json.loads(raw) if raw else []
    except json.JSONDecodeError as error:
        raise MalformedAnswer(f"{REGISTER_ANNOTATION} is not JSON ({error.msg} at {error.pos})") from None
    if not isinstance(entries, list):
        raise MalformedAnswer(f"{REGISTER_ANNOTATION} is not a JSON list")
    devices = []
    for position, entry in enumerate(entries):
        if entry is None:
            continue  # a nil *DeviceInfo
        if not isinstance(entry, dict):
            raise MalformedAnswer(f"{REGISTER_ANNOTATION} entry {position} is not an object")
        for key, value in entry.items():
            kind, bounds = REGISTER_FIELDS.get(key, (object, None))
            wrong = not isinstance(value, kind) or (kind is int and isinstance(value, bool))
            if value is not None and (wrong or (bounds and not bounds[0] <= value <= bounds[1])):
                raise MalformedAnswer(f"{REGISTER_ANNOTATION} entry {position}: {key} is {json.dumps(value)[:40]}")
        known = {key: entry[key] for key in RegisteredGpu.__dataclass_fields__ if entry.get(key) is not None}
        devices.append(RegisteredGpu(**known))
    return devices


def registered_devices(node: dict[str, Any]) -> list[RegisteredGpu]:
    """The GPUs of a node's register annotation as HAMi reads it; none when it is absent.

    MalformedAnswer when the node or the annotation is not in the shape HAMi writes.
    """
    where = f"node {name_of(node)}"
    raw = annotations(node, where).get(REGISTER_ANNOTATION, "")
    try:
        return decode_register(raw)
    except MalformedAnswer as error:
        raise MalformedAnswer(f"{where}: {error}") from None


def registered_cards(node: dict[str, Any] | None) -> list[RegisteredGpu]:
    """The GPUs in a node's register annotation that name their type, memory and slots."""
    if node is None:
        return []
    return [card for card in registered_devices(node) if card.type and card.devmem > 0 and card.count > 0]


@per_tenant("webhook", "HAMi's webhook routes a gpumem pod to hami-scheduler")
def webhook(lab: Lab, tenant: Tenant) -> str:
    with_gpus(lab, tenant)
    kubectl = lab.kubectl(tenant)
    # Not `default`: a ResourceQuota or LimitRange there could refuse even a dry run.
    with lab.scratch_namespace(kubectl, "webhook") as namespace:
        admitted = kubectl.admit(gpu_pod("webhook-probe", 1024, 10), namespace)
    spec = admitted.get("spec", {})
    scheduler = spec.get("schedulerName", "")
    if scheduler != HAMI_SCHEDULER:
        # failurePolicy Ignore: an unreachable webhook admits the pod unchanged, silently.
        raise CheckFailed(
            f"a pod asking for nvidia.com/gpumem got schedulerName {scheduler or '(none)'}, "
            f"not {HAMI_SCHEDULER}: the hami-webhook did not mutate it"
        )
    limits = spec.get("containers", [{}])[0].get("resources", {}).get("limits", {})
    return (
        f"dry-run pod got schedulerName {HAMI_SCHEDULER} and "
        f"nvidia.com/gpu limit {limits.get('nvidia.com/gpu', '(none)')}"
    )


def allocatable_mismatches(node: dict[str, Any], expected: dict[str, int]) -> list[str]:
    allocatable = mapping(mapping(node, "status", name_of(node)), "allocatable", name_of(node))
    problems = []
    for resource, want in expected.items():
        have = allocatable.get(resource)
        if have is None or parse_quantity(have) != want:
            problems.append(f"{name_of(node)}: {resource} is {have or 'missing'}, expected {want}")
    return problems


@per_tenant("gpu-capacity", "workers advertise their GPUs (mock: as configured); hami-scheduler has seen them")
def gpu_capacity(lab: Lab, tenant: Tenant) -> str:
    tenant = with_gpus(lab, tenant)
    nodes = worker_nodes(lab, tenant)
    problems = []
    advertised = []
    for worker in tenant.workers:
        node = nodes.get(worker)
        if node is None:
            problems.append(f"node {worker} not found")
            continue
        # A real card is registered with one slot per share, which kubelet then advertises.
        expected = (
            {"nvidia.com/gpu": sum(card.count for card in registered_cards(node))}
            if tenant.real_gpus
            else tenant.expected_allocatable()
        )
        problems += allocatable_mismatches(node, expected)
        advertised.append(f"{worker}: " + ", ".join(f"{resource}={value}" for resource, value in expected.items()))
        found = annotations(node, f"node {worker}")
        if REGISTER_ANNOTATION not in found:
            problems.append(f"{worker}: annotation {REGISTER_ANNOTATION} is missing")
        handshake = found.get(HANDSHAKE_ANNOTATION)
        if handshake is None:
            problems.append(f"{worker}: annotation {HANDSHAKE_ANNOTATION} is missing (hami-scheduler has not seen it)")
        elif not handshake.startswith(HANDSHAKE_PREFIX):
            problems.append(f"{worker}: {HANDSHAKE_ANNOTATION} is {handshake!r}, expected {HANDSHAKE_PREFIX}<time>")
    if problems:
        raise CheckFailed("; ".join(problems))
    return f"allocatable {'; '.join(advertised)}; {HANDSHAKE_ANNOTATION} stamped by {HAMI_SCHEDULER}"
