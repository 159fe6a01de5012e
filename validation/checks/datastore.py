"""Check 3b: each tenant's etcd certificate reads its own prefix and is refused everywhere else.

Kamaji gives every tenant an etcd user whose role may read and write only
/<dataStoreSchema>/ (clastix/kamaji internal/datastore/etcd.go@26.8.2-edge: GrantPrivileges,
buildKey), and points the tenant's API server there with --etcd-prefix=/<schema>
(internal/builders/controlplane/deployment.go@26.8.2-edge), so a ConfigMap is stored
at /<schema>/configmaps/<namespace>/<name>. Two independent halves prove it: the tenant's
own certificate probes etcd, and the DataStore's root credentials read the tenant's user,
its role and where the marker landed.
"""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import dataclass
from typing import Any

from validation import manifests
from validation.checks.base import per_tenant
from validation.checks.tenancy import TCP_RESOURCE
from validation.host import poll
from validation.kube import Kubectl
from validation.lab import Lab
from validation.pods import describe_pod, phase
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import Tenant

DATASTORE_RESOURCE = "datastores.kamaji.clastix.io"
# The etcd behind DataStore default: Kamaji's kamaji-etcd subchart with fullnameOverride kamaji-etcd
# (clastix/kamaji charts/kamaji/values.yaml@26.8.2-edge), a StatefulSet whose container is "etcd"
# (clastix/kamaji-etcd charts/kamaji-etcd/templates/etcd_sts.yaml@92f31f0).
ETCD_STATEFULSET, ETCD_NAMESPACE, ETCD_CONTAINER = "kamaji-etcd", "kamaji-system", "etcd"
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
# etcd's permission types (etcd-io/etcd api/authpb/auth.pb.go@v3.6.12); etcdctl -w json prints the protobuf
# structs through encoding/json, so a READ (0) has no permType and keys are base64
# (etcdctl/ctlv3/command/printer.go, printer_json.go@v3.6.12).
PERMISSION_TYPES = {0: "READ", 1: "WRITE", 2: "READWRITE"}
OPEN_ENDED = "\0"  # a range end of one zero byte: every key from the start onward (etcd-io/etcd clientv3 WithFromKey)


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


def marker_found(read: Read, key: str) -> tuple[bool, str]:
    if read.exit_code != 0:
        return False, f"cannot read {read.prefix}: {read.error}"
    if key in read.keys:
        return True, f"found {key}"
    return False, f"{key} is not under {read.prefix} (etcd listed {keys(read)} there)"


def refused(read: Read) -> tuple[bool, str]:
    """Only etcd's permission denied proves the role lacks the range."""
    if read.exit_code != 0 and PERMISSION_DENIED in read.output:
        return True, f"{read.prefix} refused ({PERMISSION_DENIED})"
    if read.exit_code == 0 and not read.keys:
        return False, (
            f"{read.prefix} answered with no keys instead of {PERMISSION_DENIED}; an empty answer is no proof "
            "(is etcd auth enabled?)"
        )
    if read.exit_code == 0:
        return False, f"{read.prefix} is readable: etcd listed {keys(read)}, e.g. {read.keys[0]}"
    return False, f"{read.prefix} failed without {PERMISSION_DENIED}: {read.error}"


def marker_absent(read: Read, path: str) -> tuple[bool, str]:
    """path is the marker's key below its prefix: configmaps/<namespace>/<name>."""
    if read.exit_code != 0:
        return False, f"cannot read {read.prefix}: {read.error}"
    leaked = [key for key in read.keys if key.endswith(f"/{path}")]
    if leaked:
        return False, f"the marker is also under another tenant's prefix: {leaked[0]}"
    return True, f"marker not under {read.prefix} ({keys(read)})"


def own_roles(read: Read, role: str) -> tuple[bool, str]:
    """The tenant's etcd user holds Kamaji's role for its schema and no other."""
    if read.exit_code != 0:
        return False, f"cannot read {read.prefix}: {read.error}"
    roles = read.document.get("roles") or []
    if roles == [role]:
        return True, f"{read.prefix} has only role {role}"
    held = f"roles {', '.join(roles)}" if roles else "no role"
    return False, f"{read.prefix} has {held} instead of only {role}"


def describe_range(permission: dict[str, Any]) -> str:
    key = base64.b64decode(permission.get("key", "")).decode(errors="replace")
    end = base64.b64decode(permission.get("range_end", "")).decode(errors="replace")
    kind = PERMISSION_TYPES.get(permission.get("permType", 0), str(permission.get("permType")))
    if not end:
        return f"{kind} on key {key}"
    return f"{kind} on [{key}, {'<open ended>' if end == OPEN_ENDED else end + ')'}"


