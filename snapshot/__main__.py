"""python -m snapshot take TENANT | restore TENANT FILE: one tenant's snapshot (docs/operations.md)."""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from snapshot import archive, core, encryption
from snapshot.archive import Refused
from snapshot.etcd import EtcdFailed, Progress
from snapshot.live import HOLD_ANNOTATION, LiveTenant, Moving, root_client
from validation.exit_codes import EXIT_FAILED, EXIT_NO_OUTPUTS, EXIT_USAGE, ArgumentParser
from validation.host import Clock, Runner, SubprocessRunner
from validation.lab import Lab
from validation.results import CheckFailed, CheckSkipped
from validation.stack_outputs import OneTenantUnusable, add_outputs_arguments, outputs_with_tenant

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


# After a restore stopped, and while one holds the tenant: the same command again finishes it (docs/operations.md).
FINISH = "To finish, run the restore again: `make restore TENANT={tenant} SNAPSHOT={file}`."
HELD = (
    "a restore that did not finish holds it asleep (the annotation {annotation} on its "
    "TenantControlPlane), and its etcd prefix may be empty or partly written. Finish that restore first: "
    "`make restore TENANT={tenant} SNAPSHOT=<the snapshot it was restoring>`."
)
# The stack config keeps the tenant asleep (`sleeping: true`): the restore leaves it so.
SLEEPS_BY_CONFIG = "no API server started, as it sleeps by its config (sleeping: true): `make wake TENANT={tenant}`"


def escaped(text: str) -> str:
    """Text for the terminal: what is not printable (control sequences, bidirectional overrides) as a Python
    escape, so a file's name or a snapshot's text can never act on the terminal."""
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode() for char in text)


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


