"""One tenant: its control plane, network, workers and GPU sharing, independent of every other tenant."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.commands import script_command
from components.datastore_move import clients_restart
from components.dedicated_datastore import DedicatedDataStore, DedicatedDataStoreArgs
from components.docker_host import DockerHost
from components.flannel import Flannel, FlannelArgs
from components.gpu_sharing import GpuSharing, GpuSharingArgs
from components.kube_proxy import KubeProxy, KubeProxyArgs
from components.machine_worker import MachineWorker, MachineWorkerArgs
from components.observability_values import MONITORING_NAMESPACE, tenant_secret_name
from components.settings import GpuQuota, LabSettings, TenantSettings
from components.team_access import TeamAccess, TeamAccessArgs
from components.tenant_control_plane import TenantControlPlane, TenantControlPlaneArgs
from components.worker_node import WorkerNode, WorkerNodeArgs


@dataclass(frozen=True)
class TenantArgs:
    """What every tenant takes from the layers below it; nothing from another tenant."""

    tenant: TenantSettings
    lab: LabSettings
    management_provider: k8s.Provider
    management_kubeconfig: pulumi.Input[str]
    tenants_namespace: pulumi.Input[str]
    platform: pulumi.Resource
    """Tenants are created only once Kamaji and MetalLB are ready (and destroyed before them)."""
    docker: DockerHost | None
    """Where container workers run; None when no tenant has any."""
    lab_identity: pulumi.Input[str] | None = None
    """The lab's random identity (LabIdentity), which machines are marked with; None when no tenant has any."""
    network_filter: pulumi.Resource | None = None
    """The filter on the lab's docker network (NetworkFilter), in place before a container worker starts; None
    where the network is not the lab's."""


