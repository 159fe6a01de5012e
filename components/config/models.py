"""The stack configuration, described as pydantic models.

Field types (``values``) carry the per-value constraints and their messages; each model's
``problems`` yields the rules that need several values. ``StackConfig.settings()`` hands the
components plain frozen dataclasses. Keys that select a mode (managementCluster, each platform
piece, gpuDevices) are enums, and which other keys each mode allows is a rule of the model holding them.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Iterable, Iterator, Sequence
from difflib import get_close_matches
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

from components.addresses import (
    CARVED_POOL_SIZE,
    DEFAULT_KIND_SUBNET,
    AddressRange,
    dynamic_range,
    grafana_address,
    home_address,
    pool_for_subnet,
    tenant_addresses,
    worker_address,
    worker_address_clashes,
    worker_part,
)
from components.config.values import (
    MAX_LABEL,
    AddressPool,
    CertManagerVersion,
    Cidr,
    CliPositiveInt,
    CliSwitch,
    CliText,
    ClusterName,
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
from components.gpus import (
    FULL_GPU_CORES,
    GPU_CATALOGUE,
    MAX_MOCK_MEMORY_PER_NODE_MIB,
    GpuSpec,
    node_gpu_memory_mib,
)
from components.kubeconfig import NoSuchContext, check_kubeconfig, with_current_context
from components.settings import (
    ExistingCluster,
    GpuQuota,
    LabSettings,
    Machine,
    Provided,
    TenantSettings,
    Versions,
    worker_name,
)

_RESERVED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
# The management cluster's kubeconfig is written next to the tenants' as management.kubeconfig.
_RESERVED_TENANT_NAMES = ("management",)
_NODE_POD_SUBNET_SIZE = 256
# Each quarter of the kind network keeps at least 4 addresses (components/addresses.py lays it out).
_SMALLEST_KIND_SUBNET = 28
_SMALLEST_SERVICE_PREFIX = 28
_SET_KUBECONFIG = "set it with: pulumi config set --secret managementKubeconfig < FILE"
_SET_SSH_KEYS = "set it with: pulumi config set --secret --path 'sshPrivateKeys.<name>' < KEY_FILE"
_KIND_RUNS_ONLY_OURS = "the kind cluster this program creates runs nothing it did not install"
# The newest Kubernetes minor Kamaji admits: upgrade.KubeadmVersion "v1.36.0", compared without its
# patch (clastix/kamaji internal/upgrade/kubeadm_version.go and internal/webhook/handlers/tcp_version.go
# @ddbabd8, master, which chart 0.0.0+latest installs by default).
KAMAJI_NEWEST_KUBERNETES = (1, 36)
# The oldest tenant Kubernetes a worker can join: Kamaji writes the tenant's kubeadm-config ConfigMap with
# kubeadm's own upload-config phase (clastix/kamaji internal/kubeadm/uploadconfig.go@ddbabd8, built on
# k8s.io/kubernetes v1.36.3, go.mod), i.e. as kubeadm.k8s.io/v1beta4, which `kubeadm join` reads from
# v1.31 on (kubernetes/kubernetes cmd/kubeadm/app/apis/kubeadm/v1beta4, released with v1.31).
OLDEST_JOINABLE_KUBERNETES = (1, 31)

# A broken rule: the key path below the value that broke it, and what is wrong.
Problem = tuple[tuple[str | int, ...], str]
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


def repeats(items: Any, key: str, what: str) -> Iterator[Problem]:
    seen: set[str] = set()
    for index, item in enumerate(items if isinstance(items, list | tuple) else ()):
        name = item.get(key) if isinstance(item, dict) else getattr(item, key, None)
        if isinstance(name, str):
            if name in seen:
                yield (index, key), f"duplicate {what} {name!r}"
            seen.add(name)


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
        if self.memory is None:
            known = ", ".join(GPU_CATALOGUE)
            yield ("model",), (f"unknown GPU model {show(self.model)}{_closest_models(self.model)}; set memoryMiB "
                               f"for it or use one of: {known}")


def _closest_models(model: str) -> str:
    """' (did you mean <the catalogue's closest models>?)', or nothing when none is close; case is ignored.

    Models naming what was written ('A100') come first, then those spelt most alike ('NVIDIA A100 80G').
    """
    by_lower = {name.lower(): name for name in GPU_CATALOGUE}
    typed = model.strip().lower()
    naming = [lower for lower in by_lower if typed and typed in lower]
    alike = get_close_matches(typed, by_lower, n=3)
    close = [by_lower[lower] for lower in dict.fromkeys([*naming, *alike])][:3]
    if not close:
        return ""
    *others, last = map(repr, close)
    return f" (did you mean {', '.join(others) + ' or ' if others else ''}{last}?)"


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
        if (self.gpumem_mib, self.gpucores, self.gpus) == (None, None, None):
            yield (), "set at least one of gpumemMiB, gpucores, gpus"


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
    api_address: IPv4Text | None = Field(
        None, description="address of the MetalLB pool its API server gets; default: one that follows from the "
        "tenant's name, the same after make down and make up; set it to keep one the program warns may change")

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, name: str) -> str:
        if name in _RESERVED_TENANT_NAMES:
            raise invalid(f"{name!r} is reserved for the management cluster; choose another name")
        return name

    def problems(self) -> Iterator[Problem]:
        if (total := node_gpu_memory_mib(self.gpu_specs)) > MAX_MOCK_MEMORY_PER_NODE_MIB:
            yield ("gpus",), (f"{total} MiB of GPU memory per worker exceeds the mock device plugin's limit of "
                              f"{MAX_MOCK_MEMORY_PER_NODE_MIB} MiB; spread the GPUs over more workers")
        pods, services = ipaddress.ip_network(self.pod_cidr), ipaddress.ip_network(self.service_cidr)
        if services.prefixlen > _SMALLEST_SERVICE_PREFIX:
            yield ("serviceCidr",), (f"{services} is too small; use a /{_SMALLEST_SERVICE_PREFIX} or larger "
                                     "(the cluster DNS service takes its .10 address)")
        elif pods.overlaps(services):
            yield ("serviceCidr",), f"{services} overlaps podCidr {pods}"
        for (index, key), message in repeats(self.quotas, "namespace", "quota namespace"):
            yield ("quotas", index, key), message
        yield from self._worker_problems()

    def _worker_problems(self) -> Iterator[Problem]:
        if self.machines and self.workers is not None:
            yield ("workers",), "unused with machines: each machine is one worker"
        if self.machines and self.node_image is not None:
            yield ("nodeImage",), "unused with machines: they run their own kubelet, not a node image"
        if self.gpu_devices == "real" and not self.machines:
            yield ("gpuDevices",), "'real' needs machines: container workers have no GPUs of their own"
        if self.gpu_devices == "real" and self.gpus:
            yield ("gpus",), "unused with gpuDevices real: HAMi's device plugin counts the machines' GPUs"

    @property
    def gpu_specs(self) -> tuple[GpuSpec, ...]:
        return tuple(GpuSpec(model=gpu.model, count=gpu.count, memory_mib=gpu.memory) for gpu in self.gpus)


def _image_runs_another_version(image: str, version: str, wanted_by: str) -> str | None:
    """Why a kindest/node image cannot run `version` (its tag names another), or None."""
    tag = re.search(r":(v\d+\.\d+\.\d+)(@|$)", image)
    if tag and tag.group(1) != version:
        return f"{image!r} runs Kubernetes {tag.group(1)}, but {wanted_by} {version}; change both together"
    return None


def _kamaji_refuses(version: str, lab: dict[str, Any]) -> str | None:
    """Why Kamaji's admission webhook would refuse `version`, or its workers could not join, or None.

    The newest is known only for the chart's default image: a pinned kamajiImageTag or a provided Kamaji may
    admit newer ones.
    """
    major, minor = (int(part) for part in version.lstrip("v").split(".")[:2])
    if (major, minor) < OLDEST_JOINABLE_KUBERNETES:
        oldest = "v{}.{}".format(*OLDEST_JOINABLE_KUBERNETES)
        return (
            f"{version} is older than {oldest}: Kamaji writes the tenant's kubeadm-config as kubeadm.k8s.io/v1beta4, "
            f"which kubeadm reads only from {oldest} on, so no worker could join; choose {oldest} or newer"
        )
    if lab.get("kamaji_image_tag") or lab.get("kamaji") == "provided" or (major, minor) <= KAMAJI_NEWEST_KUBERNETES:
        return None
    newest = "v{}.{}".format(*KAMAJI_NEWEST_KUBERNETES)
    return (
        f"{version} is newer than Kamaji supports ({newest}.x with the chart's default image; its webhook "
        f"would refuse the control plane); choose a {newest} release or pin a newer Kamaji with kamajiImageTag"
    )


# Tenants with their place in the list: when some are invalid, the rules check the others where they stand.
Indexed = Sequence[tuple[int, "Tenant"]]


def _tenant_versions(tenants: Indexed, lab: dict[str, Any]) -> Iterator[Problem]:
    """A tenant's own kubernetesVersion and nodeImage against Kamaji and each other."""
    for index, tenant in tenants:
        version = tenant.kubernetes_version or lab.get("kubernetes_version")
        if tenant.kubernetes_version and (problem := _kamaji_refuses(version, lab)):
            yield (index, "kubernetesVersion"), problem
        image = tenant.node_image
        if version and image and (problem := _image_runs_another_version(image, version, "the tenant runs")):
            yield (index, "nodeImage"), problem


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


