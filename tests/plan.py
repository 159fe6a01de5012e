"""Runs the real __main__.py under Pulumi mocks and records the plan it makes.

`plan(config, preview=True)` is a first `pulumi preview` on an empty stack:
every computed output is unknown, and, as in the engine, a resource whose
provider configuration is unknown gets no outputs at all. `preview=False` is a
`pulumi up` where the host-side commands print what they would on a live host.
`plan(config, preview=True, previous=an_up_plan)` previews a change to a stack
that `previous` brought up: a resource whose inputs did not change keeps the
outputs recorded then. Each registration is
recorded with its options (provider, parent, dependencies, secrets, delete
behaviour, custom timeouts) because the mock engine itself applies none of them.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import os
import runpy
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.output import Unknown
from pulumi.runtime import mocks, rpc
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from tests.render_charts_module import project_defaults, stack_config


def _fresh_executor_after_fork() -> None:
    # Pulumi's mock runtime runs its calls on the event loop's default executor, whose
    # threads a fork does not copy: a plan in a forked child (mutmut runs each mutant in
    # one) would wait on them forever. A new executor starts its own threads.
    asyncio.get_event_loop().set_default_executor(ThreadPoolExecutor())


os.register_at_fork(after_in_child=_fresh_executor_after_fork)


ROOT = Path(__file__).resolve().parent.parent
PROJECT = "kamaji-hami-lab"
MANAGEMENT_SERVER = "https://127.0.0.1:38211"
# What scripts/lab-identity.sh prints once per stack (16 random bytes as hex).
LAB_IDENTITY = "5f0c3a9e7d21b4c86e93f1a0d7b2c458"
# Pulumi.yaml's default node image: the one kind v0.33.0's release notes list for v1.36.4.
NODE_IMAGE = "kindest/node:v1.36.4@sha256:099e049362a1526b2db71494e1947aae99bd16290d7c895f2b7ea312e3cbfaed"


# What the host-side password command prints in an `up`, and the address a LoadBalancer that picks its own
# (a provided one) gives Grafana.
GRAFANA_PASSWORD = "grafana-password-from-openssl"
GRAFANA_ADDRESS = "172.18.255.230"
# MetalLB gives a Service the address it asks for (go.universe.tf/metallb controller/service.go@v0.16.1).
METALLB_ADDRESS_ANNOTATION = "metallb.io/loadBalancerIPs"


def picked_server(tenant: str) -> str:
    # Stand-in for the address a LoadBalancer that picks its own gives a tenant, as Kamaji writes it into admin.conf.
    return f"https://172.18.255.{200 + sum(map(ord, tenant)) % 50}:6443"


def fake_kubeconfig(server: str, user: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": "Q0E="}}],
            "users": [{"name": user, "user": {"client-key-data": f"secret-key-of-{user}"}}],
            "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": user}}],
            "current-context": "ctx",
        }
    )


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str
    provider: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    inputs: dict[str, Any]
    """Inputs with secrets revealed; `secret_inputs` names the top-level ones that were secret."""
    secret_inputs: set[str]
    secret_outputs: list[str]
    delete_before_replace: bool
    replace_on_changes: list[str]
    ignore_changes: list[str]
    custom: bool
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    """Only the operations given a timeout (create, update, delete), e.g. {"create": "20m"}."""
    id: str | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    """What the engine handed back: an empty dict in preview for a resource whose provider config is unknown."""

    @property
    def provider_urn(self) -> str:
        # Provider references are "<urn>::<id>".
        return self.provider.rsplit("::", 1)[0] if self.provider else ""

    @property
    def all_dependencies(self) -> set[str]:
        deps = set(self.dependencies)
        for urns in self.property_dependencies.values():
            deps.update(urns)
        return deps


@dataclass
class Plan:
    registrations: list[Registration]
    outputs: dict[str, Any] = field(default_factory=dict)
    component_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What each component passed to register_outputs, by URN."""

    @cached_property
    def by_urn(self) -> dict[str, Registration]:
        # Made once: a plan is read, never changed, and the graph walks below look URNs up for every resource.
        return {r.urn: r for r in self.registrations}

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def named(self, name: str) -> Registration:
        (match,) = [r for r in self.registrations if r.name == name]
        return match

    def commands(self, script: str) -> list[Registration]:
        """The commands that run scripts/<script>, on creation or, for those that run nothing then, on an update."""
        return [
            r
            for r in self.of_type("command:local:Command")
            if (r.inputs.get("create") or r.inputs.get("update", "")).endswith(f"/{script}")
        ]

    def tenant_server(self, tenant: str) -> str:
        """The API server URL the tenant's admin kubeconfig names in an `up` of this plan."""
        environments = [reveal(read.inputs["environment"]) for read in self.commands("tenant-kubeconfig.sh")]
        (environment,) = [env for env in environments if env["TENANT"] == tenant]
        return _tenant_server(environment)

    @property
    def components(self) -> dict[str, Registration]:
        """The lab's own components, by URN."""
        return {r.urn: r for r in self.registrations if r.type.startswith("kamaji-hami-lab:index:")}

    def outside_components(self) -> list[str]:
        """Names of resources not parented by one of the lab's components (each child sets parent=self)."""
        components = self.components
        return [
            r.name
            for r in self.registrations
            if r.type != "pulumi:pulumi:Stack" and r.urn not in components and r.parent not in components
        ]

    def misnamed(self) -> list[str]:
        """Resources not named after their component. Names must be unique in a stack, so each component
        prefixes its children with its own name (a sub-component may take it whole, its type differs).
        Workers are named after their node, which the config keeps unique in the lab."""
        components = self.components
        workers = ("kamaji-hami-lab:index:WorkerNode", "kamaji-hami-lab:index:MachineWorker")
        return [
            r.name
            for r in self.registrations
            if r.parent in components
            and r.type not in workers
            and not f"{r.name}-".startswith(components[r.parent].name + "-")
        ]

    def ancestors(self, urn: str) -> set[str]:
        """URNs of components that (transitively) parent this resource."""
        found: set[str] = set()
        by_urn = self.by_urn
        while urn in by_urn and by_urn[urn].parent in by_urn:
            urn = by_urn[urn].parent
            found.add(urn)
        return found

    def upstream(self, urn: str) -> set[str]:
        """Everything this resource waits for: dependencies, its provider, and theirs."""
        by_urn = self.by_urn
        seen: set[str] = set()
        stack = [urn]
        while stack:
            current = by_urn.get(stack.pop())
            if current is None:
                continue
            for dep in current.all_dependencies | ({current.provider_urn} - {""}):
                if dep not in seen:
                    seen.add(dep)
                    stack.append(dep)
        return seen


