"""python -m snapshot take TENANT | restore TENANT FILE: one tenant's snapshot (docs/operations.md)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from snapshot import core
from snapshot.archive import Refused
from snapshot.etcd import EtcdFailed, Progress
from snapshot.live import LiveTenant, root_client
from validation.exit_codes import EXIT_FAILED, EXIT_NO_OUTPUTS, EXIT_USAGE, ArgumentParser
from validation.host import Clock, Runner, SubprocessRunner
from validation.lab import Lab
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import DEFAULT_STACK, OutputsError, parse_outputs, read_outputs_document

SNAPSHOTS = Path("snapshots")
# After every restore: where the tenant is, against where the snapshot recorded it (docs/operations.md).
SAME_ADDRESS = "The tenant is at {now}, as at the snapshot"
MOVED = "The tenant was at {then} and is now at {now}"
UNKNOWN_ADDRESS = (
    "The tenant is at {now}; where it was when the snapshot was taken is unknown (snapshots did not record it then)"
)
AS_THEY_ARE = ": kubeconfigs from then work as they are."
# Kamaji's kubeconfigs name their cluster after the TenantControlPlane, that is the tenant (kubeadm's ClusterName:
# clastix/kamaji internal/kubeadm/configuration.go@26.8.2-edge).
SET_CLUSTER = "`kubectl --kubeconfig <file> config set-cluster {tenant} --server={now}`"
POINT_AT_IT = ": point a kubeconfig from then at it with " + SET_CLUSTER + "."
IF_ELSEWHERE = ": a kubeconfig from then that names another address works once pointed here with " + SET_CLUSTER + "."
# After a restore into a re-created tenant: what the snapshot's CA makes stale (docs/operations.md).
CA_REPLACED = (
    "The tenant's CA is the snapshot's again, not the one it was re-created with, and Kamaji re-issued the "
    "tenant's certificates and kubeconfigs from it: service-account tokens from the snapshot's time work again, "
    "and kubeconfigs from then are trusted again (at the address said above)."
)
CA_NOT_KEPT = (
    "Kamaji did not keep the snapshot's CA (invalid, or expiring within its 24-hour renewal deadline) and made a "
    "new one: service-account tokens from the snapshot's time work again, kubeconfigs from then do not."
)
REJOIN = (
    "What the re-created lab issued with its own CA no longer works: its workers and the stack's admin "
    "kubeconfig. Run `make rejoin TENANT={tenant}`: it reads the re-issued admin kubeconfig into the stack, which "
    "makes each worker join again, then writes kubeconfigs/ and validates (docs/operations.md, "
    '"Into a re-created tenant").'
)


def address(then: str | None, now: str, tenant: str, ca_of_then: bool) -> str:
    """Where the restored tenant is, against where the snapshot says it was; what to do with a kubeconfig from
    then only while the tenant's CA is still the one it names (ca_of_then)."""
    if then is None:
        said, advice = UNKNOWN_ADDRESS, IF_ELSEWHERE
    elif core.same_address(then, now):
        said, advice = SAME_ADDRESS, AS_THEY_ARE
    else:
        said, advice = MOVED, POINT_AT_IT
    return (said + (advice if ca_of_then else ".")).format(then=then, now=now, tenant=tenant)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="python -m snapshot",
        description="Save one tenant's etcd prefix and identity Secrets to a file, or bring them back.",
        epilog=f"exit status: 0 done, {EXIT_FAILED} refused or failed (nothing deleted when refused), "
        f"{EXIT_NO_OUTPUTS} the stack outputs could not be read, {EXIT_USAGE} wrong arguments",
    )
    parser.add_argument("--stack", default=DEFAULT_STACK, help=f"the stack to read; default: {DEFAULT_STACK}")
    parser.add_argument("--outputs", metavar="FILE|-", help="stack outputs JSON instead of asking pulumi")
    commands = parser.add_subparsers(dest="command", required=True)
    take = commands.add_parser("take", help="write snapshots/<tenant>-<UTC time>.tar.gz")
    take.add_argument("tenant")
    take.add_argument("--dir", type=Path, default=SNAPSHOTS, help="where snapshots go (made 0700)")
    restore = commands.add_parser("restore", help="verify a snapshot, then put the tenant back as it was")
    restore.add_argument("tenant")
    restore.add_argument("file", type=Path)
    return parser.parse_args(argv)


def main(
    argv: Sequence[str] | None = None,
    runner: Runner | None = None,
    clock: Clock | None = None,
    stdout: TextIO | None = None,
) -> int:
    args = parse_args(argv)
    out = stdout or sys.stdout
    runner = runner or SubprocessRunner()
    clock = clock or Clock()
    try:
        outputs = parse_outputs(read_outputs_document(args.outputs, runner, None, args.stack))
    except OutputsError as error:
        print(f"snapshot: {error}", file=sys.stderr)
        return EXIT_NO_OUTPUTS
    if args.tenant not in outputs.tenants:
        print(f"snapshot: no tenant {args.tenant!r}; the stack has {', '.join(outputs.tenants)}", file=sys.stderr)
        return EXIT_USAGE

    def report(keys: int, size: int) -> None:
        print(f"  {keys} keys, {size / 1e6:.1f} MB", file=out, flush=True)

    progress = Progress(report)
    with tempfile.TemporaryDirectory(prefix="kamaji-hami-lab-snapshot-") as workdir:
        lab = Lab.open(outputs, runner, Path(workdir), clock)
        live = LiveTenant(lab, outputs.tenants[args.tenant])
        try:
            if args.command == "restore":
                target = live.target()
                # Verified before anything reaches etcd or the tenant: a refusal changes nothing.
                core.check(args.file, target)
                with root_client(lab, live.tenant) as root:
                    done = core.restore(root, args.file, target, live.hold, live.restore_secrets, progress)
                print(
                    f"restored tenant {args.tenant} to etcd revision {done.manifest.etcd_revision} of "
                    f"{done.manifest.created}: {done.deleted} keys removed, {done.written} written, identity Secrets "
                    "back, API servers restarted",
                    file=out,
                )
                # ca_kept is False only when Kamaji replaced the CA the restore put back.
                print(address(done.manifest.endpoint, target.endpoint, args.tenant, live.ca_kept), file=out)
                if live.ca_replaced:
                    kept = CA_REPLACED if live.ca_kept else CA_NOT_KEPT
                    print(kept, REJOIN.format(tenant=args.tenant), file=out)
            else:
                target, secrets = live.target(), live.identity_secrets()
                with root_client(lab, live.tenant) as root:
                    path, manifest = core.take(root, target, secrets, args.dir, clock.wall(), progress)
                skipped = ", ".join(f"{count} {kind}" for kind, count in manifest.skipped_leased.items())
                print(
                    f"wrote {path} (mode 0600; it holds the tenant's private keys): {manifest.key_count} keys at etcd "
                    f"revision {manifest.etcd_revision}" + (f"; leased keys left out: {skipped}" if skipped else ""),
                    file=out,
                )
        except Refused as refusal:
            print(f"snapshot: {args.file} refused, nothing changed: {refusal}", file=sys.stderr)
            return EXIT_FAILED
        except (EtcdFailed, CheckFailed, CheckSkipped, OSError) as problem:
            again = " If the tenant was put to sleep, it stays asleep: run the restore again."
            again = again if args.command == "restore" else ""
            print(f"snapshot: {args.command} of {args.tenant} failed: {problem}.{again}", file=sys.stderr)
            return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