def own_range(read: Read, schema: str) -> tuple[bool, str]:
    """The role grants READWRITE on [/<schema>/, /<schema>0), as Kamaji grants it, and nothing else."""
    if read.exit_code != 0:
        return False, f"cannot read {read.prefix}: {read.error}"
    wanted = f"READWRITE on [/{schema}/, /{schema}0)"
    granted = [describe_range(permission) for permission in read.document.get("perm") or []]
    if granted == [wanted]:
        return True, f"{read.prefix} grants only {wanted}"
    others = [grant for grant in granted if grant != wanted]
    problems = [f"also grants {', '.join(others)}"] if others else []
    if wanted not in granted:
        problems.append(f"lacks {wanted}")
    return False, f"{read.prefix} {' and '.join(problems)}"


def tenant_user(tcp: dict[str, Any]) -> str:
    """The tenant's etcd user, the CN of its datastore certificate: Kamaji takes status.storage.setup.user, else
    spec.dataStoreUsername, else the TenantControlPlane's UID (clastix/kamaji
    internal/resources/datastore/datastore_storage_config.go@ddbabd87ed0e; UID since 4232a9d)."""
    return (
        tcp.get("status", {}).get("storage", {}).get("setup", {}).get("user")
        or tcp.get("spec", {}).get("dataStoreUsername")
        or tcp.get("metadata", {}).get("uid", "")
    )


def root_credentials(store: dict[str, Any]) -> tuple[str, dict[tuple[str, str], str]] | str:
    """(namespace, files) of the DataStore's own client certificate, or why it cannot be used.

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
    namespaces = {reference.get("namespace", "") for reference in references.values()}
    if len(namespaces) != 1 or not next(iter(namespaces)):
        return f"DataStore {store_name(store)} does not name one namespace for its root credentials; a pod mounts one"
    files = {(reference["name"], reference.get("keyPath", "")): path for path, reference in references.items()}
    return next(iter(namespaces)), files


def store_name(store: dict[str, Any]) -> str:
    return store.get("metadata", {}).get("name", "?")


def etcd_endpoints(store: dict[str, Any]) -> str:
    endpoints = store.get("spec", {}).get("endpoints") or []
    if not endpoints:
        raise CheckFailed(f"DataStore {store_name(store)} lists no endpoints")
    return ",".join(endpoint if "://" in endpoint else f"https://{endpoint}" for endpoint in endpoints)


def etcd_image(management: Kubectl, store: str, kamaji_provided: bool) -> str:
    """The DataStore's own etcd image, so etcdctl speaks its version."""
    if kamaji_provided:
        found = management.run("get", "statefulset", ETCD_STATEFULSET, "-n", ETCD_NAMESPACE, "--ignore-not-found")
        if not management.checked(found).stdout.strip():
            raise CheckSkipped(
                f"kamaji is provided, and its DataStore {store} is not the Kamaji chart's etcd: there is no "
                f"StatefulSet {ETCD_NAMESPACE}/{ETCD_STATEFULSET} whose etcd image could read it"
            )
    statefulset = management.get("statefulset", ETCD_STATEFULSET, "-n", ETCD_NAMESPACE)
    for container in statefulset.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []:
        if container.get("name") == ETCD_CONTAINER and container.get("image"):
            return container["image"]
    raise CheckFailed(f"StatefulSet {ETCD_NAMESPACE}/{ETCD_STATEFULSET} has no {ETCD_CONTAINER} container image")


def read_datastore(
    lab: Lab,
    namespace: str,
    image: str,
    endpoints: str,
    files: dict[tuple[str, str], str],
    commands: dict[str, tuple[str, list[str]]],
) -> dict[str, Read]:
    """Run one etcdctl pod in the management cluster, a container per command (name: (what it reads, etcdctl
    arguments)); always delete it."""
    management = lab.management
    name = f"validate-datastore-{secrets.token_hex(3)}"
    try:
        arguments = {container: argv for container, (_, argv) in commands.items()}
        management.must_create(manifests.etcdctl_pod(name, image, endpoints, files, arguments), "-n", namespace)

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
        remove_pod(lab, namespace, name)


def exit_codes(pod: dict[str, Any]) -> dict[str, int]:
    """Each container's exit code: in a pod that has ended, every container has terminated."""
    return {status["name"]: status["state"]["terminated"]["exitCode"] for status in pod["status"]["containerStatuses"]}


def container_log(management: Kubectl, namespace: str, pod: str, container: str) -> str:
    return management.checked(management.run("logs", "-n", namespace, pod, "-c", container)).stdout


def remove_pod(lab: Lab, namespace: str, name: str) -> None:
    management = lab.management
    try:
        deleted = management.run("delete", "pod", name, "-n", namespace, "--ignore-not-found", "--wait=false")
        problem = "" if deleted.ok else deleted.error
    except (CheckFailed, CheckSkipped) as unreachable:
        problem = str(unreachable)
    if problem:
        lab.warnings.append(
            f"management: pod {namespace}/{name} was not deleted ({problem}); "
            f"remove it with `{management.hint} -n {namespace} delete pod {name}`"
        )


def prefix_of(tenant: Tenant) -> str:
    return f"/{tenant.data_store_schema}/"


