"""Check: each tenant's API server writes its audit log, and only its own tenant's requests into it.

Each awake tenant is asked once for a ConfigMap that cannot exist (a name made for this run); the request must be
in that tenant's log, answered 404, and in no other tenant's log.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from validation import audit
from validation.checks.base import ALL_TENANTS, once
from validation.host import poll
from validation.lab import Lab
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import Tenant

PROBE_NAMESPACE = "default"
# The API server writes an event once it answered (blocking mode, kube-apiserver's default for the log backend);
# a few seconds cover a file being rotated while it is read.
FIND_TIMEOUT = 20
FIND_INTERVAL = 4
# Only files written this recently are read: the probe was made seconds before.
RECENT = timedelta(minutes=10)


def probe_name() -> str:
    return f"audit-probe-{secrets.token_hex(6)}"


def ask(lab: Lab, tenant: Tenant, name: str) -> None:
    """The probe request: a get of a ConfigMap that does not exist, so the tenant changes in no way."""
    answer = lab.kubectl(tenant).run("get", "configmap", name, "-n", PROBE_NAMESPACE, "-o", "name")
    if answer.ok or "NotFound" not in answer.stderr:
        raise CheckFailed(f"{tenant.name}: the probe get of configmap {name} did not answer NotFound: {answer.error}")


def probes_in(trail: audit.Trail, names: set[str]) -> set[str]:
    """Which probes the log holds: a get of that very ConfigMap in PROBE_NAMESPACE, answered 404."""
    return {
        found.name
        for found in trail.events
        if found.name in names
        and found.verb == "get"
        and found.resource == "configmaps"
        and found.namespace == PROBE_NAMESPACE
        and found.code == 404
    }


@once("audit", "each tenant's API server logs a request made to it, and no other tenant's log has it", ALL_TENANTS)
def audit_trail(lab: Lab) -> str:
    awake = [tenant for tenant in lab.tenants if not tenant.sleeping]
    if not awake:
        raise CheckSkipped("every tenant sleeps; no API server runs to ask")
    probes = {tenant.name: probe_name() for tenant in awake}
    for tenant in awake:
        ask(lab, tenant, probes[tenant.name])

    every = set(probes.values())
    logged: dict[str, set[str]] = {}
    for tenant in awake:
        own = probes[tenant.name]

        def read(tenant: Tenant = tenant, own: str = own) -> tuple[bool, set[str]]:
            found = probes_in(audit.read(lab, tenant, RECENT), every)
            return own in found, found

        done, found = poll(lab.clock, FIND_TIMEOUT, read, interval=FIND_INTERVAL)
        if not done:
            raise CheckFailed(
                f"{tenant.name}'s audit log has no event of its probe (get configmap {PROBE_NAMESPACE}/{own}) "
                f"after {FIND_TIMEOUT}s"
            )
        logged[tenant.name] = found
    owner = {name: tenant for tenant, name in probes.items()}
    strays = {tenant: sorted(n for n in names if owner[n] != tenant) for tenant, names in logged.items()}
    strays = {tenant: names for tenant, names in strays.items() if names}
    if strays:
        described = "; ".join(f"{tenant}'s log has {', '.join(names)}" for tenant, names in sorted(strays.items()))
        raise CheckFailed(f"a tenant's audit log holds another tenant's request: {described}")
    asleep = [tenant.name for tenant in lab.tenants if tenant.sleeping]
    said = f"each of {len(awake)} tenants' probe is in its own audit log only"
    return said + (f"; asleep, not asked: {', '.join(asleep)}" if asleep else "")
