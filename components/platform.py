"""The management platform: cert-manager, a LoadBalancer (MetalLB with its pool) and Kamaji."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.addresses import AddressRange
from components.commands import script_command
from components.docker_host import DockerHost
from components.settings import KAMAJI_IMAGE_TAG, Provided, Versions

# Kamaji's CRD conversion webhook and CA injection are wired to these names.
KAMAJI_RELEASE = "kamaji"
KAMAJI_NAMESPACE = "kamaji-system"
TENANTS_NAMESPACE = "tenants"
METALLB_NAMESPACE = "metallb-system"
ADDRESS_POOL = "kind"
HELM_TIMEOUT_SECONDS = 600

CERT_MANAGER_REPO = "https://charts.jetstack.io"
METALLB_REPO = "https://metallb.github.io/metallb"
KAMAJI_REPO = "https://clastix.github.io/charts"

# Removes the chart's default resource limits from the Kamaji manager (they
# throttle and OOM-kill it). Only a YAML null deletes a chart default, and a
# Python None inside `values=` is silently dropped, so it goes in as a file.
KAMAJI_VALUES_YAML = "resources: null\n"
# The kamaji-etcd chart Kamaji's chart bundles as its DataStore, as the code cites it (clastix/kamaji-etcd 92f31f0,
# charts/kamaji-etcd/Chart.yaml). No value pins it: the chart asks for kamaji-etcd >=0.15.0 (charts/kamaji/
# Chart.yaml@26.8.2-edge), its publisher packs the newest one in (stefanprodan/helm-gh-pages src/entrypoint.sh
# @89c6698 runs `helm dependency update`), and an install takes the packed one, checking only its name (helm
# pkg/action/install.go@v3.20.2 CheckDependencies, which pulumi-kubernetes' Release calls). So it is checked:
# scripts/render_charts.py fails CI when the published chart bundles another.
KAMAJI_ETCD_CHART = "kamaji-etcd-0.17.0"
CERT_MANAGER_VALUES = {"crds": {"enabled": True}}


@dataclass(frozen=True)
class PlatformArgs:
    provider: k8s.Provider
    """Provider of the management cluster."""
    kubeconfig: pulumi.Input[str]
    """Management kubeconfig (secret) for the readiness checks."""
    docker: DockerHost | None
    """Where container workers run: a MetalLB pool must be clear of its network's addresses."""
    address_pool: AddressRange | None
    """The pool the lab's MetalLB announces; None: the cluster's own LoadBalancer gives the addresses."""
    lab_name: str
    """The lab's identity (its management cluster name), which marks its pool on the shared network."""
    versions: Versions
    provided: Provided
    """Pieces the cluster already runs: checked, not installed."""
    data_store: str
    """The DataStore tenants use; a provided Kamaji must have it ready."""
    network_ready: pulumi.Resource | None = None
    """The Docker network exists as planned (the kind network's check); the pool is checked on it after."""


