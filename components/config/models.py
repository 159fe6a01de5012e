"""The stack configuration, described as pydantic models.

Field types (``values``) carry the per-value constraints and their messages; each model's
``problems`` yields the rules that need several values, written in ``rules``; ``conversion``
hands the components plain frozen dataclasses. Keys that select a mode (managementCluster, each
platform piece, gpuDevices) are enums, and which other keys each mode allows is a rule of the
model holding them.
"""

from __future__ import annotations

import ipaddress
import shlex
from collections.abc import Iterable, Iterator
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    ValidationInfo,
    WrapValidator,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from components.addresses import DEFAULT_KIND_SUBNET, AddressRange, pool_for_subnet, tenant_addresses
from components.config.rules import (
    SET_KUBECONFIG,
    SET_SSH_KEYS,
    Problem,
    across_tenants,
    gpu_rules,
    image_runs_another_version,
    quota_rules,
    repeats,
    stack_rules,
    tenant_rules,
)
from components.config.values import (
    AddressPool,
    CertManagerVersion,
    Cidr,
    CliPositiveInt,
    CliSwitch,
    CliText,
    ClusterName,
    DataStoreMode,
    DnsLabel,
    DockerNetwork,
    GpuDevices,
    HamiChartVersion,
    HostAddress,
    ImageReference,
    ImageTag,
    IPv4Text,
    KamajiChartVersion,
    KindSubnet,
    KubernetesVersion,
    LoadBalancerMode,
    ManagementClusterMode,
    MetallbVersion,
    NetworkInterface,
    ObjectName,
    PieceMode,
    PodSecurityLevel,
    Port,
    PositiveInt,
    ProxyJump,
    SecretMap,
    SecretText,
    SshHostKey,
    SshUser,
    TaggedImage,
    TenantName,
    invalid,
    read_json,
    show,
)
from components.gpus import GPU_CATALOGUE, GpuSpec
from components.settings import DEFAULT_POD_SECURITY, KAMAJI_IMAGE_TAG

_RESERVED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
# The management cluster's kubeconfig is written next to the tenants' as management.kubeconfig.
_RESERVED_TENANT_NAMES = ("management",)
# The pydantic error that carries a value's broken rules (``messages`` unpacks it).
RULES_ERROR = "lab_rules"


def report(problems: Iterable[Problem], errors: list[Any] | None = None) -> None:
    """Raises every broken rule at once, beside pydantic's own `errors` for the same value."""
    if (found := list(problems)) or errors:
        raise PydanticCustomError(RULES_ERROR, "broken rules", {"problems": found, "errors": errors or []})


def repeats_beside_errors(key: str, what: str) -> WrapValidator:
    """When a list has invalid items, also says which items repeat another's `key`.

    A valid list's repeats are a rule of the model holding it; this keeps them from waiting.
    """

    def check(items: Any, validate: Any) -> Any:
        try:
            return validate(items)
        except ValidationError as invalid_items:
            report(repeats(items, key, what), invalid_items.errors(include_url=False))

    return WrapValidator(check)


