"""Check 3b: nobody but the tenant's own etcd user (and root) reaches its keys, and that user nothing else.

Kamaji gives every tenant an etcd user whose role may read and write only
/<dataStoreSchema>/ (clastix/kamaji internal/datastore/etcd.go@26.8.2-edge: GrantPrivileges,
buildKey), and points the tenant's API server there with --etcd-prefix=/<schema>
(internal/builders/controlplane/deployment.go@26.8.2-edge), so a ConfigMap is stored
at /<schema>/configmaps/<namespace>/<name>. Two independent halves prove it: the tenant's
own certificate says whose it is and probes etcd, and the DataStore's root credentials read
etcd's auth status, version, every user and role, and where the marker landed. A half that
cannot run leaves the result UNPROVEN, never PASS.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from validation import manifests
from validation.checks.base import per_tenant
from validation.checks.certificates import common_name
from validation.checks.etcd_ranges import (
    OPEN_ENDED,
    READS,
    WRITES,
    Permission,
    Span,
    UnreadablePermission,
    intersection,
    minus,
    permissions,
    tenant_range,
    union,
)
from validation.checks.tenancy import TCP_RESOURCE
from validation.host import poll
from validation.kube import Kubectl
from validation.lab import Lab
from validation.pods import describe_pod, phase
from validation.results import CheckFailed, CheckSkipped, CheckUnproven
from validation.stack_outputs import Tenant

DATASTORE_RESOURCE = "datastores.kamaji.clastix.io"
# The etcd behind a kamaji-etcd DataStore is a StatefulSet whose container is "etcd" (clastix/kamaji-etcd
# charts/kamaji-etcd/templates/etcd_sts.yaml@92f31f0); which StatefulSet, the DataStore's endpoints say (Member).
ETCD_CONTAINER = "etcd"
# The tenant's client certificate: secret <tenant>-datastore-certificate in the tenant's namespace
# with keys ca.crt, server.crt, server.key (clastix/kamaji
# internal/resources/datastore/datastore_certificate.go@26.8.2-edge).
TENANT_CERTIFICATE_KEYS = {
    "ca.crt": manifests.ETCD_CA,
    "server.crt": manifests.ETCD_CERT,
    "server.key": manifests.ETCD_KEY,
}
# etcd's refusal of a range the user's roles do not cover (etcd-io/etcd api/v3rpc/rpctypes/error.go@v3.6.12:
# ErrGRPCPermissionDenied); etcdctl's own "open <file>: permission denied" is no refusal of etcd's.
PERMISSION_DENIED = "etcdserver: permission denied"
# Image already on the node (the DataStore runs it); etcdctl gives up after its own timeouts.
READ_TIMEOUT = 120
# etcd's answer to a user its caller may not see, and to a certificate whose CN is no user
# (etcd-io/etcd server/auth/store.go@v3.5.1: ErrPermissionDenied, ErrUserNotFound).
USER_NOT_FOUND = "etcdserver: user name not found"
# kamaji-etcd's setup job makes user root with role root (clastix/kamaji-etcd
# charts/kamaji-etcd/templates/etcd_job_preinstall_2.yaml@92f31f0); etcd lets role root reach every key
# (etcd-io/etcd server/auth/store.go@v3.5.1: hasRootRole).
ROOT_USER, ROOT_ROLE = "root", "root"
# etcd's answer for a role it does not have (etcd-io/etcd api/v3rpc/rpctypes/error.go@v3.5.1: ErrGRPCRoleNotFound).
ROLE_NOT_FOUND = "etcdserver: role name not found"
# Kamaji's state while its migrate Job runs (clastix/kamaji api/v1alpha1/tenantcontrolplane_status.go@26.8.2-edge:
# VersionMigrating).
MIGRATING = "Migrating"
# What removes a tenant's data from a DataStore it no longer uses (snapshot/leftovers.py).
CLEAN = "`make datastore-clean TENANT={tenant}`"


class Verdict(NamedTuple):
    """One finding of the check: whether it holds, and what was seen."""

    good: bool
    what: str


@dataclass(frozen=True)
class Read:
    """What one etcdctl command in the pod printed (stdout and stderr, as `kubectl logs` shows them) and its exit."""

    prefix: str  # the prefix listed, or what else the command read (e.g. "etcd user x")
    exit_code: int
    output: str

    @property
    def keys(self) -> list[str]:
        """The keys listed; etcdctl's client logs its warnings as JSON lines on stderr, which are no keys."""
        lines = (line.strip() for line in self.output.splitlines())
        return [line for line in lines if line.startswith(self.prefix)] if self.exit_code == 0 else []

    @property
    def error(self) -> str:
        lines = [line.strip() for line in self.output.splitlines() if line.strip()]
        return lines[-1] if lines else f"exit code {self.exit_code}, no output"

    @property
    def statuses(self) -> list[dict[str, Any]]:
        """The members `endpoint status -w json` listed: a JSON array on one line."""
        for line in self.output.splitlines():
            try:
                found = json.loads(line)
            except ValueError:
                continue
            if isinstance(found, list):
                return [member for member in found if isinstance(member, dict)]
        return []

    @property
    def document(self) -> dict[str, Any]:
        """The response etcdctl -w json printed (it has a header; the client's warnings do not)."""
        for line in self.output.splitlines():
            try:
                found = json.loads(line)
            except ValueError:
                continue
            if isinstance(found, dict) and "header" in found:
                return found
        return {}


def list_keys(prefix: str) -> list[str]:
    return ["get", prefix, "--prefix", "--keys-only"]


def keys(read: Read) -> str:
    return f"{len(read.keys)} key{'' if len(read.keys) == 1 else 's'}"


