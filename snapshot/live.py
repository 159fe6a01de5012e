"""The live lab's side of a snapshot: the tenant's TenantControlPlane and identity Secrets, the hold, and
an etcd client (snapshot/etcd.py) reaching the DataStore with its root credentials through `kubectl port-forward`.

Why a port-forward: the datastore check's etcdctl pod answers through `kubectl logs`, which the kubelet
rotates (a large prefix would come back cut short) and which takes no input for the writes; `kubectl exec`
into the etcd member finds no root client certificate there (clastix/kamaji-etcd
charts/kamaji-etcd/templates/etcd_sts.yaml@92f31f0 mounts only the server and peer certificates). The member's
server certificate names 127.0.0.1 (etcd_cert-manager_servercert.yaml@92f31f0: ipAddresses), so the client
verifies it through the forward. The price: the root key sits on this host while the command runs (a 0700
temporary directory, removed after).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import select
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from components.kubeconfig import current_cluster
from snapshot.archive import IDENTITY_SECRETS
from snapshot.core import Target
from snapshot.etcd import EtcdClient
from validation.checks.datastore import (
    DATASTORE_RESOURCE,
    between_stores,
    first_member,
    root_credentials,
    used_store,
)
from validation.checks.tenancy import TCP_RESOURCE
from validation.host import poll
from validation.lab import Lab
from validation.manifests import ETCD_CA, ETCD_CERT, ETCD_KEY
from validation.results import CheckFailed
from validation.stack_outputs import Tenant

FORWARD_TIMEOUT = 30
DRAIN_CHUNK = 4096  # characters read at a time from kubectl port-forward's output, which is thrown away
# The original replica count while a tenant is held, so a restore run again after an interruption still knows it.
HOLD_ANNOTATION = "kamaji-hami-lab/held-replicas"
# Set while held once the restore has put back a CA other than the tenant's, so a restore run again after an
# interruption still waits for Kamaji's re-issue and still says what the new CA makes stale.
CA_ANNOTATION = "kamaji-hami-lab/restored-other-ca"
# Kamaji runs two API server replicas when spec.controlPlane.deployment.replicas is unset
# (clastix/kamaji internal/resources/k8s_deployment_resource.go@26.8.2-edge: ptr.Deref(..., 2)).
DEFAULT_REPLICAS = 2
SLEEP_TIMEOUT = 180
WAKE_TIMEOUT = 600
# Kamaji re-issues what the CA signs in the reconcile that the CA Secret's update starts; it reconciles a sleeping
# tenant's certificates too (clastix/kamaji controllers/resources.go@26.8.2-edge: GetResources has no sleep branch).
REISSUE_TIMEOUT = 300
CA_CERT = "ca.crt"  # kubeadm's CACertName, the key of the CA Secret (ca_certificate.go@26.8.2-edge)
# The admin kubeconfig Secret's key (clastix/kamaji internal/resources/kubeconfig.go@26.8.2-edge).
ADMIN_CONF = "admin.conf"
# The TenantControlPlane's status.certificates entry naming each identity Secret (Kamaji's CRD), by role.
STATUS_ENTRY = {"ca": "ca", "sa-certificate": "sa", "front-proxy-ca-certificate": "frontProxyCA"}
FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) -> \d+")


@dataclass
class LiveTenant:
    lab: Lab
    tenant: Tenant
    ca_replaced: bool = False  # the restore put back a CA other than the one the tenant had
    restored_ca: str = ""  # the snapshot's ca.crt (base64), when the restore put it back
    ca_kept: bool = True  # Kamaji kept the restored CA (False: it found it invalid or expiring and made a new one)
    say: Callable[[str], None] = lambda line: None  # what it waits for, as it starts waiting

    def tcp(self) -> dict[str, Any]:
        return self.lab.management.get(TCP_RESOURCE, self.tenant.name, "-n", self.tenant.namespace)

    def target(self) -> Target:
        tcp = self.tcp()
        version = tcp.get("spec", {}).get("kubernetes", {}).get("version") or self.tenant.kubernetes_version
        tenant = self.tenant
        return Target(tenant.name, tenant.namespace, tenant.data_store_schema, version, tenant.endpoint)

    def secret_names(self, tcp: dict[str, Any]) -> dict[str, str]:
        """Each identity Secret's name: where the TenantControlPlane's status says, else Kamaji's "<tcp>-<role>"
        (clastix/kamaji internal/utilities: AddTenantPrefix@26.8.2-edge)."""
        certificates = tcp.get("status", {}).get("certificates", {})
        return {
            role: (certificates.get(STATUS_ENTRY[role]) or {}).get("secretName") or f"{self.tenant.name}-{role}"
            for role in IDENTITY_SECRETS
        }

    def identity_secrets(self) -> dict[str, dict[str, Any]]:
        found = {}
        for role, name in self.secret_names(self.tcp()).items():
            secret = self.lab.management.get("secret", name, "-n", self.tenant.namespace)
            found[role] = {"type": secret.get("type", "Opaque"), "data": secret.get("data") or {}}
        return found

    def restore_secrets(self, secrets: dict[str, dict[str, Any]]) -> None:
        """The snapshot's identity Secrets over the tenant's: Kamaji keeps a valid one it finds and re-issues
        what it signed (clastix/kamaji internal/resources/ca_certificate.go@26.8.2-edge, mutate). When that puts
        back another CA, waits (still held) until Kamaji has re-issued the admin kubeconfig, so the API servers
        the wake starts serve certificates of the restored CA."""
        management, namespace = self.lab.management, self.tenant.namespace
        tcp = self.tcp()
        self.ca_replaced |= bool(tcp.get("metadata", {}).get("annotations", {}).get(CA_ANNOTATION))
        for role, name in self.secret_names(tcp).items():
            if role not in secrets:
                continue
            found = management.run("get", "secret", name, "-n", namespace, "-o", "json", "--ignore-not-found")
            current = json.loads(management.checked(found).stdout or "null")
            other = not current or current.get("data") != secrets[role]["data"]
            if role == "ca" and other and not self.ca_replaced:
                self.ca_replaced = True
                self.patch({"metadata": {"annotations": {CA_ANNOTATION: "true"}}})
            if current:
                current["data"] = secrets[role]["data"]
                management.checked(management.run("replace", "-f", "-", stdin=json.dumps(current)))
            else:
                fresh = {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": name, "namespace": namespace},
                    "type": secrets[role]["type"],
                    "data": secrets[role]["data"],
                }
                management.must_create(fresh, "-n", namespace)
        if self.ca_replaced:
            self.restored_ca = secrets.get("ca", {}).get("data", {}).get(CA_CERT, "")
            self.wait(REISSUE_TIMEOUT, "re-issued from the restored CA", self.reissued)

    def reissued(self) -> tuple[bool, str]:
        """Whether Kamaji has re-issued the admin kubeconfig from the CA its Secret now holds. Kamaji keeps a valid
        CA it finds and re-signs every certificate and kubeconfig that no longer verifies against it
        (clastix/kamaji internal/resources/ca_certificate.go, api_server_certificate.go, kubeconfig.go@26.8.2-edge:
        mutate); a CA that is invalid or expires within its --certificate-expiration-deadline (24 h by default,
        cmd/manager/cmd.go@26.8.2-edge) it replaces with a new one instead, which the admin kubeconfig then names."""
        tcp = self.tcp()
        names = self.secret_names(tcp)
        ca = self.lab.management.get("secret", names["ca"], "-n", self.tenant.namespace).get("data") or {}
        admin_name = (tcp.get("status", {}).get("kubeconfig", {}).get("admin") or {}).get("secretName")
        admin_name = admin_name or f"{self.tenant.name}-admin-kubeconfig"
        found = self.lab.management.run(
            "get", "secret", admin_name, "-n", self.tenant.namespace, "-o", "json", "--ignore-not-found"
        )
        admin = (json.loads(self.lab.management.checked(found).stdout or "null") or {}).get("data") or {}
        self.ca_kept = ca.get(CA_CERT) == self.restored_ca
        try:
            conf = base64.b64decode(admin.get(ADMIN_CONF, ""), validate=True).decode()
            named = current_cluster(conf).ca_data if conf else ""
        except (ValueError, binascii.Error, UnicodeError):
            return False, f"secret {self.tenant.namespace}/{admin_name} holds no readable {ADMIN_CONF}"
        if not named:
            return False, f"secret {self.tenant.namespace}/{admin_name} has no {ADMIN_CONF} yet"
        if decoded(named) != decoded(ca.get(CA_CERT, "")):
            return False, f"the {ADMIN_CONF} in secret {self.tenant.namespace}/{admin_name} still names the CA it had"
        return True, ""

    def held(self) -> bool:
        """Whether a restore holds the tenant asleep: one under way, or one that stopped before it finished."""
        return HOLD_ANNOTATION in (self.tcp().get("metadata", {}).get("annotations") or {})

    @contextmanager
    def hold(self) -> Iterator[None]:
        """The tenant asleep (no API server writes its prefix) while the body runs; woken after it succeeds,
        which starts fresh API servers. A failed body leaves it asleep for the restore to be run again."""
        tcp = self.tcp()
        held = tcp.get("metadata", {}).get("annotations", {}).get(HOLD_ANNOTATION)
        replicas = int(held) if held else tcp["spec"]["controlPlane"].get("deployment", {}).get("replicas")
        replicas = DEFAULT_REPLICAS if replicas is None else replicas
        self.patch({"metadata": {"annotations": {HOLD_ANNOTATION: str(replicas)}}, "spec": replicas_spec(0)})
        selector = self.api_server_selector()
        self.say(
            f"holding tenant {self.tenant.name} asleep: waiting until no pod in {self.tenant.namespace} matches its "
            f"API server Deployment's selector {selector}, terminating ones included"
        )
        self.wait(SLEEP_TIMEOUT, "asleep", lambda: self.asleep(selector))
        yield
        woken = {"metadata": {"annotations": {HOLD_ANNOTATION: None, CA_ANNOTATION: None}}}
        self.patch(woken | {"spec": replicas_spec(replicas)})
        if replicas:
            self.wait(WAKE_TIMEOUT, "Ready", self.awake)

    def patch(self, change: dict[str, Any]) -> None:
        management, tenant = self.lab.management, self.tenant
        patched = management.run(
            "patch", TCP_RESOURCE, tenant.name, "-n", tenant.namespace, "--type", "merge", "-p", json.dumps(change)
        )
        management.checked(patched)

    def api_server_selector(self) -> str:
        """The label selector of the Deployment Kamaji runs the tenant's API servers in, named after the
        TenantControlPlane; Kamaji selects by matchLabels alone (clastix/kamaji
        internal/builders/controlplane/deployment.go@26.8.2-edge: setSelector)."""
        namespace = self.tenant.namespace
        deployment = self.lab.management.get("deployment", self.tenant.name, "-n", namespace)
        labels = (deployment.get("spec", {}).get("selector") or {}).get("matchLabels") or {}
        if not labels:  # an empty selector would match every pod in the namespace
            raise CheckFailed(f"deployment {namespace}/{self.tenant.name} has no spec.selector.matchLabels")
        return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))

    def asleep(self, selector: str) -> tuple[bool, str]:
        """No pod matches the API server Deployment's selector, terminating ones included: a pod being deleted
        keeps serving (and writing etcd) until its grace period ends, yet the Deployment's status.replicas, the sum of
        its ReplicaSets', no longer counts it (kubernetes/kubernetes pkg/controller/replicaset/replica_set.go@003e862:
        syncReplicaSet computes the status from controller.FilterActivePods, which drops pods being deleted)."""
        pods = self.lab.management.items("pods", "-n", self.tenant.namespace, "-l", selector)
        described = ", ".join(f"{pod['metadata']['name']} ({pod_state(pod)})" for pod in pods)
        return not pods, f"pods still match {selector}: {described}"

    def awake(self) -> tuple[bool, str]:
        status = self.tcp().get("status", {}).get("kubernetesResources", {}).get("version", {}).get("status", "")
        return status == "Ready", f"the TenantControlPlane is {status or 'without status'}"

    def wait(self, timeout: float, goal: str, probe) -> None:
        done, last = poll(self.lab.clock, timeout, probe)
        if not done:
            raise CheckFailed(f"tenant {self.tenant.name} is not {goal} after {timeout}s: {last}")


def decoded(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        return b""


def pod_state(pod: dict[str, Any]) -> str:
    """The word kubectl shows for a pod being deleted, terminating, else its phase."""
    if pod["metadata"].get("deletionTimestamp"):
        return "terminating"
    return pod.get("status", {}).get("phase") or "no phase yet"


def replicas_spec(replicas: int) -> dict[str, Any]:
    return {"controlPlane": {"deployment": {"replicas": replicas}}}


def root_files(lab: Lab, store: dict[str, Any], directory: Path) -> dict[str, Path]:
    """The DataStore's root client certificate, key and CA, written 0600 into directory, by file name
    (ETCD_CA, ETCD_CERT, ETCD_KEY)."""
    credentials = root_credentials(store)
    if isinstance(credentials, str):
        raise CheckFailed(credentials)
    # kubectl reads each Secret in its own namespace: unlike a pod, a CA kept apart from the client certificate
    # needs no copy here.
    items = {(credentials.namespace, secret, key): file for (secret, key), file in credentials.files.items()}
    if credentials.ca_elsewhere is not None:
        items[credentials.ca_elsewhere] = ETCD_CA
    written = {}
    for (namespace, secret, key), file in sorted(items.items()):
        data = lab.management.get("secret", secret, "-n", namespace).get("data") or {}
        if key not in data:
            raise CheckFailed(f"secret {namespace}/{secret} has no {key} (the DataStore's {file})")
        path = directory / file
        path.touch(mode=0o600)
        path.write_bytes(base64.b64decode(data[key]))
        written[file] = path
    return written


def forwarded_port(line: str) -> int | None:
    """The local port in kubectl port-forward's first line, "Forwarding from 127.0.0.1:<port> -> <port>"."""
    found = FORWARDING.match(line.strip())
    return int(found[1]) if found else None


