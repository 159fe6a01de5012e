"""`python -m snapshot` against recorded management-cluster answers and the real etcd behind them: a snapshot
taken, the lab rebuilt (new CA, new keys, an empty prefix bootstrapped anew), and the tenant restored into the
re-created one, with the hold, the Secrets and the restart in the order that keeps the tenant consistent.

The management cluster is a FakeLab whose TenantControlPlane, Deployment and Secrets change as the commands
patch and replace them; `kubectl port-forward` is a stand-in on PATH that names the real etcd's port, which a
forward to the member would give (the member's certificate names 127.0.0.1, as the real etcd's here does)."""

from __future__ import annotations

import base64
import copy
import dataclasses
import datetime
import io
import json
import stat
from pathlib import Path

import pytest
import yaml

from snapshot.__main__ import main
from snapshot.core import same_address
from snapshot.etcd import EtcdFailed, PrefixWriter
from snapshot.live import CA_ANNOTATION, HOLD_ANNOTATION, REISSUE_TIMEOUT, forwarded_port, store_client
from tests.etcd_pods import chart_secrets
from tests.real_etcd import PIPE_BUFFER, RealEtcd
from tests.snapshot_etcd import dump, etcdctl, put, root
from tests.test_snapshot_etcd import mutate_manifest
from tests.test_validation import FakeClock, FakeLab, error, ok, recorded
from validation.exit_codes import EXIT_USAGE
from validation.host import Clock, CommandResult, poll
from validation.lab import Lab
from validation.stack_outputs import parse_outputs

TCP = r"tenantcontrolplanes\.kamaji\.clastix\.io tenant-a -n tenants"
SCHEMA = recorded("tcp-tenant-a.json")["spec"]["dataStoreSchema"]


def recorded_snapshot(name: str) -> dict:
    """A hand-made answer of tests/fixtures/snapshot/ (its README says what each answers)."""
    return json.loads((Path(__file__).parent / "fixtures/snapshot" / name).read_text())


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def identity(generation: str) -> dict[str, dict]:
    """The Secrets Kamaji makes per TenantControlPlane that everything else is signed by, one lab's worth."""
    return {
        "tenant-a-ca": {"ca.crt": b64(f"CA {generation}"), "ca.key": b64(f"CA key {generation}")},
        "tenant-a-sa-certificate": {"sa.pub": b64(f"SA {generation}"), "sa.key": b64(f"SA key {generation}")},
        "tenant-a-front-proxy-ca-certificate": {"ca.crt": b64(f"FP {generation}"), "ca.key": b64(f"FP {generation}")},
    }


def admin_conf(ca_crt: str) -> str:
    """admin.conf as Kamaji writes it into "<tcp>-admin-kubeconfig", base64: kubeadm's kubeconfig of one cluster,
    context and user, the CA inline (clastix/kamaji internal/resources/kubeconfig.go@26.8.2-edge, CreateKubeconfig;
    the layout of kubernetes/kubernetes cmd/kubeadm/app/util/kubeconfig CreateWithCerts)."""
    conf = (
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n"
        f"    certificate-authority-data: {ca_crt}\n    server: https://172.18.255.200:6443\n  name: tenant-a\n"
        "contexts:\n- context:\n    cluster: tenant-a\n    user: kubernetes-admin\n"
        "  name: kubernetes-admin@tenant-a\ncurrent-context: kubernetes-admin@tenant-a\n"
        "users:\n- name: kubernetes-admin\n  user:\n    client-certificate-data: Y2VydA==\n    client-key-data: a2V5\n"
    )
    return b64(conf)