def marker_found(read: Read, key: str) -> Verdict:
    if read.exit_code != 0:
        return Verdict(False, f"cannot read {read.prefix}: {read.error}")
    if key in read.keys:
        return Verdict(True, f"found {key}")
    return Verdict(False, f"{key} is not under {read.prefix} (etcd listed {keys(read)} there)")


def refused(read: Read) -> Verdict:
    """Only etcd's permission denied proves the role lacks the range."""
    if read.exit_code != 0 and PERMISSION_DENIED in read.output:
        return Verdict(True, f"{read.prefix} refused ({PERMISSION_DENIED})")
    if read.exit_code == 0 and not read.keys:
        return Verdict(
            False,
            f"{read.prefix} answered with no keys instead of {PERMISSION_DENIED}; an empty answer is no proof "
            "(is etcd auth enabled?)",
        )
    if read.exit_code == 0:
        return Verdict(False, f"{read.prefix} is readable: etcd listed {keys(read)}, e.g. {read.keys[0]}")
    return Verdict(False, f"{read.prefix} failed without {PERMISSION_DENIED}: {read.error}")


def marker_absent(read: Read, path: str) -> Verdict:
    """path is the marker's key below its prefix: configmaps/<namespace>/<name>."""
    if read.exit_code != 0:
        return Verdict(False, f"cannot read {read.prefix}: {read.error}")
    leaked = [key for key in read.keys if key.endswith(f"/{path}")]
    if leaked:
        return Verdict(False, f"the marker is also under another tenant's prefix: {leaked[0]}")
    return Verdict(True, f"marker not under {read.prefix} ({keys(read)})")


def identity(read: Read, user: str, certificate: str, cn: str | None) -> Verdict:
    """etcd answers `user get` for the caller's own user and nobody else's (etcd-io/etcd
    server/etcdserver/apply_auth.go@v3.5.1: UserGet), so the answer says whose certificate this is; cn is the
    certificate's CN as read from its secret, to name the user etcd took instead (None: unread)."""
    if read.exit_code == 0:
        return Verdict(True, f"etcd takes it as user {user}")
    its = f"etcd user {cn} (its CN)" if cn else "another etcd user (`openssl x509 -noout -subject` of its server.crt)"
    if PERMISSION_DENIED in read.output:
        return Verdict(
            False,
            f"the certificate {certificate} is {its}, not {user}, the user this check inspects (Kamaji's "
            f"status.storage.setup.user): the tenant's API server acts as {cn or 'that user'}",
        )
    if USER_NOT_FOUND in read.output:
        inspected = "" if cn == user else f"; the user this check inspects is {user}"
        cn_named = f" {cn}" if cn else ""
        return Verdict(False, f"the certificate {certificate}'s CN{cn_named} is no etcd user at all{inspected}")
    return Verdict(False, f"cannot ask etcd whose certificate {certificate} is: {read.error}")


def certificate_cn(management: Kubectl, namespace: str, secret: str) -> str | None:
    """The CN of the tenant's client certificate (only the public server.crt is read), or None if unreadable."""
    read = management.run("get", "secret", secret, "-n", namespace, "-o", "jsonpath={.data.server\\.crt}")
    if not read.ok:
        return None
    try:
        return common_name(base64.b64decode(read.stdout.strip(), validate=True).decode(errors="replace"))
    except ValueError:
        return None


def auth_enabled(read: Read) -> Verdict:
    if read.exit_code != 0:
        return Verdict(False, f"cannot read etcd's auth status: {read.error}")
    if read.document.get("enabled") is True:
        return Verdict(True, "etcd authentication is enabled")
    return Verdict(False, "etcd authentication is disabled: every client reads and writes every tenant's keys")


@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


# CVE-2023-32082 (GHSA-3p4g-rcw5-8298): LeaseTimeToLive with keys answers every authenticated user with the keys
# attached to a lease, whoever may read them; fixed in etcd 3.4.26 and 3.5.9, never on older lines.
CVE_2023_32082 = "CVE-2023-32082"
LEAK_FIXED = (((3, 5), Version(3, 5, 9)), ((3, 4), Version(3, 4, 26)))


def parse_version(text: str) -> Version | None:
    """etcd's server version as `endpoint status` prints it ("3.5.1"); None for anything else."""
    found = re.fullmatch(r"v?([0-9]{1,4})\.([0-9]{1,4})\.([0-9]{1,4})", text.strip())
    return Version(*map(int, found.groups())) if found else None


def known_leak(version: Version) -> str:
    """The first release of version's line without a known cross-tenant leak, or "" when it has none."""
    for line, fixed in LEAK_FIXED:
        if (version.major, version.minor) == line[:2] and version < fixed:
            return f"below {fixed}"
    if version < LEAK_FIXED[-1][1]:  # lines older than 3.4 never got the fix
        return f"older than {LEAK_FIXED[-1][1]}"
    return ""


# etcdctl's line for each member `endpoint status` could not reach; it lists the others after them, and exits 1
# (etcd-io/etcd etcdctl/ctlv3/command/ep_command.go@v3.6.12: epStatusCommandFunc).
UNREACHED = "Failed to get the status of endpoint "


def server_versions(read: Read) -> Verdict:
    """Every member's version, as `endpoint status -w json` lists them, is one without a known leak."""
    if read.exit_code != 0:
        unreached = [line.strip() for line in read.output.splitlines() if line.startswith(UNREACHED)]
        return Verdict(False, f"cannot read etcd's version: {'; '.join(unreached) or read.error}")
    members = read.statuses
    if not members:
        return Verdict(False, f"cannot read etcd's version: endpoint status listed no member ({read.error})")
    by_version: dict[str, list[str]] = {}
    for member in members:
        version = str((member.get("Status") or {}).get("version", ""))
        by_version.setdefault(version, []).append(str(member.get("Endpoint", "?")))
    problems, fine = [], []
    for text, endpoints in sorted(by_version.items()):
        where = f"{', '.join(sorted(set(endpoints)))}"
        version = parse_version(text)
        if version is None:
            problems.append(f"{where} reports version {text!r}, which this check cannot judge")
        elif leak := known_leak(version):
            problems.append(
                f"etcd {version} ({where}) is {leak}, open to {CVE_2023_32082}: any authenticated user lists "
                "the keys attached to a lease, across tenants; upgrade etcd"
            )
        else:
            fine.append(str(version))
    if problems:
        return Verdict(False, "; ".join(problems))
    return Verdict(True, f"etcd {', '.join(fine)} on every member (past the fixes for {CVE_2023_32082})")


