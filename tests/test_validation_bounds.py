"""How a validation run ends: within its time bound, once per unreachable cluster, cleaning up only
what it created, with hints that name the kubeconfig, and with exit codes that mean one thing each."""

from __future__ import annotations

import io
import json
import re
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.test_validation import (
    OUTPUTS,
    TENANTS,
    FakeClock,
    created_namespaces,
    error,
    healthy_lab,
    ok,
    outputs_with,
    recorded,
    result,
    validate,
)
from validation import kube, manifests
from validation.checks import CHECKS_BY_NAME, base
from validation.checks.base import ALL_TENANTS
from validation.checks.datastore import READ_TIMEOUT
from validation.cli import main
from validation.host import CommandResult
from validation.kube import Kubectl
from validation.results import CheckFailed
from validation.stack_outputs import MANAGEMENT

TARGETS = [MANAGEMENT, ALL_TENANTS, *TENANTS]

# kubectl's words for a request the server refused: kubernetes/kubectl pkg/cmd/util/helpers.go, StandardErrorMessage.
NO_ROUTE = "Unable to connect to the server: dial tcp 172.18.255.200:6443: connect: no route to host\n"
FORBIDDEN_NAMESPACE = (
    'Error from server (Forbidden): namespaces is forbidden: User "kubernetes-admin" cannot create resource '
    '"namespaces" in API group "" at the cluster scope\n'
)


