"""The objects the validation suite creates are ones an API server takes, and pods a restricted namespace admits."""

from __future__ import annotations

import pytest

from tests.kube_api import refusals
from validation import manifests

ETCD_FILES = {
    ("root-certs", "ca.crt"): "ca.crt",
    ("root-certs", "tls.crt"): "client.crt",
    ("root-key", "tls.key"): "client.key",
}
ETCD_COMMANDS = {
    "own": ["get", "/tenants_tenant_a/", "--prefix", "--keys-only"],
    "user": ["user", "get", "6f1c2b2e-93b4-4a57-9d0c-2f1f0f3b9a11", "-w", "json"],
}


def every_object():
    return {
        "namespace": manifests.namespace("validate-x"),
        "sleeper": manifests.sleeper_pod("probe", command="echo hi", annotations={"a": "b"}),
        "gpu": manifests.gpu_pod("slice", 4096, 25, {"hami.io/gpu-scheduler-policy": "binpack"}),
        "quota": manifests.resource_quota("gpumem", {"limits.nvidia.com/gpumem": "8192"}),
        "config-map": manifests.config_map("marker", {"value": "0123"}),
        "etcdctl": manifests.etcdctl_pod("reader", "quay.io/coreos/etcd:v3.6.12", "https://e:2379", ETCD_FILES,
                                         ETCD_COMMANDS),
    }


@pytest.mark.parametrize("name", list(every_object()))
def test_an_api_server_takes_every_object_the_suite_creates(name):
    assert refusals(every_object()[name]) == []


def test_the_api_table_refuses_what_a_server_would():
    pod = manifests.sleeper_pod("probe")
    pod["spec"]["restartPolicy"] = "never"
    pod["spec"]["containers"][0]["imagePullSecret"] = "x"
    pod["spec"]["terminationGracePeriodSeconds"] = True
    del pod["spec"]["containers"][0]["image"]
    assert refusals(pod) == [
        "Pod.spec.containers[0].image: required value",
        "Pod.spec.containers[0].imagePullSecret: unknown field",
        "Pod.spec.restartPolicy: 'never' is not one of Always, OnFailure, Never",
        "Pod.spec.terminationGracePeriodSeconds: expected int, got True",
    ]
    assert refusals({"apiVersion": "apps/v1", "kind": "Deployment"})


# Pod Security Standards, "restricted" (kubernetes.io/docs/concepts/security/pod-security-standards):
# no privilege escalation, every capability dropped, non-root, and the RuntimeDefault (or Localhost)
# seccomp profile, each set on the container or inherited from the pod.
def restricted_violations(pod: dict) -> list[str]:
    spec = pod["spec"]
    pod_context = spec.get("securityContext", {})
    problems = []
    for container in spec["containers"]:
        context = container.get("securityContext", {})
        name = container["name"]
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation is not false")
        if "ALL" not in context.get("capabilities", {}).get("drop", []):
            problems.append(f"{name}: capabilities are not all dropped")
        if context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is not True:
            problems.append(f"{name}: may run as root")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            problems.append(f"{name}: runs as UID 0")
        seccomp = context.get("seccompProfile", pod_context.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: seccomp profile {seccomp}")
    return problems


@pytest.mark.parametrize("name", ["sleeper", "gpu", "etcdctl"])
def test_every_pod_meets_the_restricted_pod_security_level(name):
    pod = every_object()[name]
    assert restricted_violations(pod) == []
    # A pod that ran once is done, and deleting it does not wait out a grace period.
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["terminationGracePeriodSeconds"] <= 1


def test_the_etcd_reader_gets_only_the_certificate_files_it_names_and_runs_each_command_once():
    pod = every_object()["etcdctl"]
    (volume,) = pod["spec"]["volumes"]
    projected = {source["secret"]["name"]: source["secret"]["items"] for source in volume["projected"]["sources"]}
    assert projected == {
        "root-certs": [{"key": "ca.crt", "path": "ca.crt"}, {"key": "tls.crt", "path": "client.crt"}],
        "root-key": [{"key": "tls.key", "path": "client.key"}],
    }
    # Readable by the pod's group (fsGroup), by nobody else.
    assert volume["projected"]["defaultMode"] == 0o440 and pod["spec"]["securityContext"]["fsGroup"] == 65534
    for container in pod["spec"]["containers"]:
        (mount,) = container["volumeMounts"]
        assert (mount["name"], mount["readOnly"]) == (volume["name"], True)
        command = container["command"]
        arguments = ETCD_COMMANDS[container["name"]]
        assert command[-len(arguments):] == arguments
        flags = dict(flag.split("=", 1) for flag in command[1:-len(arguments)])
        assert flags["--endpoints"] == "https://e:2379"
        assert {flags["--cacert"], flags["--cert"], flags["--key"]} == {
            f"{mount['mountPath']}/ca.crt", f"{mount['mountPath']}/client.crt", f"{mount['mountPath']}/client.key"}


def test_gpu_pods_ask_hami_for_a_slice_and_not_for_a_whole_gpu():
    limits = every_object()["gpu"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpumem": "4096", "nvidia.com/gpucores": "25"}


def test_everything_the_suite_creates_is_labelled_as_its_own():
    for name, obj in every_object().items():
        assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "kamaji-hami-lab-validation"}, name
