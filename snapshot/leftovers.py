"""python -m snapshot.leftovers [TENANT]: remove what a tenant left in lab DataStores it no longer uses
(`make up` after `pulumi up`, every tenant; `make datastore-clean TENANT=<name>`; docs/operations.md).

Kamaji moves a tenant to the DataStore its spec names with a Job that reads every key under /<schema>/ from the
one its status names and puts each into the target, one by one (clastix/kamaji cmd/migrate/cmd.go and
internal/datastore/etcd.go@26.8.2-edge: Migrate). It deletes nothing from the source and copies no etcd user or
role: the tenant's reconcile makes those in the DataStore its spec names, and Kamaji's deletion cleans only that
one (controllers/tenantcontrolplane_controller.go@26.8.2-edge: dataStore). So a finished move leaves the tenant's
prefix, user and role in the source, and a failed one, once undone (the spec names the source again), a partial
copy and a user and role in the target.

What is removed: the keys under the tenant's /<schema>/, its etcd user and its role <schema> (Kamaji's names for
them: internal/datastore/etcd.go@26.8.2-edge, GrantPrivileges), in each lab DataStore its TenantControlPlane
names in neither spec nor status. A lab DataStore is the one the stack's platform names or one a lab tenant's
TenantControlPlane names; no other is opened. Refused, with nothing deleted: while the tenant moves (Kamaji says
Migrating, its spec and status name two DataStores, or its migrate Job runs; read again right before each delete,
which is also refused once it names that DataStore), while the DataStore it uses holds
none of its keys; left alone: a DataStore that names a member of the one it uses (the same etcd under another
name), and in a DataStore what another lab tenant there also uses (the same schema or user). Only etcd DataStores
of the driver the tenant uses are opened; another tenant's own DataStore that cannot be reached is a warning.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from snapshot.etcd import EtcdClient, EtcdFailed, range_end
from snapshot.live import store_client
from validation.checks.datastore import (
    CLEAN,
    DATASTORE_RESOURCE,
    between_stores,
    named_stores,
    same_etcd,
    tenant_schema,
    tenant_user,
    used_store,
)
from validation.checks.tenancy import TCP_RESOURCE
from validation.exit_codes import EXIT_FAILED, EXIT_NO_OUTPUTS, EXIT_USAGE, ArgumentParser
from validation.host import Clock, Runner, SubprocessRunner
from validation.lab import Lab
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import (
    OneTenantUnusable,
    OutputsError,
    Tenant,
    add_outputs_arguments,
    outputs_with_tenant,
    parse_outputs,
    read_outputs_document,
)

# The labels of Kamaji's migrate Job (clastix/kamaji internal/resources/datastore/datastore_migrate.go@26.8.2-edge).
MIGRATE_JOB = (
    "kamaji.clastix.io/component=migrate,tcp.kamaji.clastix.io/name={name},tcp.kamaji.clastix.io/namespace={namespace}"
)
FINISH = "run " + CLEAN + " once it is on one DataStore"
ETCD_DRIVER = "etcd"


class Refused(Exception):
    """Nothing (more) was deleted for this tenant; the message says why, `removed` what was before."""

    def __init__(self, why: str, removed: Sequence[Found] = ()):
        super().__init__(why)
        self.removed = list(removed)


@dataclass(frozen=True)
class Owner:
    """Whose data this is in etcd, as the tenant's TenantControlPlane names it."""

    tenant: str
    schema: str
    user: str

    @property
    def prefix(self) -> bytes:
        return f"/{self.schema}/".encode()


@dataclass(frozen=True)
class Found:
    """What of a tenant one DataStore holds."""

    store: str
    keys: int
    user: str  # "" when absent
    role: str

    def __bool__(self) -> bool:
        return bool(self.keys or self.user or self.role)

    def __str__(self) -> str:
        parts = [f"{self.keys} key{'' if self.keys == 1 else 's'}"] if self.keys else []
        parts += [f"etcd user {self.user}"] if self.user else []
        parts += [f"role {self.role}"] if self.role else []
        return f"DataStore {self.store}: {', '.join(parts)}"


def owner(tenant: Tenant, tcp: dict[str, Any]) -> Owner:
    schema, user = tenant_schema(tcp), tenant_user(tcp)
    if not schema or not user:
        raise Refused(f"its TenantControlPlane names no etcd schema or user (schema {schema!r}, user {user!r})")
    return Owner(tenant.name, schema, user)