class SilentServer:
    """A loopback TCP server that accepts every connection and never sends a byte."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:  # closed
                return
            self.connections.append(connection)

    def close(self) -> None:
        self.socket.close()
        for connection in self.connections:
            connection.close()


def outputs_pointing_at(tmp_path: Path, server: str, outputs: Path = OUTPUTS) -> Path:
    """The recorded outputs with every kubeconfig leading to server (whose certificate is never checked)."""
    document = json.loads(outputs.read_text())

    def moved(text: str) -> str:
        config = yaml.safe_load(text)
        for cluster in config["clusters"]:
            # The recorded CAs are placeholders kubectl cannot parse; the handshake never ends anyway.
            cluster["cluster"] = {"server": server, "insecure-skip-tls-verify": True}
        for user in config["users"]:
            user["user"] = {"token": "placeholder"}  # likewise the recorded client certificates
        return yaml.safe_dump(config)

    document["managementKubeconfig"] = moved(document["managementKubeconfig"])
    document["kubeconfigs"] = {name: moved(text) for name, text in document["kubeconfigs"].items()}
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs a real kubectl")
def test_a_lab_that_accepts_connections_and_never_answers_ends_within_the_bound(tmp_path, monkeypatch):
    # Short limits keep the test quick; the bound scales with them as the README states: one
    # timed-out call for the management cluster, then one for all tenants side by side, 2 x CALL_TIMEOUT.
    monkeypatch.setattr(kube, "REQUEST_TIMEOUT", 1)
    monkeypatch.setattr(kube, "CALL_TIMEOUT", 2)
    server = SilentServer()
    outputs = outputs_pointing_at(tmp_path, f"https://127.0.0.1:{server.port}")
    stdout = io.StringIO()

    started = time.monotonic()
    try:
        code = main(["--outputs", str(outputs), "--json", "-"], stdout=stdout)
    finally:
        server.close()
    elapsed = time.monotonic() - started

    clusters = ("management", "tenant-a", "tenant-b")
    assert elapsed < 2 * kube.CALL_TIMEOUT + 5  # 5 s for starting kubectl and Python
    report = json.loads(stdout.getvalue())
    assert code == 1
    failed = [r for r in report["results"] if r["status"] == "fail"]
    # Each cluster is reported unreachable once; everything that needs it is skipped, saying why.
    assert sorted(r["reason"].split()[3] for r in failed) == sorted(clusters)
    assert all(r["reason"].startswith("cannot reach the ") for r in failed)
    skipped = [r for r in report["results"] if r["status"] == "skip"]
    assert len(failed) + len(skipped) == len(report["results"])
    # Both skip before asking anything: outputs.json has neither grafanaUrl nor teamKubeconfigs.
    assert all("unreachable" in r["reason"] for r in skipped if r["check"] not in ("observability", "team-isolation"))
    assert report["warnings"] == []  # no namespace was created, so none is left behind


def test_every_kubectl_call_has_a_request_timeout():
    lab = healthy_lab()
    validate(lab)

    kubectl_calls = [call for call in lab.calls if call.kubeconfig]
    assert kubectl_calls
    assert {call.request_timeout for call in kubectl_calls} == {f"{kube.REQUEST_TIMEOUT}s"}


def test_an_unreachable_management_cluster_is_reported_once_and_its_dependents_skipped():
    lab = healthy_lab()
    lab.on("management", r"", error(NO_ROUTE))

    code, report = validate(lab)

    assert code == 1
    assert result(report, "platform", "management")["reason"].startswith("cannot reach the management API server")
    for tenant in ("tenant-a", "tenant-b"):
        control_plane = result(report, "control-plane", tenant)
        assert control_plane["status"] == "skip" and "management was unreachable" in control_plane["reason"]
        assert result(report, "nodes", tenant)["status"] == "pass"  # the tenants themselves still answer
    assert len(lab.commands("management", "")) == 1  # asked once, not once per check


def test_a_namespace_that_was_never_created_gets_no_cleanup_warning():
    lab = healthy_lab()
    lab.on("tenant-a", r"^create -f -$", error(FORBIDDEN_NAMESPACE), stdin='"Namespace"')

    code, report = validate(lab, "--only", "konnectivity")

    assert code == 1
    assert "cannot create resource" in result(report, "konnectivity", "tenant-a")["reason"]
    assert report["warnings"] == []
    assert not lab.commands("tenant-a", r"^delete ")


def test_a_namespace_that_is_not_deleted_is_named_with_the_kubeconfig_to_delete_it_with():
    lab = healthy_lab()
    lab.on("tenant-b", r"^get namespace validate-", still_there)

    code, report = validate(lab, "--only", "konnectivity", clock=FakeClock())

    (namespace,) = created_namespaces(lab, "tenant-b")
    (warning,) = report["warnings"]
    assert code == 0  # a slow cleanup does not fail the lab
    assert "still there after 90s" in warning
    assert f"`kubectl --kubeconfig kubeconfigs/tenant-b.kubeconfig delete namespace {namespace}`" in warning


def test_failed_kubectl_calls_are_shown_with_the_kubeconfig_a_user_has():
    lab = healthy_lab()
    lab.on("tenant-a", r"^get nodes ", error("Error from server (InternalError): etcdserver: leader changed\n"))

    _, report = validate(lab, "--only", "nodes")

    reason = result(report, "nodes", "tenant-a")["reason"]
    assert reason.startswith("`kubectl --kubeconfig kubeconfigs/tenant-a.kubeconfig get nodes -o json` failed")


@pytest.mark.parametrize("arguments", [["--only", "no-such-check"], ["--no-such-flag"]])
def test_wrong_arguments_have_their_own_exit_status(arguments, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--outputs", str(OUTPUTS), *arguments], runner=healthy_lab(), clock=FakeClock())

    assert exited.value.code == 64  # EX_USAGE (sysexits.h); 2 stays "no stack outputs"
    assert "usage:" in capsys.readouterr().err


def test_unreadable_outputs_exit_2(tmp_path):
    assert main(["--outputs", str(tmp_path / "missing.json")], runner=healthy_lab(), clock=FakeClock()) == 2


def test_outputs_printed_without_show_secrets_say_so(tmp_path, capsys):
    # `pulumi stack output --json` without --show-secrets prints "[secret]" for each secret output.
    document = json.loads(OUTPUTS.read_text())
    document["kubeconfigs"] = document["managementKubeconfig"] = "[secret]"
    redacted = tmp_path / "outputs.json"
    redacted.write_text(json.dumps(document))

    assert main(["--outputs", str(redacted)], runner=healthy_lab(), clock=FakeClock()) == 2
    assert "--show-secrets" in capsys.readouterr().err


# --- Tenants side by side: a run lasts as long as its slowest tenant. ---


def waits_for_each_other(lab, pattern: str) -> list[bool]:
    """Each tenant's call matching pattern answers only once every tenant has made it.

    Checked one tenant after another, the first would wait for a call that never comes (10 s, then
    its flag says so); side by side, all arrive.
    """
    arrived = {tenant: threading.Event() for tenant in TENANTS}
    met: list[bool] = []
    for tenant in TENANTS:
        # the healthy answer: the rule this one goes in front of
        healthy = next(rule for rule in lab.rules if rule.cluster == tenant and rule.pattern == pattern).replies[0]

        def meet(command: str, tenant: str = tenant, healthy=healthy):
            arrived[tenant].set()
            met.append(all(event.wait(10) for event in arrived.values()))
            return healthy(command) if callable(healthy) else healthy

        lab.on(tenant, pattern, meet)
    return met


def test_the_tenants_are_checked_side_by_side():
    lab = healthy_lab()
    met = waits_for_each_other(lab, r"^get nodes ")

    code, report = validate(lab, "--only", "nodes", clock=FakeClock())

    assert met == [True, True]
    assert code == 0 and [r["target"] for r in report["results"]] == list(TENANTS)


def test_each_result_prints_as_it_finishes_and_the_table_ends_grouped_by_target():
    lab = healthy_lab()
    shown = io.StringIO()
    printed_first: list[bool] = []

    def after_tenant_a_printed(command: str):
        # tenant-b's nodes check waits until tenant-a's line is out (10 s at most)
        for _ in range(1000):
            if re.search(r"^PASS  nodes +tenant-a ", shown.getvalue(), re.MULTILINE):
                printed_first.append(True)
                break
            time.sleep(0.01)
        else:
            printed_first.append(False)
        return ok(recorded("nodes-tenant-b.json"))

    lab.on("tenant-b", r"^get nodes ", after_tenant_a_printed)
    code = main(
        ["--outputs", str(OUTPUTS), "--only", "control-plane", "nodes"], runner=lab, clock=FakeClock(), stdout=shown
    )

    lines = shown.getvalue().splitlines()
    assert code == 0 and printed_first == [True]
    assert sorted(lines[:4]) == sorted(line for line in lines[:4] if line.startswith("PASS"))
    assert lines[4:7] == [
        "by target:",
        "  tenant-a     PASS control-plane, nodes",
        "  tenant-b     PASS control-plane, nodes",
    ]


def test_the_json_report_keeps_check_order_then_tenant_order():
    _, report = validate(healthy_lab())
    order = [(r["check"], r["target"]) for r in report["results"]]
    checks = [name for name in CHECKS_BY_NAME]
    assert order == sorted(order, key=lambda pair: (checks.index(pair[0]), TARGETS.index(pair[1])))


def test_a_tenant_s_checks_keep_their_order_and_each_cleans_up_before_the_next():
    lab = healthy_lab()
    validate(lab, clock=FakeClock())

    for tenant in TENANTS:
        steps = [
            ("create" if call.command.startswith("create") else "delete", call.command, call.stdin)
            for call in lab.commands(tenant, r"^create -f -$|^delete namespace ")
            if not call.command.startswith("create") or '"Namespace"' in (call.stdin or "")
        ]
        created = [json.loads(stdin)["metadata"]["name"] for kind, _, stdin in steps if kind == "create"]
        assert [name.split("-")[1] for name in created] == [
            "datastore",
            "konnectivity",
            "webhook",
            "fractional",
            "sharing",
            "quota",
        ]
        # create a, delete a, create b, delete b, ...: every namespace is gone before the next check starts
        assert [kind for kind, *_ in steps] == ["create", "delete"] * len(created)
        assert [command.split()[2] for kind, command, _ in steps if kind == "delete"] == created


def still_there(command: str) -> CommandResult:
    """`kubectl get namespace NAME -o name` while the namespace terminates: its name."""
    return ok(f"namespace/{command.split()[2]}\n")


def stuck_namespaces(lab, tenant: str) -> None:
    """Scratch namespaces that never go away: each of the tenant's 6 cleanups waits its full 90 s."""
    lab.on(tenant, r"^get namespace validate-", still_there)