class ConfigModel(BaseModel):
    """Frozen, rejects unknown keys, and reports every broken rule of `problems` at once."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel)
    noun: ClassVar[str]  # what a list of these holds, for "expected a list of <noun> objects"

    def problems(self) -> Iterator[Problem]:
        return iter(())

    @classmethod
    def missing_hint(cls, key: str, written: Any) -> str | None:
        """What to do about required `key` missing from `written` (the object as the user wrote it)."""
        return None

    @model_validator(mode="after")
    def _rules(self) -> ConfigModel:
        report(self.problems())
        return self


class Gpu(ConfigModel):
    # Editors flag a model outside the catalogue that lacks memoryMiB at its model, as the program does;
    # errorMessage is the message yaml-language-server shows instead of its own.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"not": {"required": ["memoryMiB"]}},
            "then": {"properties": {"model": {
                "enum": list(GPU_CATALOGUE),
                "errorMessage": "unknown GPU model: set memoryMiB for it, or use one from the catalogue",
            }}},
        }
    )
    noun: ClassVar[str] = "{model, count}"

    model: StrictStr = Field(
        description="GPU model; one from the catalogue, or any name with memoryMiB", examples=list(GPU_CATALOGUE)
    )
    count: PositiveInt = Field(1, description="GPUs of this model on every worker of the tenant")
    memory_mib: PositiveInt = Field(
        None, alias="memoryMiB", description="memory per GPU in MiB; defaults to the catalogue's")

    @property
    def memory(self) -> int | None:
        return self.memory_mib or GPU_CATALOGUE.get(self.model)

    def problems(self) -> Iterator[Problem]:
        return gpu_rules(self)


class Quota(ConfigModel):
    noun: ClassVar[str] = "quota"

    namespace: DnsLabel = Field(description='namespace the ResourceQuota is in; created unless it is "default"')
    gpumem_mib: PositiveInt = Field(None, alias="gpumemMiB", description="limits.nvidia.com/gpumem")
    gpucores: PositiveInt = Field(None, description="limits.nvidia.com/gpucores")
    gpus: PositiveInt = Field(None, description="requests.nvidia.com/gpu (vGPU count)")

    @field_validator("namespace")
    @classmethod
    def _not_a_system_namespace(cls, namespace: str) -> str:
        if namespace in _RESERVED_NAMESPACES:
            raise invalid(f"{namespace!r} is a system namespace; quota it elsewhere")
        return namespace

    def problems(self) -> Iterator[Problem]:
        return quota_rules(self)


class MachineWorker(ConfigModel):
    noun: ClassVar[str] = "machine"

    name: DnsLabel = Field(description="Kubernetes node name of the machine; unique in the lab")
    address: HostAddress = Field(description="host name or IP address the Pulumi host reaches it at over SSH")
    port: Port = Field(22, description="SSH port")
    user: SshUser = Field("root", description="SSH user: root, or a user with passwordless sudo")
    ssh_key: ObjectName = Field("default", description="name of its private key in sshPrivateKeys")
    # Required: the join sends a bootstrap token whose group Kamaji auto-approves, so a man in the middle
    # could mint node credentials (clastix/kamaji internal/kubeadm/bootstraptoken.go@ddbabd8).
    host_key: SshHostKey = Field(
        description="public host key '<type> <base64>' the machine must present (ssh-keyscan prints it; check its "
        "fingerprint out of band)")

    node_ip: IPv4Text = Field(
        "", description="with several NICs: the address the kubelet advertises (kubelet --node-ip); default: the "
        "one of the default route")
    flannel_interface: NetworkInterface = Field(
        "", description="with several NICs: the interface (name or IPv4 address) flannel carries pod traffic on; "
        "default: nodeIp when set, else the default route's")
    adopt: StrictBool = Field(
        False, description="true: a join may reset the machine although it holds Kubernetes state this lab did not "
        "leave (another cluster's node); false refuses such a machine, naming what it found")
    proxy_jump: ProxyJump = Field(
        "", description="bastions to reach it through, [user@]host[:port][,...] as ssh -J takes them; default: "
        "none, or a ProxyJump your ssh_config sets for its address")

    @classmethod
    def missing_hint(cls, key: str, written: Any) -> str | None:
        if key != "hostKey" or not isinstance(written, dict):
            return None
        scan = f"ssh-keyscan -t ed25519 -p {_quoted(written.get('port', 22))} {_quoted(written.get('address'))}"
        return (f"pin the key the machine presents: `{scan}` prints '<address> <type> <base64>', set hostKey to "
                f"'<type> <base64>'; first check its fingerprint (`{scan} | ssh-keygen -lf -`) against the one the "
                "machine shows out of band, e.g. on its console: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub")


def _quoted(value: Any) -> str:
    """A value of the user's as one shell word, for a command they copy and paste; '<address>' when unset."""
    text = value if isinstance(value, str) else show(value)
    return shlex.quote(text) if value is not None and len(text) <= 253 else "<address>"