class Tenant(pulumi.ComponentResource):
    """A tenant cluster with a Kamaji control plane, workers (kindest/node containers or machines) and HAMi.

    Outputs: `kubeconfig` (secret, the operator's), `team_kubeconfig` (secret, the team's: components/
    team_access.py) and `facts`, the non-secret description users
    and the validation suite read from the stack outputs. GPU workloads added to
    this program can depend on the tenant itself: a component is done once all its
    children are, which includes HAMi being up and every worker advertising its GPUs.
    """

    kubeconfig: pulumi.Output[str]
    team_kubeconfig: pulumi.Output[str]
    facts: dict[str, pulumi.Input]

    def __init__(self, name: str, args: TenantArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:Tenant", name, None, opts)
        tenant, lab = args.tenant, args.lab

        data_store_ready = None
        if tenant.dedicated_data_store:
            data_store_ready = DedicatedDataStore(
                f"{name}-datastore",
                DedicatedDataStoreArgs(
                    data_store=tenant.data_store,
                    provider=args.management_provider,
                    management_kubeconfig=args.management_kubeconfig,
                    platform=args.platform,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            ).ready

        control_plane = TenantControlPlane(
            f"{name}",
            TenantControlPlaneArgs(
                tenant=tenant,
                kubernetes_version=tenant.kubernetes_version,
                cluster_name=lab.management_cluster_name,
                namespace=args.tenants_namespace,
                management_provider=args.management_provider,
                management_kubeconfig=args.management_kubeconfig,
                platform=args.platform,
                konnectivity_metrics=lab.observability,
                reader_secret=(MONITORING_NAMESPACE, tenant_secret_name(tenant.name)),
                data_store_ready=data_store_ready,
                shared_data_store=lab.kamaji_data_store,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.kubeconfig = control_plane.kubeconfig
        # Its own provider, for the layers above that put objects into this tenant (observability).
        self.provider = control_plane.provider

        self.team_kubeconfig = TeamAccess(
            f"{name}",
            TeamAccessArgs(tenant=tenant.name, provider=control_plane.provider, kubeconfig=control_plane.kubeconfig),
            opts=pulumi.ResourceOptions(parent=self),
        ).kubeconfig

        kube_proxy = KubeProxy(
            f"{name}",
            KubeProxyArgs(
                kubernetes_version=tenant.kubernetes_version,
                pod_cidr=tenant.pod_cidr,
                endpoint=control_plane.endpoint,
                provider=control_plane.provider,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

        # Its workers, containers or machines, with the pod network they need. They join one
        # after another, each once the control plane runs the tenant's version: an upgrade
        # drains and replaces a single worker at a time.
        if tenant.machines:
            network, workers = self._machines(name, args, control_plane)
        else:
            network, workers = self._containers(name, args, control_plane)
        node_names = list(workers)

        gpu_sharing = GpuSharing(
            f"{name}",
            GpuSharingArgs(
                tenant=tenant,
                kubernetes_version=tenant.kubernetes_version,
                chart_version=lab.versions.hami_chart,
                mock_device_plugin_image=lab.versions.mock_device_plugin,
                provider=control_plane.provider,
                kubeconfig=control_plane.kubeconfig,
                node_names=node_names,
                nodes_ready=[network, kube_proxy, *(worker.joined for worker in workers.values())],
                gpus_registered=[worker.gpus_registered for worker in workers.values() if worker.gpus_registered],
                workers_powered=[worker.power for worker in workers.values()],
                scheduler_metrics=lab.observability,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        # After a move to another DataStore, once every kubelet restarted: the lab's clients in the tenant.
        clients_restart(
            name,
            tenant.name,
            control_plane.kubeconfig,
            tenant.data_store,
            tenant.sleeping,
            parent=self,
            after=[gpu_sharing, network, kube_proxy, *(worker.kubelet_restarted for worker in workers.values())],
        )

        self.facts = {
            "endpoint": control_plane.endpoint,
            "namespace": args.tenants_namespace,
            "kubernetesVersion": tenant.kubernetes_version,
            "dataStoreSchema": tenant.data_store_schema,
            "workers": node_names,
            "gpusPerWorker": [
                {"model": gpu.model, "deviceType": gpu.device_type, "memoryMiB": gpu.memory_mib, "count": gpu.count}
                for gpu in tenant.gpus
            ],
            "gpuSlots": tenant.gpu_slots,
            "gpuDevices": "real" if tenant.real_gpus else "mock",
            "quotas": [quota_facts(quota) for quota in tenant.quotas],
            "sleeping": tenant.sleeping,
            # The isolation check expects pods it may not run refused unless the tenant opted out.
            "podSecurity": tenant.pod_security,
        }

        self.register_outputs(
            {"kubeconfig": self.kubeconfig, "teamKubeconfig": self.team_kubeconfig, "facts": self.facts}
        )

    def _containers(
        self, name: str, args: TenantArgs, control_plane: TenantControlPlane
    ) -> tuple[pulumi.Resource, dict[str, WorkerNode]]:
        """kindest/node containers on the lab's Docker host, with kindnet from their image."""
        tenant, lab = args.tenant, args.lab
        if args.docker is None:
            raise ValueError(f"tenant {tenant.name} has container workers but the lab has no Docker host")
        docker_host = args.docker
        if tenant.node_image != lab.node_image:
            docker_host = args.docker.with_node_image(name, tenant.node_image, self, control_plane.version_checked)

        # kindnet, the CNI kindest/node is built for; its manifest ships in the node image.
        network = script_command(
            f"{name}-cni",
            "install-cni.sh",
            {
                "KUBECONFIG_DATA": control_plane.kubeconfig,
                "POD_CIDR": tenant.pod_cidr,
                "NODE_IMAGE": tenant.node_image,
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[docker_host.node_image]),
        )
        workers: dict[str, WorkerNode] = {}
        for index in range(1, tenant.workers + 1):
            node_name = lab.worker_name(tenant, index)
            workers[node_name] = WorkerNode(
                node_name,
                WorkerNodeArgs(
                    node_name=node_name,
                    tenant=tenant.name,
                    cluster_name=lab.management_cluster_name,
                    docker=docker_host,
                    platform=args.platform,
                    control_plane_ready=control_plane.ready,
                    previous_worker=_last_done(workers),
                    tenant_kubeconfig=control_plane.kubeconfig,
                    gpus=tenant.gpus,
                    gpu_slots=tenant.gpu_slots,
                    data_store=tenant.data_store,
                    sleeping=tenant.sleeping,
                    address=lab.worker_address(tenant, index),
                    network_filter=args.network_filter,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
        return network, workers

    def _machines(
        self, name: str, args: TenantArgs, control_plane: TenantControlPlane
    ) -> tuple[pulumi.Resource, dict[str, MachineWorker]]:
        """Machines joined over SSH, with a CNI installed from the cluster side (no Docker needed)."""
        tenant = args.tenant
        network = Flannel(
            f"{name}",
            FlannelArgs(
                provider=control_plane.provider,
                pod_cidr=tenant.pod_cidr,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        ).ready
        workers: dict[str, MachineWorker] = {}
        for machine in tenant.machines:
            workers[machine.name] = MachineWorker(
                machine.name,
                MachineWorkerArgs(
                    machine=machine,
                    lab_id=f"{pulumi.get_project()}/{pulumi.get_stack()}/{args.lab.management_cluster_name}",
                    lab_identity=args.lab_identity,
                    tenant=tenant.name,
                    kubernetes_version=tenant.kubernetes_version,
                    endpoint=control_plane.endpoint,
                    control_plane_ready=control_plane.ready,
                    previous_worker=_last_done(workers),
                    tenant_kubeconfig=control_plane.kubeconfig,
                    gpus=tenant.gpus,
                    gpu_slots=tenant.gpu_slots,
                    real_gpus=tenant.real_gpus,
                    data_store=tenant.data_store,
                    sleeping=tenant.sleeping,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
        return network, workers


def quota_facts(quota: GpuQuota) -> dict[str, str | int]:
    limits = {"gpumemMiB": quota.gpumem_mib, "gpucores": quota.gpucores, "gpus": quota.gpus}
    return {"namespace": quota.namespace, **{key: value for key, value in limits.items() if value is not None}}


def _last_done(workers: dict[str, WorkerNode] | dict[str, MachineWorker]) -> pulumi.Resource | None:
    """The previous worker's last step, which the next worker waits for."""
    return list(workers.values())[-1].done if workers else None