def elapsed(lab, outputs: Path = OUTPUTS) -> float:
    clock = FakeClock()
    validate(lab, clock=clock, outputs=outputs)
    return clock.now()


def test_the_run_lasts_as_long_as_its_slowest_tenant_not_the_sum_of_them(tmp_path):
    alone = outputs_with(
        tmp_path, lambda document: [document[key].pop("tenant-b") for key in ("tenants", "kubeconfigs")]
    )
    one = healthy_lab()
    stuck_namespaces(one, "tenant-a")
    slowest_alone = elapsed(one, alone)
    assert slowest_alone >= 6 * kube.NAMESPACE_DELETE_TIMEOUT

    both = healthy_lab()
    for tenant in TENANTS:
        stuck_namespaces(both, tenant)
    beside_a_healthy_one = healthy_lab()
    stuck_namespaces(beside_a_healthy_one, "tenant-a")

    assert elapsed(both) == slowest_alone  # two tenants stuck alike take as long as one
    assert elapsed(beside_a_healthy_one) == slowest_alone
    assert elapsed(healthy_lab()) < kube.NAMESPACE_DELETE_TIMEOUT


# --- Every kubectl call: its request timeout ends before the call itself is stopped. ---


def test_kubectl_s_request_timeout_is_below_its_call_limit_for_every_call_of_a_run():
    assert kube.REQUEST_TIMEOUT < kube.CALL_TIMEOUT
    lab = healthy_lab()
    validate(lab)
    kubectl_calls = [call for call in lab.calls if call.kubeconfig]
    assert all(int(call.request_timeout.removesuffix("s")) < call.timeout for call in kubectl_calls)


