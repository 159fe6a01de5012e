"""A tenant's Kubernetes API: a Kamaji TenantControlPlane, its kubeconfig and a provider."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components import audit, pod_security
from components.addresses import asking_metallb_for
from components.commands import script_command
from components.kubeconfig import current_cluster
from components.settings import TenantSettings, dedicated_data_store_name

API_PORT = 6443
KONNECTIVITY_PORT = 8132
# Kamaji copies the spec's version here only once that version's control plane is Ready
# (clastix/kamaji internal/resources/k8s_deployment_resource.go@ddbabd8, UpdateTenantControlPlaneStatus).
RUNNING_VERSION_PATH = "{.status.kubernetesResources.version.version}"
# What Kamaji reports for a control plane scaled to 0 replicas (clastix/kamaji
# api/v1alpha1/tenantcontrolplane_status.go@26.8.2-edge, VersionSleeping).
SLEEPING_STATUS = "Sleeping"
READY_STATUS = "Ready"
# The TenantControlPlane annotation that has Kamaji's migration Job clear the target first (clastix/kamaji
# internal/resources/datastore/datastore_migrate.go@26.8.2-edge).
MIGRATION_CLEANUP_ANNOTATION = "kamaji.clastix.io/cleanup-prior-migration"
DISK_EVICTION_OFF = {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"}
# konnectivity-server serves /metrics on its health port from v0.34.0 on; before, only on its admin port, which
# binds 127.0.0.1 unless told otherwise (kubernetes-sigs/apiserver-network-proxy cmd/server/app/server.go and
# cmd/server/app/options/options.go@v0.33.0, @v0.34.0). Kamaji runs v0.<tenant's minor>.0, names the ports
# adminport (8133) and healthport (8134), and keeps the extraArgs it does not set itself (clastix/kamaji
# internal/builders/controlplane/konnectivity_server.go@ddbabd8: serverVersion, buildKonnectivityContainer).
KONNECTIVITY_METRICS_ON_HEALTH_PORT = (1, 34)
KONNECTIVITY_ADMIN_ON_ALL_INTERFACES = "--admin-bind-address=0.0.0.0"
# Kamaji makes --enable-admission-plugins of spec.kubernetes.admissionControllers alone, over any extraArgs, and
# the list replaces its CRD default rather than adding to it (clastix/kamaji api/v1alpha1/tenantcontrolplane_types.go
# and internal/builders/controlplane/deployment.go@26.8.2-edge: KubernetesSpec, buildKubeAPIServerCommand), so the
# lab names the default again. NodeRestriction limits each kubelet to its own node and its pods; it works with the
# Node authorizer, which Kamaji enables (--authorization-mode=Node,RBAC, as long as no --authorization-config is
# given). PodSecurity is on by default in kube-apiserver (kubernetes/kubernetes pkg/kubeapiserver/options/plugins.go
# at master 008b365, DefaultOffAdmissionPlugins); named here because the admission configuration is its.
KAMAJI_DEFAULT_ADMISSION_CONTROLLERS = (
    "CertificateApproval",
    "CertificateSigning",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DefaultStorageClass",
    "DefaultTolerationSeconds",
    "LimitRanger",
    "MutatingAdmissionWebhook",
    "NamespaceLifecycle",
    "PersistentVolumeClaimResize",
    "Priority",
    "ResourceQuota",
    "RuntimeClass",
    "ServiceAccount",
    "StorageObjectInUseProtection",
    "TaintNodesByCondition",
    "ValidatingAdmissionWebhook",
)
ADMISSION_CONTROLLERS = (*KAMAJI_DEFAULT_ADMISSION_CONTROLLERS, "NodeRestriction", pod_security.PLUGIN)


def konnectivity_metrics_port(kubernetes_version: str) -> str:
    """The port (as Kamaji names it) on which a tenant's konnectivity-server serves /metrics."""
    major, minor = (int(part) for part in kubernetes_version.lstrip("v").split(".")[:2])
    return "healthport" if (major, minor) >= KONNECTIVITY_METRICS_ON_HEALTH_PORT else "adminport"


