"""Opt-in observability: Prometheus and Grafana in the management cluster, one dashboard across tenants.

Prometheus scrapes, for every tenant, HAMi's scheduler metrics and its kube-scheduler's queue through
the tenant API server's service proxy (a per-tenant ServiceAccount allowed only those two), the konnectivity-server
sidecar of its control-plane pods, and Kamaji's own series about it; every series carries a
`tenant` label. The path through the API server works for container and machine workers alike:
the API server reaches the tenant's Services over its Konnectivity tunnel. The charts, names, values and
scrape jobs are in components/observability_values.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.addresses import asking_metallb_for
from components.commands import script_command
from components.gpu_sharing import HAMI_NAMESPACE, HAMI_SCHEDULER_LEADER_LABELS, KUBE_SCHEDULER_PORT
from components.observability_values import (
    GRAFANA_ADMIN_SECRET,
    GRAFANA_CHART,
    GRAFANA_CHART_VERSION,
    GRAFANA_FORWARDED_URL,
    GRAFANA_PORT,
    GRAFANA_RELEASE,
    GRAFANA_REPO,
    HELM_TIMEOUT_SECONDS,
    METRICS_ACCOUNT,
    METRICS_ACCOUNT_NAMESPACE,
    MONITORING_NAMESPACE,
    PROMETHEUS_CHART,
    PROMETHEUS_CHART_VERSION,
    PROMETHEUS_RELEASE,
    PROMETHEUS_REPO,
    QUEUE_PORT_NAME,
    QUEUE_SERVICE,
    grafana_url,
    grafana_values,
    metrics_reader_rules,
    prometheus_values,
    tenant_secret_name,
    token_secret_data,
)


@dataclass(frozen=True)
class TenantAccess:
    """What the observability layer takes from one tenant: its name, version, provider and admin kubeconfig."""

    name: str
    kubernetes_version: str
    provider: k8s.Provider
    kubeconfig: pulumi.Input[str]
    """Secret; read on the host only, to fetch the reader's token."""
    ready: pulumi.Resource
    """The tenant, done: HAMi runs."""


@dataclass(frozen=True)
class ObservabilityArgs:
    provider: k8s.Provider
    """Provider of the management cluster."""
    platform: pulumi.Resource
    tenants: Sequence[TenantAccess]
    kamaji_installed: bool
    grafana_address: str | None = None
    """The address of the lab's MetalLB pool kept for Grafana; None: the cluster's own LoadBalancer picks one."""
    load_balancer_provided: bool = False
    """The cluster's own LoadBalancer, whose addresses may be public: Grafana gets none (make dashboard forwards)."""