@pytest.mark.parametrize("call_limit", [kube.MIN_CALL_SECONDS, 2.4, 3, 7.5, 8, 14.2, 30, 120])
@pytest.mark.parametrize("wanted", [1, 5, 15, 60])
def test_a_request_timeout_always_ends_before_the_call_it_belongs_to(call_limit, wanted):
    request = kube.request_timeout_within(wanted, call_limit)
    assert 1 <= request < call_limit
    assert request == min(wanted, request)  # never longer than asked for


def test_no_call_starts_with_less_than_its_shortest_limit_left_before_a_deadline():
    lab = healthy_lab()
    clock = FakeClock()
    kubectl = Kubectl(lab, Path("/tmp/tenant-a.kubeconfig"), "tenant-a")
    kubectl.deadline = (clock, kube.MIN_CALL_SECONDS + 1.5)
    kubectl.call("get", "nodes")
    assert lab.calls[-1].timeout == kube.MIN_CALL_SECONDS + 1.5 and lab.calls[-1].request_timeout == "3s"
    clock.sleep(2)
    with pytest.raises(CheckFailed, match=r"tenant-a ran out of time before `kubectl get nodes`"):
        kubectl.call("get", "nodes")


def test_etcdctl_gives_up_before_the_check_stops_waiting_for_its_pod():
    pod = manifests.etcdctl_pod("p", "etcd:v3", "https://e:2379", {("s", "ca.crt"): manifests.ETCD_CA}, {"own": "/"})
    command = pod["spec"]["containers"][0]["command"]
    limits = {arg.split("=")[0]: int(arg.split("=")[1].removesuffix("s")) for arg in command if "-timeout=" in arg}
    # etcdctl dials, then runs its command: both within the wait for the pod to finish.
    assert limits["--dial-timeout"] + limits["--command-timeout"] < READ_TIMEOUT


def test_an_interrupted_run_starts_no_other_check(monkeypatch, capsys):
    lab = healthy_lab()
    interrupted = threading.Event()
    wait_for = base.wait_for

    def interrupt_once(event, timeout=None):
        if not interrupted.is_set():  # the first wait for a tenant: where Ctrl-C would land
            interrupted.set()
            raise KeyboardInterrupt
        return wait_for(event, timeout)

    def probe_after_the_interrupt(command: str):
        interrupted.wait(10)  # each tenant is inside konnectivity when the interrupt comes
        return ok(recorded("pod-probe-running.json"))

    for tenant in TENANTS:
        lab.on(tenant, r"^get pod probe ", probe_after_the_interrupt)
    monkeypatch.setattr(base, "wait_for", interrupt_once)

    with pytest.raises(KeyboardInterrupt):
        validate(lab, "--only", "konnectivity", "webhook", clock=FakeClock())

    for tenant in TENANTS:
        (namespace,) = created_namespaces(lab, tenant)
        assert namespace.startswith("validate-konnectivity-")  # webhook never started
        assert [call.command.split()[2] for call in lab.commands(tenant, r"^delete namespace ")] == [namespace]
    assert "validation: interrupted" in capsys.readouterr().err


def test_isolation_tries_the_tenants_apis_side_by_side():
    lab = healthy_lab()
    met = waits_for_each_other(lab, r" get namespaces ")

    code, report = validate(lab, "--only", "isolation", clock=FakeClock())

    assert met == [True, True]  # each API was asked while the other's answer was still outstanding
    assert code == 0 and result(report, "isolation", "all tenants")["status"] == "pass"