@dataclass(frozen=True)
class TenantControlPlaneArgs:
    tenant: TenantSettings
    kubernetes_version: str
    cluster_name: str
    """Management cluster name, part of the tenant provider's identity."""
    namespace: pulumi.Input[str]
    """Management-cluster namespace that holds the TenantControlPlane."""
    management_provider: k8s.Provider
    management_kubeconfig: pulumi.Input[str]
    """Secret; used on the host to read the tenant's admin kubeconfig."""
    platform: pulumi.Resource
    """Kamaji's webhooks reject control planes until Kamaji and its DataStore are ready."""
    shared_data_store: str
    """The lab's shared DataStore (kamajiDataStore): with the tenant's own, the only ones it may move between."""
    konnectivity_metrics: bool = False
    """Prometheus scrapes the konnectivity-server (observability on)."""
    reader_secret: tuple[str, str] = ("", "")
    """(namespace, name) of the Secret on the management cluster that holds observability's token for this
    tenant, there while observability reads the tenant."""
    data_store_ready: pulumi.Resource | None = None
    """The tenant's dedicated DataStore is ready (None: it uses the lab's shared one, ready with `platform`)."""


class TenantControlPlane(pulumi.ComponentResource):
    """Kamaji runs this tenant's API server, controller manager and scheduler as pods.

    Outputs: `kubeconfig` (secret, admin, pointing at the MetalLB address),
    `endpoint` (https URL, not secret) and `provider` for the tenant cluster;
    `version_checked` completes once the running version may move to the configured
    one, `ready` once Kamaji reports the configured version Ready.
    """

    kubeconfig: pulumi.Output[str]
    endpoint: pulumi.Output[str]

    def __init__(self, name: str, args: TenantControlPlaneArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:TenantControlPlane", name, None, opts)
        tenant = args.tenant

        # Kamaji's webhook refuses a downgrade or a skipped minor only once the spec is
        # sent; this says so first, naming the tenant, and before anything of it changes.
        self.version_checked = script_command(
            f"{name}-version-check",
            "check-tenant-version.sh",
            {
                "KUBECONFIG_DATA": args.management_kubeconfig,
                "TENANT": tenant.name,
                "NAMESPACE": args.namespace,
                "KUBERNETES_VERSION": args.kubernetes_version,
                "SLEEPING": "true" if tenant.sleeping else "false",
                # Observability turned on or off is refused while the tenant sleeps (issue 49), as an upgrade is.
                "OBSERVABILITY": "true" if args.konnectivity_metrics else "false",
                "MONITORING_NAMESPACE": args.reader_secret[0],
                "READER_SECRET": args.reader_secret[1],
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.platform]),
        )

        # Kamaji's migration first deletes the tenant's prefix on the DataStore its spec comes to name: this
        # refuses any change of it but a move between the lab's shared DataStore and the tenant's own, two etcds.
        data_store_checked = script_command(
            f"{name}-datastore-check",
            "check-datastore-move.sh",
            {
                "KUBECONFIG_DATA": args.management_kubeconfig,
                "TENANT": tenant.name,
                "NAMESPACE": args.namespace,
                "DATASTORE": tenant.data_store,
                "SHARED_DATASTORE": args.shared_data_store,
                "DEDICATED_DATASTORE": dedicated_data_store_name(tenant.name),
                "KUBERNETES_VERSION": args.kubernetes_version,
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[args.platform, *([args.data_store_ready] if args.data_store_ready else [])],
            ),
        )

        # The audit trail's policy and volume live beside the TenantControlPlane, out of the tenant's reach.
        audit_policy = k8s.core.v1.ConfigMap(
            f"{name}-audit-policy",
            metadata={"name": audit_policy_name(tenant.name), "namespace": args.namespace},
            data={audit.POLICY_FILE: audit.policy_document()},
            opts=pulumi.ResourceOptions(parent=self, provider=args.management_provider, depends_on=[args.platform]),
        )
        # So is the admission configuration that sets its Pod Security.
        admission_config = k8s.core.v1.ConfigMap(
            f"{name}-admission-config",
            metadata={"name": admission_config_name(tenant.name), "namespace": args.namespace},
            data={pod_security.CONFIG_FILE: pod_security.admission_document(tenant.pod_security)},
            opts=pulumi.ResourceOptions(parent=self, provider=args.management_provider, depends_on=[args.platform]),
        )
        audit_log = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-audit-log",
            metadata={
                "name": audit_log_claim_name(tenant.name),
                "namespace": args.namespace,
                # With kind's default StorageClass (WaitForFirstConsumer) the claim binds only once an API server
                # pod uses it, which the TenantControlPlane below makes: waiting for Bound here would never end
                # (pulumi/pulumi-kubernetes issue 895; the await changed across versions, PR 3130 and PR 4181).
                "annotations": {"pulumi.com/skipAwait": "true"},
            },
            spec=audit_log_claim_spec(),
            opts=pulumi.ResourceOptions(parent=self, provider=args.management_provider, depends_on=[args.platform]),
        )

        control_plane = k8s.apiextensions.CustomResource(
            f"{name}-control-plane",
            api_version="kamaji.clastix.io/v1alpha1",
            kind="TenantControlPlane",
            metadata={
                "name": tenant.name,
                "namespace": args.namespace,
                # What Kamaji's KubeconfigGenerator sample selects tenants by.
                "labels": {"tenant.clastix.io": tenant.name},
                "annotations": {
                    # Kamaji's CRD has no conditions: wait for the version, which Kamaji records only once it
                    # runs Ready (or Sleeping). The state itself is the `-datastore-moved` step's to wait for.
                    "pulumi.com/waitFor": wait_for(args.kubernetes_version),
                    # Its replicas are the stack's, even after `make restore` held the tenant with `kubectl patch`
                    # (field manager kubectl-patch, which then owns them): an apply without force would conflict
                    # on the next sleep or wake. pulumi-kubernetes applies unforced unless told, and takes over
                    # only kubectl's and its own client-side managers before it applies (pulumi/pulumi-kubernetes
                    # provider/pkg/await/await.go@94977969: patchForce, fixCSAFieldManagers).
                    "pulumi.com/patchForce": "true",
                    # A move copies the tenant's keys onto the other DataStore without removing any there (clastix/
                    # kamaji internal/datastore/etcd.go@26.8.2-edge, Migrate): this has Kamaji's Job first delete
                    # the tenant's prefix on the target (cmd/migrate/cmd.go, cleanup-prior-migration; an etcd's
                    # DBExists is always true), so a tenant moved back never gets objects since deleted back.
                    MIGRATION_CLEANUP_ANNOTATION: "true",
                },
            },
            spec=control_plane_spec(tenant, args.kubernetes_version, args.konnectivity_metrics),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.management_provider,
                depends_on=[
                    args.platform,
                    self.version_checked,
                    data_store_checked,
                    audit_policy,
                    admission_config,
                    audit_log,
                    *([args.data_store_ready] if args.data_store_ready else []),
                ],
                custom_timeouts=pulumi.CustomTimeouts(create="15m", update="15m", delete="10m"),
            ),
        )
        # Its workers and HAMi go on once Kamaji runs it on the DataStore its spec names, in the state the stack
        # asks for: after a change of the tenant's dataStore, once Kamaji's migration has moved it (or failed,
        # saying how to finish or undo it). This step, not the TenantControlPlane's waitFor, waits for that state:
        # a failed move keeps Kamaji's status Migrating for good (clastix/kamaji internal/resources/datastore/
        # datastore_migrate.go@26.8.2-edge, CreateOrUpdate: MigrationInProcessError until the Job is Complete), and
        # a waitFor on it would leave the TenantControlPlane failing to update on every later `make up`, before
        # this step, which deletes the failed Job, could run.
        self.ready = script_command(
            f"{name}-datastore-moved",
            "wait-datastore-move.sh",
            {
                "KUBECONFIG_DATA": args.management_kubeconfig,
                "TENANT": tenant.name,
                "NAMESPACE": args.namespace,
                "DATASTORE": tenant.data_store,
                "DATA_STORE_KEY": "dedicated" if tenant.dedicated_data_store else "shared",
                "WANTED_STATE": SLEEPING_STATUS if tenant.sleeping else READY_STATUS,
                # For its removal, which clears what the tenant left in other DataStores, as make up does.
                "STACK": pulumi.get_stack(),
            },
            # Deleted before the TenantControlPlane it depends on: Kamaji's deletion clears only the DataStore
            # the spec names.
            delete="leave-datastores.sh",
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[control_plane],
                custom_timeouts=pulumi.CustomTimeouts(create="22m", update="22m"),
            ),
        )

        # Read on the host by a command rather than Secret.get, so a first preview
        # (or one that adds a tenant) never reads a secret that does not exist yet.
        admin_kubeconfig = script_command(
            f"{name}-admin-kubeconfig",
            "tenant-kubeconfig.sh",
            {
                "KUBECONFIG_DATA": args.management_kubeconfig,
                "TENANT": tenant.name,
                "NAMESPACE": args.namespace,
                # Read once MetalLB gave the Service this address and Kamaji issued the kubeconfig for it.
                "API_ADDRESS": tenant.api_address or "",
            },
            secret_output=True,
            # A replaced control plane has a new CA and credentials: read them again.
            triggers=[control_plane.metadata.apply(lambda metadata: metadata.get("uid"))],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[control_plane]),
        )
        self.kubeconfig = pulumi.Output.secret(admin_kubeconfig.stdout)
        self.endpoint = pulumi.Output.unsecret(self.kubeconfig.apply(kubeconfig_server))

        self.provider = k8s.Provider(
            f"{name}-kubernetes",
            kubeconfig=self.kubeconfig,
            # Stable identity, so a rotated kubeconfig updates rather than replaces
            # everything in the tenant.
            cluster_identifier=f"kamaji-{args.cluster_name}-{tenant.name}",
            opts=pulumi.ResourceOptions(parent=self),
        )

        self.register_outputs({"kubeconfig": self.kubeconfig, "endpoint": self.endpoint})


