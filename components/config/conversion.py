"""The valid stack config as the components take it: plain frozen settings (``components/settings.py``).

Here a tenant's empty keys take the lab's, and an empty nodeImage its kindest/node default; what the rules
need too (the address pool, the tenants' API addresses) stays a property of the models.
"""
from __future__ import annotations

from components.config.models import StackConfig, Tenant
from components.kubeconfig import with_current_context
from components.settings import (
    ExistingCluster,
    GpuQuota,
    LabSettings,
    Machine,
    Provided,
    TenantSettings,
    Versions,
    dedicated_data_store_name,
)


def _lab_node_image(config: StackConfig) -> str:
    return config.node_image or f"kindest/node:{config.kubernetes_version}"


def _node_image_of(config: StackConfig, tenant: Tenant) -> str:
    # A tenant on the lab's version shares the lab's (digest-pinned) image.
    version = tenant.kubernetes_version or config.kubernetes_version
    if tenant.node_image:
        return tenant.node_image
    return _lab_node_image(config) if version == config.kubernetes_version else f"kindest/node:{version}"


def lab_settings(config: StackConfig) -> LabSettings:
    """The valid config as the components take it."""
    addresses = config.api_addresses
    versions = Versions(
        kubernetes=config.kubernetes_version,
        cert_manager=config.cert_manager_version,
        metallb=config.metallb_version,
        kamaji_chart=config.kamaji_chart_version,
        kamaji_image_tag=config.kamaji_image_tag,
        hami_chart=config.hami_chart_version,
        mock_device_plugin=config.mock_device_plugin_image,
    )
    return LabSettings(
        management_cluster_name=config.management_cluster_name,
        versions=versions,
        node_image=_lab_node_image(config),
        address_pool=config.address_pool,
        kind_subnet=config.kind_subnet,
        existing_cluster=None
        if config.management_cluster == "kind"
        else ExistingCluster(
            kubeconfig=with_current_context(config.management_kubeconfig, config.management_context),
            docker_network=config.docker_network or None,
        ),
        provided=Provided(
            cert_manager=config.cert_manager == "provided",
            load_balancer=config.load_balancer == "provided",
            kamaji=config.kamaji == "provided",
        ),
        kamaji_data_store=config.kamaji_data_store,
        observability=config.observability,
        tenants=tuple(
            TenantSettings(
                name=tenant.name,
                workers=len(tenant.machines) or tenant.workers or config.workers_per_tenant,
                gpus=tenant.gpu_specs,
                gpu_slots=tenant.gpu_slots or config.gpu_slots,
                control_plane_replicas=tenant.control_plane_replicas or config.control_plane_replicas,
                pod_cidr=tenant.pod_cidr,
                service_cidr=tenant.service_cidr,
                quotas=tuple(GpuQuota(q.namespace, q.gpumem_mib, q.gpucores, q.gpus) for q in tenant.quotas),
                data_store=dedicated_data_store_name(tenant.name) if tenant.data_store == "dedicated"
                else config.kamaji_data_store,
                dedicated_data_store=tenant.data_store == "dedicated",
                kubernetes_version=tenant.kubernetes_version or config.kubernetes_version,
                node_image=_node_image_of(config, tenant),
                machines=tuple(
                    Machine(m.name, m.address, m.port, m.user, config.ssh_private_keys[m.ssh_key], m.host_key,
                            m.adopt, m.node_ip or "", m.flannel_interface or m.node_ip or "", m.proxy_jump)
                    for m in tenant.machines
                ),
                real_gpus=tenant.gpu_devices == "real",
                sleeping=tenant.sleeping,
                api_address=str(addresses[tenant.name]) if tenant.name in addresses else None,
                pod_security=tenant.pod_security,
            )
            for tenant in config.tenants
        ),
    )