class Tenant(ConfigModel):
    noun: ClassVar[str] = "tenant"

    name: TenantName = Field(description="names the tenant's control plane and its workers")
    gpus: tuple[Gpu, ...] = Field((), description="mock GPUs on every worker of this tenant")
    workers: PositiveInt = Field(None, description="worker nodes; default workersPerTenant")
    gpu_slots: PositiveInt = Field(None, description="vGPU slots per GPU; default gpuSlots")
    control_plane_replicas: PositiveInt = Field(None, description="API server replicas; default controlPlaneReplicas")
    pod_cidr: Cidr = Field("10.244.0.0/16", description="pod network; each worker gets a /24")
    service_cidr: Cidr = Field("10.96.0.0/16", description="service network; the cluster DNS gets its .10 address")
    quotas: Annotated[tuple[Quota, ...], repeats_beside_errors("namespace", "quota namespace")] = Field(
        (), description="ResourceQuotas in the tenant, enforced by HAMi")
    kubernetes_version: KubernetesVersion | None = Field(
        None,
        description="Kubernetes version of this tenant's control plane, kubelets, kube-proxy and HAMi's "
        "kube-scheduler; default kubernetesVersion. Raise it one minor at a time to upgrade the tenant",
    )
    node_image: ImageReference | None = Field(
        None,
        description="node image of this tenant's workers; its tag must equal the tenant's version. Default "
        "nodeImage when the tenant runs kubernetesVersion, else kindest/node:<version>",
    )
    machines: Annotated[tuple[MachineWorker, ...], repeats_beside_errors("name", "machine name")] = Field(
        (), description="real machines joined over SSH as this tenant's workers, instead of kindest/node containers")
    gpu_devices: GpuDevices = Field(
        "mock", description="mock: GPUs from gpus, advertised by HAMi's mock plugin; real: with machines, HAMi's "
        "NVIDIA device plugin finds their GPUs")
    sleeping: StrictBool = Field(
        False, description="true: the tenant sleeps; its control plane runs no replicas and its workers stop, "
        "keeping their state, address and GPUs; false or absent wakes it (make sleep / make wake)")
    data_store: DataStoreMode = Field(
        "shared", description="shared: the lab's DataStore (kamajiDataStore), beside the other tenants; dedicated: "
        "an etcd of its own in the management cluster, with its own CA and root credentials. Changing it on a "
        "running tenant moves its data with Kamaji's migration (docs/operations.md, moving a tenant's datastore)")
    api_address: IPv4Text | None = Field(
        None, description="address of the MetalLB pool its API server gets; default: one that follows from the "
        "tenant's name, the same after make down and make up; set it to keep one the program warns may change")
    pod_security: PodSecurityLevel = Field(
        DEFAULT_POD_SECURITY, description="Pod Security level its API server enforces in every namespace but the "
        "lab's own, which the tenant cannot lift: baseline, restricted, or privileged, which enforces nothing and "
        "lets any pod take root on the host (docs/configuration.md)")

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, name: str) -> str:
        if name in _RESERVED_TENANT_NAMES:
            raise invalid(f"{name!r} is reserved for the management cluster; choose another name")
        return name

    def problems(self) -> Iterator[Problem]:
        return tenant_rules(self)

    @property
    def gpu_specs(self) -> tuple[GpuSpec, ...]:
        return tuple(GpuSpec(model=gpu.model, count=gpu.count, memory_mib=gpu.memory) for gpu in self.gpus)


def _tenant_list(value: Any) -> Any:
    # The CLI hands objects over as JSON text. Checked here, not by min_length, which pydantic
    # also reports when the only tenants are invalid.
    try:
        tenants = read_json(value) if isinstance(value, str) else value
    except ValueError as problem:
        raise invalid(str(problem)) from None
    if tenants == []:
        raise invalid("expected a non-empty list of tenant objects, got []")
    return tenants


def _tenants_beside_errors(items: Any, validate: Any, info: ValidationInfo) -> Any:
    """When some tenants are invalid, the valid ones still meet every rule across tenants, and repeats are named."""
    try:
        return validate(items)
    except ValidationError as invalid_items:
        errors = invalid_items.errors(include_url=False)
        broken = {error["loc"][0] for error in errors if error["loc"]}
        valid = [] if not isinstance(items, list) or any(not error["loc"] for error in errors) else [
            (index, Tenant.model_validate(item, context=info.context))
            for index, item in enumerate(items) if index not in broken
        ]
        report([*repeats(items, "name", "tenant name"), *across_tenants(valid, info.data)], errors)


