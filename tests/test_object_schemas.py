"""Every object the program and the validation suite send to an API server is one its schemas accept.

The program's objects are recorded from its plans (tests/plan.py) in every mode and example stack, and from what
its scripts pipe into kubectl (tests/test_scripts.py's fake tools); the suite's from the objects its checks pipe
into `kubectl create -f -` (tests/test_validation.py's fake lab). Each built-in
one is judged strictly by v1.36.0's schemas, and one created inside a tenant also by those of the oldest
Kubernetes version the config accepts for a tenant, the release a tenant's API server may run. A custom
resource is judged by its CRD's schema at the pinned chart version.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import ConfigError, parse_settings
from tests.kube_schemas import CURRENT, minor, problems, schema_version, shipped_minors
from tests.plan import ROOT, Plan, dev_config, plan
from tests.render_charts_module import project_defaults, stack_config

TENANT = "kamaji-hami-lab:index:Tenant"
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
# Not objects: the provider, and Helm releases (the chart renders the objects, outside the program).
NOT_OBJECTS = ("pulumi:providers:kubernetes", "kubernetes:helm.sh/v3:Release")


@functools.cache
def oldest_tenant_version() -> str:
    """The oldest release the config accepts as a tenant's kubernetesVersion, among those whose schemas ship.

    Asked of the config itself: each minor from the current one down, at its first or a late patch, until one
    is refused. Older than the oldest shipped schemas cannot be judged; that one stands in for it.
    """

    def accepted(version: str) -> bool:
        try:
            parse_settings(dev_config(tenants=[{"name": "oldest", "kubernetesVersion": version}]))
        except ConfigError:
            return False
        return True

    oldest = f"v{CURRENT}"
    for major, minor_ in reversed([found for found in shipped_minors() if found <= minor(CURRENT)]):
        version = next((v for v in (f"v{major}.{minor_}.0", f"v{major}.{minor_}.99") if accepted(v)), None)
        if version is None:
            break
        oldest = version
    return oldest


@dataclass(frozen=True)
class Sent:
    """An object sent to a cluster, and the Kubernetes versions whose schemas must accept it."""

    label: str
    obj: dict[str, Any]
    in_tenant: bool
    versions: tuple[str, ...]
    patch: bool = False
    """A patch names only the fields it sets: required fields of the whole object may be missing."""


def _versions(in_tenant: bool, tenant_version: str | None = None) -> tuple[str, ...]:
    if not in_tenant:
        return (CURRENT,)
    return tuple(dict.fromkeys(v for v in (CURRENT, tenant_version, oldest_tenant_version()) if v))


# --- what the program creates ------------------------------------------------------------------------

EXISTING_SECRETS_KEY = "managementKubeconfig"


def labs() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Every example stack and mode: (config, secrets)."""
    from tests.test_machines import EXISTING, MOCK_GPU_TENANT, REAL_GPU_TENANT, SECRETS
    from tests.test_management_modes import EXISTING_KUBECONFIG, INSTALLED, PROVIDED

    existing = {EXISTING_SECRETS_KEY: EXISTING_KUBECONFIG}
    example = {**project_defaults(), **stack_config("beyond-one-host", root=ROOT / "examples")}
    quota = [{"namespace": "team-a", "gpumemMiB": 8192}]
    oldest = {"name": "oldest", "kubernetesVersion": oldest_tenant_version(), "quotas": quota,
              "gpus": [{"model": "NVIDIA L4 24GB"}]}
    return {
        "dev": (dev_config(), {}),
        "existing-installed": (dev_config(**INSTALLED), existing),
        "existing-provided": (dev_config(**PROVIDED), existing),
        "machines-mock-gpus": (dev_config(tenants=[MOCK_GPU_TENANT], **EXISTING), SECRETS),
        "machines-real-gpus": (dev_config(tenants=[REAL_GPU_TENANT], **EXISTING), SECRETS),
        "example-beyond-one-host": (example, SECRETS),
        "tenant-on-the-oldest-version": (dev_config(tenants=[oldest]), {}),
        "dedicated-datastore": (
            dev_config(tenants=[{"name": "shared"}, {"name": "own", "dataStore": "dedicated"}]), {}),
    }


def tenant_version(lab: Plan, provider_urn: str) -> str | None:
    """The Kubernetes version of the tenant whose provider this is, or None for the management cluster."""
    by_urn = lab.by_urn
    tenants = {urn for urn in lab.ancestors(provider_urn) | {by_urn[provider_urn].parent} if by_urn[urn].type == TENANT}
    if not tenants:
        return None
    (tenant,) = tenants
    (control_plane,) = [r for r in lab.of_type(TCP) if tenant in lab.ancestors(r.urn)]
    return control_plane.inputs["spec"]["kubernetes"]["version"]


