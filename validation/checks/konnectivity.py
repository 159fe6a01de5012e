"""Check 5: the tenant API server reaches kubelets (logs, exec) through Konnectivity.

A hosted control plane has no route to its workers; without working
Konnectivity agents `kubectl logs` and `kubectl exec` fail with "No agent available".
"""

from __future__ import annotations

from validation import manifests
from validation.checks.base import per_tenant
from validation.host import CommandResult, poll
from validation.lab import Lab
from validation.pods import wait_until_running
from validation.results import CheckFailed
from validation.stack_outputs import Tenant

POD_START_TIMEOUT = 120  # the first pod on a fresh worker pulls busybox
# Right after Running, the container's log can still be empty; ask again for this long.
LOG_TIMEOUT = 10
LOG_INTERVAL = 2
LOG_LINE = "konnectivity-probe-log"
EXEC_LINE = "konnectivity-probe-exec"


def expect_output(result: CommandResult, line: str, what: str) -> None:
    if not result.ok:
        raise CheckFailed(f"{what} failed: {result.error}")
    if line not in result.stdout:
        raise CheckFailed(f"{what} printed {result.stdout.strip()[:100]!r} instead of {line!r}")


@per_tenant("konnectivity", "kubectl logs and exec reach a pod through the Konnectivity tunnel")
def konnectivity(lab: Lab, tenant: Tenant) -> str:
    kubectl = lab.kubectl(tenant)
    with lab.scratch_namespace(kubectl, "konnectivity") as namespace:
        pod = manifests.sleeper_pod("probe", command=f"echo {LOG_LINE}; exec sleep 3600")
        kubectl.must_create(pod, "-n", namespace)
        running = wait_until_running(lab.clock, kubectl, namespace, "probe", POD_START_TIMEOUT)

        def read_logs() -> tuple[bool, CommandResult]:
            logs = kubectl.run("logs", "-n", namespace, "probe")
            empty = logs.ok and not logs.stdout.strip()  # only this is worth another try
            return not empty, logs

        got_logs, logs = poll(lab.clock, LOG_TIMEOUT, read_logs, interval=LOG_INTERVAL)
        if not got_logs:
            raise CheckFailed(f"kubectl logs printed nothing for {LOG_TIMEOUT}s; expected {LOG_LINE!r}")
        expect_output(logs, LOG_LINE, "kubectl logs")
        expect_output(
            kubectl.run("exec", "-n", namespace, "probe", "--", "echo", EXEC_LINE),
            EXEC_LINE,
            "kubectl exec",
        )
    return f"kubectl logs and exec reached pod probe on {running['spec'].get('nodeName', '?')}"