class _RecordingMonitor(mocks.MockMonitor):
    def __init__(self, lab_mocks: _LabMocks, previous: Plan | None):
        super().__init__(lab_mocks)
        self.preview = lab_mocks.preview
        self.previous = previous.by_urn if previous else {}
        self.registrations: list[Registration] = []
        self.component_outputs: dict[str, dict[str, Any]] = {}
        self.unknown_config_providers: set[str] = set()

    def RegisterResourceOutputs(self, request):
        self.component_outputs[request.urn] = reveal(_sync_await(_deserialize(request.outputs)))
        return super().RegisterResourceOutputs(request)

    def RegisterResource(self, request):
        if request.type == "pulumi:pulumi:Stack":
            return super().RegisterResource(request)
        urn = self.make_urn(request.parent, request.type, request.name)
        inputs = _sync_await(_deserialize(request.object))
        recorded = Registration(
            urn=urn,
            type=request.type,
            name=request.name,
            parent=request.parent,
            provider=request.provider,
            dependencies=list(request.dependencies),
            property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
            inputs=reveal(inputs),
            secret_inputs={key for key, value in inputs.items() if _contains_secret(value)},
            secret_outputs=list(request.additionalSecretOutputs),
            delete_before_replace=request.deleteBeforeReplace,
            replace_on_changes=list(request.replaceOnChanges),
            ignore_changes=list(request.ignoreChanges),
            custom=request.custom,
            custom_timeouts={
                operation: getattr(request.customTimeouts, operation)
                for operation in ("create", "update", "delete")
                if getattr(request.customTimeouts, operation)
            },
        )
        if request.type.startswith("pulumi:providers:") and _contains_unknown(inputs):
            self.unknown_config_providers.add(urn)

        before = self.previous.get(urn)
        if self.preview and recorded.provider_urn in self.unknown_config_providers:
            # pulumi/pulumi sdk/go/common/resource/plugin/provider_plugin.go (master 1b5949891b,
            # Create/Update): with unknown provider config a preview returns an empty property map;
            # the Python SDK (pulumi/runtime/rpc.py resolve_outputs) then leaves every output unknown.
            answer = (None, {})
        elif self.preview and before is not None and same_inputs(before, recorded):
            answer = (before.id, before.outputs)  # no diff: the engine keeps what the state holds
        elif self.preview and before is not None and _updated_in_place(before, recorded, inputs):
            # pulumi-kubernetes previews an update by a server-side dry run, which answers with
            # the live object: it keeps its uid.
            metadata = {**recorded.inputs["metadata"], "uid": before.outputs["metadata"]["uid"]}
            answer = (before.id, {**recorded.inputs, "metadata": metadata})
        elif self.preview and before is not None and _updated_in_place_outside_kubernetes(before, recorded, inputs):
            # An update keeps the resource's ID; pulumi-command's previewed update also keeps the last run's
            # stdout and stderr (pulumi/pulumi-command provider/pkg/provider/local/commandController.go@v1.2.1).
            answer = (before.id, {**before.outputs, **recorded.inputs})
        else:
            response = super().RegisterResource(request)
            recorded.id, recorded.outputs = self.resources[urn].id, self.resources[urn].state
            self.registrations.append(recorded)
            return response
        recorded.id, recorded.outputs = answer
        self.resources[urn] = mocks.MockMonitor.ResourceRegistration(urn, answer[0], answer[1])
        self.registrations.append(recorded)
        state = _sync_await(rpc.serialize_properties(answer[1], {}))
        return resource_pb2.RegisterResourceResponse(urn=urn, id=answer[0], object=state)