class ManagementCluster:
    """The TenantControlPlane, its Deployment and the Secrets, as kubectl would see them change.

    kamaji says what Kamaji does when the CA Secret is replaced: "keeps" a valid CA and re-issues the admin
    kubeconfig from it (ca_certificate.go and kubeconfig.go@26.8.2-edge, mutate), "renews" one that is invalid or
    expiring (a new CA, the kubeconfig from that), or "stalls" (not running: nothing is re-issued)."""

    def __init__(self, server: RealEtcd, lab: FakeLab, generation: str, kamaji: str = "keeps"):
        self.server, self.lab, self.kamaji = server, lab, kamaji
        self.tcp = recorded("tcp-tenant-a.json")
        self.secrets = {
            name: {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": data,
                   "metadata": {"name": name, "namespace": "tenants", "uid": f"{generation}-{name}"}}
            for name, data in identity(generation).items()
        }  # fmt: skip
        self.secrets["tenant-a-admin-kubeconfig"] = {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "tenant-a-admin-kubeconfig", "namespace": "tenants", "uid": f"{generation}-admin"},
            "data": {"admin.conf": admin_conf(identity(generation)["tenant-a-ca"]["ca.crt"])},
        }  # fmt: skip
        self.events: list[str] = []  # hold, wake and Secret replacements, with what etcd held then
        root = {name: {key: base64.b64encode(path.read_bytes()).decode() for key, path in keys.items()}
                for (_, name), keys in chart_secrets(server).items()}  # fmt: skip
        lab.on("management", rf"^get {TCP} -o json", lambda command: ok(self.tcp))
        lab.on("management", rf"^patch {TCP} --type merge -p ", self.patch)
        lab.on("management", r"^get deployment tenant-a -n tenants -o json", self.deployment)
        lab.on("management", r"^get pods -n tenants -l kamaji\.clastix\.io/name=tenant-a -o json", self.pods)
        lab.on("management", r"^get datastores\.kamaji\.clastix\.io default ", ok(recorded("datastore-default.json")))
        for name, data in root.items():
            lab.on("management", rf"^get secret {name} -n kamaji-system -o json", ok({"data": data}))
        lab.on("management", r"^get secret (\S+) -n tenants -o json", self.get_secret)
        lab.on("management", r"^replace -f -", self.replace)

    def replicas(self) -> int:
        return self.tcp["spec"]["controlPlane"]["deployment"]["replicas"]

    def patch(self, command: str) -> CommandResult:
        change = json.loads(command.split(" -p ", 1)[1])
        annotations = self.tcp["metadata"].setdefault("annotations", {})
        for key, value in change.get("metadata", {}).get("annotations", {}).items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        if "spec" not in change:
            self.events.append("annotated " + ", ".join(change["metadata"]["annotations"]))
            return ok(self.tcp)
        self.tcp["spec"]["controlPlane"]["deployment"]["replicas"] = change["spec"]["controlPlane"]["deployment"][
            "replicas"
        ]
        state = "Sleeping" if self.replicas() == 0 else "Ready"
        self.tcp["status"]["kubernetesResources"]["version"]["status"] = state
        self.events.append(f"replicas {self.replicas()}")
        return ok(self.tcp)

    def deployment(self, command: str) -> CommandResult:
        deployment = recorded_snapshot("deployment-tenant-a-held.json")
        deployment["spec"]["replicas"] = self.replicas()
        return ok(deployment)

    def pods(self, command: str) -> CommandResult:
        """The API server pods, asked for once the hold scaled to 0: gone at once here (tests/test_snapshot_hold.py
        keeps a terminating one a while)."""
        assert self.replicas() == 0
        return ok({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": []})

    def get_secret(self, command: str) -> CommandResult:
        name = command.split()[2]
        if name not in self.secrets:
            if "--ignore-not-found" in command:
                return ok("")
            return error(f'Error from server (NotFound): secrets "{name}" not found\n')
        return ok(self.secrets[name])

    def replace(self, command: str) -> CommandResult:
        secret = json.loads(self.lab.this_call().stdin)
        assert secret["metadata"]["uid"] == self.secrets[secret["metadata"]["name"]]["metadata"]["uid"]
        self.secrets[secret["metadata"]["name"]] = secret
        self.events.append(f"secret {secret['metadata']['name']}")
        if secret["metadata"]["name"] == "tenant-a-ca" and self.kamaji != "stalls":
            if self.kamaji == "renews":
                secret["data"] = identity("renewed by Kamaji")["tenant-a-ca"]
            self.secrets["tenant-a-admin-kubeconfig"]["data"]["admin.conf"] = admin_conf(secret["data"]["ca.crt"])
        return ok()

    def data(self) -> dict[str, dict]:
        return {name: secret["data"] for name, secret in self.secrets.items() if name in identity("any")}


def prefix(server: RealEtcd, schema: str = SCHEMA) -> list[tuple[str, str]]:
    return [(kv["key"], kv.get("value", "")) for kv in dump(root(server), f"/{schema}/")]


class WallClock(FakeClock):
    def wall(self) -> datetime.datetime:
        return datetime.datetime(2026, 12, 4, 18, 30, 5, tzinfo=datetime.UTC) + datetime.timedelta(seconds=self.now())


OUTPUTS = Path(__file__).parent / "fixtures/validation/outputs.json"
RECORDED = json.loads(OUTPUTS.read_text())
ENDPOINT = RECORDED["tenants"]["tenant-a"]["endpoint"]
# The name a kubeconfig from the lab gives tenant-a's cluster, which `kubectl config set-cluster` must be given.
CLUSTER = yaml.safe_load(RECORDED["kubeconfigs"]["tenant-a"])["clusters"][0]["name"]


def run(lab: FakeLab, tmp_path: Path, *args: str, endpoint: str = ENDPOINT) -> tuple[int, str]:
    """python -m snapshot on the recorded outputs, with tenant-a's API server at endpoint."""
    outputs = tmp_path / "outputs.json"
    outputs.write_text(OUTPUTS.read_text().replace(ENDPOINT, endpoint))  # the endpoint and the kubeconfig's server
    out = io.StringIO()
    code = main(["--outputs", str(outputs), *args], runner=lab, clock=WallClock(), stdout=out)
    return code, out.getvalue()


def seed(server: RealEtcd, generation: str) -> None:
    client = root(server)
    for name in ("kube-root-ca.crt", f"made-in-{generation}"):
        put(client, f"/{SCHEMA}/configmaps/default/{name}".encode(), b"k8s\x00" + generation.encode())


def test_a_snapshot_restored_into_a_re_created_tenant_brings_back_its_keys_and_identity(
    real_etcd, port_forward, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    seed(real_etcd, "first-lab")
    put(root(real_etcd), b"/tenants_tenant_b/configmaps/default/theirs", b"kept")
    first = ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
    code, said = run(lab, tmp_path, "take", "tenant-a")
    assert code == 0, said
    (snapshot,) = (tmp_path / "snapshots").iterdir()
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o600 and "private keys" in said
    assert first.events == []  # taking a snapshot holds nothing: it reads one revision
    saved, saved_identity = prefix(real_etcd), first.data()
    assert "--address=127.0.0.1" in port_forward.read_text() and "pod/kamaji-etcd-0 :2379" in (
        port_forward.read_text()
    )

    # make down; make up: the prefix bootstrapped anew, a new CA and signing keys, a new TenantControlPlane.
    etcdctl(root(real_etcd), "del", f"/{SCHEMA}/", "--prefix")
    seed(real_etcd, "second-lab")
    neighbour = dump(root(real_etcd), "/tenants_tenant_b/")
    second = ManagementCluster(real_etcd, lab := FakeLab(), "second-lab")
    etcd_at_wake = []
    wake = second.patch

    def watching_wake(command: str) -> CommandResult:
        if '"replicas": 1' in command:
            etcd_at_wake.append(prefix(real_etcd))
        return wake(command)

    lab.on("management", rf"^patch {TCP} --type merge -p ", watching_wake)
    code, said = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 0, said
    assert prefix(real_etcd) == saved
    assert second.data() == saved_identity
    assert dump(root(real_etcd), "/tenants_tenant_b/") == neighbour
    # Asleep before etcd changed, Secrets back while asleep, woken (fresh API servers) last, onto restored keys.
    assert second.events == [
        "replicas 0", f"annotated {CA_ANNOTATION}", "secret tenant-a-ca", "secret tenant-a-sa-certificate",
        "secret tenant-a-front-proxy-ca-certificate", "replicas 1",
    ]  # fmt: skip
    assert etcd_at_wake == [saved]
    assert not {HOLD_ANNOTATION, CA_ANNOTATION} & set(second.tcp["metadata"]["annotations"])
    # Woken only once Kamaji had re-issued the admin kubeconfig from the restored CA.
    admin_reads = [i for i, call in enumerate(lab.calls) if "get secret tenant-a-admin-kubeconfig" in call.command]
    wake = max(i for i, call in enumerate(lab.calls) if call.command.startswith("patch"))
    assert admin_reads and max(admin_reads) < wake
    assert "service-account tokens from the snapshot's time work again" in said
    assert "make rejoin TENANT=tenant-a" in said and "https://172.18.255.200:6443" in said


def test_a_refused_snapshot_changes_neither_the_tenant_nor_etcd(real_etcd, port_forward, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    seed(real_etcd, "first-lab")
    cluster = ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
    assert run(lab, tmp_path, "take", "tenant-a")[0] == 0
    (snapshot,) = (tmp_path / "snapshots").iterdir()
    snapshot.write_bytes(snapshot.read_bytes()[:-100])
    before = prefix(real_etcd)
    tcp, taken = copy.deepcopy(cluster.tcp), len(lab.calls)
    code, _ = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 1
    assert prefix(real_etcd) == before and cluster.tcp == tcp and cluster.events == []
    # Read-only calls only, and the root credentials never even fetched.
    assert [call.command.split()[:2] for call in lab.calls[taken:]] == [
        ["get", "tenantcontrolplanes.kamaji.clastix.io"]
    ]


def test_a_restore_that_failed_while_the_tenant_slept_is_run_again_and_wakes_it_to_its_replicas(
    real_etcd, port_forward, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    seed(real_etcd, "first-lab")
    cluster = ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
    assert run(lab, tmp_path, "take", "tenant-a")[0] == 0
    (snapshot,) = (tmp_path / "snapshots").iterdir()
    saved = prefix(real_etcd)
    seed(real_etcd, "later")

    def lost(self, transaction):
        raise EtcdFailed("etcd transaction failed: connection lost")

    real_commit = PrefixWriter.commit
    monkeypatch.setattr(PrefixWriter, "commit", lost)
    code, _ = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 1 and "run the restore again" in capsys.readouterr().err
    assert cluster.replicas() == 0 and cluster.tcp["metadata"]["annotations"][HOLD_ANNOTATION] == "1"

    monkeypatch.setattr(PrefixWriter, "commit", real_commit)
    code, said = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 0, said
    assert "make rejoin" not in said  # the same lab: its CA never changed
    assert f"The tenant is at {ENDPOINT}, as at the snapshot: kubeconfigs from then work as they are." in said
    assert cluster.replicas() == 1 and HOLD_ANNOTATION not in cluster.tcp["metadata"]["annotations"]
    assert prefix(real_etcd) == saved


def test_an_unknown_tenant_is_a_usage_error(tmp_path, capsys):
    code, _ = run(FakeLab(), tmp_path, "take", "tenant-z")
    assert code == EXIT_USAGE and "no tenant 'tenant-z'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "port"),
    [
        ("Forwarding from 127.0.0.1:40123 -> 2379\n", 40123),
        ("Forwarding from [::1]:40123 -> 2379\n", None),
        ("error: unable to forward port because pod is not running. Current status=Pending\n", None),
        ("", None),
    ],
)
def test_the_forwarded_port_is_read_from_kubectls_first_line(line, port):
    assert forwarded_port(line) == port


def test_a_port_forward_that_fails_stops_the_restore_before_the_tenant_is_held(
    real_etcd, port_forward, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    seed(real_etcd, "first-lab")
    cluster = ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
    assert run(lab, tmp_path, "take", "tenant-a")[0] == 0
    (snapshot,) = (tmp_path / "snapshots").iterdir()
    kubectl = port_forward.parent / "bin" / "kubectl"
    kubectl.write_text('#!/bin/sh\necho "error: unable to forward port because pod is not running" >&2\nexit 1\n')
    before = prefix(real_etcd)
    code, _ = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 1
    forward = "kubectl port-forward to DataStore default's pod kamaji-system/kamaji-etcd-0 failed"
    assert f"{forward}: error: unable to forward port" in capsys.readouterr().err
    assert cluster.events == [] and prefix(real_etcd) == before


def test_a_port_forward_that_says_more_than_a_pipe_holds_goes_on_forwarding(real_etcd, port_forward, tmp_path):
    # kubectl writes "Handling connection for <port>" per connection on stdout, each failed one on stderr; a
    # stand-in writes past what a pipe holds on both, then leaves a mark: a blocked kubectl never would.
    ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
    kubectl, mark = port_forward.parent / "bin" / "kubectl", tmp_path / "said-it-all"
    lines = PIPE_BUFFER // len("Handling connection for 2379\n") + 1
    kubectl.write_text(
        f'#!/bin/sh\necho "Forwarding from 127.0.0.1:{real_etcd.url.rsplit(":", 1)[1]} -> 2379"\n'
        f'yes "Handling connection for 2379" | head -n {lines}\n'
        f'yes "E1206 portforward.go:413] an error occurred forwarding" | head -n {lines} >&2\n'
        f"touch {mark}\nexec sleep 600\n"
    )
    outputs = parse_outputs(json.loads(OUTPUTS.read_text()))

    with store_client(Lab.open(outputs, lab, tmp_path / "work"), "default") as client:
        said_it_all, _ = poll(Clock(), 30, lambda: (mark.exists(), None), interval=0.1)
        assert not client.has("user", "nobody")  # and the client is answered through it

    assert said_it_all


def test_a_root_secret_without_its_key_is_named(real_etcd, port_forward, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
    lab.on("management", r"^get secret kamaji-etcd-client-certs -n kamaji-system -o json", ok({"data": {}}))
    code, _ = run(lab, tmp_path, "take", "tenant-a")
    assert code == 1
    assert "secret kamaji-system/kamaji-etcd-client-certs has no tls.crt (the DataStore's client.crt)" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "snapshots").exists() or not any((tmp_path / "snapshots").iterdir())


def rebuilt(
    real_etcd: RealEtcd, tmp_path: Path, kamaji: str, endpoint: str = ENDPOINT
) -> tuple[Path, ManagementCluster, FakeLab]:
    """A snapshot of the first lab, its tenant at endpoint, then `make down; make up`: a new prefix, CA and keys,
    and Kamaji as given."""
    seed(real_etcd, "first-lab")
    ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
    assert run(lab, tmp_path, "take", "tenant-a", endpoint=endpoint)[0] == 0
    (snapshot,) = (tmp_path / "snapshots").iterdir()
    etcdctl(root(real_etcd), "del", f"/{SCHEMA}/", "--prefix")
    seed(real_etcd, "second-lab")
    second = ManagementCluster(real_etcd, lab := FakeLab(), "second-lab", kamaji)
    return snapshot, second, lab


def test_a_ca_kamaji_renews_instead_of_keeping_brings_back_tokens_but_not_kubeconfigs(
    real_etcd, port_forward, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    snapshot, second, lab = rebuilt(real_etcd, tmp_path, "renews")
    code, said = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 0, said
    assert "did not keep the snapshot's CA" in said and "kubeconfigs from then do not" in said
    assert "kubeconfigs from then are trusted again" not in said
    assert "make rejoin TENANT=tenant-a" in said and second.replicas() == 1


def test_a_kamaji_that_re_issues_nothing_leaves_the_tenant_asleep_and_a_second_run_finishes(
    real_etcd, port_forward, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    snapshot, second, lab = rebuilt(real_etcd, tmp_path, "stalls")
    code, _ = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    err = capsys.readouterr().err
    assert code == 1
    assert f"not re-issued from the restored CA after {REISSUE_TIMEOUT}s" in err and "run the restore again" in err
    assert "tenant-a-admin-kubeconfig still names the CA it had" in err
    assert second.replicas() == 0 and second.tcp["metadata"]["annotations"][CA_ANNOTATION] == "true"

    # Kamaji is back. The CA Secret already holds the snapshot's CA, yet the run still waits for the re-issue and
    # still says what the other CA made stale: the annotation kept it.
    second.kamaji = "keeps"
    code, said = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 0, said
    assert "make rejoin TENANT=tenant-a" in said and second.replicas() == 1
    assert not {HOLD_ANNOTATION, CA_ANNOTATION} & set(second.tcp["metadata"]["annotations"])


@pytest.mark.parametrize(
    ("admin", "named"),
    [
        (None, "has no admin.conf yet"),  # Kamaji has not written it (yet)
        ({"admin.conf": "not base64!"}, "holds no readable admin.conf"),
        ({"admin.conf": b64("- a list, not a kubeconfig")}, "holds no readable admin.conf"),
    ],
)
def test_an_admin_kubeconfig_that_never_names_the_restored_ca_is_named(
    real_etcd, port_forward, tmp_path, monkeypatch, capsys, admin, named
):
    monkeypatch.chdir(tmp_path)
    snapshot, second, lab = rebuilt(real_etcd, tmp_path, "stalls")
    if admin is None:
        del second.secrets["tenant-a-admin-kubeconfig"]
    else:
        second.secrets["tenant-a-admin-kubeconfig"]["data"] = admin
    code, _ = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 1 and f"secret tenants/tenant-a-admin-kubeconfig {named}" in capsys.readouterr().err
    assert second.replicas() == 0


def test_a_failed_read_of_the_admin_kubeconfig_stops_the_restore(
    real_etcd, port_forward, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    snapshot, second, lab = rebuilt(real_etcd, tmp_path, "keeps")
    forbidden = error("Error from server (Forbidden): secrets is forbidden\n")
    lab.on("management", r"^get secret tenant-a-admin-kubeconfig ", forbidden)
    code, _ = run(lab, tmp_path, "restore", "tenant-a", str(snapshot))
    assert code == 1 and "Forbidden" in capsys.readouterr().err and second.replicas() == 0


# The lab's MetalLB pool pins a tenant's address; with `loadBalancer: provided` the cluster's own LoadBalancer may
# give a re-created tenant another one. 172.30.255.2 is a prefix of 172.30.255.20, and no match.
PINNED, OTHER = "https://172.30.255.2:6443", "https://172.30.255.20:6443"


def set_cluster(server: str) -> str:
    return f"config set-cluster {CLUSTER} --server={server}"


@pytest.mark.parametrize(
    ("kamaji", "now", "said", "unsaid"),
    [
        ("keeps", PINNED, [f"is at {PINNED}, as at the snapshot: kubeconfigs from then work as they are"],
         ["set-cluster", "was at"]),
        ("keeps", OTHER,
         [f"was at {PINNED} and is now at {OTHER}: point a kubeconfig from then at it", set_cluster(OTHER)],
         [", as at the snapshot"]),
        # Kamaji made a new CA: no kubeconfig from then works, wherever the tenant is.
        ("renews", PINNED, [f"is at {PINNED}, as at the snapshot.", "kubeconfigs from then do not"],
         ["work as they are", "set-cluster"]),
        ("renews", OTHER, [f"was at {PINNED} and is now at {OTHER}.", "kubeconfigs from then do not"],
         ["set-cluster", ", as at the snapshot"]),
    ],
)  # fmt: skip
def test_the_restore_says_whether_the_re_created_tenant_is_where_the_snapshot_recorded_it(
    real_etcd, port_forward, tmp_path, monkeypatch, kamaji, now, said, unsaid
):
    monkeypatch.chdir(tmp_path)
    snapshot, second, lab = rebuilt(real_etcd, tmp_path, kamaji, endpoint=PINNED)
    code, out = run(lab, tmp_path, "restore", "tenant-a", str(snapshot), endpoint=now)
    assert code == 0, out
    assert all(words in out for words in said), out
    assert not any(words in out for words in unsaid), out
    assert "make rejoin TENANT=tenant-a" in out


def without_endpoint(snapshot: Path) -> None:
    """The snapshot as the lab wrote it before manifests recorded the tenant's endpoint."""
    mutate_manifest(snapshot, lambda manifest: dataclasses.replace(manifest, endpoint=None))


@pytest.mark.parametrize(
    ("kamaji", "said", "unsaid"),
    [
        (None, [set_cluster(PINNED)], ["make rejoin"]),  # the same lab
        ("keeps", [set_cluster(PINNED)], ["did not keep"]),
        ("renews", ["kubeconfigs from then do not"], ["set-cluster"]),
    ],
)
def test_a_snapshot_from_before_endpoints_were_recorded_is_restored_and_its_address_is_unknown(
    real_etcd, port_forward, tmp_path, monkeypatch, kamaji, said, unsaid
):
    monkeypatch.chdir(tmp_path)
    if kamaji is None:
        seed(real_etcd, "first-lab")
        ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
        assert run(lab, tmp_path, "take", "tenant-a", endpoint=PINNED)[0] == 0
        (snapshot,) = (tmp_path / "snapshots").iterdir()
    else:
        snapshot, _, lab = rebuilt(real_etcd, tmp_path, kamaji, endpoint=PINNED)
    without_endpoint(snapshot)
    code, out = run(lab, tmp_path, "restore", "tenant-a", str(snapshot), endpoint=PINNED)
    assert code == 0, out
    assert f"is at {PINNED}; where it was when the snapshot was taken is unknown" in out
    assert ", as at the snapshot" not in out and "was at https" not in out
    assert all(words in out for words in said), out
    assert not any(words in out for words in unsaid), out


@pytest.mark.parametrize(
    ("endpoint", "other", "same"),
    [
        (PINNED, PINNED, True),
        (PINNED, OTHER, False),  # a prefix of the other
        (OTHER, PINNED, False),
        (PINNED, PINNED + "/", True),  # a path is no part of the address
        (PINNED, "https://172.30.255.2:6444", False),
        (PINNED, "https://172.30.255.2", False),  # no port is not port 6443
        ("https://[fd00::2]:6443", "https://[FD00::2]:6443", True),
        ("https://[fd00::2]:6443", "https://[fd00::20]:6443", False),
        (PINNED, "https://172.30.255.2:99999", False),  # a malformed port matches nothing
        ("", "", False),
    ],
)
def test_two_endpoints_are_the_same_address_only_for_the_same_whole_host_and_port(endpoint, other, same):
    assert same_address(endpoint, other) is same
