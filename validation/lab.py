"""The lab under test: its outputs, a kubectl per cluster, and check-scoped namespaces."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from validation import manifests
from validation.host import Clock, Runner
from validation.kube import KubeconfigCluster, Kubectl, kubeconfig_cluster
from validation.stack_outputs import MANAGEMENT, StackOutputs, Tenant, write_kubeconfig_files


@dataclass
class Lab:
    outputs: StackOutputs
    clusters: dict[str, Kubectl]  # MANAGEMENT and each tenant name
    workdir: Path  # private directory, deleted when the run ends
    clock: Clock
    warnings: list[str] = field(default_factory=list)  # cleanups that did not finish

    @classmethod
    def open(cls, outputs: StackOutputs, runner: Runner, workdir: Path, clock: Clock | None = None) -> Lab:
        paths = write_kubeconfig_files(workdir, outputs.kubeconfigs)
        clusters = {name: Kubectl(runner, path, name) for name, path in paths.items()}
        return cls(outputs, clusters, workdir, clock or Clock())

    @property
    def tenants(self) -> list[Tenant]:
        return list(self.outputs.tenants.values())

    @property
    def management(self) -> Kubectl:
        return self.clusters[MANAGEMENT]

    def kubectl(self, tenant: Tenant) -> Kubectl:
        return self.clusters[tenant.name]

    def kubeconfig(self, name: str) -> KubeconfigCluster:
        return kubeconfig_cluster(self.outputs.kubeconfigs[name])

    @contextmanager
    def scratch_namespace(self, kubectl: Kubectl, purpose: str) -> Iterator[str]:
        """A fresh namespace for one check, deleted afterwards whatever the check concluded."""
        name = f"validate-{purpose}-{secrets.token_hex(3)}"
        try:
            kubectl.must_create(manifests.namespace(name))
            yield name
        finally:
            # Also runs when creation itself timed out: the namespace may exist anyway.
            result = kubectl.delete_namespace(name)
            if not result.ok:
                self.warnings.append(
                    f"{kubectl.cluster}: namespace {name} was not deleted ({result.error}); "
                    f"remove it with `kubectl delete namespace {name}`"
                )
