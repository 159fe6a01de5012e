"""Two real etcd DataStores on loopback and the management cluster's answers about them: DataStore default (the
shared one Kamaji's chart installs, holding tenant-a and tenant-b) and a second kamaji-etcd release of another
name, in another namespace, with its own CA and root certificate (a dedicated one), empty at first.

A tenant moves between them as Kamaji's migrate Job moves it (kamaji_migrate below); `kubectl port-forward` is a
stand-in on PATH that names the port of the server whose member it was asked for."""

from __future__ import annotations

import base64
import contextlib
import copy
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from snapshot import leftovers
from tests.etcd_pods import chart_secrets, provision
from tests.real_etcd import RealEtcd
from tests.snapshot_etcd import contents, etcdctl, put, root
from tests.test_validation import SCHEMAS, TENANTS, USERS, FakeLab, ok, recorded

# Another kamaji-etcd release's DataStore: names unlike the shared one's, so nothing can find it by a convention.
DEDICATED, DEDICATED_NAMESPACE, DEDICATED_RELEASE = "team-a-store", "store-of-a", "etcd-a"
DEDICATED_MEMBER = f"{DEDICATED_RELEASE}-0"
SHARED_MEMBER = "kamaji-etcd-0"
OUTPUTS = Path(__file__).parent / "fixtures/validation/outputs.json"


def dedicated_datastore() -> dict:
    """DataStore default as the chart renders it, for release etcd-a in namespace store-of-a (clastix/kamaji-etcd
    charts/kamaji-etcd/templates/etcd_datastore.yaml and _helpers.tpl@92f31f0: <sts>-<n>.<service>.<namespace>.svc,
    secrets <release>-ca and <release>-client-certs)."""
    store = copy.deepcopy(recorded("datastore-default.json"))
    store["metadata"]["name"] = DEDICATED
    store["spec"]["endpoints"] = [
        f"{DEDICATED_RELEASE}-{n}.{DEDICATED_RELEASE}.{DEDICATED_NAMESPACE}.svc.cluster.local:2379" for n in range(3)
    ]
    text = json.dumps(store).replace('"kamaji-system"', f'"{DEDICATED_NAMESPACE}"')
    return json.loads(text.replace('"kamaji-etcd-', f'"{DEDICATED_RELEASE}-'))


def secret_answers(server: RealEtcd, namespace: str, release: str) -> dict[tuple[str, str], dict[str, str]]:
    """(namespace, secret) -> its data (base64), the chart's secrets of release."""
    return {
        (namespace, name.replace("kamaji-etcd", release)): {
            key: base64.b64encode(path.read_bytes()).decode() for key, path in keys.items()
        }
        for (_, name), keys in chart_secrets(server).items()
    }


