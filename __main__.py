"""kamaji-hami-lab: many isolated, GPU-sharing Kubernetes clusters on one Docker host.

config -> management cluster -> platform -> tenants -> outputs
"""

import pulumi

from components.config import load_settings
from components.docker_daemon import docker_daemon_address
from components.management_cluster import ManagementCluster, ManagementClusterArgs
from components.platform import Platform, PlatformArgs
from components.tenant import Tenant, TenantArgs

# 1. Config: parsed and validated in full before any resource is registered.
lab = load_settings()

# 2. The host: Docker, the shared node image and the kind management cluster.
management = ManagementCluster(
    "management",
    ManagementClusterArgs(
        cluster_name=lab.management_cluster_name,
        node_image=lab.node_image,
        kind_subnet=str(lab.kind_subnet) if lab.kind_subnet else None,
        docker_host=docker_daemon_address(),
    ),
)

# 3. The platform on it: cert-manager, MetalLB and Kamaji.
platform = Platform(
    "platform",
    PlatformArgs(
        provider=management.provider,
        kubeconfig=management.kubeconfig,
        kind_subnet=management.kind_subnet,
        address_range=lab.metallb_address_range,
        lab_name=lab.management_cluster_name,
        versions=lab.versions,
    ),
)

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
            node_image=management.node_image,
            docker_provider=management.docker_provider,
        ),
    )
    for tenant in lab.tenants
}

# 5. Outputs: credentials stay secret; the rest describes each tenant.
pulumi.export("managementKubeconfig", management.kubeconfig)
pulumi.export("metallbAddressRange", platform.address_range)
pulumi.export("kubeconfigs", pulumi.Output.secret({name: tenant.kubeconfig for name, tenant in tenants.items()}))
pulumi.export("tenants", {name: tenant.facts for name, tenant in tenants.items()})
