"""Fractional GPU scheduling in one tenant: HAMi on mock GPUs, plus GPU quotas."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.commands import script_command
from components.gpus import node_gpu_memory_mib
from components.settings import GpuQuota, TenantSettings

HAMI_REPO = "https://project-hami.github.io/HAMi/"
HAMI_RELEASE = "hami"
HAMI_NAMESPACE = "kube-system"
HELM_TIMEOUT_SECONDS = 600
# The mock device plugin never releases HAMi's per-node bind lock; without a short
# expiry every further pod on a node waits the default five minutes. Only the
# extender's flag sets it: it overrides the chart's scheduler.nodeLockExpire
# (Project-HAMi/HAMi cmd/scheduler/main.go@v2.10.0, HAMi issue #2790).
NODE_LOCK_TIMEOUT = "5s"
# The node label the chart's NVIDIA device plugin DaemonSet selects
# (charts/hami/values.yaml@v2.10.0: devicePlugin.nvidiaNodeSelector).
REAL_GPU_NODE_LABELS = {"gpu": "on"}
# The resources pods request and nodes advertise: the chart's default names.
GPU_COUNT_RESOURCE = "nvidia.com/gpu"
GPU_MEMORY_RESOURCE = "nvidia.com/gpumem"
GPU_MEMORY_PERCENTAGE_RESOURCE = "nvidia.com/gpumem-percentage"
GPU_CORES_RESOURCE = "nvidia.com/gpucores"
# HAMi's kube-scheduler container queues the GPU pods: HAMi's webhook gives each pod that asks for a HAMi
# resource its schedulerName (pkg/scheduler/webhook.go@v2.10.0), so its `scheduler_pending_pods` counts the
# pending GPU pods. It serves /metrics on its secure port (kubernetes/kubernetes
# pkg/scheduler/apis/config/types.go: 10259) behind delegated authorization, and a request through the API
# server's service proxy reaches it as system:anonymous: the API server drops the caller's Authorization
# header once it has authenticated it (kubernetes/apiserver pkg/endpoints/filters/authentication.go@v0.36.3)
# and dials pods with no client certificate (kubernetes/kubernetes pkg/controlplane/apiserver/config.go).
# So exactly /metrics skips authorization (a path without a trailing * matches only itself:
# pkg/authorization/path/path.go@v0.36.3), as the chart's own metrics port does already.
KUBE_SCHEDULER_PORT = 10259
KUBE_SCHEDULER_METRICS_PATH = "/metrics"
# Replaces the chart's `extraNewArgs`, keeping its two entries (charts/hami/values.yaml@v2.10.0).
KUBE_SCHEDULER_ARGS = (
    "--config=/config/config.yaml",
    "-v=4",
    # The delegated authorizer's defaults (/healthz, /readyz, /livez: pkg/server/options/authorization.go@v0.36.3)
    # and /metrics; /metrics/resources, with pod names, still needs authorization.
    f"--authorization-always-allow-paths=/healthz,/readyz,/livez,{KUBE_SCHEDULER_METRICS_PATH}",
)
# The labels of the scheduler pod that holds the lease, as the chart's own Service selects it
# (charts/hami/templates/scheduler/service.yaml and _helpers.tpl@v2.10.0; the extender labels the leader,
# pkg/scheduler/scheduler.go@v2.10.0).
HAMI_SCHEDULER_LEADER_LABELS = {
    "app.kubernetes.io/component": "hami-scheduler",
    "app.kubernetes.io/name": "hami",
    "app.kubernetes.io/instance": HAMI_RELEASE,
    "hami.io/scheduler-role": "leader",
}
# The DaemonSets that advertise GPUs (charts/hami/templates/device-plugin/daemonset{mock,nvidia}.yaml@v2.10.0).
MOCK_DEVICE_PLUGIN = "hami-mock-device-plugin"
REAL_DEVICE_PLUGIN = "hami-device-plugin"
# HAMi's Services stay inside the tenant: the chart defaults both to NodePort, which would open the extender's
# unauthenticated /filter, /bind and /webhook (31998), its metrics (31993) and the NVIDIA plugin's metrics
# (31992) on every worker to anything on the lab's network; a nodePort is rendered only for type NodePort
# (charts/hami/templates/scheduler/service.yaml, device-plugin/monitorservice.yaml@v2.10.0). Nothing needs them:
# kube-scheduler calls the extender on 127.0.0.1 (templates/scheduler/configmap.yaml@v2.10.0), the API server
# reaches the webhook and the metrics through the Service's endpoints.
CLUSTER_IP_SERVICE = {"type": "ClusterIP"}
# Namespaces that exist in every cluster and must not be created (or deleted) by us.
EXISTING_NAMESPACES = ("default",)


@dataclass(frozen=True)
class GpuSharingArgs:
    tenant: TenantSettings
    kubernetes_version: str
    chart_version: str
    mock_device_plugin_image: str
    provider: k8s.Provider
    """The tenant's own provider; nothing here may touch another cluster."""
    kubeconfig: pulumi.Input[str]
    """The tenant's admin kubeconfig (secret), for the readiness check."""
    node_names: Sequence[str]
    nodes_ready: Sequence[pulumi.Resource]
    """Joined workers and the CNI: HAMi's pods need schedulable nodes."""
    gpus_registered: Sequence[pulumi.CustomResource]
    """Each worker's GPU registration; a new one (a replaced worker) checks the GPUs again."""
    workers_powered: Sequence[pulumi.Resource] = ()
    """Each worker's sleep or wake step: a woken tenant is ready once its GPUs are advertised again."""
    scheduler_metrics: bool = False
    """Open HAMi's kube-scheduler /metrics for the lab's Prometheus (observability on); closed otherwise."""