@dataclass
class TwoStores:
    """The shared and the dedicated etcd, the TenantControlPlanes, DataStores and Secrets that name them."""

    shared: RealEtcd
    dedicated: RealEtcd
    lab: FakeLab = field(default_factory=FakeLab)
    tcps: dict[str, dict] = field(default_factory=dict)
    jobs: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        provision(self.shared, SCHEMAS, USERS)
        self.shared.put(f"/{SCHEMAS['tenant-a']}/secrets/kube-system/bootstrap-token-abcdef", "token")
        self.dedicated.provision_root_and_enable_auth()
        self.tcps = {tenant: recorded(f"tcp-{tenant}.json") for tenant in TENANTS}
        lab = self.lab
        for tenant in TENANTS:
            tcp = rf"^get tenantcontrolplanes\.kamaji\.clastix\.io {tenant} -n tenants -o json"
            lab.on("management", tcp, lambda command, tenant=tenant: ok(self.tcps[tenant]))
        lab.on("management", r"^get datastores\.kamaji\.clastix\.io default ", ok(recorded("datastore-default.json")))
        lab.on("management", rf"^get datastores\.kamaji\.clastix\.io {DEDICATED} ", ok(dedicated_datastore()))
        secrets = secret_answers(self.shared, "kamaji-system", "kamaji-etcd")
        secrets |= secret_answers(self.dedicated, DEDICATED_NAMESPACE, DEDICATED_RELEASE)
        for (namespace, name), data in secrets.items():
            lab.on("management", rf"^get secret {name} -n {namespace} -o json", ok({"data": data}))
        lab.on("management", r"^get jobs --all-namespaces -l ", lambda command: ok({"items": self.jobs}))

    def port_forward(self, tmp_path: Path, monkeypatch) -> Path:
        """kubectl on PATH: port-forward to either member prints the forwarding line of that server's port; the
        file it logs its arguments to."""
        bin_dir, log = tmp_path / "bin", tmp_path / "kubectl.log"
        bin_dir.mkdir(exist_ok=True)
        port = {member: server.url.rsplit(":", 1)[1] for member, server in
                ((SHARED_MEMBER, self.shared), (DEDICATED_MEMBER, self.dedicated))}  # fmt: skip
        script = bin_dir / "kubectl"
        script.write_text(
            f'#!/bin/sh\necho "$@" >> {log}\n'
            'case "$*" in\n'
            f'  *"-n kamaji-system pod/{SHARED_MEMBER} "*) port={port[SHARED_MEMBER]} ;;\n'
            f'  *"-n {DEDICATED_NAMESPACE} pod/{DEDICATED_MEMBER} "*) port={port[DEDICATED_MEMBER]} ;;\n'
            '  *) echo "error: no such pod" >&2; exit 1 ;;\n'
            "esac\n"
            'echo "Forwarding from 127.0.0.1:$port -> 2379"\nexec sleep 600\n'
        )
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        return log

    def name(self, tenant: str, *, spec: str | None = None, status: str | None = None, state: str = "") -> None:
        """The DataStores tenant's TenantControlPlane names, and Kamaji's state for it."""
        tcp = self.tcps[tenant]
        if spec:
            tcp["spec"]["dataStore"] = spec
        if status:
            tcp["status"]["storage"]["dataStoreName"] = status
        if state:
            tcp["status"]["kubernetesResources"]["version"]["status"] = state

    def server(self, store: str) -> RealEtcd:
        return self.dedicated if store == DEDICATED else self.shared


def kamaji_migrate(source: RealEtcd, target: RealEtcd, schema: str, puts: int | None = None) -> None:
    """Kamaji's migrate Job: one read of every key under /<schema>/ in the source, then a put of each into the
    target, in key order, with no lease; nothing deleted, no user or role copied (clastix/kamaji
    internal/datastore/etcd.go@26.8.2-edge: Migrate). puts: the Job dies after that many."""
    with root(source) as reader:
        copied = list(contents(reader, f"/{schema}/").items())
    with root(target) as writer:
        for key, value in copied[:puts]:
            put(writer, key, value)


def kamaji_sets_up(target: RealEtcd, tenant: str) -> None:
    """The tenant's reconcile against the DataStore its spec names: its user and role there (clastix/kamaji
    internal/resources/datastore/datastore_setup.go and internal/datastore/etcd.go@26.8.2-edge)."""
    target.provision_tenant(USERS[tenant], SCHEMAS[tenant])



def everything(server: RealEtcd) -> dict[bytes, bytes]:
    with root(server) as client:
        return contents(client, "/")


def users_and_roles(server: RealEtcd) -> tuple[set[str], set[str]]:
    with root(server) as client:
        users = set(etcdctl(client, "user", "list").decode().split())
        roles = set(etcdctl(client, "role", "list").decode().split())
    return users, roles


def clean(stores: TwoStores, *tenant: str) -> tuple[int, str, str]:
    """python -m snapshot.leftovers [tenant] on the recorded outputs: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = leftovers.main(["--outputs", str(OUTPUTS), *tenant], runner=stores.lab, stdout=out)
    return code, out.getvalue(), err.getvalue()


def on_the_dedicated_store(stores: TwoStores, tenant: str) -> None:
    """tenant moved to the dedicated DataStore and cleaned up after, as `make up` leaves it."""
    stores.name(tenant, spec=DEDICATED, status=DEDICATED)
    kamaji_sets_up(stores.dedicated, tenant)
    kamaji_migrate(stores.shared, stores.dedicated, SCHEMAS[tenant])
    assert clean(stores, tenant)[0] == 0