def _updated_in_place(before: Registration, after: Registration, inputs: dict[str, Any]) -> bool:
    """A Kubernetes object whose identity stays: pulumi-kubernetes replaces one when apiVersion,
    kind, metadata.name or metadata.namespace change (pulumi/pulumi-kubernetes
    provider/pkg/provider/diff.go@94977969; the kinds with more such fields are not used here)."""
    if not after.type.startswith("kubernetes:") or _contains_unknown(inputs):
        return False
    identity = [("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")]

    def at(values: dict[str, Any], path: tuple[str, ...]) -> Any:
        for key in path:
            values = values.get(key, {}) if isinstance(values, dict) else {}
        return values

    return "uid" in before.outputs.get("metadata", {}) and all(
        at(before.inputs, path) == at(after.inputs, path) for path in identity
    )


# Container inputs a change of which docker updates in place: the few that are not ForceNew in
# kreuzwerker/terraform-provider-docker internal/provider/resource_docker_container.go@v4.5.0 (that this
# project changes on a live container).
CONTAINER_UPDATABLE = frozenset({"mustRun"})


def _updated_in_place_outside_kubernetes(before: Registration, after: Registration, inputs: dict[str, Any]) -> bool:
    """A Command whose triggers (its only replaceOnChanges input) are known and unchanged
    (pulumi/pulumi-command provider/pkg/provider/common/inputs.go@v1.2.1), or a Container whose
    changes are all in CONTAINER_UPDATABLE."""
    if after.type == "command:local:Command":
        return not _contains_unknown(inputs.get("triggers")) and _comparable(before.inputs.get("triggers")) == (
            _comparable(after.inputs.get("triggers"))
        )
    if after.type == "docker:index/container:Container" and not _contains_unknown(inputs):
        keys = before.inputs.keys() | after.inputs.keys()
        moved = {key for key in keys if _comparable(before.inputs.get(key)) != _comparable(after.inputs.get(key))}
        return moved <= CONTAINER_UPDATABLE
    return False


async def _deserialize(struct) -> dict[str, Any]:
    return rpc.deserialize_properties(struct, keep_unknowns=True)


def _is_secret_wrapper(value: Any) -> bool:
    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def _contains_secret(value: Any) -> bool:
    if _is_secret_wrapper(value):
        return True
    if isinstance(value, dict):
        return any(_contains_secret(item) for item in value.values())
    if isinstance(value, list):
        return any(_contains_secret(item) for item in value)
    return False