def wait_for(kubernetes_version: str) -> str:
    """pulumi-kubernetes' waitFor: a JSON list of conditions that must all hold, on create and
    update (pulumi/pulumi-kubernetes provider/pkg/metadata/overrides.go@94977969, ReadyCondition).

    Kamaji copies the spec's version into the status only once it reports Ready, or Sleeping asleep
    (clastix/kamaji internal/resources/k8s_deployment_resource.go@26.8.2-edge, UpdateTenantControlPlaneStatus)."""
    return json.dumps([f"jsonpath={RUNNING_VERSION_PATH}={kubernetes_version}"])


# Container workers share one host's swap and disk, which their kubelets must not act on; a
# machine's kubelet keeps its defaults (no swap, which check-machine.sh verifies, and disk eviction).
SHARED_HOST_KUBELET_PATCHES = [
    # Workers share the host's swap; kind runs its kubelets the same way.
    {"op": "add", "path": "/failSwapOn", "value": False},
    # The kubelet sees the host's disk: without these a fairly full host disk
    # puts every worker under DiskPressure and evicts its pods (kind does the same).
    {"op": "add", "path": "/imageGCHighThresholdPercent", "value": 100},
    {"op": "add", "path": "/evictionHard", "value": DISK_EVICTION_OFF},
]


