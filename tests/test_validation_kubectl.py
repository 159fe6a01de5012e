"""The kubectl command lines the validation suite relies on, and readers of what comes back."""

import json
import threading
from pathlib import Path

import pytest

from validation.host import CommandResult
from validation.kube import Kubectl, condition, kubeconfig_cluster
from validation.results import CheckFailed, CheckSkipped


class Recorder:
    """A runner that answers every command with `reply` and remembers the arguments after the kubeconfig."""

    def __init__(self, reply: str = "") -> None:
        self.reply = reply
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv, stdin=None, timeout=60.0, env=None):
        self.calls.append(tuple(argv[4:]))  # after kubectl --kubeconfig <file> --request-timeout=...
        return CommandResult(tuple(argv), 0, self.reply, "")


def kubectl(reply: str = "") -> tuple[Kubectl, Recorder]:
    runner = Recorder(reply)
    return Kubectl(runner, Path("/tmp/k"), "tenant-a"), runner


def test_cleanup_asks_for_deletion_without_blocking_and_treats_gone_as_done():
    # --ignore-not-found: a namespace already gone is no error; --wait=false: the request returns at
    # once and the suite polls with bounded requests; `-o name` prints nothing once it is gone.
    client, runner = kubectl()
    client.delete_namespace("validate-x")
    gone, _ = client.namespace_gone("validate-x")
    assert runner.calls == [
        ("delete", "namespace", "validate-x", "--ignore-not-found", "--wait=false"),
        ("get", "namespace", "validate-x", "--ignore-not-found", "-o", "name"),
    ]
    assert gone


def test_a_server_side_dry_run_asks_for_the_admitted_object_as_json():
    client, runner = kubectl(json.dumps({"kind": "Pod", "spec": {"schedulerName": "hami-scheduler"}}))
    admitted = client.admit({"kind": "Pod"}, "validate-y")
    (call,) = runner.calls
    assert call[call.index("-o") + 1] == "json" and "--dry-run=server" in call
    assert admitted["spec"]["schedulerName"] == "hami-scheduler"


def test_a_broken_kubeconfig_fails_the_check_with_the_readers_words():
    with pytest.raises(CheckFailed) as failed:
        kubeconfig_cluster("clusters: [unclosed")
    assert str(failed.value) == "kubeconfig is not valid YAML"


def test_an_object_without_status_has_no_conditions():
    # A TenantControlPlane has no status until Kamaji first reconciles it.
    assert condition({"kind": "TenantControlPlane", "metadata": {"name": "tenant-a"}}, "Ready") == {}


def test_output_that_is_not_json_names_the_command_a_user_can_rerun():
    client, _ = kubectl("error: unknown resource\n")
    with pytest.raises(CheckFailed) as failed:
        client.get("nodes")
    assert str(failed.value) == (
        "`kubectl --kubeconfig kubeconfigs/tenant-a.kubeconfig get nodes -o json` did not print JSON"
    )


def test_calls_in_flight_side_by_side_report_an_unreachable_cluster_once():
    # Tenants' checks share the management cluster: two calls fail together, one says why, the other skips.
    both_asked = threading.Barrier(2, timeout=10)

    class Unreachable:
        def run(self, argv, stdin=None, timeout=60.0, env=None):
            both_asked.wait()
            return CommandResult(tuple(argv), 1, "", "Unable to connect to the server: dial tcp: no route to host\n")

    management = Kubectl(Unreachable(), Path("/tmp/k"), "management")
    raised: list[Exception] = []

    def ask() -> None:
        try:
            management.get("tenantcontrolplanes")
        except (CheckFailed, CheckSkipped) as error:
            raised.append(error)

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(type(error).__name__ for error in raised) == ["CheckFailed", "CheckSkipped"]
    assert "no route to host" in management.unreachable
