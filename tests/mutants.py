"""Hand-written mutants: regressions the offline suite must catch (`make mutants`).

mutmut mutates Python operators and constants; the bugs below are the ones it
cannot write (shell scripts, dropped options, changed facts). Each is applied
to a scratch copy of the project, one at a time, and the named tests run there:
a mutant that leaves them green "survived", which means a test is missing.

    python tests/mutants.py           # all of them
    python tests/mutants.py DataStore # those whose description contains the word
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    description: str
    path: str
    before: str
    after: str
    tests: tuple[str, ...]


MUTANTS = (
    Mutant(
        "command output streamed to the console in full",
        "components/commands.py",
        "logging=local.Logging.STDERR,",
        "logging=local.Logging.STDOUT_AND_STDERR,",
        ("tests/test_guards.py",),
    ),
    Mutant(
        "join timeout cut to one minute",
        "components/node_join.py",
        'custom_timeouts=pulumi.CustomTimeouts(create="27m", delete="8m")',
        'custom_timeouts=pulumi.CustomTimeouts(create="1m", delete="8m")',
        ("tests/test_guards.py",),
    ),
    Mutant(
        "drain timeout above the join's delete timeout",
        "scripts/leave-worker.sh",
        "drain_timeout=${DRAIN_TIMEOUT:-120}",
        "drain_timeout=${DRAIN_TIMEOUT:-600}",
        ("tests/test_guards.py", "tests/test_scripts.py"),
    ),
    Mutant(
        "drain skipped before a worker leaves",
        "scripts/leave-worker.sh",
        'if kube drain "$NODE"',
        "if true",
        ("tests/test_scripts.py",),
    ),
    Mutant(
        "version check lets a skipped minor through",
        "scripts/check-tenant-version.sh",
        "((wanted - have <= 1)) ||",
        "((wanted - have <= 2)) ||",
        ("tests/test_scripts.py",),
    ),
    Mutant(
        "version check reads only the spec, not the running version",
        "scripts/check-tenant-version.sh",
        'for current in "$spec_version" ${running_version:+"$running_version"}; do',
        'for current in "$spec_version"; do',
        ("tests/test_scripts.py",),
    ),
    Mutant(
        "control plane waits for any running version, not its new one",
        "components/tenant_control_plane.py",
        'f"jsonpath={RUNNING_VERSION_PATH}={kubernetes_version}"',
        'f"jsonpath={RUNNING_VERSION_PATH}"',
        ("tests/test_tenants.py",),
    ),
    Mutant(
        "workers no longer wait for the previous one",
        "components/tenant.py",
        "return list(workers.values())[-1].done if workers else None",
        "return None",
        ("tests/test_workers.py", "tests/test_tenant_versions.py"),
    ),
    Mutant(
        "worker containers no longer wait for the control plane's version",
        "components/worker_node.py",
        "depends_on=[args.platform, args.control_plane_ready, *address_checked]",
        "depends_on=[args.platform, *address_checked]",
        ("tests/test_workers.py", "tests/test_tenant_versions.py"),
    ),
    Mutant(
        "HAMi's kube-scheduler keeps the lab's version",
        "components/tenant.py",
        """                kubernetes_version=tenant.kubernetes_version,
                chart_version=lab.versions.hami_chart,""",
        """                kubernetes_version=lab.versions.kubernetes,
                chart_version=lab.versions.hami_chart,""",
        ("tests/test_tenant_versions.py",),
    ),
    Mutant(
        "admin-kubeconfig re-read trigger removed",
        "components/tenant_control_plane.py",
        'triggers=[control_plane.metadata.apply(lambda metadata: metadata.get("uid"))],',
        "",
        ("tests/test_guards.py",),
    ),
    Mutant(
        "node-lock timeout raised to 300 s",
        "components/gpu_sharing.py",
        'NODE_LOCK_TIMEOUT = "5s"',
        'NODE_LOCK_TIMEOUT = "300s"',
        ("tests/test_hami_upstream.py",),
    ),
    Mutant(
        "disk-eviction thresholds changed",
        "components/tenant_control_plane.py",
        '"nodefs.available": "0%"',
        '"nodefs.available": "10%"',
        ("tests/test_tenants.py",),
    ),
    Mutant(
        "kubelet image-GC patch dropped",
        "components/tenant_control_plane.py",
        '{"op": "add", "path": "/imageGCHighThresholdPercent", "value": 100},',
        "",
        ("tests/test_tenants.py",),
    ),
    Mutant(
        "DataStore delete no longer waits",
        "scripts/delete-datastore.sh",
        'if retry "${DELETE_TIMEOUT:-180}" "$RETRY_INTERVAL" datastore_gone; then',
        "if true; then",
        ("tests/test_scripts.py",),
    ),
    Mutant(
        "DaemonSet with 0 desired pods counted as ready (wait-gpus.sh)",
        "scripts/wait-gpus.sh",
        "${desired:-0} -gt 0 && ",
        "",
        ("tests/test_scripts.py",),
    ),
    Mutant(
        "DaemonSet with 0 desired pods counted as ready (platform check)",
        "validation/checks/platform.py",
        "if wanted == 0 or ready < wanted:",
        "if ready < wanted:",
        ("tests/test_validation.py", "tests/test_validation_edges.py"),
    ),
    Mutant(
        "DaemonSet with updated != desired counted as ready",
        "scripts/wait-gpus.sh",
        ' && $updated == "$desired"',
        "",
        ("tests/test_scripts.py",),
    ),
    Mutant(
        "empty webhook CA bundle accepted",
        "scripts/wait-gpus.sh",
        "[[ -n $ca_bundle ]] ||",
        "[[ -n ${ca_bundle+set} ]] ||",
        ("tests/test_scripts.py",),
    ),
    Mutant(
        "node with Ready=Unknown counted as Ready",
        "validation/checks/tenancy.py",
        'if ready.get("status") != "True":',
        'if ready.get("status") == "False":',
        ("tests/test_validation.py", "tests/test_validation_edges.py"),
    ),
    Mutant(
        "no CoreDNS pods at all accepted",
        "validation/checks/tenancy.py",
        'return ["no CoreDNS pods (k8s-app=kube-dns) in kube-system"]',
        "return []",
        ("tests/test_validation.py", "tests/test_validation_edges.py"),
    ),
    Mutant(
        "Konnectivity probe pod no longer prints the line the check looks for",
        "validation/checks/konnectivity.py",
        'command=f"echo {LOG_LINE}; exec sleep 3600"',
        'command="exec sleep 3600"',
        ("tests/test_validation.py", "tests/test_validation_edges.py"),
    ),
    Mutant(
        "webhook probe pod asks for no GPU",
        "validation/checks/hami.py",
        'gpu_pod("webhook-probe", 1024, 10)',
        'gpu_pod("webhook-probe", 0, 0) | {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}',
        ("tests/test_validation.py", "tests/test_validation_edges.py"),
    ),
    Mutant(
        "a worker container no longer waits for the check that its fixed address is free on the network",
        "components/worker_node.py",
        "depends_on=[args.platform, args.control_plane_ready, *address_checked]",
        "depends_on=[args.platform, args.control_plane_ready]",
        ("tests/test_worker_addresses.py",),
    ),
    Mutant(
        "TenantControlPlane applied without force, so a sleep after a restore conflicts",
        "components/tenant_control_plane.py",
        '"pulumi.com/patchForce": "true",',
        "",
        ("tests/test_snapshot_then_sleep.py",),
    ),
    Mutant(
        "restore writes the original file, not the copy it verified",
        "snapshot/core.py",
        "return restore_copy(etcdctl, copy, check(copy, target),",
        "return restore_copy(etcdctl, path, check(copy, target),",
        ("tests/test_snapshot_never_half_done.py",),
    ),
    Mutant(
        "a snapshot is renamed into place, over a file that appeared meanwhile",
        "snapshot/core.py",
        "os.link(made, path)",
        "os.rename(made, path)",
        ("tests/test_snapshot_never_half_done.py",),
    ),
    Mutant(
        "preflight: a rootless Docker no longer refused",
        "scripts/preflight.py",
        "check_remote_docker(host) + check_rootless_docker(info) + ",
        "check_remote_docker(host) + ",
        ("tests/test_preflight_docker_host.py",),
    ),
    Mutant(
        "preflight: an unreadable docker info checked as an empty one, without a warning",
        "scripts/preflight.py",
        'return None, [Finding("warning", "could not read `docker info`; the Docker host checks were skipped")]',
        "return {}, []",
        ("tests/test_preflight_docker_host.py",),
    ),
    Mutant(
        "reset policy: a machine of this lab now bound to another cluster reset as the lab's",
        "scripts/reset_policy.py",
        'if state.bound_now in ("", marked_binding, join.binding):',
        "if True:",
        ("tests/test_reset_policy.py",),
    ),
    Mutant(
        "reset policy: a machine of this lab bound to this tenant no longer the lab's",
        "scripts/reset_policy.py",
        'if state.bound_now in ("", marked_binding, join.binding):',
        'if state.bound_now in ("", marked_binding):',
        ("tests/test_reset_policy.py",),
    ),
    Mutant(
        "reset policy: marks told apart by lab name, not by the stack's identity",
        "scripts/reset_policy.py",
        "elif identity == join.identity:",
        "elif lab == join.lab_id:",
        ("tests/test_reset_policy.py",),
    ),
    Mutant(
        "reset policy: Kubernetes state of another cluster reset without adopt",
        "scripts/reset_policy.py",
        "    if join.adopt:\n",
        "    if True:\n",
        ("tests/test_reset_policy.py",),
    ),
    Mutant(
        "reset policy: a clean machine without a mark refused",
        "scripts/reset_policy.py",
        """    if not state.marked:
        if not found:""",
        """    if not state.marked:
        if False:""",
        ("tests/test_reset_policy.py",),
    ),
    Mutant(
        "reset policy: a line that only starts like the mark's counts as one",
        "scripts/reset_policy.py",
        'if line == "mark=present":',
        'if line.startswith("mark=present"):',
        ("tests/test_reset_policy.py",),
    ),
    Mutant(
        "reset policy: an empty identity accepted",
        "scripts/reset_policy.py",
        "if not args.identity:",
        "if False:",
        ("tests/test_reset_policy.py",),
    ),
    Mutant(
        "reset policy: join-worker.sh resets a machine the policy refuses",
        "scripts/join-worker.sh",
        '*) die "${decision#* }" ;; # refuse',
        '*) log "${decision#* }" ;; # refuse',
        ("tests/test_machine_ssh.py::test_a_machine_of_another_cluster_is_refused_naming_what_was_found",),
    ),
    Mutant(
        "reset policy: join-worker.sh hides the kubelet's binding from the policy",
        "scripts/join-worker.sh",
        '--bound-now "$bound_now"',
        '--bound-now ""',
        ("tests/test_machine_ssh.py::test_a_machine_of_another_cluster_is_refused_naming_what_was_found",),
    ),
    Mutant(
        "reset policy: join-worker.sh ignores adopt: true",
        "scripts/join-worker.sh",
        '--adopt "${ADOPT:-false}"',
        "--adopt false",
        ("tests/test_machine_ssh.py::test_an_adopted_machine_of_another_cluster_is_reset_with_a_warning",),
    ),
    Mutant(
        "reset policy: join-worker.sh goes on when the policy could not run",
        "scripts/join-worker.sh",
        'die "$NODE: could not decide whether it may be reset ($reset_policy failed, see above)"',
        "true",
        ("tests/test_machine_ssh.py::test_a_machine_whose_reset_could_not_be_decided_is_left_as_it_is",),
    ),
    Mutant(
        "HAMi's Services left as the chart's NodePorts",
        "components/gpu_sharing.py",
        'CLUSTER_IP_SERVICE = {"type": "ClusterIP"}',
        "CLUSTER_IP_SERVICE = {}",
        ("tests/test_hami_services.py",),
    ),
    Mutant(
        "team-isolation takes a refused connection to another tenant's worker for silence",
        "validation/checks/team_isolation.py",
        "if how in (OPEN, REFUSED):",
        "if how == OPEN:",
        ("tests/test_validation_team_isolation.py",),
    ),
    Mutant(
        "no host devices: containerd starts even when the script failed",
        "components/worker_node.py",
        'ExecStartPre={NO_HOST_DEVICES_SCRIPT}',
        'ExecStartPre=-{NO_HOST_DEVICES_SCRIPT}',
        ("tests/test_no_host_devices.py",),
    ),
    Mutant(
        "no host devices: only kind's runc runtime gets the key",
        "scripts/node/no-host-devices.sh",
        r"\\.containerd\\.runtimes\\.[A-Za-z0-9_-]+\\]",
        r"\\.containerd\\.runtimes\\.runc\\]",
        ("tests/test_no_host_devices.py",),
    ),
    Mutant(
        "no host devices: the join goes on past a runtime that hands out host devices",
        "scripts/join-worker.sh",
        "((${#with_host_devices[@]} == 0)) ||",
        "((${#with_host_devices[@]} >= 0)) ||",
        ("tests/test_no_host_devices.py",),
    ),
    Mutant(
        "NodeRestriction: the kubelet registers a label in node-role.kubernetes.io",
        "components/gpu_sharing.py",
        'REAL_GPU_NODE_LABELS = {"gpu": "on"}',
        'REAL_GPU_NODE_LABELS = {"node-role.kubernetes.io/gpu": "on"}',
        ("tests/test_node_restriction.py",),
    ),
)


def copy_project(destination: Path) -> None:
    ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "mutants")
    shutil.copytree(ROOT, destination, ignore=ignore, symlinks=True)


def first_failure(mutant: Mutant) -> str | None:
    """The first test the mutant fails (pytest's FAILED line), or None if it survives.

    A run that fails without a failing test (a collection error, a missing file in the
    scratch copy) says nothing about the mutant, so it stops the table rather than
    counting as a kill.
    """
    with tempfile.TemporaryDirectory(prefix="mutant-") as scratch:
        project = Path(scratch) / "project"
        copy_project(project)
        target = project / mutant.path
        source = target.read_text()
        if source.count(mutant.before) != 1:
            sys.exit(f"{mutant.path}: expected exactly one {mutant.before!r}; update the mutant table")
        target.write_text(source.replace(mutant.before, mutant.after))
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-rfE", *mutant.tests],
            cwd=project,
            capture_output=True,
            text=True,
        )
        if run.returncode == 0:
            return None
        failures = [line for line in run.stdout.splitlines() if line.startswith("FAILED tests/")]
        if not failures:
            tail = "\n".join(run.stdout.splitlines()[-15:])
            sys.exit(f"{mutant.description}: pytest exited {run.returncode} without a failing test:\n{tail}")
        return failures[0]


def main(words: list[str]) -> int:
    chosen = [m for m in MUTANTS if all(word.lower() in m.description.lower() for word in words)]
    survivors = []
    for mutant in chosen:
        failure = first_failure(mutant)
        print(f"{'killed  ' if failure else 'SURVIVED'}  {mutant.description}", flush=True)
        if failure:
            print(f"          by {failure}", flush=True)
        else:
            survivors.append(mutant)
    print(f"{len(chosen) - len(survivors)}/{len(chosen)} hand-written mutants killed")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
