#!/usr/bin/env python3
"""Put one tenant to sleep, or wake it, in the stack config: what `make sleep` and `make wake` do before `up`.

sleep sets `sleeping: true` on the tenant named TENANT in Pulumi.<STACK>.yaml's `kamaji-hami-lab:tenants`;
wake removes the key (absent means awake). Both go through `pulumi config`, which keeps the file's other keys
and its secrets as they are; with --path it stores "true" as a boolean. A tenant already in the asked state is
left alone. The next `pulumi up` does the rest (docs/operations.md, "Sleeping tenants").

recover, which `make wake` runs after that `up`, brings the tenant's GPU pods back: it deletes each pod the
woken kubelets refused (a controller re-creates it), names those no controller re-creates, and waits until every
GPU pod runs with its GPU allocated. It reads kubeconfigs/<tenant>.kubeconfig, which `make up` writes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

# Run as a file, so make the repository (and its validation package) importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.gpu_sharing import (  # noqa: E402
    GPU_CORES_RESOURCE,
    GPU_COUNT_RESOURCE,
    GPU_MEMORY_PERCENTAGE_RESOURCE,
    GPU_MEMORY_RESOURCE,
)
from validation.answers import mapping, objects, text  # noqa: E402
from validation.exit_codes import EXIT_FAILED, EXIT_USAGE, ArgumentParser  # noqa: E402
from validation.host import Clock, Runner, SubprocessRunner, poll  # noqa: E402
from validation.kube import USER_KUBECONFIG_DIR, Kubectl, name_of  # noqa: E402
from validation.pods import describe_pod, phase, vgpu_allocations  # noqa: E402
from validation.results import CheckFailed, CheckSkipped  # noqa: E402
from validation.stack_outputs import DEFAULT_STACK, pulumi_environment  # noqa: E402

TENANTS_KEY = "kamaji-hami-lab:tenants"
# A woken container worker is a rebooted node: its kubelet admits the pods it had again, each through the device
# manager, before HAMi's device plugin (a pod on that node) has registered, and rejects for good each that asks for
# a device-plugin resource ("cannot allocate unregistered device", or "no healthy devices present": kubernetes/
# kubernetes pkg/kubelet/cm/devicemanager/manager.go devicesToAllocate, the node-reboot case; the status reason
# from pkg/kubelet/cm/admission/errors.go). Read in a recent copy of manager.go, not at a tag (the repository is too
# large to fetch here); that v1.31 to v1.36 all do it rests on issues #125579 (v1.30) and #133382 (v1.31) being open
# and the retries proposed for v1.36's cycle (#131190, #137919) being closed unmerged: a live wake proves it.
REFUSED_REASON = "UnexpectedAdmissionError"
GPU_RESOURCES = frozenset({GPU_COUNT_RESOURCE, GPU_MEMORY_RESOURCE, GPU_MEMORY_PERCENTAGE_RESOURCE, GPU_CORES_RESOURCE})
RECOVER_TIMEOUT = 300.0


class SleepError(Exception):
    """The config cannot be changed as asked; the message says why."""


def tenant_index(stack_file: Path, tenant: str) -> tuple[int, bool]:
    """(position of the tenant in the stack file's tenants, whether it is set to sleep there)."""
    try:
        config = (yaml.safe_load(stack_file.read_text()) or {}).get("config") or {}
    except (OSError, yaml.YAMLError) as error:
        raise SleepError(f"cannot read {stack_file}: {error}") from error
    tenants = config.get(TENANTS_KEY) or []
    names = [entry.get("name") for entry in tenants if isinstance(entry, dict)]
    if tenant not in names:
        known = ", ".join(str(name) for name in names) or "none"
        raise SleepError(f"{stack_file} has no tenant {tenant!r} in {TENANTS_KEY} (its tenants: {known})")
    index = names.index(tenant)
    return index, tenants[index].get("sleeping") is True


def config_command(action: str, stack: str, index: int, asleep: bool) -> list[str] | None:
    """The `pulumi config` call that makes it so; None when the config already says so."""
    key = f"tenants[{index}].sleeping"
    if action == "sleep":
        return None if asleep else ["pulumi", "config", "set", "--path", "--stack", stack, key, "true"]
    return ["pulumi", "config", "rm", "--path", "--stack", stack, key] if asleep else None


def requests_gpus(pod: dict[str, Any]) -> bool:
    """Whether any container of the pod asks for a GPU resource HAMi serves."""
    where = f"pod {name_of(pod)}"
    spec = mapping(pod, "spec", where)
    for container in objects(spec, "initContainers", where) + objects(spec, "containers", where):
        resources = mapping(container, "resources", where)
        if GPU_RESOURCES & {*mapping(resources, "limits", where), *mapping(resources, "requests", where)}:
            return True
    return False


def refused(pod: dict[str, Any]) -> bool:
    """Whether a kubelet rejected the pod at admission with the device manager's error."""
    status = mapping(pod, "status", f"pod {name_of(pod)}")
    return phase(pod) == "Failed" and text(status, "reason", f"pod {name_of(pod)}") == REFUSED_REASON


def controller_of(pod: dict[str, Any]) -> str:
    """Kind/name of the controller that re-creates the pod once it is deleted; empty for a bare pod."""
    where = f"pod {name_of(pod)}"
    for owner in objects(mapping(pod, "metadata", where), "ownerReferences", where):
        if owner.get("controller") is True:
            return f"{owner.get('kind')}/{owner.get('name')}"
    return ""


def back(pod: dict[str, Any]) -> bool:
    """Running, every container ready, and HAMi's annotation names the GPU slices it was given."""
    where = f"pod {name_of(pod)}"
    statuses = objects(mapping(pod, "status", where), "containerStatuses", where)
    ready = bool(statuses) and all(status.get("ready") is True for status in statuses)
    return phase(pod) == "Running" and ready and bool(vgpu_allocations(pod))


def recover_gpu_pods(kubectl: Kubectl, clock: Clock, timeout: float, say) -> tuple[bool, list[str], list[str]]:
    """Deletes the GPU pods the kubelets refused that a controller re-creates, until every GPU pod is back.

    Returns (every GPU pod back, the refused pods no controller re-creates, the GPU pods not back yet), each named
    <namespace>/<name> with why. A pod being deleted is left to finish; a replacement refused again (its node's
    plugin was still registering) is deleted again.
    """
    bare: dict[str, str] = {}

    def probe() -> tuple[bool, list[str]]:
        waiting, deleted = [], False
        for pod in kubectl.items("pods", "--all-namespaces"):
            metadata = mapping(pod, "metadata", f"pod {name_of(pod)}")
            namespace = text(metadata, "namespace", f"pod {name_of(pod)}")
            name = f"{namespace}/{name_of(pod)}"
            if metadata.get("deletionTimestamp"):
                waiting += [f"{name}: being deleted"] if requests_gpus(pod) else []
            elif refused(pod) and requests_gpus(pod):
                why = text(mapping(pod, "status", name), "message", name)
                controller = controller_of(pod)
                if not controller:
                    bare[name] = why
                    continue
                kubectl.checked(kubectl.run("delete", "pod", name_of(pod), "-n", namespace, "--ignore-not-found",
                                            "--wait=false"))
                say(f"deleted pod {name}, refused by its kubelet after the wake ({why}), for {controller} to "
                    "create again")
                deleted = True
            elif requests_gpus(pod) and phase(pod) not in ("Succeeded", "Failed") and not back(pod):
                allocated = "" if vgpu_allocations(pod) else ", no GPU allocated"
                waiting.append(f"{name}: {describe_pod(pod)}{allocated}")
        return not deleted and not waiting, waiting

    done, waiting = poll(clock, timeout, probe)
    return done and not bare, [f"{name} ({why})" for name, why in sorted(bare.items())], waiting


def recover(tenant: str, kubeconfig_dir: Path, runner: Runner, clock: Clock, timeout: float) -> int:
    kubeconfig = kubeconfig_dir / f"{tenant}.kubeconfig"
    if not kubeconfig.is_file():
        print(f"tenant_sleep: no {kubeconfig}; `make up` writes it (or `make kubeconfigs`)", file=sys.stderr)
        return EXIT_USAGE
    kubectl = Kubectl(runner, kubeconfig, tenant)
    try:
        done, bare, waiting = recover_gpu_pods(kubectl, clock, timeout, lambda line: print(f"{tenant}: {line}"))
    except (CheckFailed, CheckSkipped) as error:
        print(f"tenant_sleep: {tenant}: cannot bring its GPU pods back: {error}", file=sys.stderr)
        return EXIT_FAILED
    for pod in bare:
        print(f"tenant_sleep: {tenant}: pod {pod} was refused by its kubelet after the wake and has no controller to "
              f"create it again; create it again yourself ({kubectl.hint} get pod -n <namespace> <name> -o yaml "
              "shows it)", file=sys.stderr)
    if waiting:
        print(f"tenant_sleep: {tenant}: GPU pods not running with their GPU allocated {timeout:.0f}s after the wake: "
              + "; ".join(waiting), file=sys.stderr)
    elif not done and not bare:
        print(f"tenant_sleep: {tenant}: the GPU pods deleted last were not looked at again within {timeout:.0f}s",
              file=sys.stderr)
    if done:
        print(f"{tenant}: every GPU pod runs with its GPU allocated")
        return 0
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None, runner: Runner | None = None, root: Path | None = None,
         clock: Clock | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("sleep", "wake", "recover"))
    parser.add_argument("--tenant", required=True, help="the tenant's name")
    parser.add_argument("--stack", default=DEFAULT_STACK, help=f"the stack (default: {DEFAULT_STACK})")
    parser.add_argument("--kubeconfig-dir", type=Path, default=Path(USER_KUBECONFIG_DIR),
                        help=f"recover: where `make up` wrote the kubeconfigs (default: {USER_KUBECONFIG_DIR})")
    parser.add_argument("--timeout", type=float, default=RECOVER_TIMEOUT,
                        help=f"recover: seconds the GPU pods have to run again (default: {RECOVER_TIMEOUT:.0f})")
    args = parser.parse_args(argv)
    if not args.tenant:
        print("tenant_sleep: name the tenant: make sleep TENANT=<name>", file=sys.stderr)
        return EXIT_USAGE
    stack_file = (root or Path.cwd()) / f"Pulumi.{args.stack}.yaml"
    try:
        index, asleep = tenant_index(stack_file, args.tenant)
    except SleepError as error:
        print(f"tenant_sleep: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "recover":
        if asleep:
            print(f"tenant_sleep: tenant {args.tenant} is asleep in the stack config; wake it first", file=sys.stderr)
            return EXIT_USAGE
        kubeconfig_dir = (root or Path.cwd()) / args.kubeconfig_dir  # an absolute one stays as it is
        return recover(args.tenant, kubeconfig_dir, runner or SubprocessRunner(), clock or Clock(), args.timeout)
    command = config_command(args.action, args.stack, index, asleep)
    state = "asleep" if args.action == "sleep" else "awake"
    if command is None:
        print(f"tenant {args.tenant} is already {state} in the stack config")
        return 0
    done = (runner or SubprocessRunner()).run(command, env=pulumi_environment())
    if not done.ok:
        print(f"tenant_sleep: {' '.join(command)} failed: {done.error}", file=sys.stderr)
        return EXIT_FAILED
    print(f"tenant {args.tenant}: {state} in the stack config; pulumi up makes it so")
    return 0


if __name__ == "__main__":
    sys.exit(main())