def moving(lab: Lab, tenant: Tenant, tcp: dict[str, Any]) -> str:
    """Why the tenant is between two DataStores, or "" when it is on one."""
    if why := between_stores(tcp):
        return why
    selector = MIGRATE_JOB.format(name=tenant.name, namespace=tenant.namespace)
    running = [job for job in lab.management.items("jobs", "--all-namespaces", "-l", selector)
               if (job.get("status") or {}).get("active")]  # fmt: skip
    if running:
        job = running[0]["metadata"]
        return f"Kamaji's migrate Job {job.get('namespace')}/{job.get('name')} still runs"
    return ""


def still_elsewhere(lab: Lab, tenant: Tenant, store: str) -> None:
    """Refused unless the tenant, read again now, still names neither store nor moves: a `make up` run meanwhile
    may have started a move to it, whose Job would then copy into what is being deleted."""
    tcp = lab.management.get(TCP_RESOURCE, tenant.name, "-n", tenant.namespace)
    if store in named_stores(tcp):
        raise Refused(f"its TenantControlPlane names DataStore {store} now; {FINISH.format(tenant=tenant.name)}")
    if why := moving(lab, tenant, tcp):
        raise Refused(f"{why}; {FINISH.format(tenant=tenant.name)}")


def held(client: EtcdClient, store: str, whose: Owner) -> Found:
    keys = client.range(whose.prefix, range_end(whose.prefix), 1, 0).result().count
    user = whose.user if client.has("user", whose.user) else ""
    role = whose.schema if client.has("role", whose.schema) else ""
    return Found(store, keys, user, role)


def remove(client: EtcdClient, found: Found, whose: Owner) -> None:
    """The tenant's keys, user and role there; nothing else: the range ends where its prefix does."""
    if found.keys:
        client.delete_range(whose.prefix, range_end(whose.prefix))
    if found.user:
        client.delete_auth("user", found.user)
    if found.role:
        client.delete_auth("role", found.role)


@dataclass
class LabStores:
    """The lab's DataStores, and for each the lab tenants whose TenantControlPlane names it."""

    users: dict[str, list[Owner]]

    @classmethod
    def read(cls, lab: Lab, tcps: dict[str, dict[str, Any]]) -> LabStores:
        users: dict[str, list[Owner]] = {lab.outputs.platform.data_store: []}
        for tenant in lab.tenants:
            tcp = tcps[tenant.name]
            for store in named_stores(tcp):
                try:
                    users.setdefault(store, []).append(owner(tenant, tcp))
                except Refused:
                    users.setdefault(store, [])
        return cls(users)

    def shared_with(self, store: str, whose: Owner) -> list[str]:
        """What of whose another lab tenant using store also uses, e.g. "schema x (tenant-b)"."""
        return [
            f"{what} {name} ({other.tenant})"
            for other in self.users.get(store, [])
            if other.tenant != whose.tenant
            for what, name, theirs in (("schema", whose.schema, other.schema), ("etcd user", whose.user, other.user))
            if name == theirs
        ]


