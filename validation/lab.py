"""The lab under test: its outputs, a kubectl per cluster, and check-scoped namespaces."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from validation import manifests
from validation.host import Clock, Runner, SubprocessRunner, poll
from validation.kube import NAMESPACE_DELETE_TIMEOUT, KubeconfigCluster, Kubectl, kubeconfig_cluster
from validation.results import CheckFailed, CheckSkipped, CheckUnproven
from validation.stack_outputs import MANAGEMENT, StackOutputs, Tenant, write_kubeconfig_files


def team_cluster(tenant: str) -> str:
    """How a tenant's team credential is named: `make kubeconfigs` writes kubeconfigs/<tenant>-team.kubeconfig."""
    return f"{tenant}-team"


@dataclass
class Lab:
    outputs: StackOutputs
    clusters: dict[str, Kubectl]  # MANAGEMENT and each tenant name
    workdir: Path  # private directory, deleted when the run ends
    clock: Clock
    warnings: list[str] = field(default_factory=list)  # cleanups that did not finish
    teams: dict[str, Kubectl] = field(default_factory=dict)  # team_cluster(tenant) -> kubectl with its team credential

    @classmethod
    def open(cls, outputs: StackOutputs, runner: Runner, workdir: Path, clock: Clock | None = None) -> Lab:
        paths = write_kubeconfig_files(workdir, outputs.kubeconfigs)
        clusters = {name: Kubectl(runner, path, name) for name, path in paths.items()}
        # In a directory of their own: a tenant named <other>-team must not overwrite a team's file.
        team_paths = write_kubeconfig_files(
            workdir / "team", {team_cluster(name): text for name, text in (outputs.team_kubeconfigs or {}).items()}
        )
        teams = {name: Kubectl(runner, path, name) for name, path in team_paths.items()}
        return cls(outputs, clusters, workdir, clock or Clock(), teams=teams)

    def interrupt(self) -> None:
        """Ctrl-C or SIGTERM: stop every kubectl call in flight and every wait, start no more.

        The checks then end at once; a scratch namespace they could not delete is named in warnings.
        """
        if isinstance(self.clock, Clock):
            self.clock.interrupt()
        for kubectl in [*self.clusters.values(), *self.teams.values()]:
            if isinstance(kubectl.runner, SubprocessRunner):
                kubectl.runner.stop()

    @property
    def tenants(self) -> list[Tenant]:
        return list(self.outputs.tenants.values())

    @property
    def management(self) -> Kubectl:
        return self.clusters[MANAGEMENT]

    def kubectl(self, tenant: Tenant) -> Kubectl:
        return self.clusters[tenant.name]

    def team_kubectl(self, tenant: Tenant) -> Kubectl | None:
        """kubectl with the tenant's team credential; None when the outputs hold none for it."""
        return self.teams.get(team_cluster(tenant.name))

    def kubeconfig(self, name: str) -> KubeconfigCluster:
        return kubeconfig_cluster(self.outputs.kubeconfigs[name])

    @contextmanager
    def scratch_namespace(self, kubectl: Kubectl, purpose: str) -> Iterator[str]:
        """A fresh namespace for one check, deleted afterwards whatever the check concluded."""
        name = f"validate-{purpose}-{secrets.token_hex(3)}"
        kubectl.must_create(manifests.namespace(name))  # nothing to clean up if this fails
        try:
            yield name
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C or SIGTERM while this thread waited: end now
            self.interrupt()
            raise
        finally:
            problem = self._delete_namespace(kubectl, name)
            if problem:
                self.warnings.append(
                    f"{kubectl.cluster}: namespace {name} was not deleted ({problem}); "
                    f"remove it with `{kubectl.hint} delete namespace {name}`"
                )

    def _delete_namespace(self, kubectl: Kubectl, name: str) -> str:
        """Delete and wait until it is gone; what went wrong, or "" once it is gone."""
        # Waiting matters: GPU pods still terminating would hold vGPU slots needed by later checks.
        try:
            deleted = kubectl.delete_namespace(name)
            if not deleted.ok:
                return deleted.error
            gone, last = poll(self.clock, NAMESPACE_DELETE_TIMEOUT, lambda: kubectl.namespace_gone(name))
        except (CheckFailed, CheckSkipped, CheckUnproven) as unreachable:  # unreachable, or the run interrupted
            return str(unreachable)
        if gone:
            return ""
        return last.error if not last.ok else f"still there after {NAMESPACE_DELETE_TIMEOUT}s"