def drain(pipe: IO[str] | None) -> None:
    """Read a pipe to its end: kubectl port-forward writes a line per connection (kubernetes/client-go
    tools/portforward/portforward.go@v0.36.3) and one per error, and once a pipe nobody reads holds 64 KiB it stops
    forwarding to wait for a reader."""
    if pipe:
        while pipe.read(DRAIN_CHUNK):
            pass


class Moving(Exception):
    """The tenant is between two DataStores: neither is known to hold all of its data; the message says why."""


@contextmanager
def root_client(lab: Lab, tenant: Tenant) -> Iterator[EtcdClient]:
    """A root etcd client of the DataStore the tenant's TenantControlPlane says its data is in; Moving while Kamaji
    moves it: its Job copies from the DataStore the status names, so a restore written there after the copy read
    it would be lost, and a snapshot taken there may miss writes made since on the target."""
    tcp = lab.management.get(TCP_RESOURCE, tenant.name, "-n", tenant.namespace)
    if why := between_stores(tcp):
        raise Moving(why)
    with store_client(lab, used_store(tcp) or lab.outputs.platform.data_store) as client:
        yield client


@contextmanager
def store_client(lab: Lab, store_name: str) -> Iterator[EtcdClient]:
    """An etcd client with the DataStore's root credentials, through a port-forward to the first etcd member its
    endpoints name; both gone after, and the credentials' files with them."""
    store = lab.management.get(DATASTORE_RESOURCE, store_name)
    member = first_member(store)
    with tempfile.TemporaryDirectory(prefix="kamaji-hami-lab-snapshot-") as scratch:
        directory = Path(scratch)
        directory.chmod(0o700)
        tls = root_files(lab, store, directory)
        kubectl = lab.management
        forward = subprocess.Popen(
            [
                "kubectl", "--kubeconfig", str(kubectl.kubeconfig), "port-forward", "-n", member.namespace,
                f"{member.kind}/{member.name}", f":{member.port}", "--address=127.0.0.1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            ready, _, _ = select.select([forward.stdout], [], [], FORWARD_TIMEOUT)
            port = forwarded_port(forward.stdout.readline()) if ready and forward.stdout else None
            if port is None:
                forward.kill()
                problem = forward.stderr.read() if forward.stderr else f"no forwarding after {FORWARD_TIMEOUT}s"
                raise CheckFailed(f"kubectl port-forward to DataStore {store_name}'s {member} failed: {problem}")
            for pipe in (forward.stdout, forward.stderr):
                threading.Thread(target=drain, args=(pipe,), daemon=True).start()
            with EtcdClient(f"127.0.0.1:{port}", tls[ETCD_CA], tls[ETCD_CERT], tls[ETCD_KEY]) as client:
                yield client
        finally:
            forward.terminate()
            forward.wait(timeout=10)
