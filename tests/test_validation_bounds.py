"""How a validation run ends: within its time bound, once per unreachable cluster, cleaning up only
what it created, with hints that name the kubeconfig, and with exit codes that mean one thing each."""

from __future__ import annotations

import io
import json
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.test_validation import OUTPUTS, FakeClock, created_namespaces, error, healthy_lab, ok, result, validate
from validation import kube
from validation.cli import main

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


def outputs_pointing_at(tmp_path: Path, server: str) -> Path:
    """The recorded outputs with every kubeconfig leading to server (whose certificate is never checked)."""
    document = json.loads(OUTPUTS.read_text())

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
    # Short limits keep the test quick; the bound scales with them as the README states:
    # one timed-out call per cluster, (1 + tenants) x CALL_TIMEOUT.
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
    assert elapsed < len(clusters) * kube.CALL_TIMEOUT + 5  # 5 s for starting kubectl and Python
    report = json.loads(stdout.getvalue())
    assert code == 1
    failed = [r for r in report["results"] if r["status"] == "fail"]
    # Each cluster is reported unreachable once; everything that needs it is skipped, saying why.
    assert sorted(r["reason"].split()[3] for r in failed) == sorted(clusters)
    assert all(r["reason"].startswith("cannot reach the ") for r in failed)
    skipped = [r for r in report["results"] if r["status"] == "skip"]
    assert len(failed) + len(skipped) == len(report["results"])
    assert all("unreachable" in r["reason"] for r in skipped)
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
    lab.on("tenant-b", r"^get namespace validate-", ok("namespace/still-terminating\n"))

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
