"""The snapshot tests' look at a real etcd (tests/real_etcd.py): a tenant to snapshot, the program's client with
the root certificate, and etcdctl beside it for setup and inspection, apart from the program's client."""

from __future__ import annotations

import base64
import datetime
import json
import subprocess

from snapshot.core import Target
from snapshot.etcd import EtcdClient
from tests.real_etcd import CALL_TIMEOUT, ETCDCTL, RealEtcd

WHEN = datetime.datetime(2026, 12, 4, 18, 30, 5, tzinfo=datetime.UTC)
TENANT = Target("tenant-a", "tenants", "tenants_tenant-a", "v1.36.4", "https://172.30.255.2:6443")
NEIGHBOUR = "tenants_tenant-b"
# What Kubernetes stores: protobuf with its "k8s\0" magic (kubernetes apimachinery runtime/serializer/protobuf),
# so values hold NUL, newlines, quotes, backslashes and bytes that are no UTF-8.
PROTOBUF = b"k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x80\xff\xfe\"\\'\r\n-- end"
SECRETS = {"ca": {"type": "Opaque", "data": {"ca.crt": base64.b64encode(b"PEM").decode()}}}


def root(server: RealEtcd) -> EtcdClient:
    """The program's etcd client with the root certificate (the DataStore's, in a lab)."""
    return EtcdClient(server.url.removeprefix("https://"), server.root.ca, server.root.cert, server.root.key)


def etcdctl(client: EtcdClient, *args: str | bytes, stdin: bytes | None = None) -> bytes:
    """etcdctl as the client's user at the client's address: the tests' own look at etcd, apart from the program's
    client, for setup and inspection."""
    tls = (f"--cacert={client.ca}", f"--cert={client.cert}", f"--key={client.key}")
    done = subprocess.run(
        [str(ETCDCTL), f"--endpoints=https://{client.address}", *tls, *args],
        input=stdin,
        capture_output=True,
        timeout=CALL_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"etcdctl {args}: {done.stderr.decode(errors='replace')}"
    return done.stdout


def put(client: EtcdClient, key: bytes, value: bytes, *flags: str) -> None:
    # etcdctl put reads the value from stdin when none is given: any bytes, as they are (an empty one it refuses
    # there, so that goes as an argument).
    if value:
        etcdctl(client, "put", *flags, "--", key, stdin=value)
    else:
        etcdctl(client, "put", *flags, "--", key, "")


def dump(client: EtcdClient, prefix: str) -> list[dict]:
    """Every kv under prefix as etcdctl reports it: key, value, create and mod revision, version, lease."""
    return json.loads(etcdctl(client, "get", prefix, "--prefix", "-w", "json")).get("kvs") or []


def contents(client: EtcdClient, prefix: str) -> dict[bytes, bytes]:
    return {base64.b64decode(kv["key"]): base64.b64decode(kv.get("value", "")) for kv in dump(client, prefix)}


def seeded(server: RealEtcd) -> EtcdClient:
    """The root client on a server holding five objects of TENANT and of NEIGHBOUR, a key just past TENANT's prefix,
    an empty value and one that starts with a dash."""
    client = root(server)
    for schema in (TENANT.schema, NEIGHBOUR):
        for index in range(5):
            put(client, f"/{schema}/configmaps/default/cm-{index}".encode(), PROTOBUF + bytes([index]))
    put(client, b"/tenants_tenant-a0/outside", b"just past the prefix")  # the prefix's range end, not in it
    put(client, f"/{TENANT.schema}/secrets/default/empty".encode(), b"")
    put(client, f"/{TENANT.schema}/secrets/default/-dash".encode(), b"-starts with a dash")
    return client