def names(read: Read, field: str) -> list[str]:
    found = read.document.get(field) or []
    return [name for name in found if isinstance(name, str)]


@dataclass(frozen=True)
class Survey:
    """What the root credentials read of etcd's users and roles: each user's roles, each role's permissions."""

    user_roles: dict[str, list[str]]
    role_permissions: dict[str, list[Permission]]
    problems: list[str]  # what could not be read

    def reach(self, user: str) -> list[tuple[str, Permission]]:
        """(role, permission) for every permission the user holds; role root counts as every key."""
        held = []
        for role in self.user_roles[user]:  # callers ask only of users the survey read
            if role == ROOT_ROLE:
                held.append((role, Permission("READWRITE", b"\0", OPEN_ENDED)))
            held += [(role, permission) for permission in self.role_permissions.get(role, [])]
        return held


def survey(users: list[str], roles: list[str], answers: dict[str, Read]) -> Survey:
    user_roles, role_permissions, problems = {}, {}, []
    for index, user in enumerate(users):
        read = answers[f"user-{index}"]
        if read.exit_code != 0:
            problems.append(f"cannot read {read.prefix}: {read.error}")
        else:
            user_roles[user] = names(read, "roles")
    for index, role in enumerate(roles):
        read = answers[f"role-{index}"]
        try:
            if read.exit_code != 0:
                raise UnreadablePermission(read.error)
            role_permissions[role] = permissions(read.document)
        except UnreadablePermission as why:
            problems.append(f"cannot read {read.prefix}: {why}")
    return Survey(user_roles, role_permissions, problems)


def verb(kind: str) -> str:
    return {"READ": "read", "WRITE": "write", "READWRITE": "read and write"}[kind]


def whose(spans: list[Span], owners: dict[str, str]) -> str:
    """Whose prefixes spans reach into, e.g. "tenant tenant-b's /tenants_tenant_b/"."""
    reached = [
        f"{owner}'s /{schema}/"
        for schema, owner in sorted(owners.items())
        if any(intersection(span, tenant_range(schema)) for span in spans)
    ]
    return f", including {', '.join(reached)}" if reached else ""


def own_reach(found: Survey, user: str, schema: str, owners: dict[str, str]) -> list[Verdict]:
    """The union of the tenant's user's grants is exactly its range, for reading and for writing."""
    own = tenant_range(schema)
    if user not in found.user_roles:
        return [Verdict(False, f"etcd user {user} does not exist")]
    held = found.reach(user)
    verdicts = []
    for role, permission in held:
        beyond = minus([permission.span], own)
        if not beyond:
            continue
        where = (
            f"all of it outside {own}"
            if beyond == [permission.span]
            else f"beyond {own} it can {verb(permission.kind)} {', '.join(map(str, beyond))}"
        )
        granted = f"etcd user {user}'s role {role} grants {permission}: {where}{whose(beyond, owners)}"
        verdicts.append(Verdict(False, granted))
    gaps = {}
    for kinds, what in ((READS, "read"), (WRITES, "write")):
        left = [own]
        for span in union([permission.span for _, permission in held if permission.kind in kinds]):
            left = [gap for part in left for gap in minus([part], span)]
        if left:
            gaps[what] = ", ".join(map(str, left))
    if gaps and len(set(gaps.values())) == 1 and len(gaps) == 2:
        verdicts.append(Verdict(False, f"etcd user {user} can neither read nor write {gaps['read']} of its own range"))
    else:
        verdicts += [
            Verdict(False, f"etcd user {user} cannot {what} {left} of its own range") for what, left in gaps.items()
        ]
    if not verdicts:  # then some role of the user grants its range: it has at least one
        roles = ", ".join(found.user_roles[user])
        verdicts.append(Verdict(True, f"etcd user {user} (roles: {roles}) reads and writes exactly {own}"))
    return verdicts


def other_readers(found: Survey, user: str, tenant: str, schema: str, users: dict[str, str]) -> list[Verdict]:
    """Nobody but root and the tenant's own user reaches the tenant's range; users: etcd user -> lab tenant."""
    own = tenant_range(schema)
    verdicts = []
    for other in sorted(found.user_roles):
        if other in (ROOT_USER, user):
            continue
        who = f"etcd user {other}" + (f" (tenant {users[other]})" if other in users else "")
        for role, permission in found.reach(other):
            if shared := intersection(permission.span, own):
                verdicts.append(
                    Verdict(
                        False,
                        f"{who} can {verb(permission.kind)} tenant {tenant}'s keys {shared}: its role {role} "
                        f"grants {permission}",
                    )
                )
    if not verdicts:
        verdicts.append(Verdict(True, f"no etcd user but {ROOT_USER} and {user} reaches {own}"))
    return verdicts


def shared_schema(tenant: Tenant, others: list[Tenant]) -> Verdict:
    sharing = [other.name for other in others if other.data_store_schema == tenant.data_store_schema]
    if sharing:
        return Verdict(
            False,
            f"tenants {tenant.name} and {', '.join(sharing)} have the same dataStoreSchema "
            f"{tenant.data_store_schema}: each reads and writes the other's keys",
        )
    return Verdict(True, f"no other tenant has dataStoreSchema {tenant.data_store_schema}")


