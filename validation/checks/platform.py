"""Checks 1 and 1b: the management cluster runs cert-manager, Kamaji and its DataStore, and a LoadBalancer.

Each piece is checked as the program left it (the `platform` stack output): an
installed one by its workloads, a provided one the way `pulumi up` checked it
(scripts/check-cert-manager.sh, check-kamaji.sh), since its workloads may have any name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from validation.checks.base import once
from validation.checks.datastore import DATASTORE_RESOURCE
from validation.kube import Kubectl, name_of
from validation.lab import Lab
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import MANAGEMENT


@dataclass(frozen=True)
class Component:
    label: str
    kind: str  # Deployment or DaemonSet
    namespace: str  # glob
    name: str  # glob


# cert-manager's namespace is the installer's choice; MetalLB names its workloads
# differently in its manifest and its chart; Kamaji's CRDs hard-wire kamaji-system/kamaji.
CERT_MANAGER = (
    Component("cert-manager", "Deployment", "*", "cert-manager"),
    Component("cert-manager webhook", "Deployment", "*", "cert-manager-webhook"),
    Component("cert-manager cainjector", "Deployment", "*", "cert-manager-cainjector"),
)
METALLB = (
    Component("MetalLB controller", "Deployment", "metallb-system", "*controller"),
    Component("MetalLB speaker", "DaemonSet", "metallb-system", "*speaker"),
)
KAMAJI = (Component("Kamaji", "Deployment", "kamaji-system", "kamaji"),)

# A self-signed Issuer that cert-manager's webhook must admit in a server-side dry run (it
# fails closed and has no side effects: cert-manager/cert-manager
# deploy/charts/cert-manager/templates/webhook-validating-webhook.yaml@v1.21.1).
PROBE_ISSUER = {
    "apiVersion": "cert-manager.io/v1",
    "kind": "Issuer",
    "metadata": {"name": "kamaji-hami-lab-validation-probe"},
    "spec": {"selfSigned": {}},
}
# Kamaji's TenantControlPlane webhooks, which fail closed (clastix/kamaji
# charts/kamaji/templates/{mutating,validating}webhookconfiguration.yaml and
# charts/kamaji/controller-gen/*-webhook.yaml@26.8.2-edge).
KAMAJI_WEBHOOKS = (
    ("mutatingwebhookconfiguration", "kamaji-mutating-webhook-configuration", "mtenantcontrolplane.kb.io"),
    ("validatingwebhookconfiguration", "kamaji-validating-webhook-configuration", "vtenantcontrolplane.kb.io"),
)


def find(workloads: list[dict[str, Any]], component: Component) -> dict[str, Any] | None:
    for workload in workloads:
        # Deployments and DaemonSets are namespaced: the API server always returns both fields.
        metadata = workload["metadata"]
        if (
            workload.get("kind") == component.kind
            and fnmatchcase(metadata["namespace"], component.namespace)
            and fnmatchcase(metadata["name"], component.name)
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
    # The API server defaults spec.replicas to 1 (kubernetes/kubernetes pkg/apis/apps/v1/defaults.go@04791b490660).
    return status.get("readyReplicas", 0), workload["spec"]["replicas"]


def workloads_report(workloads: list[dict[str, Any]], components: tuple[Component, ...]) -> tuple[list[str], list[str]]:
    """(problems, evidence) for installed components."""
    problems, evidence = [], []
    for component in components:
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
    return problems, evidence


def workloads_ready(management: Kubectl, components: tuple[Component, ...]) -> str:
    problems, evidence = workloads_report(
        management.items("deployments,daemonsets", "--all-namespaces"), components
    )
    if problems:
        raise CheckFailed("; ".join(problems))
    return ", ".join(evidence)


def datastore_ready(management: Kubectl, name: str) -> str:
    if management.get(DATASTORE_RESOURCE, name).get("status", {}).get("ready") is not True:
        raise CheckFailed(f"DataStore {name} is not ready (status.ready is not true)")
    return f"DataStore {name} ready"


def cert_manager_admits(management: Kubectl) -> str:
    try:
        management.admit(PROBE_ISSUER, "default")
    except CheckFailed as refused:
        raise CheckFailed(f"the provided cert-manager does not admit an Issuer: {refused}") from None
    return "cert-manager (provided) admits an Issuer"


def webhook_served(management: Kubectl, kind: str, configuration: str, webhook: str) -> str:
    """The webhook has a CA and a ready endpoint behind its service, as check-kamaji.sh waits for."""
    entries = management.get(kind, configuration).get("webhooks") or []
    entry = next((item for item in entries if item.get("name") == webhook), None)
    if entry is None:
        raise CheckFailed(f"{kind} {configuration} has no webhook {webhook}")
    client = entry.get("clientConfig") or {}
    if not client.get("caBundle"):
        raise CheckFailed(f"webhook {webhook} has no CA injected (clientConfig.caBundle is empty)")
    service = client.get("service")
    if not service:
        raise CheckFailed(
            f"webhook {webhook} names no service in its clientConfig (a URL?); this check reads the endpoints of "
            "the service that Kamaji's chart creates for it"
        )
    # admissionregistration/v1 ServiceReference requires both.
    namespace, name = service["namespace"], service["name"]
    slices = management.get("endpointslices", "-n", namespace, "-l", f"kubernetes.io/service-name={name}")
    endpoints = [endpoint for item in slices.get("items") or [] for endpoint in item.get("endpoints") or []]
    # An unset ready is unknown, which consumers read as ready (k8s.io/api discovery/v1 EndpointConditions).
    if not any((endpoint.get("conditions") or {}).get("ready") is not False for endpoint in endpoints):
        raise CheckFailed(f"no ready endpoint of service {namespace}/{name}, which serves webhook {webhook}")
    return f"webhook {webhook} served"


def collect(management: Kubectl, parts: list[Callable[[], str]]) -> tuple[list[str], list[str]]:
    """Run every part, so one report names every problem; an unreachable cluster ends the check."""
    problems, evidence = [], []
    for part in parts:
        try:
            evidence.append(part())
        except CheckFailed as failed:
            if management.unreachable:
                raise
            problems.append(str(failed))
    return problems, evidence


@once(
    "platform",
    "cert-manager and Kamaji are ready (installed: their workloads; provided: their webhooks), and so is the "
    "tenants' DataStore",
    MANAGEMENT,
)
def platform(lab: Lab) -> str:
    facts, management = lab.outputs.platform, lab.management
    installed = (() if facts.is_provided("certManager") else CERT_MANAGER) + (
        () if facts.is_provided("kamaji") else KAMAJI
    )
    parts: list[Callable[[], str]] = [lambda: workloads_ready(management, installed)] if installed else []
    if facts.is_provided("certManager"):
        parts.append(lambda: cert_manager_admits(management))
    if facts.is_provided("kamaji"):
        parts += [lambda hook=hook: webhook_served(management, *hook) for hook in KAMAJI_WEBHOOKS]
    parts.append(lambda: datastore_ready(management, facts.data_store))
    problems, evidence = collect(management, parts)
    if problems:
        raise CheckFailed("; ".join(problems))
    return ", ".join(evidence)


@once("load-balancer", "MetalLB's controller and speaker are ready (skipped when the cluster provides one)", MANAGEMENT)
def load_balancer(lab: Lab) -> str:
    if lab.outputs.platform.is_provided("loadBalancer"):
        raise CheckSkipped(
            "loadBalancer is provided: the cluster's own LoadBalancer, not MetalLB, gives the tenant API servers "
            "their addresses; pulumi up proved it hands them out (check-load-balancer.sh), and control-plane "
            "checks each tenant's endpoint"
        )
    return workloads_ready(lab.management, METALLB)
