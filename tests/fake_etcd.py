"""A hand-made kamaji-etcd behind the `datastore` check's etcdctl pods.

It answers kubectl's questions about those pods from what the check created: the
pod manifest says which certificate each container presents and which prefix it
lists; ConfigMaps created in a tenant become keys under that tenant's prefix.
Permissions follow Kamaji's layout: a tenant's user may read /<dataStoreSchema>/
only (clastix/kamaji internal/datastore/etcd.go@26.8.2-edge), the DataStore's
root client certificate reads everything.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from validation.host import CommandResult

# etcdctl prints "Error: " and the server's error, then exits 1
# (etcd-io/etcd etcdctl/ctlv3/command/error.go: ExitWithError); the server's words
# come from etcd-io/etcd api/v3rpc/rpctypes ErrPermissionDenied.
PERMISSION_DENIED = "Error: etcdserver: permission denied\n"
ROOT_SECRET = "kamaji-etcd-root-client-certs"  # tests/fixtures/validation/datastore-default.json
ETCD_IMAGE = "quay.io/coreos/etcd:v3.6.12"  # kamaji-etcd chart 0.17.0: image.repository, appVersion
# The members' client URLs: TLS on 2379 behind the headless service of DataStore default's endpoints
# (tests/fixtures/validation/datastore-default.json), whose CRD takes them without a scheme.
SERVED_URLS = frozenset(
    f"https://kamaji-etcd-{member}.kamaji-etcd.kamaji-system.svc.cluster.local:2379" for member in range(3)
)
# What etcdctl prints when it reaches no endpoint before --command-timeout (etcd-io/etcd clientv3).
UNREACHABLE = "Error: context deadline exceeded\n"
ROOT_USER = "root"
# etcdctl v3's global flags and those of `get` (etcd-io/etcd etcdctl/ctlv3/ctl.go and
# command/get_command.go, read on main @00c6090 / @0c3aef1); cobra refuses any other with "unknown flag".
ETCDCTL_FLAGS = {
    "--endpoints", "--cacert", "--cert", "--key", "--dial-timeout", "--command-timeout", "--keepalive-time",
    "--keepalive-timeout", "--insecure-transport", "--insecure-skip-tls-verify", "--user", "--password",
    "--write-out", "--hex", "--debug", "--prefix", "--keys-only", "--limit", "--rev", "--print-value-only",
}


@dataclass
class FakeEtcd:
    schemas: dict[str, str]  # tenant name -> dataStoreSchema
    calls: list  # the FakeLab's calls, to see what the check created
    auth_enabled: bool = True
    keys: list[str] = field(default_factory=list)
    # A tenant whose objects also land under another schema (tenant name -> that schema).
    copies: dict[str, str] = field(default_factory=dict)
    # Users (tenant names, or ROOT_USER) whose role was taken away: etcd refuses them everywhere.
    without_role: tuple[str, ...] = ()

    def install(self, lab) -> None:
        statefulset = {
            "spec": {"template": {"spec": {"containers": [{"name": "etcd", "image": ETCD_IMAGE}]}}},
        }
        lab.on("management", r"^get statefulset kamaji-etcd -n kamaji-system ", ok(json.dumps(statefulset)))
        lab.on("management", r"^create -f - -n ", ok(), stdin='"validate-datastore-')
        lab.on("management", r"^get pod validate-datastore-", self.pod_status)
        lab.on("management", r"^logs -n \S+ validate-datastore-\S+ -c ", self.log)
        lab.on("management", r"^delete pod validate-datastore-", ok())

    def pods(self) -> dict[tuple[str, str], dict]:
        """(namespace, name) -> each pod created in the management cluster, where it was created."""
        created = [
            (call.command.split(" -n ")[1].split()[0], json.loads(call.stdin))
            for call in self.calls
            if call.cluster == "management" and call.stdin and " -n " in call.command
        ]
        return {(namespace, pod["metadata"]["name"]): pod for namespace, pod in created if pod.get("kind") == "Pod"}

    def stored(self) -> list[str]:
        keys = list(self.keys)
        for call in self.calls:
            if call.cluster in self.schemas and call.stdin and '"ConfigMap"' in call.stdin:
                name = json.loads(call.stdin)["metadata"]["name"]
                namespace = call.command.split(" -n ")[1].split()[0]
                own = self.schemas[call.cluster]
                schemas = sorted({own, self.copies.get(call.cluster, own)})
                keys += [f"/{schema}/configmaps/{namespace}/{name}" for schema in schemas]
        return keys

    def answer(self, container: dict, secrets: list[str]) -> CommandResult:
        command = container["command"]
        unknown = [arg for arg in command if arg.startswith("-") and arg.split("=", 1)[0] not in ETCDCTL_FLAGS]
        if unknown:
            return CommandResult((), 1, f"Error: unknown flag: {unknown[0].split('=', 1)[0]}\n", "")
        subcommand = next(arg for arg in command[1:] if not arg.startswith("-"))
        if subcommand != "get":
            return CommandResult((), 1, f'Error: unknown command "{subcommand}" for "etcdctl"\n', "")
        endpoints = next(arg for arg in command if arg.startswith("--endpoints=")).split("=", 1)[1]
        if not set(endpoints.split(",")) <= SERVED_URLS:
            return CommandResult((), 1, UNREACHABLE, "")
        prefix = command[command.index("get") + 1]
        users = {f"{tenant}-datastore-certificate": tenant for tenant in self.schemas}
        user = ROOT_USER if ROOT_SECRET in secrets else users[secrets[0]]
        allowed = "/" if user == ROOT_USER else f"/{self.schemas[user]}/"
        if self.auth_enabled and (user in self.without_role or not prefix.startswith(allowed)):
            return CommandResult((), 1, PERMISSION_DENIED, "")
        listed = "".join(f"{key}\n" for key in self.stored() if key.startswith(prefix))
        return ok(listed)

    def answers(self, namespace: str, pod_name: str) -> dict[str, CommandResult]:
        pod = self.pods()[namespace, pod_name]
        sources = pod["spec"]["volumes"][0]["projected"]["sources"]
        secrets = [source["secret"]["name"] for source in sources]
        return {container["name"]: self.answer(container, secrets) for container in pod["spec"]["containers"]}

    def pod_status(self, command: str) -> CommandResult:
        asked = re.fullmatch(r"get pod (\S+) -n (\S+) -o json", command)
        if asked is None or (asked[2], asked[1]) not in self.pods():
            return CommandResult((), 1, "", f'Error from server (NotFound): pods "{command.split()[2]}" not found\n')
        answers = self.answers(asked[2], asked[1])
        statuses = [
            {"name": container, "state": {"terminated": {"exitCode": answer.returncode}}}
            for container, answer in answers.items()
        ]
        failed = any(answer.returncode for answer in answers.values())
        return ok(json.dumps({"status": {"phase": "Failed" if failed else "Succeeded", "containerStatuses": statuses}}))

    def log(self, command: str) -> CommandResult:
        match = re.match(r"logs -n (\S+) (\S+) -c (\S+)", command)
        answer = self.answers(match[1], match[2])[match[3]]
        return ok(answer.stdout)  # kubectl logs shows what the container printed, whatever its exit code


def ok(stdout: str = "") -> CommandResult:
    return CommandResult((), 0, stdout, "")