# Plans other tests build from the same config, under conftest's `shared` keys: made once per session.
SHARED_KEYS = {
    "dev": "dev-False",
    "existing-installed": "existing-installed-False",
    "existing-provided": "existing-provided-False",
    "machines-mock-gpus": "machines-mock-False",
    "machines-real-gpus": "machines-real-False",
}


def program_objects(name: str, shared) -> list[Sent]:
    config, secrets = labs()[name]
    lab = shared(SHARED_KEYS.get(name, f"schemas-{name}"), lambda: plan(config, preview=False, secrets=secrets))
    sent = []
    for r in lab.registrations:
        if not r.type.startswith("kubernetes:") or r.type.startswith(NOT_OBJECTS):
            continue
        version = tenant_version(lab, r.provider_urn)
        obj = json.loads(json.dumps(r.inputs))  # as the provider sends it: JSON
        in_tenant = version is not None
        sent.append(Sent(f"{name}: {r.type} {r.name}", obj, in_tenant, _versions(in_tenant, version),
                         patch=r.type.endswith("Patch")))
    return sent


def judged(sent: Sent) -> list[str]:
    found = []
    for version in sent.versions:
        for problem in problems(sent.obj, version):
            if not (sent.patch and problem.endswith(": required field missing")):
                found.append(f"{sent.label} (Kubernetes {schema_version(version)}): {problem}")
    return found


@pytest.mark.parametrize("name", list(labs()))
def test_every_object_the_program_creates_is_one_kubernetes_and_the_pinned_crds_accept(name, shared):
    objects = program_objects(name, shared)

    assert [problem for sent in objects for problem in judged(sent)] == []
    kinds = {sent.obj["kind"] for sent in objects}
    assert {"TenantControlPlane", "DaemonSet"} <= kinds
    # MetalLB's pool and announcement exist unless the cluster provides its own LoadBalancer.
    assert ({"IPAddressPool", "L2Advertisement"} <= kinds) == (labs()[name][0].get("loadBalancer") != "provided")