class StackConfig(ConfigModel):
    """The `kamaji-hami-lab:` keys of a stack. Scalar defaults equal Pulumi.yaml's (a test checks)."""

    management_cluster_name: ClusterName = Field(
        "kamaji",
        description="Name of the lab and of its kind management cluster (at most 49 characters); also prefixes "
        "worker container names.",
    )
    management_cluster: ManagementClusterMode = Field(
        "kind",
        description="kind: the program creates a kind cluster on this host; existing: it uses the cluster of "
        "managementKubeconfig and creates no cluster.",
    )
    management_kubeconfig: SecretText = Field(
        "",
        description="With managementCluster existing: the cluster's kubeconfig (content, as a secret: "
        "pulumi config set --secret managementKubeconfig < FILE).",
    )
    ssh_private_keys: SecretMap = Field(
        {},
        description="With machine workers: their SSH private keys by name, each a secret (pulumi config set "
        "--secret --path 'sshPrivateKeys.default' < KEY_FILE); a machine picks one with sshKey.",
    )
    management_context: CliText = Field(
        "",
        description="With managementCluster existing: the context of managementKubeconfig to use; "
        "empty: its current one.",
    )
    docker_network: DockerNetwork = Field(
        "",
        description="With managementCluster existing: network of this host's Docker that container workers join, "
        "from which the LoadBalancer addresses are reachable; empty: no Docker is used.",
    )
    cert_manager: PieceMode = Field(
        "install", description="install, or provided: the cluster runs cert-manager and the program checks its webhook."
    )
    load_balancer: LoadBalancerMode = Field(
        "metallb",
        description="metallb: the program installs MetalLB with metallbAddressRange; provided: the cluster's own "
        "LoadBalancer gives the tenant API servers their addresses.",
    )
    kamaji: PieceMode = Field(
        "install",
        description="install, or provided: the cluster runs Kamaji and the program checks its webhooks and "
        "kamajiDataStore.",
    )
    kamaji_data_store: ObjectName = Field(
        "default",
        description="DataStore of the tenant control planes: the installed chart's default, or with kamaji provided "
        "one that must exist and report ready.",
    )
    kubernetes_version: KubernetesVersion = Field(
        "v1.36.4",
        description="Kubernetes version of the kind cluster, and of every tenant that sets none (its control plane, "
        "worker kubelets, kube-proxy and HAMi's kube-scheduler); keep the leading v.",
    )
    node_image: ImageReference = Field(
        # kubernetes-sigs/kind release notes of v0.33.0 ("Images pre-built for this release").
        "kindest/node:v1.36.4@sha256:099e049362a1526b2db71494e1947aae99bd16290d7c895f2b7ea312e3cbfaed",
        description="Node image for the kind cluster and the workers of tenants on kubernetesVersion, pinned by "
        "digest; its tag must equal kubernetesVersion. Empty means kindest/node:<kubernetesVersion>, whatever that "
        "tag points at.",
    )
    cert_manager_version: CertManagerVersion = Field(
        "v1.21.2", description="cert-manager chart version (jetstack repository).")
    metallb_version: MetallbVersion = Field("v0.16.1", description="MetalLB chart version (metallb repository).")
    kamaji_chart_version: KamajiChartVersion = Field(
        "0.0.0+latest",
        description="Kamaji chart version (clastix repository); 0.0.0+latest follows Kamaji's master branch.",
    )
    kamaji_image_tag: ImageTag = Field(
        "",
        description="Kamaji controller image tag (an edge release such as 26.8.2-edge); "
        f"empty means {KAMAJI_IMAGE_TAG}, the release the lab was checked against",
    )
    hami_chart_version: HamiChartVersion = Field("2.10.0", description="HAMi chart version (project-hami repository).")
    mock_device_plugin_image: TaggedImage = Field(
        "docker.io/projecthami/mock-device-plugin:1.0.1",
        description="Image of HAMi's mock device plugin, with its tag (and optionally @sha256:<digest>); the device "
        "config the program writes was checked against 1.0.1.",
    )
    metallb_address_range: AddressPool = Field(
        "",
        validate_default=True,
        description="MetalLB pool as a.b.c.d-a.b.c.e or a CIDR; empty carves 51 addresses of the lab's "
        "docker network's upper half, in a block picked by managementClusterName.",
    )
    kind_subnet: KindSubnet = Field(
        "",
        validate_default=True,
        description=f"IPv4 subnet of the lab's docker network, where kind puts its node; empty: {DEFAULT_KIND_SUBNET}. "
        "The program creates the network with it when missing, plans every address in it, and stops if the network "
        "has another.",
    )
    control_plane_replicas: CliPositiveInt = Field(
        1, description="API server replicas per tenant control plane (tenants may override).")
    workers_per_tenant: CliPositiveInt = Field(1, description="Worker nodes per tenant (tenants may override).")
    gpu_slots: CliPositiveInt = Field(
        10, description="HAMi vGPU slots per mock GPU, i.e. how many pods may share one card (tenants may override).")
    # Observability (issue 39): its own key, kept apart from the others.
    observability: CliSwitch = Field(
        False, description="true: Prometheus and Grafana in the management cluster, with one dashboard of every "
        "tenant's GPU allocation and Konnectivity tunnel (docs/operations.md#the-dashboard).")
    tenants: Annotated[
        tuple[Tenant, ...], WrapValidator(_tenants_beside_errors), BeforeValidator(_tenant_list)
    ] = Field(
        json_schema_extra={"minItems": 1},
        description="The tenants: isolated clusters, each with its own control plane, workers and mock GPUs.",
    )

    @field_validator("management_kubeconfig")
    @classmethod
    def _kept_secret(cls, kubeconfig: str, info: ValidationInfo) -> str:
        # Secret keys are known only when the CLI runs the program (context from load_settings).
        secret_keys = (info.context or {}).get("secret_keys")
        if kubeconfig and secret_keys is not None and "managementKubeconfig" not in secret_keys:
            raise invalid(f"must be a secret (the value is not shown); {SET_KUBECONFIG}")
        return kubeconfig

    @field_validator("ssh_private_keys")
    @classmethod
    def _keys_kept_secret(cls, keys: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        secret_keys = (info.context or {}).get("secret_keys")
        if keys and secret_keys is not None and "sshPrivateKeys" not in secret_keys:
            raise invalid(f"must be a secret (the value is not shown); {SET_SSH_KEYS}")
        return keys

    @field_validator("node_image")
    @classmethod
    def _runs_the_tenants_kubernetes(cls, image: str, info: ValidationInfo) -> str:
        # Worker kubelets must match the tenants' API servers (and HAMi's kube-scheduler).
        version = info.data.get("kubernetes_version")
        if version and (problem := image_runs_another_version(image, version, "kubernetesVersion is")):
            raise invalid(problem)
        return image

    @field_validator("tenants")
    @classmethod
    def _fit_the_stack(cls, tenants: tuple[Tenant, ...], info: ValidationInfo) -> tuple[Tenant, ...]:
        # Unlike `problems`, a field validator runs even when another key is wrong: it sees the valid keys above it.
        report([*repeats(tenants, "name", "tenant name"), *across_tenants(list(enumerate(tenants)), info.data)])
        return tenants

    def problems(self) -> Iterator[Problem]:
        return stack_rules(self)

    @property
    def address_pool(self) -> AddressRange | None:
        """The pool the lab's MetalLB announces; None with the cluster's own LoadBalancer."""
        if self.load_balancer == "provided":
            return None
        if self.metallb_address_range is not None or self.management_cluster != "kind":
            return self.metallb_address_range
        return pool_for_subnet(self.kind_subnet or DEFAULT_KIND_SUBNET, self.management_cluster_name)

    @property
    def api_addresses(self) -> dict[str, ipaddress.IPv4Address]:
        """Each tenant's API address in the lab's pool (components/addresses.py, tenant_addresses)."""
        pool = self.address_pool
        if pool is None:
            return {}
        pinned = {tenant.name: ipaddress.IPv4Address(tenant.api_address)
                  for tenant in self.tenants if tenant.api_address}
        return tenant_addresses(pool, [tenant.name for tenant in self.tenants], pinned)

    @property
    def has_container_workers(self) -> bool:
        return any(not tenant.machines for tenant in self.tenants)

    @property
    def carves_a_pool(self) -> bool:
        return self.management_cluster == "kind" and self.load_balancer == "metallb"