class Platform(pulumi.ComponentResource):
    """cert-manager, a LoadBalancer and Kamaji on the management cluster, each installed or provided.

    Depending on this component means "Kamaji accepts TenantControlPlanes and
    the LoadBalancer hands out their addresses": its children end with the wait
    for Kamaji's DataStore, whose absence makes Kamaji's webhook reject tenants,
    and, for a provided LoadBalancer, a probe Service that must get an address.
    A provided piece is checked by a bounded script that fails naming what is missing.
    """

    address_range: pulumi.Output[str]
    tenants_namespace: pulumi.Output[str]
    facts: dict[str, object]
    """Non-secret: the pieces provided (by config key) and the DataStore, for the validation suite."""

    def __init__(self, name: str, args: PlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:Platform", name, None, opts)
        self._kubeconfig = {"KUBECONFIG_DATA": args.kubeconfig}
        pieces = {
            "certManager": args.provided.cert_manager,
            "loadBalancer": args.provided.load_balancer,
            "kamaji": args.provided.kamaji,
        }
        self.facts = {"provided": [key for key, provided in pieces.items() if provided], "dataStore": args.data_store}

        pool_checked = self._address_range(name, args)
        on_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=pool_checked)
        cert_manager = self._cert_manager(name, args, on_cluster)
        load_balancer = [] if args.provided.load_balancer else [self._metallb(name, args, on_cluster)]
        kamaji_ready = self._kamaji(name, args, on_cluster, cert_manager, load_balancer)

        tenants = k8s.core.v1.Namespace(
            f"{name}-tenants-namespace",
            metadata={"name": TENANTS_NAMESPACE},
            opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[kamaji_ready])),
        )
        self.tenants_namespace = tenants.metadata.name
        if args.provided.load_balancer:
            self._load_balancer_check(name, tenants)

        self.register_outputs(
            {"addressRange": self.address_range, "tenantsNamespace": self.tenants_namespace, "facts": self.facts}
        )

    def _address_range(self, name: str, args: PlatformArgs) -> list[pulumi.Resource]:
        """Sets `address_range` (empty for a provided LoadBalancer); returns the check that it is free."""
        if args.address_pool is None:
            # The cluster's own LoadBalancer picks the addresses (checked by _load_balancer_check).
            self.address_range = pulumi.Output.from_input("")
            return []
        self.address_range = pulumi.Output.from_input(str(args.address_pool))
        if not args.docker:
            return []
        # Before anything goes onto the cluster: a pool that overlaps Docker's
        # addresses or another kind cluster's pool on the network is refused.
        environment = {"POOL": self.address_range, "CLUSTER_NAME": args.lab_name, "KIND_NETWORK": args.docker.network}
        return [
            script_command(
                f"{name}-address-pool-check",
                "check-address-pool.sh",
                environment,
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=[args.network_ready] if args.network_ready else []
                ),
            )
        ]

    def _cert_manager(self, name: str, args: PlatformArgs, on_cluster: pulumi.ResourceOptions) -> pulumi.Resource:
        if args.provided.cert_manager:
            return script_command(
                f"{name}-cert-manager-check",
                "check-cert-manager.sh",
                self._kubeconfig,
                opts=pulumi.ResourceOptions(parent=self, custom_timeouts=pulumi.CustomTimeouts(create="5m")),
            )
        return k8s.helm.v3.Release(
            f"{name}-cert-manager",
            name="cert-manager",
            chart="cert-manager",
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=CERT_MANAGER_REPO),
            version=args.versions.cert_manager,
            namespace="cert-manager",
            create_namespace=True,
            values=CERT_MANAGER_VALUES,
            timeout=HELM_TIMEOUT_SECONDS,
            opts=on_cluster,
        )

    def _metallb(self, name: str, args: PlatformArgs, on_cluster: pulumi.ResourceOptions) -> pulumi.Resource:
        """MetalLB announcing `address_range`; returns its L2Advertisement, the last step."""
        metallb = k8s.helm.v3.Release(
            f"{name}-metallb",
            name="metallb",
            chart="metallb",
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=METALLB_REPO),
            version=metallb_chart_version(args.versions.metallb),
            namespace=METALLB_NAMESPACE,
            create_namespace=True,
            timeout=HELM_TIMEOUT_SECONDS,
            opts=on_cluster,
        )
        # MetalLB's webhook refuses pools for a while after its release reports ready.
        metallb_ready = script_command(
            f"{name}-metallb-ready",
            "wait-metallb.sh",
            {**self._kubeconfig, "NAMESPACE": METALLB_NAMESPACE},
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[metallb], custom_timeouts=pulumi.CustomTimeouts(create="10m")
            ),
        )
        after_metallb = pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[metallb_ready]))
        pool = k8s.apiextensions.CustomResource(
            f"{name}-address-pool",
            api_version="metallb.io/v1beta1",
            kind="IPAddressPool",
            metadata={"name": ADDRESS_POOL, "namespace": METALLB_NAMESPACE},
            # Hands out only the addresses Services ask for by name (MetalLB go.universe.tf/metallb
            # internal/allocator/allocator.go@v0.16.1: Allocate skips pools without autoAssign, Assign does not):
            # a tenant's or Grafana's address is never taken by a Service that came first.
            spec={"addresses": [self.address_range], "autoAssign": False},
            opts=after_metallb,
        )
        return k8s.apiextensions.CustomResource(
            f"{name}-l2-advertisement",
            api_version="metallb.io/v1beta1",
            kind="L2Advertisement",
            metadata={"name": ADDRESS_POOL, "namespace": METALLB_NAMESPACE},
            spec={"ipAddressPools": [ADDRESS_POOL]},
            opts=pulumi.ResourceOptions.merge(after_metallb, pulumi.ResourceOptions(depends_on=[pool])),
        )

    def _load_balancer_check(self, name: str, tenants: k8s.core.v1.Namespace) -> None:
        """Proves a provided LoadBalancer hands out addresses: a probe Service in the tenants namespace.

        It takes MetalLB's place for the tenants, which wait for every child of
        this component; without it a control plane would only time out.
        """
        script_command(
            f"{name}-load-balancer-check",
            "check-load-balancer.sh",
            {**self._kubeconfig, "NAMESPACE": tenants.metadata.name},
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[tenants], custom_timeouts=pulumi.CustomTimeouts(create="6m")
            ),
        )

    def _kamaji(
        self,
        name: str,
        args: PlatformArgs,
        on_cluster: pulumi.ResourceOptions,
        cert_manager: pulumi.Resource,
        load_balancer: list[pulumi.Resource],
    ) -> pulumi.Resource:
        """Kamaji, installed or checked; returns the step after which it accepts TenantControlPlanes."""
        if args.provided.kamaji:
            # Kamaji's webhooks fail closed, and its default DataStore need not be the lab's.
            return script_command(
                f"{name}-kamaji-check",
                "check-kamaji.sh",
                {**self._kubeconfig, "DATASTORE": args.data_store},
                opts=pulumi.ResourceOptions(
                    parent=self,
                    depends_on=[cert_manager, *load_balancer],
                    custom_timeouts=pulumi.CustomTimeouts(create="6m"),
                ),
            )
        kamaji = k8s.helm.v3.Release(
            f"{name}-kamaji",
            name=KAMAJI_RELEASE,
            chart="kamaji",
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=KAMAJI_REPO),
            version=args.versions.kamaji_chart,
            namespace=KAMAJI_NAMESPACE,
            create_namespace=True,
            value_yaml_files=[pulumi.StringAsset(KAMAJI_VALUES_YAML)],
            values=kamaji_values(args.versions.kamaji_image_tag),
            timeout=HELM_TIMEOUT_SECONDS,
            # Kamaji's certificates and webhooks are cert-manager resources.
            opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[cert_manager])),
        )
        # The release is ready before its etcd DataStore is; tenants need both. On
        # destroy (after the last tenant, before the release) it deletes the DataStore
        # while Kamaji can still remove its finalizer.
        return script_command(
            f"{name}-kamaji-ready",
            "wait-kamaji.sh",
            self._kubeconfig,
            delete="delete-datastore.sh",
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[kamaji, *load_balancer],
                custom_timeouts=pulumi.CustomTimeouts(create="15m"),
            ),
        )


def metallb_chart_version(metallb_version: str) -> str:
    # The metallb repository versions its chart without the leading v.
    return metallb_version.removeprefix("v")


def kamaji_values(image_tag: str) -> dict:
    """Helm values for Kamaji besides KAMAJI_VALUES_YAML; an empty `image_tag` means KAMAJI_IMAGE_TAG.

    The chart's image defaults to its appVersion `latest` pulled Always, so any
    restart of the controller could run a newer Kamaji than the CRDs Helm
    installed; a pinned tag is pulled once (clastix/kamaji
    charts/kamaji/values.yaml@26.8.2-edge: image.tag, image.pullPolicy).
    """
    return {"image": {"tag": image_tag or KAMAJI_IMAGE_TAG, "pullPolicy": "IfNotPresent"}}