def same_inputs(before: Registration, after: Registration) -> bool:
    """Whether the engine would see no input change (assets compare by content)."""
    return _comparable(before.inputs) == _comparable(after.inputs)


def changed(preview: Plan, previous: Plan) -> set[str]:
    """URNs of the resources `preview` creates or whose inputs differ from the `previous` up's."""
    before = previous.by_urn
    return {
        r.urn for r in preview.registrations if r.custom and (r.urn not in before or not same_inputs(before[r.urn], r))
    }


def _comparable(value: Any) -> Any:
    if isinstance(value, pulumi.asset.StringAsset):
        return ("StringAsset", value.text)
    if isinstance(value, dict):
        return {key: _comparable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_comparable(item) for item in value]
    return value


def _contains_unknown(value: Any) -> bool:
    if isinstance(value, Unknown):
        return True
    if isinstance(value, dict):
        return any(_contains_unknown(item) for item in value.values())
    if isinstance(value, list):
        return any(_contains_unknown(item) for item in value)
    return False


def reveal(value: Any) -> Any:
    """The value with every secret wrapper replaced by what it holds."""
    if _is_secret_wrapper(value):
        return reveal(value["value"])
    if isinstance(value, dict):
        return {key: reveal(item) for key, item in value.items()}
    if isinstance(value, list):
        return [reveal(item) for item in value]
    return value


class _LabMocks(mocks.Mocks):
    """Answers as the engine would: in preview only inputs are known."""

    def __init__(self, preview: bool):
        self.preview = preview

    def new_resource(self, args: mocks.MockResourceArgs):
        outputs = dict(args.inputs)
        if self.preview:
            return None, outputs
        if args.typ == "command:local:Command":
            outputs["stdout"] = _command_stdout(args.inputs)
            outputs["stderr"] = ""
        elif args.typ == "docker:index/remoteImage:RemoteImage":
            outputs["imageId"] = f"sha256:{args.name}"
        elif args.typ.startswith("kubernetes:") and "metadata" in outputs:
            outputs["metadata"] = {**outputs["metadata"], "uid": f"uid-{args.name}"}
            if args.typ == "kubernetes:core/v1:Service" and (outputs.get("spec") or {}).get("type") == "LoadBalancer":
                asked = (outputs["metadata"].get("annotations") or {}).get(METALLB_ADDRESS_ANNOTATION)
                outputs["status"] = {"loadBalancer": {"ingress": [{"ip": asked or GRAFANA_ADDRESS}]}}
        return f"{args.name}-id", outputs

    def call(self, args: mocks.MockCallArgs):
        raise AssertionError(f"the program must not invoke {args.token}: invokes break a first preview")


def _command_stdout(inputs: dict[str, Any]) -> str:
    env = reveal(inputs.get("environment", {}))
    script = inputs.get("create", "").rsplit("/", 1)[-1]
    if script == "kind-kubeconfig.sh":
        return fake_kubeconfig(MANAGEMENT_SERVER, "kind-admin")
    if script == "kind-subnet.sh":
        # The network as kind-up.sh created it: with the subnet the program plans with (the script fails otherwise).
        return env["EXPECTED_SUBNET"] + "\n"
    if script == "lab-identity.sh":
        return LAB_IDENTITY + "\n"
    if script == "tenant-kubeconfig.sh":
        return fake_kubeconfig(_tenant_server(env), f"{env['TENANT']}-admin")
    if script == "tenant-metrics-token.sh":
        # The token of the tenant whose admin kubeconfig the script was given, so a mix-up shows.
        user = yaml.safe_load(env["KUBECONFIG_DATA"])["users"][0]["name"]
        return json.dumps({"token": _b64(f"token-read-with-{user}"), "ca.crt": _b64(f"ca-read-with-{user}")}) + "\n"
    if script == "grafana-password.sh":
        return GRAFANA_PASSWORD + "\n"
    return ""