def control_plane_spec(tenant: TenantSettings, kubernetes_version: str, konnectivity_metrics: bool = False) -> dict:
    """The TenantControlPlane spec of a tenant, for its container or machine workers.

    With `konnectivity_metrics`, a konnectivity-server that serves /metrics only on its admin port opens that
    port on the pod's address, for Prometheus.
    """
    konnectivity_server: dict = {"port": KONNECTIVITY_PORT}
    if konnectivity_metrics and konnectivity_metrics_port(kubernetes_version) == "adminport":
        konnectivity_server["extraArgs"] = [KONNECTIVITY_ADMIN_ON_ALL_INTERFACES]
    return {
        # Always named, Kamaji's default too: a change of it is what starts Kamaji's migration (clastix/kamaji
        # internal/resources/datastore/datastore_migrate.go@26.8.2-edge compares it with the status), and a
        # provided Kamaji's default need not be the configured one.
        "dataStore": tenant.data_store,
        "dataStoreSchema": tenant.data_store_schema,
        "controlPlane": {
            # 0 puts it to sleep: Kamaji keeps its Service (so its LoadBalancer address), certificates,
            # kubeconfigs and datastore, and scales only the Deployment (clastix/kamaji
            # internal/resources/k8s_deployment_resource.go@26.8.2-edge; e2e/tcp_scale_test.go).
            "deployment": {
                "replicas": 0 if tenant.sleeping else tenant.control_plane_replicas,
                **combined(
                    audit.deployment_spec(
                        audit_log_claim_name(tenant.name), audit_policy_name(tenant.name), tenant.control_plane_replicas
                    ),
                    pod_security.deployment_spec(admission_config_name(tenant.name), tenant.pod_security),
                ),
            },
            # MetalLB gives the address, reachable from the host and from workers on the kind network. Kamaji
            # copies these annotations onto the Service (clastix/kamaji internal/resources/k8s_service_resource.go
            # @26.8.2-edge, mutate).
            "service": {"serviceType": "LoadBalancer", **pinned_address(tenant.api_address)},
        },
        "kubernetes": {
            # Used verbatim as an image tag, so it keeps its leading "v".
            "version": kubernetes_version,
            "admissionControllers": list(ADMISSION_CONTROLLERS),
            "kubelet": {
                "preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"],
                # "add" also replaces, and works whether or not the key is present in
                # Kamaji's generated KubeletConfiguration; "replace" fails on absent keys.
                "configurationJSONPatches": [
                    # kindest/node's containerd uses the systemd cgroup driver, as a machine's
                    # containerd should (kubeadm's default on cgroup v2 hosts).
                    {"op": "add", "path": "/cgroupDriver", "value": "systemd"},
                    *([] if tenant.machines else SHARED_HOST_KUBELET_PATCHES),
                ],
            },
        },
        "networkProfile": {
            # Kamaji takes the declared address over the Service's for its certificates and kubeconfigs, and
            # records it whenever it updates the Service (clastix/kamaji api/v1alpha1/tenantcontrolplane_funcs.go
            # and internal/resources/k8s_service_resource.go@26.8.2-edge: DeclaredControlPlaneAddress,
            # UpdateTenantControlPlaneStatus). From the Service's address alone it would record a new one only
            # when the Service itself changes (internal/resources/resource.go, createOrUpdate), not when MetalLB
            # moves it; the annotation above and this change together, so a moved tenant is re-issued at once.
            **({"address": tenant.api_address} if tenant.api_address else {}),
            "port": API_PORT,
            "podCidrs": [tenant.pod_cidr],
            "serviceCidrs": [tenant.service_cidr],
            "dnsServiceIPs": [tenant.dns_service_ip],
        },
        "addons": {
            "coreDNS": {},
            # No "kubeProxy": Kamaji's addon would raise host-wide conntrack sysctls that a
            # worker container cannot write; components/kube_proxy.py installs it instead.
            # Carries API-server-to-node traffic (logs, exec, HAMi's webhook) from the
            # management cluster into the tenant's nodes.
            "konnectivity": {"server": konnectivity_server, "agent": {"mode": "DaemonSet"}},
        },
    }