def tenant_schema(tcp: dict[str, Any]) -> str:
    """The tenant's etcd prefix and role name: the schema Kamaji set up (status.storage.setup.schema), else the one
    the spec names."""
    return tcp.get("status", {}).get("storage", {}).get("setup", {}).get("schema") or tcp.get("spec", {}).get(
        "dataStoreSchema", ""
    )


def tenant_user(tcp: dict[str, Any]) -> str:
    """The tenant's etcd user, the CN of its datastore certificate: Kamaji takes status.storage.setup.user, else
    spec.dataStoreUsername, else the TenantControlPlane's UID (clastix/kamaji
    internal/resources/datastore/datastore_storage_config.go@ddbabd87ed0e; UID since 4232a9d)."""
    return (
        tcp.get("status", {}).get("storage", {}).get("setup", {}).get("user")
        or tcp.get("spec", {}).get("dataStoreUsername")
        or tcp.get("metadata", {}).get("uid", "")
    )


@dataclass(frozen=True)
class RootCredentials:
    """Where the root etcdctl pods run (the client certificate's namespace) and the secret items they mount; the CA
    certificate, when it lives in another namespace, is copied beside them for as long as the check runs."""

    namespace: str
    files: dict[tuple[str, str], str]  # (secret, key) -> file
    ca_elsewhere: tuple[str, str, str] | None = None  # (namespace, secret, key) of the CA certificate to copy


def root_credentials(store: dict[str, Any]) -> RootCredentials | str:
    """The DataStore's own client certificate, or why no pod can use it.

    kamaji-etcd's DataStore refers to its root client certificate and CA by secret
    (clastix/kamaji-etcd charts/kamaji-etcd/templates/etcd_datastore.yaml@92f31f0).
    """
    tls = store.get("spec", {}).get("tlsConfig") or {}
    client = tls.get("clientCertificate") or {}
    wanted = {
        manifests.ETCD_CA: (tls.get("certificateAuthority") or {}).get("certificate") or {},
        manifests.ETCD_CERT: client.get("certificate") or {},
        manifests.ETCD_KEY: client.get("privateKey") or {},
    }
    references = {path: item.get("secretReference") or {} for path, item in wanted.items()}
    missing = [path for path, reference in references.items() if not reference.get("name")]
    if missing:
        return f"DataStore {store_name(store)} names no secret for {', '.join(missing)} (root credentials)"
    if any(not reference.get("namespace") for reference in references.values()):
        return f"DataStore {store_name(store)} does not name a namespace for each secret of its root credentials"
    ca, cert, key = (references[path] for path in (manifests.ETCD_CA, manifests.ETCD_CERT, manifests.ETCD_KEY))
    if cert["namespace"] != key["namespace"]:
        # A private key is never copied: a pod mounts secrets of its own namespace only.
        return (
            f"DataStore {store_name(store)} keeps its root client certificate and key in two namespaces "
            f"({cert['namespace']}, {key['namespace']}); no pod mounts both"
        )
    files = {(reference["name"], reference.get("keyPath", "")): path for path, reference in references.items()}
    if ca["namespace"] == cert["namespace"]:
        return RootCredentials(cert["namespace"], files)
    files = {item: path for item, path in files.items() if path != manifests.ETCD_CA}
    return RootCredentials(cert["namespace"], files, (ca["namespace"], ca["name"], ca.get("keyPath", "")))


@contextmanager
def mountable(lab: Lab, credentials: RootCredentials) -> Iterator[dict[tuple[str, str], str]]:
    """The secret items a root pod mounts; a CA certificate from another namespace is copied into a Secret of the
    pods' namespace (only the public certificate is read, never the CA's key) and deleted when the check ends."""
    if credentials.ca_elsewhere is None:
        yield credentials.files
        return
    management, namespace = lab.management, credentials.namespace
    source_namespace, source, key = credentials.ca_elsewhere
    escaped = key.replace(".", "\\.")
    read = management.run("get", "secret", source, "-n", source_namespace, "-o", f"jsonpath={{.data.{escaped}}}")
    encoded = management.checked(read).stdout.strip()
    if not encoded:
        raise CheckFailed(f"secret {source_namespace}/{source} has no {key}, the DataStore's CA certificate")
    copy = f"validate-datastore-ca-{secrets.token_hex(3)}"
    management.must_create(manifests.certificate_copy(copy, manifests.ETCD_CA, encoded), "-n", namespace)
    try:
        yield credentials.files | {(copy, manifests.ETCD_CA): manifests.ETCD_CA}
    finally:
        remove(lab, "secret", namespace, copy)


def store_name(store: dict[str, Any]) -> str:
    return store.get("metadata", {}).get("name", "?")


def etcd_endpoints(store: dict[str, Any]) -> str:
    endpoints = store.get("spec", {}).get("endpoints") or []
    if not endpoints:
        raise CheckFailed(f"DataStore {store_name(store)} lists no endpoints")
    return ",".join(endpoint if "://" in endpoint else f"https://{endpoint}" for endpoint in endpoints)


