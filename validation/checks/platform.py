"""Check 1: the management cluster runs cert-manager, MetalLB and Kamaji."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from validation.checks.base import once
from validation.kube import name_of
from validation.lab import Lab
from validation.results import CheckFailed
from validation.stack_outputs import MANAGEMENT


@dataclass(frozen=True)
class Component:
    label: str
    kind: str  # Deployment or DaemonSet
    namespace: str  # glob
    name: str  # glob


# cert-manager's namespace is the installer's choice; MetalLB names its workloads
# differently in its manifest and its chart; Kamaji's CRDs hard-wire kamaji-system/kamaji.
COMPONENTS = (
    Component("cert-manager", "Deployment", "*", "cert-manager"),
    Component("cert-manager webhook", "Deployment", "*", "cert-manager-webhook"),
    Component("cert-manager cainjector", "Deployment", "*", "cert-manager-cainjector"),
    Component("MetalLB controller", "Deployment", "metallb-system", "*controller"),
    Component("MetalLB speaker", "DaemonSet", "metallb-system", "*speaker"),
    Component("Kamaji", "Deployment", "kamaji-system", "kamaji"),
)


def find(workloads: list[dict[str, Any]], component: Component) -> dict[str, Any] | None:
    for workload in workloads:
        metadata = workload.get("metadata", {})
        if (
            workload.get("kind") == component.kind
            and fnmatchcase(metadata.get("namespace", ""), component.namespace)
            and fnmatchcase(metadata.get("name", ""), component.name)
        ):
            return workload
    return None


def ready_counts(workload: dict[str, Any]) -> tuple[int, int]:
    """(ready, wanted) pods of a Deployment or DaemonSet."""
    status = workload.get("status", {})
    if workload.get("kind") == "DaemonSet":
        # Mid-rollout, pods of the old template still count as ready; only updated ones are wanted.
        ready = min(status.get("numberReady", 0), status.get("updatedNumberScheduled", 0))
        return ready, status.get("desiredNumberScheduled", 0)
    return status.get("readyReplicas", 0), workload.get("spec", {}).get("replicas", 1)


def platform_report(workloads: list[dict[str, Any]], datastore: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(problems, evidence) for the platform components and the default DataStore."""
    problems, evidence = [], []
    for component in COMPONENTS:
        workload = find(workloads, component)
        if workload is None:
            problems.append(f"{component.label}: no {component.kind} found")
            continue
        ready, wanted = ready_counts(workload)
        counts = f"{component.label} {ready}/{wanted}"
        if wanted == 0 or ready < wanted:
            problems.append(f"{counts} ready ({component.kind} {name_of(workload)})")
        else:
            evidence.append(counts)
    if datastore.get("status", {}).get("ready") is True:
        evidence.append("DataStore default ready")
    else:
        problems.append("DataStore default is not ready (status.ready is not true)")
    return problems, evidence


@once("platform", "cert-manager, MetalLB, Kamaji and DataStore default are ready", MANAGEMENT)
def platform(lab: Lab) -> str:
    workloads = lab.management.get("deployments,daemonsets", "--all-namespaces")["items"]
    datastore = lab.management.get("datastores.kamaji.clastix.io", "default")
    problems, evidence = platform_report(workloads, datastore)
    if problems:
        raise CheckFailed("; ".join(problems))
    return ", ".join(evidence)
