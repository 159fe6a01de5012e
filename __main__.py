"""kamaji-hami-lab: many isolated, GPU-sharing Kubernetes clusters on one Docker host.

config -> management cluster -> platform -> tenants -> observability (opt-in) -> outputs
"""

import pulumi

from components.config import load_settings
from components.existing_management_cluster import ExistingManagementCluster
from components.kind_management_cluster import KindManagementCluster
from components.lab_identity import LabIdentity
from components.network_filter import NetworkFilter, NetworkFilterArgs, filtered_tenants
from components.observability import Observability, ObservabilityArgs, TenantAccess
from components.platform import Platform, PlatformArgs
from components.tenant import Tenant, TenantArgs

# 1. Config: parsed and validated in full before any resource is registered.
lab = load_settings()

# 2. The management cluster: a kind cluster on this host, or an existing one. Both
#    expose a provider, a secret kubeconfig, the Docker host of container workers
#    and the subnet (if any) to carve LoadBalancer addresses from.
ManagementCluster = ExistingManagementCluster if lab.existing_cluster else KindManagementCluster
management = ManagementCluster("management", lab)

# 3. The platform on it: cert-manager, a LoadBalancer and Kamaji, each installed or checked.
platform = Platform(
    "platform",
    PlatformArgs(
        provider=management.provider,
        kubeconfig=management.kubeconfig,
        docker=management.docker,
        address_pool=lab.address_pool,
        lab_name=lab.management_cluster_name,
        versions=lab.versions,
        provided=lab.provided,
        data_store=lab.kamaji_data_store,
        network_ready=management.network_checked,
    ),
)

# The lab's random identity, kept in state: the mark on every machine it joins names it, and so do the
# chains of the filter on its docker network.
filtered = filtered_tenants(lab)
identity = LabIdentity("lab") if filtered or any(tenant.machines for tenant in lab.tenants) else None

# Each container worker reaches only what its tenant needs on the lab's network (docs/architecture.md),
# from before its container starts.
network_filter = NetworkFilter(
    "network-filter",
    NetworkFilterArgs(
        lab_identity=identity.value,
        network=management.docker.network,
        subnet=lab.network_subnet,
        node_image=lab.node_image,
        tenants=filtered,
        after=(management.network_checked, management.docker.node_image),
    ),
) if filtered and identity else None

# 4. Tenants: each depends on the layers below and never on another tenant, so
#    all of them come up in parallel.
tenants = {
    tenant.name: Tenant(
        tenant.name,
        TenantArgs(
            tenant=tenant,
            lab=lab,
            management_provider=management.provider,
            management_kubeconfig=management.kubeconfig,
            tenants_namespace=platform.tenants_namespace,
            platform=platform,
            docker=management.docker,
            lab_identity=identity.value if identity else None,
            network_filter=network_filter.installed if network_filter else None,
        ),
    )
    for tenant in lab.tenants
}

# 5. Observability, opt-in: Prometheus and Grafana on the management cluster, one dashboard of
#    every tenant; each tenant gets a metrics reader through its own provider.
if lab.observability:
    observability = Observability(
        "observability",
        ObservabilityArgs(
            provider=management.provider,
            platform=platform,
            tenants=[
                TenantAccess(name=settings.name, kubernetes_version=settings.kubernetes_version,
                             provider=tenants[settings.name].provider, kubeconfig=tenants[settings.name].kubeconfig,
                             ready=tenants[settings.name])
                for settings in lab.tenants
            ],
            kamaji_installed=not lab.provided.kamaji,
            grafana_address=lab.grafana_address,
            load_balancer_provided=lab.provided.load_balancer,
        ),
    )
    pulumi.export("grafanaUrl", observability.grafana_url)
    pulumi.export("grafanaAdminPassword", observability.admin_password)

# 6. Outputs: credentials stay secret; the rest describes each tenant.
pulumi.export("managementKubeconfig", management.kubeconfig)
pulumi.export("metallbAddressRange", platform.address_range)
pulumi.export("platform", platform.facts)
pulumi.export("kubeconfigs", pulumi.Output.secret({name: tenant.kubeconfig for name, tenant in tenants.items()}))
# The teams' own (not system:masters; make revoke-team takes one back): docs/operations.md, "Team credentials".
pulumi.export(
    "teamKubeconfigs", pulumi.Output.secret({name: tenant.team_kubeconfig for name, tenant in tenants.items()})
)
pulumi.export("tenants", {name: tenant.facts for name, tenant in tenants.items()})