@dataclass(frozen=True)
class Member:
    """The etcd member a DataStore names first, as kamaji-etcd's DataStore names them: a StatefulSet pod's DNS
    name <pod>.<service>.<namespace>.svc.<domain>:<port>, or with datastore.headless false its client Service's
    <service>.<namespace>.svc.<domain>:<port> (clastix/kamaji-etcd charts/kamaji-etcd/templates/_helpers.tpl
    @92f31f0: etcd.endpointsYAML, client.endpointsYAML)."""

    namespace: str
    kind: str  # "pod" or "service", as `kubectl port-forward` names what it forwards to
    name: str
    port: int

    @property
    def statefulset(self) -> str | None:
        """A StatefulSet names its pods <statefulset>-<ordinal> (kubernetes/kubernetes
        pkg/controller/statefulset/stateful_set_utils.go: getPodName)."""
        found = re.fullmatch(r"(.+)-[0-9]+", self.name) if self.kind == "pod" else None
        return found[1] if found else None

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def first_member(store: dict[str, Any]) -> Member:
    endpoint = etcd_endpoints(store).split(",")[0].split("://", 1)[1]
    host, _, port = endpoint.rpartition(":")
    labels = host.split(".")
    if port.isdigit() and len(labels) > 3 and labels[3] == "svc":
        return Member(labels[2], "pod", labels[0], int(port))
    if port.isdigit() and len(labels) > 2 and labels[2] == "svc":
        return Member(labels[1], "service", labels[0], int(port))
    raise CheckFailed(
        f"DataStore {store_name(store)}'s endpoint {endpoint} is no cluster DNS name "
        "(<pod>.<service>.<namespace>.svc... or <service>.<namespace>.svc...): the lab cannot tell which etcd it is"
    )


def etcd_image(management: Kubectl, store: dict[str, Any], kamaji_provided: bool) -> str:
    """The DataStore's own etcd image, so etcdctl speaks its version: its first member's StatefulSet's."""
    member = first_member(store)
    statefulset, namespace = member.statefulset, member.namespace
    if statefulset is None:
        raise CheckSkipped(
            f"DataStore {store_name(store)} names its etcd by {member}, not by its pods: this check reads the etcd "
            "image of the StatefulSet whose pods a DataStore names"
        )
    if kamaji_provided:
        found = management.run("get", "statefulset", statefulset, "-n", namespace, "--ignore-not-found")
        if not management.checked(found).stdout.strip():
            raise CheckSkipped(
                f"kamaji is provided, and its DataStore {store_name(store)} is not the Kamaji chart's etcd: there is "
                f"no StatefulSet {namespace}/{statefulset} whose etcd image could read it"
            )
    found = management.get("statefulset", statefulset, "-n", namespace)
    for container in found.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []:
        if container.get("name") == ETCD_CONTAINER and container.get("image"):
            return container["image"]
    raise CheckFailed(f"StatefulSet {namespace}/{statefulset} has no {ETCD_CONTAINER} container image")


@dataclass(frozen=True)
class EtcdAccess:
    """How one half of the check reaches the DataStore's etcd: etcdctl pods in `namespace` of the lab's management
    cluster, running the DataStore's own etcd `image` against its `endpoints`, with `files` as client credentials."""

    lab: Lab
    namespace: str
    image: str
    endpoints: str
    files: dict[tuple[str, str], str]  # (secret, key) -> file


def read_datastore(access: EtcdAccess, commands: dict[str, tuple[str, list[str]]]) -> dict[str, Read]:
    """Run one etcdctl pod in the management cluster, a container per command (name: (what it reads, etcdctl
    arguments)); always delete it."""
    lab, namespace = access.lab, access.namespace
    management = lab.management
    name = f"validate-datastore-{secrets.token_hex(3)}"
    try:
        arguments = {container: argv for container, (_, argv) in commands.items()}
        manifest = manifests.etcdctl_pod(name, access.image, access.endpoints, access.files, arguments)
        management.must_create(manifest, "-n", namespace)

        def ended() -> tuple[bool, dict[str, Any]]:
            pod = management.get("pod", name, "-n", namespace)
            return phase(pod) in ("Succeeded", "Failed"), pod

        finished, pod = poll(lab.clock, READ_TIMEOUT, ended)
        if not finished:
            raise CheckFailed(f"etcdctl pod {namespace}/{name} did not finish in {READ_TIMEOUT}s: {describe_pod(pod)}")
        codes = exit_codes(pod)
        return {
            container: Read(what, codes[container], container_log(management, namespace, name, container))
            for container, (what, _) in commands.items()
        }
    finally:
        remove(lab, "pod", namespace, name)


def exit_codes(pod: dict[str, Any]) -> dict[str, int]:
    """Each container's exit code: in a pod that has ended, every container has terminated."""
    return {status["name"]: status["state"]["terminated"]["exitCode"] for status in pod["status"]["containerStatuses"]}


def container_log(management: Kubectl, namespace: str, pod: str, container: str) -> str:
    return management.checked(management.run("logs", "-n", namespace, pod, "-c", container)).stdout


def remove(lab: Lab, kind: str, namespace: str, name: str) -> None:
    """Delete what the check made in the management cluster; what stays behind is a warning with its command."""
    management = lab.management
    try:
        deleted = management.run("delete", kind, name, "-n", namespace, "--ignore-not-found", "--wait=false")
        problem = "" if deleted.ok else deleted.error
    except (CheckFailed, CheckSkipped) as unreachable:
        problem = str(unreachable)
    if problem:
        lab.warnings.append(
            f"management: {kind} {namespace}/{name} was not deleted ({problem}); "
            f"remove it with `{management.hint} -n {namespace} delete {kind} {name}`"
        )


def prefix_of(tenant: Tenant) -> str:
    return f"/{tenant.data_store_schema}/"