class GpuSharing(pulumi.ComponentResource):
    """HAMi's scheduler, admission webhook and device plugin (mock or NVIDIA), and the tenant's GPU quotas.

    Its last step waits until GPU workloads can be scheduled: HAMi is up and every
    worker advertises its GPUs (the configured mock memory, or real GPUs found by
    the NVIDIA plugin on the nodes labelled for it here).
    """

    def __init__(self, name: str, args: GpuSharingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:GpuSharing", name, None, opts)
        in_tenant = pulumi.ResourceOptions(parent=self, provider=args.provider)
        real_gpus = args.tenant.real_gpus

        # Real GPUs: the NVIDIA plugin's DaemonSet runs only on labelled nodes. The kubelet
        # registers the label itself (join-worker.sh NODE_LABELS), so a re-joined Node has it;
        # this patch gives it to machines joined before that. Applied server-side, so destroy
        # removes only this label and the node keeps the rest.
        labels = [
            k8s.core.v1.NodePatch(
                f"{name}-gpu-label-{node}",
                metadata={
                    "name": node,
                    "labels": REAL_GPU_NODE_LABELS,
                    # The kubelet owns the node object; take over just this label.
                    "annotations": {"pulumi.com/patchForce": "true"},
                },
                opts=pulumi.ResourceOptions.merge(
                    in_tenant, pulumi.ResourceOptions(depends_on=list(args.nodes_ready))
                ),
            )
            for node in (args.node_names if real_gpus else ())
        ]

        hami = k8s.helm.v3.Release(
            f"{name}-hami",
            name=HAMI_RELEASE,
            chart="hami",
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=HAMI_REPO),
            version=args.chart_version,
            namespace=HAMI_NAMESPACE,
            values=hami_values(
                args.kubernetes_version, args.tenant.gpu_slots, real_gpus, args.mock_device_plugin_image,
                scheduler_metrics=args.scheduler_metrics,
            ),
            timeout=HELM_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions.merge(in_tenant, pulumi.ResourceOptions(depends_on=list(args.nodes_ready))),
        )

        for quota in args.tenant.quotas:
            self._quota(name, quota, in_tenant)

        gpu_nodes = " ".join(args.node_names) if args.tenant.gpus or real_gpus else ""
        registered = [*args.gpus_registered, *labels]
        script_command(
            f"{name}-gpus-ready",
            "wait-gpus.sh",
            {
                "KUBECONFIG_DATA": args.kubeconfig,
                "NODES": gpu_nodes,
                # Real GPUs are whatever the nodes have: any is enough.
                "EXPECTED_GPUMEM": "" if real_gpus else str(node_gpu_memory_mib(args.tenant.gpus)),
                "DEVICE_PLUGIN": REAL_DEVICE_PLUGIN if real_gpus else MOCK_DEVICE_PLUGIN,
                # Runs again on each sleep and wake: asleep there is nothing to wait for; woken, the
                # nodes must be Ready and advertise their GPUs again before `up` is done.
                "SLEEPING": "true" if args.tenant.sleeping else "false",
            },
            triggers=[registration.id for registration in registered],
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[hami, *registered, *args.workers_powered],
                custom_timeouts=pulumi.CustomTimeouts(create="10m"),
            ),
        )

        self.register_outputs({})

    def _quota(self, name: str, quota: GpuQuota, in_tenant: pulumi.ResourceOptions) -> None:
        namespace: pulumi.Input[str] = quota.namespace
        if quota.namespace not in EXISTING_NAMESPACES:
            namespace = k8s.core.v1.Namespace(
                f"{name}-namespace-{quota.namespace}",
                metadata={"name": quota.namespace},
                opts=in_tenant,
            ).metadata.name
        k8s.core.v1.ResourceQuota(
            f"{name}-quota-{quota.namespace}",
            metadata={"name": "gpu-quota", "namespace": namespace},
            spec={"hard": quota_limits(quota)},
            opts=in_tenant,
        )


