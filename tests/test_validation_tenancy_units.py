"""Pieces of the isolation check: addresses, the verdict on foreign credentials, the etcd schema."""

from validation.checks.tenancy import (
    container_trouble,
    coredns_problems,
    credential_verdict,
    datastore_schema,
    host_port,
    node_problems,
    pod_readiness_problem,
)
from validation.host import CommandResult
from validation.stack_outputs import Tenant


def tenant(name: str) -> Tenant:
    return Tenant(name, "https://172.18.255.3:6443", "v1.36.4", name, f"tenants_{name}", ("w1",), (), 0, ())


A, B = tenant("tenant-a"), tenant("tenant-b")


def answer(stderr: str) -> CommandResult:
    return CommandResult(("kubectl",), 1, "", stderr)


def test_addresses_compare_by_lowercase_host_and_port_with_https_default():
    # Host names are case-insensitive (RFC 4343); https means port 443 when none is given.
    assert host_port("https://Tenant-A.Lab:6443") == ("tenant-a.lab", 6443)
    assert host_port("tenant-a.lab") == ("tenant-a.lab", 443)
    assert host_port("https://:6443") == ("", 6443)


def test_a_403_without_a_user_name_still_says_the_credentials_were_authenticated():
    refused, said = credential_verdict(A, B, answer("Error from server (Forbidden): forbidden\n"))
    assert not refused
    assert said.startswith("tenant-b authenticated tenant-a's credentials as some user (403 Forbidden")


def test_an_error_that_is_no_401_is_not_counted_as_a_refusal():
    refused, said = credential_verdict(A, B, answer("error: the server has asked for the client to retry\n"))
    assert not refused and said.startswith("tenant-a's credentials against tenant-b:")


def test_the_schema_comes_from_status_else_spec_else_none_is_known():
    # A TenantControlPlane Kamaji has not reconciled yet has no status.
    assert datastore_schema({"spec": {"dataStoreSchema": "tenants_a"}}) == "tenants_a"
    assert datastore_schema({"spec": {}}) == ""


def coredns(ready: str, *containers: dict, conditions: tuple[dict, ...] = ()) -> dict:
    return {
        "metadata": {"name": "coredns-1"},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": ready}, *conditions],
            "containerStatuses": list(containers),
        },
    }


def test_each_unready_container_is_explained_with_its_restarts():
    crashing = {
        "name": "coredns",
        "ready": False,
        "restartCount": 7,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}},
    }
    probing = {"name": "sidecar", "ready": False, "restartCount": 1, "state": {"running": {}}}
    fine = {"name": "other", "ready": True, "restartCount": 0, "state": {"running": {}}}
    assert pod_readiness_problem(coredns("False", crashing, probing, fine)) == (
        "Running but not Ready (coredns CrashLoopBackOff: back-off 5m0s, 7 restarts; "
        "sidecar running but not ready (readiness probe failing), 1 restart)"
    )


def test_a_pod_whose_containers_are_ready_but_the_pod_is_not_names_the_condition():
    ready = {"name": "coredns", "ready": True, "restartCount": 0, "state": {"running": {}}}
    unknown = coredns("Unknown", ready)
    assert pod_readiness_problem(unknown) == "Running but not Ready (no Ready condition)"
    unknown["status"]["conditions"][0].update(reason="NodeLost", message="node w1 is unreachable")
    assert pod_readiness_problem(unknown) == "Running but not Ready (NodeLost: node w1 is unreachable)"


def test_no_coredns_pods_at_all_is_a_problem_naming_where_they_were_looked_for():
    assert coredns_problems([]) == ["no CoreDNS pods (k8s-app=kube-dns) in kube-system"]


def test_a_node_kubelet_never_reported_on_has_no_ready_condition():
    # A node object exists before its kubelet posts status (e.g. registered, then the kubelet died).
    unknown_version = "node w1 runs kubelet of unknown version, not the tenant's v1.36.4 (an unfinished upgrade? " \
        "run pulumi up again)"
    for node in ({"metadata": {"name": "w1"}, "status": {}}, {"metadata": {"name": "w1"}}):
        problems = node_problems([node], ("w1",), "v1.36.4")
        assert problems == ["node w1 NotReady (no Ready condition)", unknown_version]


def test_a_container_stuck_without_reason_is_named_by_its_state():
    stopped = {"name": "coredns", "restartCount": 0, "state": {"terminated": {"exitCode": 1}}}
    assert container_trouble(stopped) == "coredns terminated, 0 restarts"


def test_a_container_or_pod_the_kubelet_has_not_reported_on_yet_is_not_ready():
    assert container_trouble({"name": "coredns", "ready": False, "restartCount": 1}) == "coredns not ready, 1 restart"
    assert pod_readiness_problem({"metadata": {"name": "coredns-1"}}) == "Unknown (no Ready condition)"
