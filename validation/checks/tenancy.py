"""Checks 2-4: tenant control planes, their isolation, and their nodes."""

from __future__ import annotations

import base64
import binascii
from collections import defaultdict
from itertools import permutations
from typing import Any

from validation.checks.base import ALL_TENANTS, once, per_tenant
from validation.host import CommandResult
from validation.kube import condition, explain, name_of
from validation.lab import Lab
from validation.pods import describe_pod, phase
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import Tenant, write_private_file

TCP_RESOURCE = "tenantcontrolplanes.kamaji.clastix.io"

# Ways an API server turns down credentials it did not issue, as kubectl words them.
REFUSALS = (
    ("must be logged in", "401 Unauthorized"),  # kubectl's wording for 401
    ("unauthorized", "401 Unauthorized"),
    ("forbidden", "403 Forbidden"),
    ("x509", "certificate rejected"),
    ("certificate", "certificate rejected"),
)


def tcp_status(tcp: dict[str, Any]) -> str:
    return tcp.get("status", {}).get("kubernetesResources", {}).get("version", {}).get("status", "")


def same_version(reported: str, configured: str) -> bool:
    return reported.removeprefix("v") == configured.removeprefix("v")


@per_tenant("control-plane", "TenantControlPlane Ready, API reachable, version as configured")
def control_plane(lab: Lab, tenant: Tenant) -> str:
    tcp = lab.management.get(TCP_RESOURCE, tenant.name, "-n", tenant.namespace)
    status = tcp_status(tcp)
    if status != "Ready":
        raise CheckFailed(
            f"TenantControlPlane {tenant.namespace}/{tenant.name} is {status or 'without status'}, not Ready"
        )
    server = lab.kubeconfig(tenant.name).server
    if server.rstrip("/") != tenant.endpoint.rstrip("/"):
        raise CheckFailed(f"the kubeconfig points at {server}, the endpoint output is {tenant.endpoint}")
    version = lab.kubectl(tenant).get_raw("/version").get("gitVersion", "")
    if not same_version(version, tenant.kubernetes_version):
        raise CheckFailed(f"{tenant.endpoint} reports {version or 'no version'}, expected {tenant.kubernetes_version}")
    return f"TCP Ready; {tenant.endpoint} serves {version}"


def refusal(result: CommandResult) -> str | None:
    """How an API server turned down foreign credentials; None if it did not clearly refuse."""
    if result.ok:
        return None
    error = result.stderr.lower()
    return next((label for marker, label in REFUSALS if marker in error), None)


def shared_values(values: dict[str, str]) -> dict[str, list[str]]:
    """Non-empty values held by more than one name."""
    holders = defaultdict(list)
    for name, value in values.items():
        if value:
            holders[value].append(name)
    return {value: names for value, names in holders.items() if len(names) > 1}


def datastore_schema(tcp: dict[str, Any]) -> str:
    """The etcd prefix Kamaji actually uses (status), else the requested one (spec)."""
    setup = tcp.get("status", {}).get("storage", {}).get("setup", {})
    return setup.get("schema") or tcp.get("spec", {}).get("dataStoreSchema", "")


def present_credentials(lab: Lab, owner: Tenant, target: Tenant) -> CommandResult:
    """Call target's API with owner's kubeconfig, trusting target's CA.

    Trusting the target's CA makes any refusal come from the target rejecting the
    owner's credentials, not from our TLS client rejecting the target.
    """
    ca_file = lab.workdir / f"{target.name}-ca.crt"
    try:
        ca = base64.b64decode(lab.kubeconfig(target.name).ca_data, validate=True)
    except binascii.Error:
        raise CheckFailed(f"{target.name}'s kubeconfig has an undecodable CA") from None
    write_private_file(ca_file, ca.decode("ascii", errors="replace"))
    return lab.kubectl(owner).run(
        "--server",
        target.endpoint,
        "--certificate-authority",
        str(ca_file),
        "get",
        "namespaces",
        "-o",
        "name",
    )


@once("isolation", "tenants refuse each other's credentials; distinct CAs and schemas", ALL_TENANTS)
def isolation(lab: Lab) -> str:
    if len(lab.tenants) < 2:
        raise CheckSkipped("only one tenant: nothing to isolate")
    problems, evidence = [], []

    cas = {name: lab.kubeconfig(name).ca_data for name in lab.outputs.kubeconfigs}
    problems += [f"{name}'s kubeconfig has no certificate-authority-data" for name, ca in cas.items() if not ca]
    problems += [f"{' and '.join(names)} share one CA" for names in shared_values(cas).values()]

    schemas = {}
    for tenant in lab.tenants:
        tcp = lab.management.get(TCP_RESOURCE, tenant.name, "-n", tenant.namespace)
        schemas[tenant.name] = datastore_schema(tcp)
        if schemas[tenant.name] != tenant.data_store_schema:
            problems.append(
                f"{tenant.name} stores its data under {schemas[tenant.name] or 'no schema'}, "
                f"the dataStoreSchema output is {tenant.data_store_schema}"
            )
    problems += [
        f"{' and '.join(names)} share dataStoreSchema {schema}" for schema, names in shared_values(schemas).items()
    ]

    for owner, target in permutations(lab.tenants, 2):
        if not cas[target.name]:
            continue
        result = present_credentials(lab, owner, target)
        how = refusal(result)
        if result.ok:
            problems.append(f"{target.name} accepted {owner.name}'s credentials")
        elif how is None:
            problems.append(f"{owner.name}'s credentials against {target.name}: {result.error}")
        else:
            evidence.append(f"{target.name} refuses {owner.name} ({how})")

    if problems:
        raise CheckFailed("; ".join(problems))
    distinct = f"{len(cas)} distinct CAs (management included), {len(schemas)} distinct schemas"
    return "; ".join([*evidence, distinct])


def node_problems(nodes: list[dict[str, Any]], workers: tuple[str, ...]) -> list[str]:
    by_name = {name_of(node): node for node in nodes}
    problems = []
    for worker in workers:
        node = by_name.get(worker)
        if node is None:
            problems.append(f"node {worker} has not joined")
            continue
        ready = condition(node, "Ready")
        if ready.get("status") != "True":
            problems.append(f"node {worker} NotReady ({explain(ready) or 'no Ready condition'})")
    return problems


def coredns_problems(pods: list[dict[str, Any]]) -> list[str]:
    if not pods:
        return ["no CoreDNS pods (k8s-app=kube-dns) in kube-system"]
    return [f"CoreDNS pod {name_of(pod)} is {describe_pod(pod)}" for pod in pods if phase(pod) != "Running"]


@per_tenant("nodes", "all workers Ready, CoreDNS Running")
def nodes(lab: Lab, tenant: Tenant) -> str:
    kubectl = lab.kubectl(tenant)
    node_list = kubectl.get("nodes")["items"]
    coredns = kubectl.get("pods", "-n", "kube-system", "-l", "k8s-app=kube-dns")["items"]
    problems = node_problems(node_list, tenant.workers) + coredns_problems(coredns)
    if problems:
        raise CheckFailed("; ".join(problems))
    return f"Ready: {', '.join(tenant.workers)}; CoreDNS {len(coredns)}/{len(coredns)} Running"