def hami_values(
    kubernetes_version: str, gpu_slots: int, real_gpus: bool, mock_image: str, scheduler_metrics: bool = False
) -> dict:
    """Helm values for HAMi on mock GPUs, or on the real GPUs of machine workers.

    The chart has no values schema: a misspelt key is silently ignored, so every
    key here must exist in the chart's values.yaml (a test checks this).
    """
    scheduler = {
        "service": CLUSTER_IP_SERVICE,
        # The stock kube-scheduler must match the tenant API server exactly; the
        # chart's default registry is a mirror, and its version guess sees Helm's
        # view of the cluster rather than the tenant's.
        "kubeScheduler": {
            "image": {"registry": "registry.k8s.io", "repository": "kube-scheduler", "tag": kubernetes_version},
        },
    }
    if scheduler_metrics:
        # Used for clusters from v1.22 on (charts/hami/templates/scheduler/deployment.yaml@v2.10.0); without
        # observability nobody reads /metrics, so it stays behind authorization.
        scheduler["kubeScheduler"]["extraNewArgs"] = list(KUBE_SCHEDULER_ARGS)
    if real_gpus:
        return {
            # The chart's own device config is the one its NVIDIA plugin is built for; it
            # takes deviceSplitCount from here, for the scheduler and the plugin alike
            # (charts/hami/templates/scheduler/device-configmap.yaml@v2.10.0; the plugin
            # reads that file, pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go@v2.10.0).
            "devicePlugin": {"enabled": True, "deviceSplitCount": gpu_slots, "service": CLUSTER_IP_SERVICE},
            "mockDevicePlugin": {"enabled": False},
            # The real plugin releases the node lock after each pod: the default expiry stands.
            "scheduler": {**scheduler, "extender": {"extraArgs": ["-v=4"]}},
        }
    return {
        # No NVML here: the real plugin would find nothing and zero the GPU capacity.
        "devicePlugin": {"enabled": False},
        # Turns the node's register annotation into gpumem/gpucores resources.
        "mockDevicePlugin": {"enabled": True, "image": chart_image(mock_image)},
        # Replaces the chart's own device config, whose `vnpus` map crashes the mock
        # (Project-HAMi/mock-device-plugin internal/pkg/config/config.go@v1.0.1 expects a list).
        "device-config": {"content": yaml.safe_dump(device_config(gpu_slots), sort_keys=False)},
        "scheduler": {
            **scheduler,
            # Replaces the chart's list: -v=4 keeps the chart's detailed log for
            # troubleshooting; its --debug sets a flag nothing in 2.10.0 reads.
            "extender": {"extraArgs": ["-v=4", f"--node-lock-timeout={NODE_LOCK_TIMEOUT}"]},
        },
    }


def chart_image(reference: str) -> dict[str, str]:
    """An image reference as the chart's registry, repository and tag, which it joins as <registry>/<repository>:<tag>
    (charts/hami/templates/_commons.tpl@v2.10.0); a digest rides along in the tag."""
    name, tag = re.fullmatch(r"(.+?):([^:/@]+(?:@sha256:[a-f0-9]+)?)", reference).groups()
    first, _, rest = name.partition("/")
    # As Docker reads a reference: the first part names a registry only with a dot, a port or localhost.
    if rest and ("." in first or ":" in first or first == "localhost"):
        return {"registry": first, "repository": rest, "tag": tag}
    return {"registry": "", "repository": name, "tag": tag}


def device_config(gpu_slots: int) -> dict:
    """HAMi's device config: only the NVIDIA section, the one device type the lab mocks.

    The scheduler and webhook (Project-HAMi/HAMi pkg/scheduler/config/config.go@v2.10.0)
    and the mock plugin (Project-HAMi/mock-device-plugin internal/pkg/config/config.go@v1.0.1)
    both read it; absent sections leave their device types without resources.
    """
    return {
        "nvidia": {
            # Scheduler: a node counts while its allocatable of this is positive; mock: its capacity.
            "resourceCountName": GPU_COUNT_RESOURCE,
            # The mock advertises the registered memory, cores and percentage under these
            # names; unset, it would register a resource with an empty name.
            "resourceMemoryName": GPU_MEMORY_RESOURCE,
            "resourceCoreName": GPU_CORES_RESOURCE,
            "resourceMemoryPercentageName": GPU_MEMORY_PERCENTAGE_RESOURCE,
            # The webhook gives a pod that asks only for gpumem or gpucores one GPU.
            "defaultGPUNum": 1,
            # gpumem counts MiB, unscaled (the mock divides by a factor above 1).
            "memoryFactor": 1,
            # Slots per GPU, as a real plugin would register them (the mock reads the annotation).
            "deviceSplitCount": gpu_slots,
        }
    }


def quota_limits(quota: GpuQuota) -> dict[str, str]:
    """ResourceQuota hard limits: HAMi enforces the limits.* keys, Kubernetes the requests.* one."""
    limits = {
        f"limits.{GPU_MEMORY_RESOURCE}": quota.gpumem_mib,
        f"limits.{GPU_CORES_RESOURCE}": quota.gpucores,
        f"requests.{GPU_COUNT_RESOURCE}": quota.gpus,
    }
    return {key: str(value) for key, value in limits.items() if value is not None}
