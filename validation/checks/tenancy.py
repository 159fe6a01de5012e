"""Checks 2-4: tenant control planes, their isolation, and their nodes."""

from __future__ import annotations

import base64
import binascii
import re
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from itertools import permutations
from typing import Any
from urllib.parse import urlsplit

from validation.answers import MalformedAnswer, mapping, objects, text
from validation.checks.base import ALL_TENANTS, once, per_tenant
from validation.host import CommandResult
from validation.kube import cannot_connect, condition, explain, name_of
from validation.lab import Lab
from validation.pods import phase
from validation.results import CheckFailed, CheckSkipped, TenantAsleep
from validation.stack_outputs import Tenant, write_private_file

TCP_RESOURCE = "tenantcontrolplanes.kamaji.clastix.io"

# How kubectl words an API server's 401: it did not authenticate the credentials.
UNAUTHENTICATED = ("must be logged in", "unauthorized")
# A 403 means the server authenticated the caller and only its RBAC said no.
FORBIDDEN = "forbidden"
# TLS failures: the handshake broke, so no request (and no credential) reached the API.
TLS_ERRORS = ("x509", "tls:", "certificate")
_FORBIDDEN_USER = re.compile(r'User "([^"]*)"')


def tcp_status(tcp: dict[str, Any]) -> str:
    """status.kubernetesResources.version.status: "Ready" once Kamaji has the control plane running."""
    where = f"TenantControlPlane {name_of(tcp)}"
    version = mapping(mapping(mapping(tcp, "status", where), "kubernetesResources", where), "version", where)
    return text(version, "status", where)


def kubernetes_version(answer: Any, where: str) -> str:
    """gitVersion of a `get --raw /version` answer."""
    if not isinstance(answer, dict):
        raise MalformedAnswer(f"{where}: the answer is not an object")
    return text(answer, "gitVersion", where)


def same_version(reported: str, configured: str) -> bool:
    return reported.removeprefix("v") == configured.removeprefix("v")


# What Kamaji reports for a control plane at 0 replicas
# (clastix/kamaji internal/resources/k8s_deployment_resource.go@26.8.2-edge, computeStatus).
SLEEPING = "Sleeping"


def control_plane_asleep(lab: Lab, tenant: Tenant) -> str:
    """A tenant the outputs say sleeps is reported asleep only once Kamaji says so too."""
    tcp = lab.management.get(TCP_RESOURCE, tenant.name, "-n", tenant.namespace)
    status = tcp_status(tcp)
    if status != SLEEPING:
        raise CheckFailed(
            f"{tenant.name} should sleep (sleeping: true), but TenantControlPlane {tenant.namespace}/{tenant.name} "
            f"is {status or 'without status'}, not {SLEEPING}; run pulumi up"
        )
    raise TenantAsleep(
        f"{tenant.name} sleeps: Kamaji reports TenantControlPlane {tenant.namespace}/{tenant.name} {SLEEPING}"
    )


@per_tenant(
    "control-plane",
    "TenantControlPlane Ready, kubeconfig leads to its endpoint, version as configured",
    asleep=control_plane_asleep,
)
def control_plane(lab: Lab, tenant: Tenant) -> str:
    tcp = lab.management.get(TCP_RESOURCE, tenant.name, "-n", tenant.namespace)
    status = tcp_status(tcp)
    if status != "Ready":
        raise CheckFailed(
            f"TenantControlPlane {tenant.namespace}/{tenant.name} is {status or 'without status'}, not Ready"
        )
    # Kamaji publishes where the control plane listens; the kubeconfig must lead there.
    published = text(mapping(tcp, "status", tenant.name), "controlPlaneEndpoint", f"TenantControlPlane {tenant.name}")
    if not published:
        raise CheckFailed(f"TenantControlPlane {tenant.namespace}/{tenant.name} has no status.controlPlaneEndpoint")
    server = lab.kubeconfig(tenant.name).server
    if host_port(server) != host_port(published):
        raise CheckFailed(
            f"the {tenant.name} kubeconfig points at {server or 'no server'}, but TenantControlPlane "
            f"{tenant.namespace}/{tenant.name} listens on {published} (status.controlPlaneEndpoint)"
        )
    version = kubernetes_version(lab.kubectl(tenant).get_raw("/version"), f"{tenant.name} /version")
    if not same_version(version, tenant.kubernetes_version):
        raise CheckFailed(f"{server} reports {version or 'no version'}, expected {tenant.kubernetes_version}")
    return f"TCP Ready at {published}; {server} serves {version}"