def _tenant_server(env: dict[str, str]) -> str:
    # Given an API_ADDRESS, the script prints admin.conf only once it names that address.
    address = env.get("API_ADDRESS")
    return f"https://{address}:6443" if address else picked_server(env["TENANT"])


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def dev_config(**overrides: Any) -> dict[str, Any]:
    """The dev stack's config as the program sees it, with overrides."""
    return {**project_defaults(), **stack_config("dev"), **overrides}


def tenants(count: int, **tenant_fields: Any) -> list[dict[str, Any]]:
    return [{"name": f"t{index}", **tenant_fields} for index in range(count)]


@contextmanager
def _collector_paused(pause: bool):
    """Holds Python's cyclic garbage collector off for the block (reference counting still frees as it goes)."""
    was_enabled = gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def plan(
    config: dict[str, Any],
    preview: bool,
    previous: Plan | None = None,
    secrets: dict[str, Any] | None = None,
    *,
    pause_collector: bool = True,
) -> Plan:
    """Runs __main__.py with this project config (key without namespace → value).

    `previous` is the plan of an earlier `up` of the same stack (see the module docstring).
    `secrets` are more keys, set as `pulumi config set --secret` would: the CLI hands them
    over decrypted and names them as secret.
    `pause_collector`: a run makes hundreds of thousands of objects, and the cyclic collector's passes over them
    (and over the plans a test session keeps) took 40% of its time or more; what the program does is the same
    either way. A benchmark that times the program as the language host runs it passes False.
    """
    lab_mocks = _LabMocks(preview)
    monitor = _RecordingMonitor(lab_mocks, previous)
    # Each `pulumi preview` or `up` runs the program in a process of its own, under a root stack of its own. The mock
    # runtime makes a root only when none is set (pulumi/pulumi sdk/python/lib/pulumi/runtime/mocks.py@v3.272.0,
    # set_mocks): without this, every plan of a session shares the first one's, an earlier plan's exports show in a
    # later plan's outputs, and each plan waits on more of the session's outputs than the last.
    pulumi.runtime.reset_options()
    pulumi.runtime.set_mocks(lab_mocks, project=PROJECT, stack="dev", preview=preview, monitor=monitor)
    secrets = secrets or {}
    # The CLI hands every value to the program as a string; objects as JSON.
    pulumi.runtime.set_all_config(
        {
            f"{PROJECT}:{key}": value if isinstance(value, str) else json.dumps(value)
            for key, value in {**config, **secrets}.items()
        },
        secret_keys=[f"{PROJECT}:{key}" for key in secrets],
    )
    try:
        with _collector_paused(pause_collector):
            _sync_await(run_pulumi_func(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")))
    except Exception as error:
        error.plan = Plan(monitor.registrations)  # what was registered before it failed
        raise
    stack = pulumi.runtime.get_root_resource()
    return Plan(monitor.registrations, dict(stack.outputs), monitor.component_outputs)


def resolve(value: Any) -> Any:
    """Resolves an Output (or nested structure of them); unknowns become None."""

    async def _resolve(item):
        if isinstance(item, pulumi.Output):
            return await _resolve(await item.future(with_unknowns=False))
        if isinstance(item, dict):
            return {key: await _resolve(val) for key, val in item.items()}
        if isinstance(item, list):
            return [await _resolve(val) for val in item]
        return item

    return _sync_await(_resolve(value))


def is_unknown(value: Any) -> bool:
    """True for a recorded input that was not known when the resource was registered."""
    return isinstance(value, Unknown)


def is_secret(value: Any) -> bool:
    return isinstance(value, pulumi.Output) and _sync_await(value.is_secret())


# Tenant a of sleeping_containers_lab runs this many API server replicas (none while it sleeps).
SLEEPER_REPLICAS = 2


def sleeping_containers_lab(asleep: bool) -> dict:
    """Two container tenants: a (two workers, a GPU), asleep or awake, and b."""
    return dev_config(
        controlPlaneReplicas=SLEEPER_REPLICAS,
        tenants=[
            {
                "name": "a",
                "workers": 2,
                "gpus": [{"model": "NVIDIA L4 24GB"}],
                **({"sleeping": True} if asleep else {}),
            },
            {"name": "b"},
        ],
    )


def exported_json(outputs) -> dict:
    """What `pulumi stack output --show-secrets --json` prints of a plan's outputs after `pulumi up`."""
    return json.loads(json.dumps(resolve(outputs)))