class Observability(pulumi.ComponentResource):
    """Prometheus and Grafana in the management cluster, and each tenant's metrics reader.

    Outputs: `grafana_url` (http URL on the lab's MetalLB address, or on this host's loopback while
    `make dashboard` forwards to it) and `admin_password` (secret).
    """

    grafana_url: pulumi.Output[str]
    admin_password: pulumi.Output[str]

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:Observability", name, None, opts)
        on_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[args.platform])
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata={"name": MONITORING_NAMESPACE}, opts=on_cluster
        )
        in_namespace = pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[namespace]))

        tokens = [self._tenant_reader(name, tenant, in_namespace) for tenant in args.tenants]
        versions = {tenant.name: tenant.kubernetes_version for tenant in args.tenants}
        k8s.helm.v3.Release(
            f"{name}-prometheus",
            name=PROMETHEUS_RELEASE,
            chart=PROMETHEUS_CHART,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=PROMETHEUS_REPO),
            version=PROMETHEUS_CHART_VERSION,
            namespace=MONITORING_NAMESPACE,
            values=prometheus_values(versions, args.kamaji_installed),
            timeout=HELM_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions.merge(in_namespace, pulumi.ResourceOptions(depends_on=tokens)),
        )

        # Made once on the host and kept in state as a secret; never in the chart's values.
        password = script_command(
            f"{name}-grafana-password", "grafana-password.sh", {}, secret_output=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.admin_password = pulumi.Output.secret(password.stdout.apply(str.strip))
        admin = k8s.core.v1.Secret(
            f"{name}-grafana-admin",
            metadata={"name": GRAFANA_ADMIN_SECRET, "namespace": MONITORING_NAMESPACE},
            string_data={"admin-user": "admin", "admin-password": self.admin_password},
            opts=in_namespace,
        )
        grafana = k8s.helm.v3.Release(
            f"{name}-grafana",
            name=GRAFANA_RELEASE,
            chart=GRAFANA_CHART,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=GRAFANA_REPO),
            version=GRAFANA_CHART_VERSION,
            namespace=MONITORING_NAMESPACE,
            values=grafana_values(),
            timeout=HELM_TIMEOUT_SECONDS,
            # Not after Prometheus (its datasource is only a URL), so not after the tenants: Grafana's Service
            # takes its pinned address without waiting for them, which a tenant of a lab brought up before
            # addresses were pinned may be waiting for (docs/architecture.md, "Addresses on the lab's network").
            opts=pulumi.ResourceOptions.merge(in_namespace, pulumi.ResourceOptions(depends_on=[admin])),
        )
        if args.load_balancer_provided:
            # Grafana speaks plain HTTP: on an address the lab does not control (a provided LoadBalancer may give a
            # public one) it would show the password prompt to anyone. It keeps the chart's ClusterIP Service.
            self.grafana_url = pulumi.Output.from_input(GRAFANA_FORWARDED_URL)
            self.register_outputs({"grafanaUrl": self.grafana_url, "adminPassword": self.admin_password})
            return
        service = k8s.core.v1.Service(
            f"{name}-grafana-address",
            metadata={
                "name": f"{GRAFANA_RELEASE}-address",
                "namespace": MONITORING_NAMESPACE,
                # The lab's pool gives only addresses asked for by name (components/platform.py).
                **({"annotations": asking_metallb_for(args.grafana_address)} if args.grafana_address else {}),
            },
            spec={
                "type": "LoadBalancer",
                # The chart's pod selector labels (charts/grafana/templates/_helpers.tpl@grafana-12.11.1).
                "selector": {"app.kubernetes.io/name": "grafana", "app.kubernetes.io/instance": GRAFANA_RELEASE},
                "ports": [{"name": "http", "port": GRAFANA_PORT, "targetPort": "grafana"}],
            },
            opts=pulumi.ResourceOptions.merge(in_namespace, pulumi.ResourceOptions(depends_on=[grafana])),
        )
        self.grafana_url = service.status.apply(grafana_url)
        self.register_outputs({"grafanaUrl": self.grafana_url, "adminPassword": self.admin_password})

    def _tenant_reader(
        self, name: str, tenant: TenantAccess, in_namespace: pulumi.ResourceOptions
    ) -> pulumi.Resource:
        """The tenant's metrics reader and kube-scheduler Service (in the tenant, with its own provider), and the
        reader's token in a Secret here."""
        in_tenant = pulumi.ResourceOptions(parent=self, provider=tenant.provider, depends_on=[tenant.ready])
        prefix = f"{name}-{tenant.name}"
        account = k8s.core.v1.ServiceAccount(
            f"{prefix}-reader",
            metadata={"name": METRICS_ACCOUNT, "namespace": METRICS_ACCOUNT_NAMESPACE},
            opts=in_tenant,
        )
        role = k8s.rbac.v1.Role(
            f"{prefix}-reader-role",
            metadata={"name": METRICS_ACCOUNT, "namespace": METRICS_ACCOUNT_NAMESPACE},
            rules=metrics_reader_rules(),
            opts=in_tenant,
        )
        binding = k8s.rbac.v1.RoleBinding(
            f"{prefix}-reader-binding",
            metadata={"name": METRICS_ACCOUNT, "namespace": METRICS_ACCOUNT_NAMESPACE},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": METRICS_ACCOUNT},
            subjects=[{"kind": "ServiceAccount", "name": METRICS_ACCOUNT, "namespace": METRICS_ACCOUNT_NAMESPACE}],
            opts=in_tenant,
        )
        k8s.core.v1.Service(
            f"{prefix}-queue-service",
            metadata={"name": QUEUE_SERVICE, "namespace": HAMI_NAMESPACE},
            spec={
                "type": "ClusterIP",
                "selector": HAMI_SCHEDULER_LEADER_LABELS,
                "ports": [{"name": QUEUE_PORT_NAME, "port": KUBE_SCHEDULER_PORT, "targetPort": KUBE_SCHEDULER_PORT}],
            },
            opts=in_tenant,
        )
        token_secret = k8s.core.v1.Secret(
            f"{prefix}-reader-token",
            metadata={
                "name": METRICS_ACCOUNT,
                "namespace": METRICS_ACCOUNT_NAMESPACE,
                "annotations": {"kubernetes.io/service-account.name": METRICS_ACCOUNT},
            },
            type="kubernetes.io/service-account-token",
            opts=pulumi.ResourceOptions.merge(in_tenant, pulumi.ResourceOptions(depends_on=[account])),
        )
        # The token controller fills the Secret after it is created: read on the host, kept secret.
        token = script_command(
            f"{prefix}-reader-token-read",
            "tenant-metrics-token.sh",
            {"KUBECONFIG_DATA": tenant.kubeconfig, "NAMESPACE": METRICS_ACCOUNT_NAMESPACE, "SECRET": METRICS_ACCOUNT},
            secret_output=True,
            triggers=[token_secret.metadata.apply(lambda metadata: metadata.get("uid"))],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[token_secret, role, binding]),
        )
        return k8s.core.v1.Secret(
            f"{prefix}-token",
            metadata={"name": tenant_secret_name(tenant.name), "namespace": MONITORING_NAMESPACE},
            data=pulumi.Output.secret(token.stdout.apply(token_secret_data)),
            opts=in_namespace,
        )