@per_tenant(
    "datastore",
    "only the tenant's own etcd user and root reach its keys, exactly as Kamaji grants them",
)
def datastore(lab: Lab, tenant: Tenant) -> str:
    tcp = lab.management.get(TCP_RESOURCE, tenant.name, "-n", tenant.namespace)
    storage = tcp.get("status", {}).get("storage", {})
    if moving := between_stores(tcp):
        raise CheckFailed(f"tenant {tenant.name} is not on one DataStore: {moving}")
    # Kamaji's webhook fills in spec.dataStore when a tenant names none; the output says which that is.
    store_ref = used_store(tcp) or lab.outputs.platform.data_store
    store = lab.management.get(DATASTORE_RESOURCE, store_ref)
    driver = store.get("spec", {}).get("driver", "")
    if driver != "etcd":
        raise CheckSkipped(f"DataStore {store_ref} uses driver {driver or 'unknown'}; this check reads etcd")
    certificate = storage.get("certificate", {}).get("secretName") or f"{tenant.name}-datastore-certificate"
    kamaji_provided = lab.outputs.platform.is_provided("kamaji")
    endpoints, image = etcd_endpoints(store), etcd_image(lab.management, store, kamaji_provided)
    others = [other for other in lab.tenants if other.name != tenant.name]
    user, kubectl = tenant_user(tcp), lab.kubectl(tenant)
    secret = f"{tenant.namespace}/{certificate}"
    # A DataStore other than the platform's that no other lab tenant names is the tenant's own: nothing of anyone
    # else belongs in it.
    try:
        shared = {lab.outputs.platform.data_store} | {name for other in others for name in stores_of(lab, other)}
    except CheckFailed:  # another tenant's DataStores are unknown: left_behind makes the result UNPROVEN
        shared = {store_ref}
    own_store = store_ref if store_ref not in shared else None

    with lab.scratch_namespace(kubectl, "datastore") as namespace:
        marker = f"marker-{secrets.token_hex(4)}"
        kubectl.must_create(manifests.config_map(marker, {"value": secrets.token_hex(8)}), "-n", namespace)
        path = f"configmaps/{namespace}/{marker}"
        reads = {"identity": (f"etcd user {user}", ["user", "get", user, "-w", "json"])}
        reads |= listings({"own": f"{prefix_of(tenant)}configmaps/{namespace}/", "root": "/"} | other_prefixes(others))
        files = {(certificate, key): file for key, file in TENANT_CERTIFICATE_KEYS.items()}
        tenant_access = EtcdAccess(lab, tenant.namespace, image, endpoints, files)
        answers = read_datastore(tenant_access, reads)
        asked = answers.pop("identity")
        cn = certificate_cn(lab.management, tenant.namespace, certificate) if asked.exit_code else None
        verdicts = [identity(asked, user, secret, cn)]
        verdicts.append(marker_found(answers.pop("own"), f"{prefix_of(tenant)}{path}"))
        verdicts += [refused(read) for read in answers.values()]
        root_half = check_with_root(tenant_access, store, tenant, user, others, path, own_store)

    halves = [(f"the tenant's certificate {secret}", verdicts)]
    unproven = [f"the root-credential half could not run: {root_half}"] if isinstance(root_half, str) else []
    halves += [] if isinstance(root_half, str) else [root_half]
    for left in left_behind(lab, tenant, tcp, store, user):
        if isinstance(left, str):
            unproven.append(left)
        else:
            halves.append(left)
    halves.append(("the stack outputs", [shared_schema(tenant, others)]))
    problems = [
        f"{who}: {'; '.join(verdict.what for verdict in found if not verdict.good)}"
        for who, found in halves
        if not all(verdict.good for verdict in found)
    ]
    if problems:
        raise CheckFailed(". ".join(problems + unproven))
    evidence = ". ".join(f"{who}: {'; '.join(verdict.what for verdict in found)}" for who, found in halves)
    if unproven:
        # The tenant's own probes cannot see a grant on part of another prefix, nor who else reaches this one,
        # nor what another DataStore still holds of it.
        raise CheckUnproven(
            f"{'; '.join(unproven)}; without it that part of the proof was not looked at. What was seen: {evidence}"
        )
    return evidence


def used_store(tcp: dict[str, Any]) -> str:
    """The DataStore the tenant's data is in: status.storage.dataStoreName, which Kamaji sets once the tenant runs
    on it and changes only after a migration to spec.dataStore completed (clastix/kamaji
    internal/resources/datastore/datastore_storage_config.go@26.8.2-edge); spec.dataStore before the first."""
    return tcp.get("status", {}).get("storage", {}).get("dataStoreName") or tcp.get("spec", {}).get("dataStore") or ""


def named_stores(tcp: dict[str, Any]) -> set[str]:
    """The DataStores a TenantControlPlane names: spec.dataStore and status.storage.dataStoreName."""
    return {used_store(tcp), tcp.get("spec", {}).get("dataStore") or ""} - {""}


def between_stores(tcp: dict[str, Any]) -> str:
    """Why Kamaji has the tenant between two DataStores, or "" when it is on one."""
    spec, status = tcp.get("spec", {}).get("dataStore"), tcp.get("status", {}).get("storage", {}).get("dataStoreName")
    state = tcp.get("status", {}).get("kubernetesResources", {}).get("version", {}).get("status", "")
    if state == MIGRATING:
        return f"Kamaji is moving it to DataStore {spec} (its status is {MIGRATING})"
    if spec and status and spec != status:
        return f"it is on DataStore {status} and its spec names {spec}: a move has not finished"
    return ""


def stores_of(lab: Lab, tenant: Tenant) -> set[str]:
    """The DataStores the tenant's TenantControlPlane names; CheckFailed when it cannot be read."""
    return named_stores(lab.management.get(TCP_RESOURCE, tenant.name, "-n", tenant.namespace))


def lab_stores(lab: Lab) -> tuple[set[str], list[str]]:
    """The lab's DataStores: the platform's and every one a lab tenant's TenantControlPlane names; and the tenants
    whose TenantControlPlane could not be read (a DataStore only they name would be missed)."""
    stores, unread = {lab.outputs.platform.data_store}, []
    for tenant in lab.tenants:
        try:
            stores |= stores_of(lab, tenant)
        except CheckFailed as why:
            unread.append(f"{tenant.name} ({why})")
    return stores, unread