def combined(*parts: dict) -> dict:
    """Several features' fields of one object in one: their lists joined in order, their objects merged key by key.
    A value that is neither, given by two features, is a mistake: one would silently drop the other's."""
    whole: dict = {}
    for part in parts:
        for key, value in part.items():
            if key not in whole:
                whole[key] = value
            elif isinstance(whole[key], dict) and isinstance(value, dict):
                whole[key] = combined(whole[key], value)
            elif isinstance(whole[key], list) and isinstance(value, list):
                whole[key] = [*whole[key], *value]
            else:
                raise ValueError(f"{key} is given twice: {whole[key]!r} and {value!r}")
    return whole


def admission_config_name(tenant: str) -> str:
    return f"{tenant}-admission-config"


def audit_policy_name(tenant: str) -> str:
    return f"{tenant}-audit-policy"


def audit_log_claim_name(tenant: str) -> str:
    return f"{tenant}-audit-log"


def audit_log_claim_spec() -> dict:
    """The audit log's volume: the cluster's default StorageClass (kind's is local-path on the node, kept until the
    claim is deleted: kubernetes-sigs/kind pkg/build/nodeimage/const_storage.go@v0.33.0-alpha). One node mounts it
    for every API server pod of the tenant.

    The same whatever the tenant's replicas: the API server refuses to shrink a bound claim, and grows one only on
    a StorageClass that allows it, so a claim sized by replicas would stop `pulumi up` when they change. Rotation,
    not the request, bounds the log (local-path does not enforce a size)."""
    return {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": audit.CLAIM_REQUEST}}}


def pinned_address(address: str | None) -> dict:
    """The TenantControlPlane's service fields that ask MetalLB for `address`; none without one."""
    return {"additionalMetadata": {"annotations": asking_metallb_for(address)}} if address else {}


def kubeconfig_server(kubeconfig: str) -> str:
    """The API server URL of a kubeconfig's current context."""
    return current_cluster(kubeconfig).server


def kubeconfig_ca_fingerprint(kubeconfig: str) -> str:
    """SHA-256 of the CA a kubeconfig trusts: public, and new whenever the control plane is."""
    return hashlib.sha256(current_cluster(kubeconfig).ca_data.encode()).hexdigest()
