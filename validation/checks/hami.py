"""Checks 6-7: HAMi's webhook mutates GPU pods, and workers advertise their GPUs."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

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
        tenant = replace(tenant, gpus_per_worker=tuple(Gpu(card["type"], card["devmem"], 1) for card in cards))
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
    return {name_of(node): node for node in lab.kubectl(tenant).get("nodes")["items"]}


def registered_devices(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries of a node's register annotation as HAMi wrote them (its DeviceInfo list, all fields
    omitempty: Project-HAMi/HAMi pkg/device/devices.go@v2.10.0); none when it is absent or unreadable."""
    raw = (node["metadata"].get("annotations") or {}).get(REGISTER_ANNOTATION)
    try:
        devices = json.loads(raw) if raw else []
    except json.JSONDecodeError:
        return []
    return [device for device in devices if isinstance(device, dict)] if isinstance(devices, list) else []


def registered_cards(node: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The GPUs in a node's register annotation that name their type, memory and slots."""
    if node is None:
        return []
    fields = {"type": str, "devmem": int, "count": int}
    return [card for card in registered_devices(node) if all(isinstance(card.get(k), t) for k, t in fields.items())]


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
    allocatable = node.get("status", {}).get("allocatable", {})
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
            {"nvidia.com/gpu": sum(card["count"] for card in registered_cards(node))}
            if tenant.real_gpus
            else tenant.expected_allocatable()
        )
        problems += allocatable_mismatches(node, expected)
        advertised.append(f"{worker}: " + ", ".join(f"{resource}={value}" for resource, value in expected.items()))
        annotations = node["metadata"].get("annotations") or {}
        if REGISTER_ANNOTATION not in annotations:
            problems.append(f"{worker}: annotation {REGISTER_ANNOTATION} is missing")
        handshake = annotations.get(HANDSHAKE_ANNOTATION)
        if handshake is None:
            problems.append(f"{worker}: annotation {HANDSHAKE_ANNOTATION} is missing (hami-scheduler has not seen it)")
        elif not handshake.startswith(HANDSHAKE_PREFIX):
            problems.append(f"{worker}: {HANDSHAKE_ANNOTATION} is {handshake!r}, expected {HANDSHAKE_PREFIX}<time>")
    if problems:
        raise CheckFailed("; ".join(problems))
    return f"allocatable {'; '.join(advertised)}; {HANDSHAKE_ANNOTATION} stamped by {HAMI_SCHEDULER}"