def etcd_of(endpoint: str) -> str:
    """One name per etcd for a DataStore endpoint: an in-cluster one (<...>.<namespace>.svc[.cluster.local]) is its
    namespace's etcd, so a pod's and a Service's names of one etcd match; any other its host and port, any case.
    scripts/check-datastore-move.sh (member) reads endpoints the same way."""
    address = endpoint.lower().split("://")[-1].split("/")[0]
    host, colon, port = address.rpartition(":")
    if not colon or "]" in port:  # no port, an IPv6 literal's last colon included ("[fd00::1]")
        host, port = address, "2379"
    host = host.rstrip(".").removesuffix(".cluster.local")
    labels = host.split(".")
    if len(labels) >= 3 and labels[-1] == "svc":
        return f"namespace {labels[-2]}"
    return f"{host}:{port}"


def same_etcd(store: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two DataStores name an etcd in common (etcd_of): then they are one etcd, whatever their names."""
    members = [{etcd_of(endpoint) for endpoint in item.get("spec", {}).get("endpoints") or []}
               for item in (store, other)]  # fmt: skip
    return bool(members[0] & members[1])


def left_behind(
    lab: Lab, tenant: Tenant, tcp: dict[str, Any], used: dict[str, Any], user: str
) -> list[tuple[str, list[Verdict]] | str]:
    """For every other lab DataStore, with its root credentials: none of the tenant's keys, nor its etcd user, nor
    its role is there (Kamaji's migration leaves them in the source: snapshot/leftovers.py says why); (whose
    credentials, verdicts), or why that DataStore could not be read. One that names a member of the DataStore the
    tenant uses is that etcd, already read."""
    stores, unread = lab_stores(lab)
    found: list[tuple[str, list[Verdict]] | str] = [
        f"the DataStores named by {', '.join(unread)} could not be searched for what tenant {tenant.name} left"
    ] if unread else []
    schema = tenant_schema(tcp) or tenant.data_store_schema
    for name in sorted(stores - {store_name(used)}):
        store = lab.management.get(DATASTORE_RESOURCE, name)
        # Kamaji moves a tenant only between DataStores of one driver (cmd/migrate/cmd.go@26.8.2-edge).
        if store.get("spec", {}).get("driver") != "etcd" or same_etcd(store, used):
            continue
        credentials = root_credentials(store)
        try:
            if isinstance(credentials, str):
                raise CheckSkipped(credentials)
            image = etcd_image(lab.management, store, lab.outputs.platform.is_provided("kamaji"))
        except (CheckFailed, CheckSkipped) as why:  # its etcd cannot be reached: this part of the proof is missing
            found.append(f"DataStore {name} could not be searched for what tenant {tenant.name} left: {why}")
            continue
        with mountable(lab, credentials) as files:
            access = EtcdAccess(lab, credentials.namespace, image, etcd_endpoints(store), files)
            answers = read_datastore(
                access,
                {
                    "keys": (f"/{schema}/", list_keys(f"/{schema}/")),
                    "user": (f"etcd user {user}", ["user", "get", user, "-w", "json"]),
                    "role": (f"etcd role {schema}", ["role", "get", schema, "-w", "json"]),
                },
            )
        (client_secret,) = {secret for (secret, _), file in files.items() if file == manifests.ETCD_CERT}
        verdicts = [
            nothing_left(answers["keys"], name, tenant.name),
            absent(answers["user"], USER_NOT_FOUND, name, tenant.name),
            absent(answers["role"], ROLE_NOT_FOUND, name, tenant.name),
        ]
        found.append((f"DataStore {name}'s root credentials {credentials.namespace}/{client_secret}", verdicts))
    return found


def nothing_left(read: Read, store: str, tenant: str) -> Verdict:
    if read.exit_code != 0:
        return Verdict(False, f"cannot read {read.prefix}: {read.error}")
    if read.keys:
        return Verdict(
            False,
            f"DataStore {store}, which tenant {tenant} no longer uses, still holds {keys(read)} under {read.prefix}, "
            f"e.g. {read.keys[0]}: {CLEAN.format(tenant=tenant)} removes them",
        )
    return Verdict(True, f"no key under {read.prefix}")


def absent(read: Read, not_found: str, store: str, tenant: str) -> Verdict:
    """etcd's own "not found" proves the user or role is gone; any other answer does not."""
    if read.exit_code != 0 and not_found in read.output:
        return Verdict(True, f"no {read.prefix}")
    if read.exit_code == 0:
        return Verdict(
            False,
            f"DataStore {store}, which tenant {tenant} no longer uses, still has {read.prefix}: "
            f"{CLEAN.format(tenant=tenant)} removes it",
        )
    return Verdict(False, f"cannot read {read.prefix}: {read.error}")


def check_with_root(
    tenant_access: EtcdAccess,
    store: dict[str, Any],
    tenant: Tenant,
    user: str,
    others: list[Tenant],
    path: str,
    own_store: str | None,
) -> tuple[str, list[Verdict]] | str:
    """With the DataStore's root credentials: auth is on, the version has no known leak, the tenant's user reaches
    exactly Kamaji's range and no other user reaches any of it, and the marker is under its own prefix and no
    other tenant's; (whose credentials, verdicts), or why this half cannot run. Its pods run the image and
    endpoints of `tenant_access`, the tenant's half. In the tenant's own DataStore (own_store), also: no other user,
    role or key is there.

    etcd refuses a read unless the whole range is granted (etcd-io/etcd server/auth/range_perm_cache.go@v3.5.1),
    so the tenant's own probes cannot see a grant on part of another prefix: the grants themselves are read here.
    The root credentials must see the marker where it belongs, or their empty answers elsewhere prove nothing.
    """
    credentials = root_credentials(store)
    if isinstance(credentials, str):
        return credentials
    with mountable(tenant_access.lab, credentials) as files:
        root = replace(tenant_access, namespace=credentials.namespace, files=files)
        verdicts = root_verdicts(root, tenant, user, others, path, own_store)
    (client_secret,) = {secret for (secret, _), file in files.items() if file == manifests.ETCD_CERT}
    return f"the DataStore's root credentials {credentials.namespace}/{client_secret}", verdicts


def root_verdicts(
    root: EtcdAccess, tenant: Tenant, user: str, others: list[Tenant], path: str, own_store: str | None = None
) -> list[Verdict]:
    schema = tenant.data_store_schema
    commands = {
        "auth": ("etcd's auth status", ["auth", "status", "-w", "json"]),
        "version": ("etcd's version", ["endpoint", "status", "-w", "json"]),
        "users": ("etcd's users", ["user", "list", "-w", "json"]),
        "roles": ("etcd's roles", ["role", "list", "-w", "json"]),
    }
    # Alone, the tenant has no other prefix to search for its marker.
    commands |= listings({"own": prefix_of(tenant)} | other_prefixes(others)) if others else {}
    if own_store:
        commands["every"] = ("every key", ["get", "", "--from-key", "--keys-only"])
    answers = read_datastore(root, commands)
    every = answers.pop("every", None)
    verdicts = [auth_enabled(answers.pop("auth")), server_versions(answers.pop("version"))]
    listed = [answers.pop("users"), answers.pop("roles")]
    if unread := [f"cannot read {read.prefix}: {read.error}" for read in listed if read.exit_code != 0]:
        verdicts += [Verdict(False, why) for why in unread]
    else:
        users = [name for name in names(listed[0], "users") if name != ROOT_USER]
        roles = [name for name in names(listed[1], "roles") if name != ROOT_ROLE]
        found = survey(users, roles, read_grants(root, users, roles))
        verdicts += [Verdict(False, problem) for problem in found.problems]
        owners = {role: "another tenant" for role in roles if role != schema}
        owners |= {
            other.data_store_schema: f"tenant {other.name}" for other in others if other.data_store_schema != schema
        }
        verdicts += own_reach(found, user, schema, owners)
        named = tenant_users(root.lab, others)
        verdicts += other_readers(found, user, tenant.name, schema, named)
        if own_store:
            verdicts.append(alone(found, users, roles, user, schema, named, own_store))
    if every is not None:
        verdicts.append(only_its_keys(every, prefix_of(tenant), own_store or ""))
    if others:
        verdicts.append(marker_found(answers.pop("own"), f"{prefix_of(tenant)}{path}"))
        verdicts += [marker_absent(read, path) for read in answers.values()]
    return verdicts


def alone(
    found: Survey, users: list[str], roles: list[str], user: str, schema: str, named: dict[str, str], store: str
) -> Verdict:
    """In the tenant's own DataStore no etcd user but root and its own, and no role but root, its own (Kamaji's
    role <schema>) and those its user holds."""
    strangers = [f"etcd user {name}" + (f" (tenant {named[name]})" if name in named else "")
                 for name in users if name != user]  # fmt: skip
    held = set(found.user_roles.get(user, [])) | {schema}
    strangers += [f"role {name}" for name in roles if name not in held]
    if strangers:
        return Verdict(False, f"DataStore {store} is this tenant's own, yet it also has {', '.join(strangers)}")
    return Verdict(True, f"DataStore {store} has no etcd user or role but root and this tenant's")


def only_its_keys(read: Read, prefix: str, store: str) -> Verdict:
    """Every key in the tenant's own DataStore is under its prefix; etcdctl's client logs its warnings as JSON
    lines, which are no keys."""
    if read.exit_code != 0:
        return Verdict(False, f"cannot read {read.prefix} of DataStore {store}: {read.error}")
    lines = [line.strip() for line in read.output.splitlines() if line.strip()]
    foreign = [line for line in lines if not line.startswith(prefix) and not warning(line)]
    if foreign:
        return Verdict(
            False,
            f"DataStore {store} is this tenant's own, yet {len(foreign)} of its keys are outside {prefix}, "
            f"e.g. {foreign[0]}",
        )
    return Verdict(True, f"every key of DataStore {store} is under {prefix}")


def warning(line: str) -> bool:
    """A log line of etcdctl's client (JSON with a level and a message), not a key."""
    try:
        found = json.loads(line)
    except ValueError:
        return False
    return isinstance(found, dict) and "level" in found and "msg" in found


def read_grants(root: EtcdAccess, users: list[str], roles: list[str]) -> dict[str, Read]:
    """Every user's roles and every role's permissions, a container each (etcdctl reads one per call)."""
    commands = {
        f"user-{index}": (f"etcd user {name}", ["user", "get", name, "-w", "json"]) for index, name in enumerate(users)
    }
    commands |= {
        f"role-{index}": (f"etcd role {name}", ["role", "get", name, "-w", "json"]) for index, name in enumerate(roles)
    }
    return read_datastore(root, commands) if commands else {}


def tenant_users(lab: Lab, others: list[Tenant]) -> dict[str, str]:
    """etcd user -> the lab's tenant it belongs to, to name a reader; a tenant that cannot be read is left out."""
    users = {}
    for other in others:
        try:
            users[tenant_user(lab.management.get(TCP_RESOURCE, other.name, "-n", other.namespace))] = other.name
        except CheckFailed:
            continue
    return users


def other_prefixes(others: list[Tenant]) -> dict[str, str]:
    return {f"other-{index}": prefix_of(other) for index, other in enumerate(others)}


def listings(prefixes: dict[str, str]) -> dict[str, tuple[str, list[str]]]:
    """A container per prefix, listing its keys."""
    return {container: (prefix, list_keys(prefix)) for container, prefix in prefixes.items()}