def test_the_tenant_objects_are_judged_by_the_oldest_version_a_tenant_may_run_too(shared):
    oldest = oldest_tenant_version()
    objects = program_objects("tenant-on-the-oldest-version", shared)
    in_tenant = [sent for sent in objects if sent.in_tenant]
    kinds = {sent.obj["kind"] for sent in in_tenant}

    assert minor(oldest) < minor(CURRENT)
    assert {"DaemonSet", "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "ClusterRoleBinding"} <= kinds
    assert "ResourceQuota" in kinds
    assert all(oldest in sent.versions and CURRENT in sent.versions for sent in in_tenant)
    # The management cluster's objects are judged by the version it runs.
    assert all(sent.versions == (CURRENT,) for sent in objects if not sent.in_tenant)
    assert {sent.obj["kind"] for sent in objects if not sent.in_tenant} >= {"Namespace", "TenantControlPlane"}


def test_the_oldest_tenant_version_is_the_one_the_config_accepts_and_no_older():
    oldest = oldest_tenant_version()
    parse_settings(dev_config(tenants=[{"name": "a", "kubernetesVersion": oldest}]))
    major, minor_ = minor(oldest)
    if (major, minor_ - 1) >= shipped_minors()[0]:
        for older in (f"v{major}.{minor_ - 1}.0", f"v{major}.{minor_ - 1}.99"):
            with pytest.raises(ConfigError, match="kubernetesVersion"):
                parse_settings(dev_config(tenants=[{"name": "a", "kubernetesVersion": older}]))


def test_a_broken_program_object_fails_naming_its_path(shared):
    (proxy,) = [sent for sent in program_objects("dev", shared)
                if sent.obj["kind"] == "DaemonSet" and "tenant-a" in sent.label]
    container = proxy.obj["spec"]["template"]["spec"]["containers"][0]
    container["volumeMount"] = container.pop("volumeMounts")
    del container["name"]

    assert judged(proxy) == [
        f"{proxy.label} (Kubernetes {schema_version(version)}): {problem}"
        for version in proxy.versions
        for problem in (
            "spec.template.spec.containers[0].name: required field missing",
            "spec.template.spec.containers[0].volumeMount: unknown field",
        )
    ]


# --- what the validation suite creates ----------------------------------------------------------------


def suite_objects(tmp_path) -> list[Sent]:
    """Every object the suite pipes into `kubectl create -f -`: all checks on a healthy lab, and the provided
    platform's checks (the Issuer cert-manager must admit), each with the cluster it went to."""
    from tests.test_validation import healthy_lab, validate
    from tests.test_validation_provided import provided_lab, provided_outputs

    healthy, provided = healthy_lab(), provided_lab()
    assert validate(healthy)[0] == 0
    assert validate(provided, "--only", "platform", outputs=provided_outputs(tmp_path))[0] == 0
    sent = []
    for call in healthy.calls + provided.calls:
        if call.command.startswith("create -f -") and call.stdin:
            obj = json.loads(call.stdin)
            in_tenant = call.cluster != "management"
            label = f"{call.cluster}: {obj['kind']}/{obj['metadata']['name']} ({call.command})"
            sent.append(Sent(label, obj, in_tenant, _versions(in_tenant)))
    return sent


def test_every_object_the_validation_suite_creates_is_one_kubernetes_and_the_pinned_crds_accept(tmp_path):
    objects = suite_objects(tmp_path)

    assert [problem for sent in objects for problem in judged(sent)] == []
    # Probe, GPU and etcdctl pods, the quota, the marker ConfigMap and the scratch namespaces on tenants;
    # the etcdctl pods and cert-manager's probe Issuer on the management cluster.
    kinds = {(sent.in_tenant, sent.obj["kind"]) for sent in objects}
    assert kinds == {(True, "Namespace"), (True, "Pod"), (True, "ResourceQuota"), (True, "ConfigMap"),
                     (False, "Pod"), (False, "Issuer")}
    etcdctl = [sent for sent in objects if sent.obj["kind"] == "Pod" and not sent.in_tenant]
    assert etcdctl and all(sent.obj["spec"]["containers"][0]["command"][0].endswith("/etcdctl") for sent in etcdctl)


# --- what the program's scripts send ------------------------------------------------------------------


def script_objects(tmp_path: Path, ca_pem: str) -> list[Sent]:
    """Every object the scripts pipe into kubectl (create, apply, server dry runs), each script run as its
    own tests run it, against fake tools that answer as a healthy cluster would."""
    from tests.test_platform_checks import check_load_balancer, load_balancer_parts
    from tests.test_scripts import (
        DATASTORE_STATE,
        KAMAJI_MANIFEST,
        MANAGEMENT_KUBECONFIG,
        RELEASE_RECORD,
        TENANT_KUBECONFIG,
        Fakes,
        helm_release_secret_data,
        joinable_worker,
    )

    def fresh(name: str) -> Fakes:
        (tmp_path / name).mkdir()
        return Fakes(tmp_path / name)

    management = {"KUBECONFIG_DATA": MANAGEMENT_KUBECONFIG}
    runs = []
    issuer = fresh("cert-manager").on("kubectl", r"create --dry-run=server -f -", "issuer created (server dry run)\n")
    runs.append((issuer, issuer.run("check-cert-manager.sh", **management), False))
    pool = fresh("metallb").on("kubectl", r"apply --dry-run=server", "ipaddresspool created (server dry run)\n")
    runs.append((pool, pool.run("wait-metallb.sh", NAMESPACE="metallb-system", **management), False))
    probe = load_balancer_parts(fresh("load-balancer"), "203.0.113.7 ")
    runs.append((probe, check_load_balancer(probe), False))
    restore = fresh("kamaji").on("kubectl", r"get deployment kamaji", "True")
    restore.on("kubectl", DATASTORE_STATE, "", "|true").on("kubectl", RELEASE_RECORD,
                                                         helm_release_secret_data(KAMAJI_MANIFEST))
    restore.on("kubectl", r"create -f -", "datastore.kamaji.clastix.io/default created\n")
    runs.append((restore, restore.run("wait-kamaji.sh", **management), False))
    join = joinable_worker(fresh("join"), ca_pem)
    runs.append((join, join.run("join-worker.sh", KUBECONFIG_DATA=TENANT_KUBECONFIG, NODE="w1"), True))

    sent = []
    for fakes, result, in_tenant in runs:
        assert result.returncode == 0, result.stderr
        for call in fakes.calls("kubectl", r"(create|apply)( --dry-run=server)? -f -"):
            obj = yaml.safe_load(call["stdin"])
            sent.append(Sent(f"{' '.join(call['argv'])}: {obj['kind']}", obj, in_tenant, _versions(in_tenant)))
    return sent


def test_every_object_the_scripts_send_is_one_kubernetes_and_the_pinned_crds_accept(tmp_path, tenant_ca):
    objects = script_objects(tmp_path, tenant_ca)

    assert [problem for sent in objects for problem in judged(sent)] == []
    # cert-manager's and MetalLB's probes, the LoadBalancer probe, the DataStore restored from Kamaji's
    # release, and the bootstrap token a worker joins its tenant with.
    assert sorted((sent.in_tenant, sent.obj["kind"]) for sent in objects) == [
        (False, "DataStore"), (False, "IPAddressPool"), (False, "Issuer"), (False, "Service"), (True, "Secret")]