def _across_tenants(tenants: Indexed, lab: dict[str, Any]) -> Iterator[Problem]:
    """The rules on tenants that need the lab's keys above them (`lab`: those that are valid)."""
    yield from _tenant_problems(tenants, lab.get("management_cluster_name"), lab.get("workers_per_tenant"))
    yield from _tenant_versions(tenants, lab)
    yield from _machine_keys(tenants, lab.get("ssh_private_keys"))


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
        report([*repeats(items, "name", "tenant name"), *_across_tenants(valid, info.data)], errors)


def _tenant_problems(tenants: Indexed, cluster: str | None, default_workers: int | None) -> Iterator[Problem]:
    yield from _machines_shared(tenants)
    for index, tenant in tenants:
        workers = len(tenant.machines) or tenant.workers or default_workers
        if workers is None:  # workersPerTenant is wrong, and says so itself
            continue
        if not tenant.machines and cluster is not None and \
                len(longest := worker_name(cluster, tenant.name, workers)) > MAX_LABEL:
            yield (index, "name"), (f"{tenant.name!r} is too long: its worker node name {longest!r} would exceed "
                                    f"{MAX_LABEL} characters")
        # The tenant's controller manager hands every node a /24 of the pod CIDR.
        if ipaddress.ip_network(tenant.pod_cidr).num_addresses // _NODE_POD_SUBNET_SIZE < workers:
            yield (index, "podCidr"), f"{tenant.pod_cidr} cannot give each of {workers} workers a /24"