def host_port(address: str) -> tuple[str, int | None]:
    """(host, port) of "https://host:port" or "host:port"; the port defaults to 443."""
    try:
        parts = urlsplit(address if "//" in address else f"//{address}")
        return (parts.hostname or "").lower(), parts.port or 443
    except ValueError:  # an unparseable port
        return address, None


def credential_verdict(owner: Tenant, target: Tenant, result: CommandResult) -> tuple[bool, str]:
    """(refused, what happened) when owner's credentials were presented to target's API.

    Only a 401 proves that target did not accept them: a 403 comes after
    authentication, and a TLS error means the handshake failed before any request.
    """
    if result.ok:
        return False, f"{target.name} accepted {owner.name}'s credentials"
    error = result.stderr.lower()
    if FORBIDDEN in error:
        user = _FORBIDDEN_USER.search(result.stderr)
        identity = f'"{user[1]}"' if user else "some user"
        return False, (
            f"{target.name} authenticated {owner.name}'s credentials as {identity} "
            f"(403 Forbidden, only RBAC refused): {result.error}"
        )
    if tls_failure(result):
        return False, (
            f"inconclusive: the TLS handshake with {target.name} failed, so its API never judged "
            f"{owner.name}'s credentials: {result.error}"
        )
    if any(marker in error for marker in UNAUTHENTICATED):
        return True, f"{target.name} refuses {owner.name} (401 Unauthorized)"
    return False, f"{owner.name}'s credentials against {target.name}: {result.error}"


def tls_failure(result: CommandResult) -> bool:
    return any(marker in result.stderr.lower() for marker in TLS_ERRORS)


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
    return setup.get("schema") or tcp["spec"].get("dataStoreSchema", "")