def age_recipient(text: str) -> encryption.x25519.Recipient:
    try:
        return encryption.recipient(text)
    except ValueError as problem:
        raise argparse.ArgumentTypeError(str(problem)) from None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="python -m snapshot",
        description="Save one tenant's etcd prefix and identity Secrets to a file, or bring them back.",
        epilog=f"exit status: 0 done, {EXIT_FAILED} refused or failed (nothing deleted when refused), "
        f"{EXIT_NO_OUTPUTS} the stack outputs could not be read, {EXIT_USAGE} wrong arguments",
    )
    add_outputs_arguments(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    take = commands.add_parser("take", help="write snapshots/<tenant>-<UTC time>.tar.gz")
    take.add_argument("tenant")
    take.add_argument("--dir", type=Path, default=SNAPSHOTS, help="where snapshots go (made 0700)")
    take.add_argument(
        "--recipient", type=age_recipient, metavar="AGE_PUBLIC_KEY",
        help=f"encrypt the snapshot to this age public key (age1...): <tenant>-<UTC time>.tar.gz{encryption.SUFFIX}",
    )  # fmt: skip
    restore = commands.add_parser("restore", help="verify a snapshot, then put the tenant back as it was")
    restore.add_argument("tenant")
    restore.add_argument("file", type=Path)
    restore.add_argument("--identity", type=Path, metavar="FILE", help="the age identity file of an encrypted snapshot")
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
        outputs = outputs_with_tenant(args.outputs, runner, args.stack, args.tenant)
    except OneTenantUnusable as problem:
        print(f"snapshot: {problem}", file=sys.stderr)
        return problem.code

    def report(keys: int, size: int) -> None:
        print(f"  {keys} keys, {size / 1e6:.1f} MB", file=out, flush=True)

    progress = Progress(report)
    finish = FINISH.format(tenant=args.tenant, file=shlex.quote(str(getattr(args, "file", ""))))
    with tempfile.TemporaryDirectory(prefix="kamaji-hami-lab-snapshot-") as workdir:
        lab = Lab.open(outputs, runner, Path(workdir), clock)
        live = LiveTenant(lab, outputs.tenants[args.tenant], say=lambda line: print(line, file=out, flush=True))
        try:
            if args.command == "restore":
                target = live.target()
                # One private copy (the plaintext, when encrypted) is verified, then written: a refusal changes
                # nothing, and what was verified is what is written even if the file changes meanwhile.
                with encryption.private_plaintext(args.file, args.identity) as copy:
                    contents = core.check(copy, target)
                    with root_client(lab, live.tenant) as root:
                        done = core.restore_copy(
                            root, copy, contents, target, live.hold, live.restore_secrets, progress
                        )
                started = "API servers restarted"
                if live.tenant.sleeping:
                    started = SLEEPS_BY_CONFIG.format(tenant=args.tenant)
                print(
                    escaped(
                        f"restored tenant {args.tenant} to etcd revision {done.manifest.etcd_revision} of "
                        f"{done.manifest.created}: {done.deleted} keys removed, {done.written} written, identity "
                        f"Secrets back, {started}"
                    ),
                    file=out,
                )
                # ca_kept is False only when Kamaji replaced the CA the restore put back.
                print(escaped(address(done.manifest.endpoint, target.endpoint, args.tenant, live.ca_kept)), file=out)
                if live.ca_replaced:
                    kept = CA_REPLACED if live.ca_kept else CA_NOT_KEPT
                    print(kept, REJOIN.format(tenant=args.tenant), file=out)
            else:
                if live.held():
                    held = HELD.format(tenant=args.tenant, annotation=HOLD_ANNOTATION)
                    print(f"snapshot: take of {args.tenant} refused, nothing written: {held}", file=sys.stderr)
                    return EXIT_FAILED
                target, secrets, when = live.target(), live.identity_secrets(), clock.wall()
                # Encrypted: the plaintext is written only to the private work directory, removed at the end.
                directory = Path(workdir) / "plain" if args.recipient else args.dir
                sealed = args.dir / (core.file_name(args.tenant, when) + encryption.SUFFIX)
                if args.recipient and sealed.exists():
                    raise FileExistsError(f"{sealed} already exists")
                with root_client(lab, live.tenant) as root:
                    path, manifest = core.take(root, target, secrets, directory, when, progress)
                if args.recipient:
                    archive.private_directory(args.dir)
                    encryption.encrypt(path, sealed, args.recipient)
                    path = sealed
                    held = f"encrypted to {args.recipient}: only its identity file opens it"
                else:
                    held = "it holds the tenant's private keys"
                skipped = ", ".join(f"{count} {kind}" for kind, count in manifest.skipped_leased.items())
                print(
                    f"wrote {path} (mode 0600; {held}): {manifest.key_count} keys at etcd revision "
                    f"{manifest.etcd_revision}" + (f"; leased keys left out: {skipped}" if skipped else ""),
                    file=out,
                )
        except Refused as refusal:
            print(escaped(f"snapshot: {args.file} refused, nothing changed: {refusal}"), file=sys.stderr)
            return EXIT_FAILED
        except Moving as why:
            nothing = "nothing changed" if args.command == "restore" else "nothing written"
            print(
                f"snapshot: {args.command} of {args.tenant} refused, {nothing}: tenant {args.tenant} is between two "
                f"DataStores ({why}). Let the move end or undo it (make up; docs/operations.md, moving a tenant's "
                "datastore), then run it again",
                file=sys.stderr,
            )
            return EXIT_FAILED
        except core.Unfinished as stopped:
            print(f"snapshot: restore of {args.tenant} stopped: {stopped} {finish}", file=sys.stderr)
            return EXIT_FAILED
        except (EtcdFailed, CheckFailed, CheckSkipped, OSError, KeyboardInterrupt) as problem:
            # Before the delete (after it, core raises Unfinished): etcd is as it was.
            again = f" etcd was not changed; if the tenant was put to sleep, it stays asleep. {finish}"
            again = again if args.command == "restore" else ""
            what = "interrupted" if isinstance(problem, KeyboardInterrupt) else f"failed: {problem}"
            print(f"snapshot: {args.command} of {args.tenant} {what}.{again}", file=sys.stderr)
            return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