def _machine_keys(tenants: Indexed, keys: dict[str, str] | None) -> Iterator[Problem]:
    for index, tenant in tenants:
        for number, machine in enumerate(tenant.machines):
            if keys is not None and machine.ssh_key not in keys:
                known = ", ".join(map(repr, keys)) or "none"
                yield ((index, "machines", number, "sshKey"),
                       f"{machine.ssh_key!r} is not in sshPrivateKeys (it has: {known}); {_SET_SSH_KEYS}")


def _machines_shared(tenants: Indexed) -> Iterator[Problem]:
    """A machine joins one tenant, and names its worker resources: each name, address and host key once in the lab."""
    first: dict[tuple[str, str], str] = {}
    for index, tenant in tenants:
        for number, machine in enumerate(tenant.machines):
            for key, value in (("name", machine.name), ("address", f"{machine.address}:{machine.port}"),
                               ("hostKey", machine.host_key)):
                if (key, value) in first:
                    # The same host key is one machine under two entries (an IP address and a host name?).
                    twice = ": one machine, listed twice, would be joined and reset by both" if key == "hostKey" else ""
                    yield (index, "machines", number, key), f"{value!r} is also the {key} of {first[key, value]}{twice}"
                first.setdefault((key, value), f"tenants[{index}].machines[{number}]")