def present_credentials(lab: Lab, owner: Tenant, target: Tenant) -> CommandResult:
    """Call target's API with owner's kubeconfig, trusting target's CA.

    Trusting the target's CA lets the TLS handshake succeed, so the owner's
    credentials reach the target and any 401 is the target rejecting them.
    """
    ca_file = lab.workdir / f"{target.name}-ca.crt"
    try:
        # PEM is ASCII text.
        ca = base64.b64decode(lab.kubeconfig(target.name).ca_data, validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        raise CheckFailed(f"{target.name}'s kubeconfig has an undecodable CA") from None
    write_private_file(ca_file, ca)
    return lab.kubectl(owner).call(
        "--server",
        target.endpoint,
        "--certificate-authority",
        str(ca_file),
        "get",
        "namespaces",
        "-o",
        "name",
    )


def try_target(lab: Lab, target: Tenant, has_ca: bool) -> dict[str, tuple[str, str]]:
    """Each other tenant's credentials against target, by owner: (what happened, what to say).

    "refused" and "accepted" are credential verdicts, "cut" means target could not be reached with
    them (said once), "before" that it was unreachable already, "no-ca" that it was not tried.
    """
    target_api = lab.kubectl(target)
    outcomes = {}
    for owner in lab.tenants:
        if owner is target:
            continue
        if target_api.unreachable:
            outcomes[owner.name] = ("before", "")
        elif not has_ca:
            outcomes[owner.name] = ("no-ca", "")
        else:
            answer = present_credentials(lab, owner, target)
            if cannot_connect(answer) and not tls_failure(answer):
                # Said once here; the target's own checks are skipped from now on.
                target_api.unreachable = answer.error
                outcomes[owner.name] = ("cut", f"cannot reach the {target.name} API server: {answer.error}")
            else:
                refused, what = credential_verdict(owner, target, answer)
                outcomes[owner.name] = ("refused" if refused else "accepted", what)
    return outcomes


@once("isolation", "tenants refuse each other's credentials (401); distinct CAs and schemas", ALL_TENANTS)
def isolation(lab: Lab) -> str:
    if len(lab.tenants) < 2:
        raise CheckSkipped("only one tenant: nothing to isolate")
    # A sleeping tenant's API server does not run: it can neither refuse credentials nor present them.
    asleep = [tenant.name for tenant in lab.tenants if tenant.sleeping]
    if asleep:
        awake = {tenant.name: tenant for tenant in lab.tenants if not tenant.sleeping}
        if len(awake) < 2:
            raise CheckSkipped(f"fewer than two tenants awake ({', '.join(asleep)} asleep): nothing to isolate")
        lab = replace(lab, outputs=replace(lab.outputs, tenants=awake))
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

    # Each target is tried by every other tenant in turn, the targets side by side: a silent API
    # server costs one call's limit, whatever the number of tenants.
    names = [tenant.name for tenant in lab.tenants]
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        outcomes = pool.map(lambda target: try_target(lab, target, bool(cas[target.name])), lab.tenants)
        tried = dict(zip(names, outcomes, strict=True))
    unreachable = set()
    for owner, target in permutations(names, 2):
        happened, what = tried[target][owner]
        if happened == "before":
            unreachable.add(target)
        elif happened != "no-ca":
            (evidence if happened == "refused" else problems).append(what)

    if problems:
        raise CheckFailed("; ".join(problems))
    if unreachable:
        which = " and ".join(sorted(unreachable))
        raise CheckSkipped(f"{which} unreachable earlier in this run, so not every pair of tenants could be tried")
    distinct = f"{len(cas)} distinct CAs (management included), {len(schemas)} distinct schemas"
    return "; ".join([*evidence, distinct])


def node_problems(nodes: list[dict[str, Any]], workers: tuple[str, ...], kubernetes_version: str) -> list[str]:
    by_name = {name_of(node): node for node in nodes}
    problems = []
    for worker in workers:
        node = by_name.get(worker)
        if node is None:
            problems.append(f"node {worker} has not joined")
            continue
        ready = condition(node, "Ready")
        if ready.get("status") != "True":
            why = explain(ready) or (f"Ready={ready.get('status')}" if ready else "no Ready condition")
            problems.append(f"node {worker} NotReady ({why})")
        # Every worker of an upgraded tenant is replaced by one of the new version.
        where = f"node {worker}"
        kubelet = text(mapping(mapping(node, "status", where), "nodeInfo", where), "kubeletVersion", where)
        if not same_version(kubelet, kubernetes_version):
            problems.append(
                f"node {worker} runs kubelet {kubelet or 'of unknown version'}, not the tenant's "
                f"{kubernetes_version} (an unfinished upgrade? run pulumi up again)"
            )
    return problems


def container_trouble(status: dict[str, Any]) -> str:
    """Why a container is not ready, with its restart count: "coredns CrashLoopBackOff (...), 7 restarts"."""
    where = f"container {text(status, 'name', 'container')}"
    state = mapping(status, "state", where)
    stuck = mapping(state, "waiting", where) or mapping(state, "terminated", where)
    if stuck:
        why = explain(stuck) or next(iter(state))
    elif "running" in state:
        why = "running but not ready (readiness probe failing)"
    else:
        why = "not ready"
    restarts = status.get("restartCount") or 0
    return f"{text(status, 'name', where)} {why}, {restarts} restart{'' if restarts == 1 else 's'}"


def pod_readiness_problem(pod: dict[str, Any]) -> str | None:
    """None if the pod is Ready and every container is ready, else what is wrong."""
    where = f"pod {name_of(pod)}"
    statuses = objects(mapping(pod, "status", where), "containerStatuses", where)
    ready = condition(pod, "Ready")
    if ready.get("status") == "True" and statuses and all(status.get("ready") for status in statuses):
        return None
    details = [container_trouble(status) for status in statuses if not status.get("ready")]
    scheduled = condition(pod, "PodScheduled")
    if scheduled.get("status") == "False":
        details.append(explain(scheduled))
    if not details:
        details.append(explain(ready) or "no Ready condition")
    state = "Running but not Ready" if phase(pod) == "Running" else phase(pod)
    return f"{state} ({'; '.join(details)})"


def coredns_problems(pods: list[dict[str, Any]]) -> list[str]:
    if not pods:
        return ["no CoreDNS pods (k8s-app=kube-dns) in kube-system"]
    problems = []
    for pod in pods:
        problem = pod_readiness_problem(pod)
        if problem:
            problems.append(f"CoreDNS pod {name_of(pod)} is {problem}")
    return problems


@per_tenant("nodes", "all workers Ready at the tenant's version, CoreDNS pods Ready")
def nodes(lab: Lab, tenant: Tenant) -> str:
    kubectl = lab.kubectl(tenant)
    node_list = kubectl.items("nodes")
    coredns = kubectl.items("pods", "-n", "kube-system", "-l", "k8s-app=kube-dns")
    problems = node_problems(node_list, tenant.workers, tenant.kubernetes_version) + coredns_problems(coredns)
    if problems:
        raise CheckFailed("; ".join(problems))
    return f"Ready: {', '.join(tenant.workers)}; CoreDNS {len(coredns)}/{len(coredns)} Ready"