@per_tenant(
    "datastore",
    "tenant's etcd certificate reads only its prefix; root credentials find only Kamaji's grant for it",
)
def datastore(lab: Lab, tenant: Tenant) -> str:
    tcp = lab.management.get(TCP_RESOURCE, tenant.name, "-n", tenant.namespace)
    storage = tcp.get("status", {}).get("storage", {})
    # Kamaji's webhook fills in spec.dataStore when a tenant names none; the output says which that is.
    store_ref = storage.get("dataStoreName") or tcp.get("spec", {}).get("dataStore") or lab.outputs.platform.data_store
    store = lab.management.get(DATASTORE_RESOURCE, store_ref)
    driver = store.get("spec", {}).get("driver", "")
    if driver != "etcd":
        raise CheckSkipped(f"DataStore {store_ref} uses driver {driver or 'unknown'}; this check reads etcd")
    certificate = storage.get("certificate", {}).get("secretName") or f"{tenant.name}-datastore-certificate"
    kamaji_provided = lab.outputs.platform.is_provided("kamaji")
    endpoints, image = etcd_endpoints(store), etcd_image(lab.management, store_ref, kamaji_provided)
    others = [other for other in lab.tenants if other.name != tenant.name]
    kubectl = lab.kubectl(tenant)

    with lab.scratch_namespace(kubectl, "datastore") as namespace:
        marker = f"marker-{secrets.token_hex(4)}"
        kubectl.must_create(manifests.config_map(marker, {"value": secrets.token_hex(8)}), "-n", namespace)
        path = f"configmaps/{namespace}/{marker}"
        reads = listings({"own": f"{prefix_of(tenant)}configmaps/{namespace}/", "root": "/"} | other_prefixes(others))
        files = {(certificate, key): file for key, file in TENANT_CERTIFICATE_KEYS.items()}
        answers = read_datastore(lab, tenant.namespace, image, endpoints, files, reads)
        verdicts = [marker_found(answers.pop("own"), f"{prefix_of(tenant)}{path}")]
        verdicts += [refused(read) for read in answers.values()]
        root_half = check_with_root(lab, store, image, endpoints, tenant, tenant_user(tcp), others, path)

    halves = [(f"the tenant's certificate {tenant.namespace}/{certificate}", verdicts)]
    if isinstance(root_half, str):
        skipped = f"the root-credential half is skipped: {root_half}"
    else:
        halves.append(root_half)
        skipped = ""
    problems = [
        f"{who}: {'; '.join(what for good, what in found if not good)}"
        for who, found in halves
        if not all(good for good, _ in found)
    ]
    if problems:
        raise CheckFailed(". ".join(problems))
    evidence = [f"{who}: {'; '.join(what for _, what in found)}" for who, found in halves]
    return ". ".join(evidence + [skipped] if skipped else evidence)


def check_with_root(
    lab: Lab,
    store: dict[str, Any],
    image: str,
    endpoints: str,
    tenant: Tenant,
    user: str,
    others: list[Tenant],
    path: str,
) -> tuple[str, list[tuple[bool, str]]] | str:
    """With the DataStore's root credentials: the tenant's etcd user and role grant exactly Kamaji's range, and
    the marker is under its own prefix and no other tenant's; (whose credentials, verdicts), or why skipped.

    etcd refuses a read unless the whole range is granted (etcd-io/etcd server/auth/range_perm_cache.go@v3.6.12),
    so the tenant's own probes cannot see a grant on part of another prefix: the grants themselves are read here.
    The root credentials must see the marker where it belongs, or their empty answers elsewhere prove nothing.
    """
    credentials = root_credentials(store)
    if isinstance(credentials, str):
        return credentials
    namespace, files = credentials
    (client_secret,) = {secret for (secret, _), file in files.items() if file == manifests.ETCD_CERT}
    schema = tenant.data_store_schema
    commands = {
        "user": (f"etcd user {user}", ["user", "get", user, "-w", "json"]),
        "role": (f"etcd role {schema}", ["role", "get", schema, "-w", "json"]),
    }
    # Alone, the tenant has no other prefix to search for its marker.
    commands |= listings({"own": prefix_of(tenant)} | other_prefixes(others)) if others else {}
    answers = read_datastore(lab, namespace, image, endpoints, files, commands)
    verdicts = [own_roles(answers.pop("user"), schema), own_range(answers.pop("role"), schema)]
    if others:
        verdicts.append(marker_found(answers.pop("own"), f"{prefix_of(tenant)}{path}"))
        verdicts += [marker_absent(read, path) for read in answers.values()]
    return f"the DataStore's root credentials {namespace}/{client_secret}", verdicts


def other_prefixes(others: list[Tenant]) -> dict[str, str]:
    return {f"other-{index}": prefix_of(other) for index, other in enumerate(others)}


def listings(prefixes: dict[str, str]) -> dict[str, tuple[str, list[str]]]:
    """A container per prefix, listing its keys."""
    return {container: (prefix, list_keys(prefix)) for container, prefix in prefixes.items()}