class StackConfig(ConfigModel):
    """The `kamaji-hami-lab:` keys of a stack. Scalar defaults equal Pulumi.yaml's (a test checks)."""

    management_cluster_name: ClusterName = Field(
        "kamaji",
        description="Name of the lab and of its kind management cluster; also prefixes worker container names.",
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
        description="Kamaji controller image tag (e.g. an edge release such as 26.8.2-edge); "
        "empty keeps the chart's default",
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
            raise invalid(f"must be a secret (the value is not shown); {_SET_KUBECONFIG}")
        return kubeconfig

    @field_validator("ssh_private_keys")
    @classmethod
    def _keys_kept_secret(cls, keys: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        secret_keys = (info.context or {}).get("secret_keys")
        if keys and secret_keys is not None and "sshPrivateKeys" not in secret_keys:
            raise invalid(f"must be a secret (the value is not shown); {_SET_SSH_KEYS}")
        return keys

    @field_validator("node_image")
    @classmethod
    def _runs_the_tenants_kubernetes(cls, image: str, info: ValidationInfo) -> str:
        # Worker kubelets must match the tenants' API servers (and HAMi's kube-scheduler).
        version = info.data.get("kubernetes_version")
        if version and (problem := _image_runs_another_version(image, version, "kubernetesVersion is")):
            raise invalid(problem)
        return image

    @field_validator("tenants")
    @classmethod
    def _fit_the_stack(cls, tenants: tuple[Tenant, ...], info: ValidationInfo) -> tuple[Tenant, ...]:
        # Unlike `problems`, a field validator runs even when another key is wrong: it sees the valid keys above it.
        report([*repeats(tenants, "name", "tenant name"), *_across_tenants(list(enumerate(tenants)), info.data)])
        return tenants

    def problems(self) -> Iterator[Problem]:
        yield from self._mode_problems()
        yield from self._ssh_key_problems()
        inherited = any(tenant.kubernetes_version is None for tenant in self.tenants)
        if inherited and (problem := _kamaji_refuses(self.kubernetes_version, dict(self))):
            yield ("kubernetesVersion",), problem
        pool, subnet = self.metallb_address_range, self.kind_subnet
        if pool is not None and subnet is not None and not pool.within(subnet):
            yield ("metallbAddressRange",), f"{pool} lies outside the kind network {subnet}"
        if pool is None and subnet is not None:
            try:
                pool_for_subnet(subnet, self.management_cluster_name)
            except ValueError as problem:
                yield ("kindSubnet",), str(problem)
        if self.management_cluster == "kind":
            yield from self._kind_network_problems()
        # One address each, and Grafana's (the pool's last).
        if pool is not None and len(self.tenants) + 1 > pool.size:
            yield ("metallbAddressRange",), f"{pool} has {pool.size} addresses but {len(self.tenants)} tenants " \
                "need one each, and the last is kept for Grafana"
        if pool is None and self.carves_a_pool and len(self.tenants) + 1 > CARVED_POOL_SIZE:
            yield ("tenants",), (f"{len(self.tenants)} tenants need more than the {CARVED_POOL_SIZE - 1} addresses "
                                 f"carved from the kind network by default (of {CARVED_POOL_SIZE}, the last is kept "
                                 "for Grafana); set kamaji-hami-lab:metallbAddressRange")
        yield from self._api_address_problems()

    def warnings(self) -> Iterator[Problem]:
        """What is valid but likely not what the user meant."""
        yield from self._moved_api_addresses()
        for index, tenant in enumerate(self.tenants):
            if tenant.gpu_devices == "real":  # the machines' GPUs are known only once they join
                continue
            workers = len(tenant.machines) or tenant.workers or self.workers_per_tenant
            memory = node_gpu_memory_mib(tenant.gpu_specs) * workers
            # HAMi hands out gpucores as a percentage of one card's cores, so a card holds FULL_GPU_CORES.
            gpus = sum(gpu.count for gpu in tenant.gpus) * workers
            for number, quota in enumerate(tenant.quotas):
                if quota.gpumem_mib is not None and quota.gpumem_mib > memory:
                    yield (("tenants", index, "quotas", number, "gpumemMiB"),
                           f"{quota.gpumem_mib} MiB is more GPU memory than the tenant's GPUs have ({memory} MiB on "
                           f"{workers} worker(s)); the quota never limits anything")
                if quota.gpucores is not None and quota.gpucores > FULL_GPU_CORES * gpus:
                    yield (("tenants", index, "quotas", number, "gpucores"),
                           f"{quota.gpucores} is more GPU cores than the tenant's GPUs have ({FULL_GPU_CORES * gpus}: "
                           f"{gpus} GPU(s) of {FULL_GPU_CORES} on {workers} worker(s)); the quota never limits "
                           "anything")

    def _kind_network_problems(self) -> Iterator[Problem]:
        """The pool and the workers' fixed addresses on the kind network as kind-up.sh lays it out (its lower
        half is Docker's and the workers'), known before anything exists: kindSubnet, else the default."""
        subnet = self.kind_subnet or DEFAULT_KIND_SUBNET
        if subnet.prefixlen > _SMALLEST_KIND_SUBNET:
            yield ("kindSubnet",), (f"{subnet} is too small to split into Docker's quarter, the workers' quarter "
                                    f"and the MetalLB pools' half; give a /{_SMALLEST_KIND_SUBNET} or larger")
            return
        named = f"the kind network {subnet}" + ("" if self.kind_subnet else " (the default: kindSubnet is empty)")
        pool = self.metallb_address_range
        if pool is not None and self.kind_subnet is None and not pool.within(subnet):
            yield ("metallbAddressRange",), f"{pool} lies outside {named}; set kamaji-hami-lab:kindSubnet to the " \
                "subnet the range belongs to"
        elif pool is not None and pool.within(subnet) and subnet.broadcast_address in pool:
            yield ("metallbAddressRange",), (
                f"{pool} reaches the broadcast address of the kind network {subnet}, which no Service can answer on "
                "(the pool's last address is Grafana's); end it below")
        elif pool is not None and pool.within(subnet) and int(pool.first) < int(subnet[subnet.num_addresses // 2]):
            yield ("metallbAddressRange",), (
                f"{pool} reaches into the lower half of the kind network {subnet}, which holds Docker's own "
                f"addresses ({dynamic_range(subnet)}) and the workers' fixed ones ({worker_part(subnet)}); choose "
                "addresses of its upper half")
        containers = [(index, tenant) for index, tenant in enumerate(self.tenants) if not tenant.machines]
        workers = {worker_name(self.management_cluster_name, tenant.name, number): index
                   for index, tenant in containers
                   for number in range(1, (tenant.workers or self.workers_per_tenant) + 1)}
        for worker, earlier in worker_address_clashes(subnet, list(workers)).items():
            yield ("tenants", workers[worker], "name"), (
                f"its worker {worker} would get the fixed address {worker_address(subnet, worker)}, which {earlier} "
                f"already has on {named}; the address follows from the worker's name: rename the tenant, or give "
                f"kindSubnet a larger subnet (the default /{DEFAULT_KIND_SUBNET.prefixlen} has "
                f"{worker_part(DEFAULT_KIND_SUBNET).num_addresses} worker addresses)")

    def _api_address_problems(self) -> Iterator[Problem]:
        """A pinned API address lies in the lab's pool, is not Grafana's, and is no other tenant's pin."""
        try:
            pool = self.address_pool
        except ValueError:
            return  # the kind network is too small to carve a pool from, said above
        pins = [(index, tenant) for index, tenant in enumerate(self.tenants) if tenant.api_address]
        if pool is None:  # the cluster's own LoadBalancer, or a required metallbAddressRange missing (said above)
            if self.load_balancer == "provided":
                for index, _ in pins:
                    yield ("tenants", index, "apiAddress"), "unused with loadBalancer provided: the cluster's own " \
                        "LoadBalancer picks the addresses"
            return
        pinned_by: dict[str, str] = {}
        for index, tenant in pins:
            address = ipaddress.IPv4Address(tenant.api_address)
            if address not in pool:
                problem = f"{address} lies outside the lab's MetalLB pool {pool}"
            elif address == grafana_address(pool):
                problem = f"{address} is the pool's last address, which Grafana gets; choose another of {pool}"
            elif tenant.api_address in pinned_by:
                problem = f"{address} is also the apiAddress of tenant {pinned_by[tenant.api_address]!r}"
            else:
                pinned_by[tenant.api_address] = tenant.name
                continue
            yield ("tenants", index, "apiAddress"), problem

    def _moved_api_addresses(self) -> Iterator[Problem]:
        """Tenants whose name gives an address another tenant has: theirs may change when the tenants do."""
        pool = self.address_pool
        if pool is None or len(self.tenants) + 1 > pool.size:
            return
        addresses = self.api_addresses
        for index, tenant in enumerate(self.tenants):
            address, home = addresses[tenant.name], home_address(pool, tenant.name)
            if not tenant.api_address and address != home:
                yield ("tenants", index, "name"), (
                    f"its name gives the API address {home}, which another tenant has, so it gets {address}; that "
                    "one may change when other tenants are removed, reordered or pinned, and a tenant whose address "
                    f"changes re-joins its workers. Keep it: pulumi config set --path 'tenants[{index}].apiAddress' "
                    f"{address}")

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

    def _ssh_key_problems(self) -> Iterator[Problem]:
        if self.ssh_private_keys and not any(tenant.machines for tenant in self.tenants):
            yield ("sshPrivateKeys",), "only used by machine workers, and no tenant lists machines"

    @property
    def has_container_workers(self) -> bool:
        return any(not tenant.machines for tenant in self.tenants)

    @property
    def carves_a_pool(self) -> bool:
        return self.management_cluster == "kind" and self.load_balancer == "metallb"

    def _mode_problems(self) -> Iterator[Problem]:
        """Combinations of managementCluster and the platform pieces that cannot work."""
        if self.management_cluster == "kind":
            existing_only = {
                "managementKubeconfig": self.management_kubeconfig,
                "managementContext": self.management_context,
                "dockerNetwork": self.docker_network,
            }
            for key in (key for key, value in existing_only.items() if value):
                yield (key,), "only used with managementCluster existing; kind's cluster and network are its own"
            pieces = {"certManager": self.cert_manager, "loadBalancer": self.load_balancer, "kamaji": self.kamaji}
            for key in (key for key, mode in pieces.items() if mode == "provided"):
                yield (key,), f"'provided' needs managementCluster existing: {_KIND_RUNS_ONLY_OURS}"
        else:
            yield from self._existing_cluster_problems()
        if self.load_balancer == "provided" and self.metallb_address_range is not None:
            yield ("metallbAddressRange",), "unused with loadBalancer provided (its addresses are the cluster's)"
        if self.kamaji == "provided" and self.cert_manager == "install":
            yield ("certManager",), "set it to provided: a provided Kamaji already runs on a cert-manager"
        if self.kamaji == "provided" and self.kamaji_image_tag:
            yield ("kamajiImageTag",), "unused with kamaji provided (the program installs no Kamaji); leave it empty"
        if self.kamaji == "install" and self.kamaji_data_store != "default":
            yield (
                ("kamajiDataStore",),
                f"{self.kamaji_data_store!r} with kamaji install: the installed chart creates only 'default'",
            )

    def _existing_cluster_problems(self) -> Iterator[Problem]:
        if not self.management_kubeconfig:
            yield ("managementKubeconfig",), f"required with managementCluster existing; {_SET_KUBECONFIG}"
        else:
            try:
                check_kubeconfig(self.management_kubeconfig, self.management_context or None)
            except NoSuchContext as problem:
                yield ("managementContext",), str(problem)
            except ValueError as problem:
                yield ("managementKubeconfig",), str(problem)
        if self.kind_subnet is not None:
            yield ("kindSubnet",), "describes kind's network; an existing management cluster has none"
        if self.load_balancer == "metallb" and self.metallb_address_range is None:
            yield (
                ("metallbAddressRange",),
                "required with managementCluster existing and loadBalancer metallb: there is no kind network to "
                "carve a pool from; give free addresses the cluster's nodes can announce",
            )
        if not self.docker_network and self.has_container_workers:
            yield (
                ("dockerNetwork",),
                "required with managementCluster existing while a tenant has container workers (kindest/node on "
                "this host's Docker); name the docker network from which the cluster's LoadBalancer addresses are "
                "reachable, or give every tenant machines",
            )
        if self.docker_network and not self.has_container_workers:
            yield ("dockerNetwork",), "unused: every tenant's workers are machines, so no Docker is used"

    @property
    def lab_node_image(self) -> str:
        return self.node_image or f"kindest/node:{self.kubernetes_version}"

    def node_image_of(self, tenant: Tenant) -> str:
        # A tenant on the lab's version shares the lab's (digest-pinned) image.
        version = tenant.kubernetes_version or self.kubernetes_version
        if tenant.node_image:
            return tenant.node_image
        return self.lab_node_image if version == self.kubernetes_version else f"kindest/node:{version}"

    def settings(self) -> LabSettings:
        addresses = self.api_addresses
        versions = Versions(
            kubernetes=self.kubernetes_version,
            cert_manager=self.cert_manager_version,
            metallb=self.metallb_version,
            kamaji_chart=self.kamaji_chart_version,
            kamaji_image_tag=self.kamaji_image_tag,
            hami_chart=self.hami_chart_version,
            mock_device_plugin=self.mock_device_plugin_image,
        )
        return LabSettings(
            management_cluster_name=self.management_cluster_name,
            versions=versions,
            node_image=self.lab_node_image,
            address_pool=self.address_pool,
            kind_subnet=self.kind_subnet,
            existing_cluster=None
            if self.management_cluster == "kind"
            else ExistingCluster(
                kubeconfig=with_current_context(self.management_kubeconfig, self.management_context),
                docker_network=self.docker_network or None,
            ),
            provided=Provided(
                cert_manager=self.cert_manager == "provided",
                load_balancer=self.load_balancer == "provided",
                kamaji=self.kamaji == "provided",
            ),
            kamaji_data_store=self.kamaji_data_store,
            observability=self.observability,
            tenants=tuple(
                TenantSettings(
                    name=tenant.name,
                    workers=len(tenant.machines) or tenant.workers or self.workers_per_tenant,
                    gpus=tenant.gpu_specs,
                    gpu_slots=tenant.gpu_slots or self.gpu_slots,
                    control_plane_replicas=tenant.control_plane_replicas or self.control_plane_replicas,
                    pod_cidr=tenant.pod_cidr,
                    service_cidr=tenant.service_cidr,
                    quotas=tuple(GpuQuota(q.namespace, q.gpumem_mib, q.gpucores, q.gpus) for q in tenant.quotas),
                    data_store=self.kamaji_data_store if self.kamaji == "provided" else None,
                    kubernetes_version=tenant.kubernetes_version or self.kubernetes_version,
                    node_image=self.node_image_of(tenant),
                    machines=tuple(
                        Machine(m.name, m.address, m.port, m.user, self.ssh_private_keys[m.ssh_key], m.host_key,
                                m.adopt, m.node_ip or "", m.flannel_interface or m.node_ip or "", m.proxy_jump)
                        for m in tenant.machines
                    ),
                    real_gpus=tenant.gpu_devices == "real",
                    sleeping=tenant.sleeping,
                    api_address=str(addresses[tenant.name]) if tenant.name in addresses else None,
                )
                for tenant in self.tenants
            ),
        )