def clean(lab: Lab, tenant: Tenant, stores: LabStores, tcp: dict[str, Any], say: Callable[[str], None]) -> list[Found]:
    """Remove the tenant's data from every lab DataStore its TenantControlPlane does not name; what was removed.
    Refused (nothing deleted) while it moves or when the DataStore it uses holds none of its keys."""
    whose = owner(tenant, tcp)
    if why := moving(lab, tenant, tcp):
        raise Refused(f"{why}; {FINISH.format(tenant=tenant.name)}")
    current = used_store(tcp) or lab.outputs.platform.data_store
    others = sorted(set(stores.users) - named_stores(tcp) - {current})
    if not others:
        return []
    used = lab.management.get(DATASTORE_RESOURCE, current)
    driver = used.get("spec", {}).get("driver")
    if driver != ETCD_DRIVER:
        # Only etcd is cleaned here, and Kamaji moves a tenant only between DataStores of one driver
        # (clastix/kamaji cmd/migrate/cmd.go@26.8.2-edge): nothing of it is in an etcd.
        return []
    with store_client(lab, current) as client:
        if not held(client, current, whose).keys:
            raise Refused(
                f"DataStore {current}, the one it uses, holds none of its keys under /{whose.schema}/: its data may "
                "be only in the others, which are left as they are"
            )
    removed = []
    for store in others:
        other = lab.management.get(DATASTORE_RESOURCE, store)
        if other.get("spec", {}).get("driver") != driver:
            continue
        if same_etcd(other, used):
            say(f"tenant {tenant.name}: DataStore {store} left as it is: it names an etcd member of DataStore "
                f"{current}, which the tenant uses")  # fmt: skip
            continue
        if shared := stores.shared_with(store, whose):
            say(f"tenant {tenant.name}: DataStore {store} left as it is: another tenant there uses {', '.join(shared)}")
            continue
        found = None
        try:
            with store_client(lab, store) as client:
                found = held(client, store, whose)
                if found:
                    try:
                        still_elsewhere(lab, tenant, store)
                    except Refused as refusal:
                        raise Refused(str(refusal), removed) from None
                    remove(client, found, whose)
                    removed.append(found)
        except (EtcdFailed, CheckFailed, CheckSkipped) as problem:
            # The lab moves a tenant only between the shared DataStore and its own (scripts/check-datastore-move.sh):
            # one that is not the shared one, and not the tenant's, never held its data. Reached but failing, or
            # the shared one, it may hold some: that fails the tenant.
            if found is not None or store == lab.outputs.platform.data_store:
                raise
            say(f"tenant {tenant.name}: WARNING: DataStore {store}, another tenant's where this one never was, "
                f"could not be searched: {problem}")  # fmt: skip
    return removed


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="python -m snapshot.leftovers",
        description="Remove a tenant's keys, etcd user and role from the lab DataStores it no longer uses.",
        epilog=f"exit status: 0 done, {EXIT_FAILED} refused or failed for a tenant, {EXIT_NO_OUTPUTS} the stack "
        f"outputs could not be read, {EXIT_USAGE} wrong arguments",
    )
    add_outputs_arguments(parser)
    parser.add_argument("tenant", nargs="?", help="the tenant; default: every tenant")
    return parser.parse_args(argv)


def main(
    argv: Sequence[str] | None = None,
    runner: Runner | None = None,
    clock: Clock | None = None,
    stdout: TextIO | None = None,
) -> int:
    args = parse_args(argv)
    out = stdout or sys.stdout
    runner = runner or SubprocessRunner()
    try:
        if args.tenant:
            outputs = outputs_with_tenant(args.outputs, runner, args.stack, args.tenant)
        else:
            outputs = parse_outputs(read_outputs_document(args.outputs, runner, None, args.stack))
    except OneTenantUnusable as problem:
        print(f"snapshot.leftovers: {problem}", file=sys.stderr)
        return problem.code
    except OutputsError as problem:
        print(f"snapshot.leftovers: {problem}", file=sys.stderr)
        return EXIT_NO_OUTPUTS
    code = 0
    with tempfile.TemporaryDirectory(prefix="kamaji-hami-lab-leftovers-") as workdir:
        lab = Lab.open(outputs, runner, Path(workdir), clock or Clock())
        try:
            tcps = {t.name: lab.management.get(TCP_RESOURCE, t.name, "-n", t.namespace) for t in lab.tenants}
        except (CheckFailed, CheckSkipped) as problem:
            print(f"snapshot.leftovers: cannot read the TenantControlPlanes: {problem}", file=sys.stderr)
            return EXIT_FAILED
        stores = LabStores.read(lab, tcps)
        chosen = [outputs.tenants[args.tenant]] if args.tenant else lab.tenants
        for tenant in chosen:
            try:
                removed = clean(lab, tenant, stores, tcps[tenant.name], lambda line: print(line, file=out))
            except Refused as refusal:
                for found in refusal.removed:
                    print(f"tenant {tenant.name}: removed from {found}", file=out)
                nothing = "nothing more deleted" if refusal.removed else "nothing deleted"
                print(f"snapshot.leftovers: tenant {tenant.name}: {nothing}: {refusal}", file=sys.stderr)
                code = EXIT_FAILED
                continue
            except (EtcdFailed, CheckFailed, CheckSkipped) as problem:
                print(f"snapshot.leftovers: tenant {tenant.name}: failed: {problem}; run it again", file=sys.stderr)
                code = EXIT_FAILED
                continue
            for found in removed:
                print(f"tenant {tenant.name}: removed from {found}", file=out)
    return code


if __name__ == "__main__":
    sys.exit(main())
