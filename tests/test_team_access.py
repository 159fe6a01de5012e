"""A tenant's team credential (issue 47, point 3): what the plan makes, what its role allows, what its guard
policy refuses.

The guard's CEL runs for real (PyPI cel-python, a CEL evaluator independent of the API server's cel-go) against
requests shaped as the API server hands them to a ValidatingAdmissionPolicy: `request` is the AdmissionRequest
(admission.k8s.io/v1), `object` and `oldObject` the objects, null where the operation has none
(kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/activation.go). The
variables are written never to fail, so this harness evaluates them eagerly where the API server does so lazily.
"""

from __future__ import annotations

import base64
import functools
import json

import celpy
import pytest
import yaml

from components import team_access
from components.pod_security import EXEMPT_NAMESPACES
from tests.plan import changed, is_secret, resolve, reveal


def account(namespace: str, name: str) -> tuple[str, list[str]]:
    """A ServiceAccount's user and groups as its token authenticates (kubernetes/kubernetes pkg/serviceaccount/
    util.go: MakeUsername, MakeGroupNames)."""
    return (f"system:serviceaccount:{namespace}:{name}",
            ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"])


TEAM_SA = account(team_access.TEAM_NAMESPACE, team_access.TEAM_ACCOUNT)
# Identities the team makes and binds its own rights to: held by the guards as the team is.
TEAM_MADE = [account("team-a", "bot"), account("default", "default"),
             ("system:anonymous", ["system:unauthenticated"]), ("system:kube-scheduler-x", ["system:authenticated"]),
             ("alice", ["system:nodesx", "system:authenticated"]), ("no-groups", None)]
# The lab's own: Kamaji's admin.conf (internal/resources/kubeadm_phases.go@26.8.2-edge: group system:masters), a
# kubelet, the lab's ServiceAccounts, the controller-manager and the API server's loopback user.
LAB = [("kubernetes-admin", ["system:masters", "system:authenticated"]),
       ("system:node:kamaji-tenant-a-w1", ["system:nodes", "system:authenticated"]),
       account("kube-system", "hami-scheduler"), account("kube-flannel", "flannel"),
       account("kube-system", "namespace-controller"),
       ("system:kube-controller-manager", ["system:authenticated"]),
       ("system:apiserver", ["system:masters", "system:authenticated"])]
TEAM_ACCESS = "kamaji-hami-lab:index:TeamAccess"
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"


# --- the plan -----------------------------------------------------------------------------------------------


def team_resources(lab, tenant: str):
    (component,) = [r for r in lab.of_type(TEAM_ACCESS) if r.name == tenant]
    return [r for r in lab.registrations if component.urn in lab.ancestors(r.urn)]


def test_each_tenant_gets_its_team_access_inside_it_on_its_own_provider(dev_plan):
    for tenant in ("tenant-a", "tenant-b"):
        (provider,) = [r for r in dev_plan.of_type("pulumi:providers:kubernetes") if r.name == f"{tenant}-kubernetes"]
        (component,) = [r for r in dev_plan.of_type(TEAM_ACCESS) if r.name == tenant]
        assert dev_plan.by_urn[component.parent].type == "kamaji-hami-lab:index:Tenant"
        assert dev_plan.by_urn[component.parent].name == tenant
        objects = [r for r in team_resources(dev_plan, tenant) if r.type.startswith("kubernetes:")]
        assert {r.type.split(":")[-1] for r in objects} == {
            "Namespace", "ServiceAccount", "Secret", "ClusterRole", "ClusterRoleBinding",
            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
        }
        assert {r.provider_urn for r in objects} == {provider.urn}, "explicit: the tenant's provider, no default"


def test_the_team_kubeconfigs_are_a_secret_output_of_each_tenant_with_its_server_ca_and_token(up_plan):
    output = up_plan.outputs["teamKubeconfigs"]
    assert is_secret(output)
    teams = resolve(output)
    admins = resolve(up_plan.outputs["kubeconfigs"])
    assert set(teams) == set(admins) == {"tenant-a", "tenant-b"}
    for tenant, text in teams.items():
        team, admin = yaml.safe_load(text), yaml.safe_load(admins[tenant])
        (cluster,), (user,), (context,) = team["clusters"], team["users"], team["contexts"]
        assert cluster["cluster"] == admin["clusters"][0]["cluster"], "the tenant's own server and CA"
        assert cluster["cluster"]["server"] == resolve(up_plan.outputs["tenants"])[tenant]["endpoint"]
        # The token read with this tenant's admin kubeconfig (tests/plan.py answers per kubeconfig), decoded.
        assert user["user"] == {"token": f"token-read-with-{tenant}-admin"}
        assert team["current-context"] == context["name"] and context["context"]["user"] == user["name"]
    assert teams["tenant-a"] != teams["tenant-b"]


def test_the_token_is_read_with_the_tenants_admin_kubeconfig_only_once_the_guards_are_in_place(up_plan):
    for tenant in ("tenant-a", "tenant-b"):
        (read,) = [r for r in up_plan.commands("tenant-metrics-token.sh") if r.name == f"{tenant}-team-token-read"]
        environment = reveal(read.inputs["environment"])
        assert yaml.safe_load(environment["KUBECONFIG_DATA"])["users"][0]["name"] == f"{tenant}-admin"
        assert (environment["NAMESPACE"], environment["SECRET"]) == (team_access.TEAM_NAMESPACE,
                                                                    team_access.TEAM_ACCOUNT)
        assert {"stdout", "stderr"} <= set(read.secret_outputs)
        waits = {up_plan.by_urn[urn].type.split(":")[-1] for urn in up_plan.upstream(read.urn)
                 if urn in up_plan.by_urn and tenant in up_plan.by_urn[urn].name}
        assert {"ValidatingAdmissionPolicyBinding", "ClusterRoleBinding", "Secret"} <= waits
        # A new Secret (make revoke-team's replacement) is read again.
        (secret,) = [r for r in team_resources(up_plan, tenant) if r.name == team_access.token_resource_name(tenant)]
        assert read.inputs["triggers"] == [secret.outputs["metadata"]["uid"]]


def test_the_token_secret_belongs_to_the_team_account_in_the_guarded_namespace(up_plan):
    (secret,) = [r for r in team_resources(up_plan, "tenant-a") if r.type == "kubernetes:core/v1:Secret"]
    assert secret.inputs["type"] == "kubernetes.io/service-account-token"
    # Replaced after make revoke-team under the same name: the old one must go first, or its delete would take
    # the new one.
    assert secret.delete_before_replace
    assert secret.inputs["metadata"]["namespace"] == team_access.TEAM_NAMESPACE
    assert secret.inputs["metadata"]["annotations"] == {"kubernetes.io/service-account.name": team_access.TEAM_ACCOUNT}
    assert team_access.TEAM_NAMESPACE in team_access.PROTECTED_NAMESPACES
    (binding,) = [r for r in team_resources(up_plan, "tenant-a") if r.type.endswith(":ClusterRoleBinding")]
    assert binding.inputs["subjects"] == [{"kind": "ServiceAccount", "name": team_access.TEAM_ACCOUNT,
                                           "namespace": team_access.TEAM_NAMESPACE}]


def test_a_first_preview_knows_no_team_kubeconfig_and_invokes_nothing(preview_plan):
    # tests/plan.py fails any invoke; in a first preview the command has not run.
    assert is_secret(preview_plan.outputs["teamKubeconfigs"])
    assert resolve(preview_plan.outputs["teamKubeconfigs"]) is None, "unknown until the token is read"


@pytest.mark.parametrize("direction", ["sleep", "wake"])
def test_a_sleeping_tenant_keeps_its_team_access_untouched(containers, direction):
    awake, sleep, asleep, wake = containers
    preview, previous = (sleep, awake) if direction == "sleep" else (wake, asleep)
    team = {r.urn for tenant in ("a", "b") for r in team_resources(preview, tenant)}
    assert team and not changed(preview, previous) & team
    assert set(resolve(asleep.outputs["teamKubeconfigs"])) == {"a", "b"}, "asleep, its credential stays"


# --- the guard policy, evaluated ------------------------------------------------------------------------------

_CEL = celpy.Environment()


@functools.cache
def _program(expression: str):
    # Parsing is most of cel-python's cost, and the policy has a few expressions judged hundreds of times.
    return _CEL.program(_CEL.compile(expression))


def _evaluate(expression: str, activation: dict):
    return _program(expression).evaluate(activation)


def admitted(request: dict, new: dict | None = None, old: dict | None = None) -> bool:
    return not refusals(request, new, old)


def refusals(request: dict, new: dict | None = None, old: dict | None = None) -> list[str]:
    """The messages of the validations that refuse the request, in order (the API server answers with the first:
    staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating/dispatcher.go); none if it is let through,
    as it is unless it matches and a validation is false.

    Matching as staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/matching/matching.go: the resource rules
    (with `*` and `*/*`), then every matchCondition true. A validation that errors would deny too
    (failurePolicy Fail); the harness lets the error through, so a test shows it.
    """
    spec = team_access.guard_policy_spec()
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    full = request["resource"]["resource"] + (f"/{request['subResource']}" if request.get("subResource") else "")
    wanted = set(rule["resources"])
    if request["operation"] not in rule["operations"] or not ("*/*" in wanted if "/" in full else "*" in wanted):
        return []
    activation = {"request": celpy.json_to_cel(request), "object": celpy.json_to_cel(new),
                  "oldObject": celpy.json_to_cel(old)}
    conditions = [_evaluate(condition["expression"], activation) for condition in spec["matchConditions"]]
    for result in conditions:
        if isinstance(result, celpy.CELEvalError):
            raise AssertionError(f"a match condition failed to evaluate: {result}")
    if not all(conditions):
        return []
    values: dict = {}
    for variable in spec["variables"]:  # in order: each may use the ones before it
        activation["variables"] = celpy.celtypes.MapType(values)
        values[celpy.celtypes.StringType(variable["name"])] = _evaluate(variable["expression"], activation)
    activation["variables"] = celpy.celtypes.MapType(values)
    results = [_evaluate(validation["expression"], activation) for validation in spec["validations"]]
    for result in [*values.values(), *results]:
        if isinstance(result, celpy.CELEvalError):
            raise AssertionError(f"an expression failed to evaluate: {result}")
    return [validation["message"] for validation, result in zip(spec["validations"], results, strict=True)
            if not result]


def request(operation: str, resource: str, namespace: str = "", name: str = "", *, group: str = "",
            subresource: str = "", user: tuple[str, list[str] | None] = TEAM_SA) -> dict:
    """An AdmissionRequest as the API server fills it (admission.k8s.io/v1)."""
    return {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": group, "version": "v1", "kind": resource.rstrip("s").capitalize()},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "subResource": subresource,
        "name": name,
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": user[0], "uid": "u-1", **({"groups": user[1]} if user[1] is not None else {})},
        "dryRun": False,
    }


def namespace_object(name: str, labels: dict | None = None) -> dict:
    metadata = {"name": name, "uid": "ns-uid", "resourceVersion": "7"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {**metadata, **({"labels": labels} if labels
                                                                                  is not None else {})},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


ENFORCE = "pod-security.kubernetes.io/enforce"
BASE = {"kubernetes.io/metadata.name": "apps", ENFORCE: "baseline"}


def relabel(old: dict, new: dict, user: tuple[str, list[str] | None] = TEAM_SA) -> bool:
    # An update of a Namespace is sent to /api/v1/namespaces/<name>: its name is also request.namespace.
    return admitted(request("UPDATE", "namespaces", "apps", "apps", user=user), namespace_object("apps", new),
                    namespace_object("apps", old))


@pytest.mark.parametrize("new", [
    {**BASE, ENFORCE: "privileged"},
    {key: value for key, value in BASE.items() if key != ENFORCE},
    {**BASE, "pod-security.kubernetes.io/warn": "restricted"},
    {**BASE, "pod-security.kubernetes.io/enforce-version": "v1.30"},
], ids=["changed", "removed", "added", "added-version"])
def test_the_team_cannot_relabel_a_namespaces_pod_security(new):
    assert not relabel(BASE, new)


def test_a_namespace_without_labels_loses_nothing_and_gains_no_pod_security_label():
    assert relabel({}, {}) and not relabel({}, {ENFORCE: "privileged"})
    assert admitted(request("UPDATE", "namespaces", "apps", "apps"), namespace_object("apps"),
                    namespace_object("apps"))


def test_the_team_cannot_create_a_namespace_with_a_pod_security_label():
    create = request("CREATE", "namespaces", name="apps")
    assert not admitted(create, namespace_object("apps", {ENFORCE: "privileged"}))
    assert admitted(create, namespace_object("apps", {"team": "ml"}))
    assert admitted(create, namespace_object("apps"))


def test_other_labels_and_an_unchanged_pod_security_label_are_the_teams():
    assert relabel(BASE, {**BASE, "team": "ml", "cost-centre": "42"})
    assert relabel({**BASE, "team": "ml"}, BASE)


@pytest.mark.parametrize("user", LAB, ids=[user for user, _ in LAB])
def test_the_labs_own_identities_are_not_held(user):
    assert relabel(BASE, {**BASE, ENFORCE: "privileged"}, user=user)
    assert admitted(request("UPDATE", "configmaps", "kube-system", "hami-scheduler", user=user),
                    {"metadata": {"name": "hami-scheduler"}}, {"metadata": {"name": "hami-scheduler"}})
    assert admitted(request("UPDATE", "leases", "kube-node-lease", "w1", group="coordination.k8s.io", user=user),
                    {"metadata": {"name": "w1"}}, {"metadata": {"name": "w1"}})


@pytest.mark.parametrize("user", TEAM_MADE, ids=[user for user, _ in TEAM_MADE])
def test_identities_the_team_binds_its_rights_to_are_held_as_the_team_is(user):
    assert not relabel(BASE, {**BASE, ENFORCE: "privileged"}, user=user)
    assert not admitted(request("CONNECT", "pods", "kube-system", "hami-scheduler-0", subresource="exec", user=user))
    assert admitted(request("CREATE", "pods", "team-a", "x", user=user), {"metadata": {"name": "x"}})


PROTECTED = sorted({*EXEMPT_NAMESPACES, team_access.TEAM_NAMESPACE, "kube-public", "kube-node-lease"})


def test_the_protected_namespaces_are_the_lab_ones():
    assert tuple(PROTECTED) == team_access.PROTECTED_NAMESPACES
    assert {"kube-system", "kube-flannel", "kube-public", "lab-team-access"} <= set(PROTECTED)


@pytest.mark.parametrize("namespace", PROTECTED)
@pytest.mark.parametrize("operation, resource, subresource, group", [
    ("CREATE", "pods", "", ""),
    ("UPDATE", "configmaps", "", ""),
    ("DELETE", "secrets", "", ""),
    ("CREATE", "rolebindings", "", "rbac.authorization.k8s.io"),
    ("CONNECT", "pods", "exec", ""),
    ("CONNECT", "pods", "portforward", ""),
    ("CONNECT", "services", "proxy", ""),
    ("CREATE", "serviceaccounts", "token", ""),
    ("CREATE", "pods", "eviction", ""),
    ("UPDATE", "pods", "ephemeralcontainers", ""),
    ("UPDATE", "deployments", "scale", "apps"),
])
def test_every_write_in_a_lab_namespace_is_refused(namespace, operation, resource, subresource, group):
    assert not admitted(request(operation, resource, namespace, "x", group=group, subresource=subresource),
                        {"metadata": {"name": "x", "namespace": namespace}} if operation != "DELETE" else None)


@pytest.mark.parametrize("namespace", PROTECTED)
def test_a_lab_namespace_itself_cannot_be_deleted_or_relabelled(namespace):
    # The API server names the namespace both ways for /api/v1/namespaces/<name>; the name alone is enough.
    for request_namespace in (namespace, ""):
        delete = request("DELETE", "namespaces", request_namespace, namespace)
        assert not admitted(delete, None, namespace_object(namespace))
        update = request("UPDATE", "namespaces", request_namespace, namespace)
        assert not admitted(update, namespace_object(namespace, {"team": "x"}), namespace_object(namespace))


@pytest.mark.parametrize("namespace", ["default", "team-a", "kube-systems", "kube", "lab-team"])
def test_the_teams_own_namespaces_are_its_to_write(namespace):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": namespace}}
    exec_options = {"kind": "PodExecOptions", "apiVersion": "v1", "command": ["sh"], "stdin": True, "tty": True}
    assert admitted(request("CREATE", "pods", namespace, "x"), pod)
    assert admitted(request("CONNECT", "pods", namespace, "x", subresource="exec"), exec_options)
    assert admitted(request("CREATE", "serviceaccounts", namespace, "builder", subresource="token"),
                    {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1", "spec": {"audiences": []}})
    assert admitted(request("DELETE", "pods", namespace, "x"), None, pod)
    assert admitted(request("DELETE", "namespaces", namespace, namespace), None, namespace_object(namespace))


def test_the_in_cluster_api_service_is_not_the_teams():
    for resource, group in (("services", ""), ("endpoints", ""), ("endpointslices", "discovery.k8s.io")):
        assert not admitted(request("UPDATE", resource, "default", "kubernetes", group=group),
                            {"metadata": {"name": "kubernetes"}}, {"metadata": {"name": "kubernetes"}})
        assert admitted(request("UPDATE", resource, "default", "web", group=group),
                        {"metadata": {"name": "web"}}, {"metadata": {"name": "web"}})
    assert admitted(request("CREATE", "services", "team-a", "kubernetes"), {"metadata": {"name": "kubernetes"}})


RBAC = "rbac.authorization.k8s.io"


def binding(*subjects: dict) -> dict:
    return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "b"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"}, "subjects": list(subjects)}


@pytest.mark.parametrize("subject", [
    {"kind": "Group", "name": "system:unauthenticated", "apiGroup": RBAC},
    {"kind": "Group", "name": "system:authenticated", "apiGroup": RBAC},
    {"kind": "User", "name": "system:anonymous", "apiGroup": RBAC},
    {"kind": "Group", "name": "system:serviceaccounts", "apiGroup": RBAC},
])
def test_no_grant_to_the_built_in_users_and_groups_which_would_outlive_a_revocation(subject):
    for resource in ("clusterrolebindings", "rolebindings"):
        namespace = "team-a" if resource == "rolebindings" else ""
        ok = {"kind": "ServiceAccount", "name": "builder", "namespace": "team-a"}
        assert not admitted(request("CREATE", resource, namespace, "b", group=RBAC), binding(ok, subject))
        assert not admitted(request("UPDATE", resource, namespace, "b", group=RBAC), binding(subject),
                            binding(ok))
        assert admitted(request("CREATE", resource, namespace, "b", group=RBAC),
                        binding(ok, {"kind": "User", "name": "alice", "apiGroup": RBAC}))


@pytest.mark.parametrize("namespace", PROTECTED)
def test_no_grant_to_a_service_account_of_a_lab_namespace_which_the_guards_exempt(namespace):
    lab_account = {"kind": "ServiceAccount", "name": "hami-scheduler", "namespace": namespace}
    ok = {"kind": "ServiceAccount", "name": "builder", "namespace": "team-a"}
    for resource, where in (("clusterrolebindings", ""), ("rolebindings", "team-a")):
        assert not admitted(request("CREATE", resource, where, "b", group=RBAC), binding(ok, lab_account))
        assert not admitted(request("UPDATE", resource, where, "b", group=RBAC), binding(ok, lab_account),
                            binding(ok))
        assert admitted(request("CREATE", resource, where, "b", group=RBAC), binding(ok))


def test_the_teams_own_role_and_binding_are_the_labs():
    ours = binding({"kind": "ServiceAccount", "name": team_access.TEAM_ACCOUNT,
                    "namespace": team_access.TEAM_NAMESPACE})
    ours["metadata"]["name"] = ours["roleRef"]["name"] = team_access.TEAM_ROLE
    widened = {**ours, "subjects": [*ours["subjects"], {"kind": "ServiceAccount", "name": "ci", "namespace": "team-a"}]}
    role = {"metadata": {"name": team_access.TEAM_ROLE}, "rules": team_access.team_rules()}
    name = team_access.TEAM_ROLE
    assert not admitted(request("UPDATE", "clusterrolebindings", "", name, group=RBAC), widened, ours)
    assert not admitted(request("DELETE", "clusterrolebindings", "", name, group=RBAC), None, ours)
    assert not admitted(request("UPDATE", "clusterroles", "", name, group=RBAC), {**role, "rules": []}, role)
    assert not admitted(request("DELETE", "clusterroles", "", "", group=RBAC), None, role), "in a delete-collection"
    # A namespaced binding of that name, or another binding of the role, is the team's.
    ci = {"kind": "ServiceAccount", "name": "ci", "namespace": "team-a"}
    assert admitted(request("CREATE", "rolebindings", "team-a", name, group=RBAC),
                    {**ours, "kind": "RoleBinding", "metadata": {"name": name, "namespace": "team-a"},
                     "subjects": [ci]})
    assert admitted(request("CREATE", "clusterrolebindings", "", "ci", group=RBAC),
                    {**ours, "metadata": {"name": "ci"}, "subjects": [ci]})


def test_a_role_binding_subject_without_namespace_is_the_bindings_own_namespaces_account():
    unqualified = {"kind": "ServiceAccount", "name": "builder"}
    assert admitted(request("CREATE", "rolebindings", "team-a", "b", group=RBAC), binding(unqualified))
    assert admitted(request("CREATE", "rolebindings", "team-a", "b", group=RBAC),
                    binding({**unqualified, "namespace": ""}))


@pytest.mark.parametrize("subject", [
    *({"kind": "Group", "name": group, "apiGroup": RBAC} for group in team_access.LAB_GROUPS),
    *({"kind": "User", "name": user, "apiGroup": RBAC} for user in team_access.LAB_USERS),
    *({"kind": "User", "name": account(namespace, "default")[0], "apiGroup": RBAC} for namespace in EXEMPT_NAMESPACES),
], ids=lambda subject: f"{subject['kind']}-{subject['name']}")
def test_no_identity_the_guards_exempt_can_be_lent_the_teams_rights(subject):
    # Every user and group the policy's matchCondition lets through, named directly or as a ServiceAccount's user.
    for resource, where in (("clusterrolebindings", ""), ("rolebindings", "team-a")):
        assert not admitted(request("CREATE", resource, where, "b", group=RBAC), binding(subject))


def test_the_api_servers_own_roles_are_not_the_teams():
    role = {"metadata": {"name": "system:node"}, "rules": []}
    assert not admitted(request("UPDATE", "clusterroles", "", "system:node", group=RBAC), role, role)
    assert not admitted(request("DELETE", "clusterrolebindings", "", "system:kube-scheduler", group=RBAC), None,
                        binding())
    assert admitted(request("DELETE", "clusterroles", "", "ml-reader", group=RBAC), None, role)


def crd(conversion: dict | None) -> dict:
    spec = {"group": "ml.example.com", "names": {"plural": "jobs", "kind": "Job"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True}]}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "jobs.ml.example.com"}, "spec": {**spec, **({"conversion": conversion}
                                                                              if conversion is not None else {})}}


BY_URL = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                                             "clientConfig": {"url": "https://172.18.0.1:9443/convert"}}}
BY_SERVICE = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
    "service": {"namespace": "team-a", "name": "converter", "path": "/convert", "port": 443}}}}


def test_a_crd_may_not_convert_through_a_url_which_the_api_server_would_dial_outside_the_filter():
    def write(operation: str, new: dict, old: dict | None = None) -> bool:
        return admitted(request(operation, "customresourcedefinitions", "", "jobs.ml.example.com",
                                group="apiextensions.k8s.io"), new, old)

    assert not write("CREATE", crd(BY_URL))
    assert not write("UPDATE", crd(BY_URL), crd(BY_SERVICE))
    assert not write("UPDATE", crd(BY_URL), crd(BY_URL)), "one made before the guard cannot be kept by an update"
    for conversion in (BY_SERVICE, {"strategy": "None"}, None):
        assert write("CREATE", crd(conversion))
        assert write("UPDATE", crd(conversion), crd(BY_URL)), "and may be repaired"
    assert admitted(request("DELETE", "customresourcedefinitions", "", "jobs.ml.example.com",
                            group="apiextensions.k8s.io"), None, crd(BY_URL))


def deleted_in_a_collection(resource: str, namespace: str, item: dict, group: str = "") -> bool:
    """One item of a delete-collection, as the API server admits it: request.name empty, the item as oldObject
    (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/delete.go DeleteCollection: its static attributes carry
    the name ""; pkg/registry/rest/delete.go AdmissionToValidateObjectDeleteFunc adds each item as the old object)."""
    return admitted(request("DELETE", resource, namespace, "", group=group), None, item)


def test_a_delete_collection_is_judged_by_each_items_own_name():
    def named(name: str) -> dict:
        return {"metadata": {"name": name, "namespace": "default"}}

    for resource, group in (("services", ""), ("endpoints", ""), ("endpointslices", "discovery.k8s.io")):
        assert not deleted_in_a_collection(resource, "default", named("kubernetes"), group)
        assert deleted_in_a_collection(resource, "default", named("web"), group)
    for resource in ("clusterroles", "clusterrolebindings"):
        assert not deleted_in_a_collection(resource, "", {"metadata": {"name": "system:node"}}, RBAC)
        assert deleted_in_a_collection(resource, "", {"metadata": {"name": "ml-reader"}}, RBAC)
    assert not deleted_in_a_collection("rolebindings", "team-a", {"metadata": {"name": "system:controller:x"}}, RBAC)
    assert deleted_in_a_collection("rolebindings", "team-a", {"metadata": {"name": "ci"}}, RBAC)
    for namespace in PROTECTED:
        assert not deleted_in_a_collection("namespaces", "", namespace_object(namespace))
        assert not deleted_in_a_collection("configmaps", namespace, named("x")), "its namespace is in the request"
    assert deleted_in_a_collection("namespaces", "", namespace_object("team-a"))
    assert deleted_in_a_collection("configmaps", "team-a", named("x"))


# --- pods of the lab's namespaces: only who must write them (a node joined with a stolen bootstrap token) -------

KUBELET = ("system:node:kamaji-tenant-a-w1", ["system:nodes", "system:authenticated"])
ADMIN = ("kubernetes-admin", ["system:masters", "system:authenticated"])
SCHEDULER = ("system:kube-scheduler", ["system:authenticated"])
CONTROLLER_MANAGER = ("system:kube-controller-manager", ["system:authenticated"])
# The lab's kube-system ServiceAccounts whose tokens a node of the attacker's may request for the pods bound to
# it: HAMi chart 2.10.0's (charts/hami/templates/_helpers.tpl, release `hami`), kube-proxy's, flannel's, CoreDNS's
# and Konnectivity's agent (clastix/kamaji internal/resources/addons, konnectivity@26.8.2-edge), the metrics reader.
NOT_POD_WRITERS = [account("kube-system", "hami-scheduler"), account("kube-system", "hami-device-plugin"),
                   account("kube-system", "hami-mock-device-plugin"), account("kube-system", "kube-proxy"),
                   account("kube-flannel", "flannel"), account("kube-system", "coredns"),
                   account("kube-system", "konnectivity-agent"), account("kube-system", "lab-metrics-reader"),
                   KUBELET]
SERVICE_ACCOUNTS = [user for user in NOT_POD_WRITERS if user != KUBELET]
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kube-proxy-x7k2p", "namespace": "kube-system"},
       "spec": {"containers": [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.36.0"}]}}
ROOTED = {**POD, "spec": {"containers": [{"name": "kube-proxy", "image": "attacker.example/root:1"}]}}
DEBUG = {**POD, "spec": {**POD["spec"], "ephemeralContainers": [{"name": "debug", "image": "attacker.example/root:1"}]}}


def pod_write(operation: str, subresource: str = "", user=TEAM_SA, namespace: str = "kube-system") -> list[str]:
    new = {"CREATE": ROOTED, "UPDATE": DEBUG if subresource == "ephemeralcontainers" else ROOTED}.get(operation)
    return refusals(request(operation, "pods", namespace, "kube-proxy-x7k2p", subresource=subresource, user=user),
                    new, POD if operation in ("UPDATE", "DELETE") else None)


ATTACKS = [("CREATE", ""), ("UPDATE", ""), ("UPDATE", "ephemeralcontainers"), ("CONNECT", "exec"),
           ("CONNECT", "attach"), ("CONNECT", "portforward"), ("CONNECT", "proxy")]


@pytest.mark.parametrize("operation, subresource", ATTACKS, ids=lambda value: value or "pod")
@pytest.mark.parametrize("user", NOT_POD_WRITERS, ids=[user for user, _ in NOT_POD_WRITERS])
def test_a_lab_token_taken_on_a_joined_node_cannot_write_or_enter_the_labs_pods(user, operation, subresource):
    (first, *_) = pod_write(operation, subresource, user)
    assert first == team_access.guard_policy_spec()["validations"][0]["message"], "the answer names the rule"
    assert "only the admin and the control plane may write pods" in first


@pytest.mark.parametrize("namespace", PROTECTED)
def test_the_rule_holds_in_every_lab_namespace(namespace):
    hami = account("kube-system", "hami-device-plugin")
    assert pod_write("CREATE", "", hami, namespace) and pod_write("CONNECT", "exec", hami, namespace)
    assert not pod_write("CREATE", "", account("kube-system", "daemon-set-controller"), namespace)


@pytest.mark.parametrize("user", SERVICE_ACCOUNTS, ids=[user for user, _ in SERVICE_ACCOUNTS])
def test_a_lab_token_cannot_delete_the_labs_pods_nor_change_their_status(user):
    assert pod_write("DELETE", user=user) and pod_write("UPDATE", "status", user=user)
    assert pod_write("CREATE", "eviction", user=user)


# Each write the lab needs, by whom, and where it is made (kubernetes/kubernetes plugin/pkg/auth/authorizer/rbac/
# bootstrappolicy/controller_policy.go for the controllers' roles).
NEEDED = [
    (ADMIN, "CONNECT", "exec", "the lab's scripts and the validation suite, with the admin kubeconfig"),
    (ADMIN, "UPDATE", "ephemeralcontainers", "the operator's kubectl debug"),
    (ADMIN, "CREATE", "", "Pulumi and Kamaji's addons"),
    (account("kube-system", "daemon-set-controller"), "CREATE", "", "kube-proxy's, flannel's, HAMi's pods"),
    (account("kube-system", "daemon-set-controller"), "CREATE", "binding", "its role: pods/binding"),
    (account("kube-system", "replicaset-controller"), "CREATE", "", "CoreDNS's and HAMi's scheduler's pods"),
    (account("kube-system", "replicaset-controller"), "UPDATE", "", "adopting a pod (a patch)"),
    (account("kube-system", "deployment-controller"), "UPDATE", "", "its role: pods update"),
    (account("kube-system", "job-controller"), "CREATE", "", "a chart's hook Job"),
    (account("kube-system", "statefulset-controller"), "CREATE", "", "its role: pods create"),
    (account("kube-system", "generic-garbage-collector"), "DELETE", "", "a pod whose owner is gone"),
    (account("kube-system", "generic-garbage-collector"), "UPDATE", "", "an owner reference removed"),
    (account("kube-system", "pod-garbage-collector"), "UPDATE", "status", "a pod of a gone node marked"),
    (account("kube-system", "pod-garbage-collector"), "DELETE", "", "a pod of a gone node"),
    (account("kube-system", "node-controller"), "UPDATE", "status", "pods of a NotReady node"),
    (account("kube-system", "node-controller"), "DELETE", "", "taint eviction, on node-controller's account"),
    (account("kube-system", "disruption-controller"), "UPDATE", "status", "its role: pods/status"),
    (account("kube-system", "namespace-controller"), "DELETE", "", "a namespace's pods as it goes"),
    (CONTROLLER_MANAGER, "UPDATE", "", "kube-controller-manager's own user"),
    (SCHEDULER, "CREATE", "binding", "binding every pod but HAMi's"),
    (SCHEDULER, "UPDATE", "status", "PodScheduled false"),
    (SCHEDULER, "DELETE", "", "a preemption victim"),
    (KUBELET, "UPDATE", "status", "its pods' status"),
    (KUBELET, "DELETE", "", "its pods, once stopped"),
]


@pytest.mark.parametrize("user, operation, subresource, source", NEEDED,
                         ids=[f"{user[0].rsplit(':', 1)[-1]}-{operation}-{subresource or 'pod'}"
                              for user, operation, subresource, _ in NEEDED])
def test_every_pod_write_the_lab_needs_is_admitted(user, operation, subresource, source):
    for namespace in ("kube-system", "kube-flannel"):
        assert not pod_write(operation, subresource, user, namespace), source


@pytest.mark.parametrize("user", [account("kube-system", "daemon-set-controller"), SCHEDULER, CONTROLLER_MANAGER],
                         ids=["daemon-set-controller", "scheduler", "controller-manager"])
@pytest.mark.parametrize("operation, subresource", [("CONNECT", "exec"), ("CONNECT", "attach"),
                                                    ("UPDATE", "ephemeralcontainers")])
def test_the_control_plane_writes_pods_but_never_enters_them(user, operation, subresource):
    assert pod_write(operation, subresource, user)


def test_a_kubelet_only_updates_status_and_deletes():
    assert pod_write("CREATE", user=KUBELET), "a mirror pod: the lab's workers run no static pods"
    assert pod_write("UPDATE", user=KUBELET) and pod_write("DELETE", "eviction", user=KUBELET)
    assert not pod_write("UPDATE", "status", KUBELET) and not pod_write("DELETE", user=KUBELET)


def test_a_request_without_a_subresource_key_is_judged_as_one_without_a_subresource():
    # The API server leaves subResource out when there is none (admission.k8s.io/v1: omitempty).
    def without_key(operation: str, user) -> list[str]:
        bare = {key: value for key, value in request(operation, "pods", "kube-system", "p", user=user).items()
                if key != "subResource"}
        return refusals(bare, ROOTED if operation != "DELETE" else None, POD if operation != "CREATE" else None)

    assert not without_key("DELETE", KUBELET) and without_key("UPDATE", KUBELET)
    assert without_key("CREATE", account("kube-system", "hami-scheduler"))
    assert not without_key("CREATE", account("kube-system", "replicaset-controller"))


@pytest.mark.parametrize("user", [account("team-a", "daemon-set-controller"), account("kube-flannel",
                                                                                      "daemon-set-controller"),
                                  ("system:kube-scheduler-x", ["system:authenticated"]),
                                  ("system:serviceaccount:kube-system:daemon-set-controller-x",
                                   ["system:serviceaccounts", "system:serviceaccounts:kube-system"])],
                         ids=["other-namespace", "flannel-namespace", "scheduler-prefix", "controller-prefix"])
def test_only_the_controllers_own_accounts_write_pods(user):
    assert pod_write("CREATE", user=user)


@pytest.mark.parametrize("user", NOT_POD_WRITERS, ids=[user for user, _ in NOT_POD_WRITERS])
def test_the_labs_other_writes_stay_admitted(user):
    # Events, leases and node writes in the lab's namespaces or cluster-wide are not pods.
    assert admitted(request("CREATE", "events", "kube-system", "e", user=user), {"metadata": {"name": "e"}})
    lease = {"metadata": {"name": "hami-scheduler"}}
    assert admitted(request("UPDATE", "leases", "kube-system", "hami-scheduler", group="coordination.k8s.io",
                            user=user), lease, lease)
    assert admitted(request("UPDATE", "nodes", "", "w1", user=user), {"metadata": {"name": "w1"}},
                    {"metadata": {"name": "w1"}})


HAMI_POD = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "hami-scheduler-5d9c7-abcde", "namespace": "kube-system",
                         "labels": {"app.kubernetes.io/component": "hami-scheduler", "app.kubernetes.io/name": "hami",
                                    "app.kubernetes.io/instance": "hami", "hami.io/scheduler-role": "follower"},
                         "annotations": {"checksum/config": "9f2"}},
            "spec": {"containers": [{"name": "vgpu-scheduler-extender", "image": "projecthami/hami:v2.10.0"}]}}


def relabelled(labels: dict, **changes) -> dict:
    return {**HAMI_POD, **changes, "metadata": {**HAMI_POD["metadata"], "labels": labels}}


HAMI_SCHEDULER = account("kube-system", "hami-scheduler")


def hami_scheduler_update(new: dict, old: dict = HAMI_POD, user=HAMI_SCHEDULER,
                          namespace: str = "kube-system", subresource: str = "") -> bool:
    return admitted(request("UPDATE", "pods", namespace, old["metadata"]["name"], subresource=subresource,
                            user=user), new, old)


def test_hamis_scheduler_still_labels_its_own_pods_leader_or_follower():
    # Its Service selects the leader by this label (charts/hami/templates/scheduler/service.yaml@v2.10.0): refused,
    # the webhook and the metrics would lose their endpoint.
    labels = HAMI_POD["metadata"]["labels"]
    assert hami_scheduler_update(relabelled({**labels, "hami.io/scheduler-role": "leader"}))
    unlabelled = relabelled({key: value for key, value in labels.items() if key != "hami.io/scheduler-role"})
    assert hami_scheduler_update(relabelled(labels), unlabelled), "a new pod gets its first role label"


def test_hamis_scheduler_token_changes_nothing_else_of_a_pod():
    labels, leader = HAMI_POD["metadata"]["labels"], {**HAMI_POD["metadata"]["labels"],
                                                     "hami.io/scheduler-role": "leader"}
    rooted = {"containers": [{"name": "vgpu-scheduler-extender", "image": "attacker.example/root:1"}]}
    assert not hami_scheduler_update(relabelled(leader, spec=rooted)), "a new image with the label"
    assert not hami_scheduler_update(relabelled({**labels, "team": "x"})), "another label"
    assert not hami_scheduler_update(relabelled({**labels, "app.kubernetes.io/component": "x"}))
    changed = {**HAMI_POD, "metadata": {**HAMI_POD["metadata"], "labels": leader, "annotations": {}}}
    assert not hami_scheduler_update(changed), "an annotation"
    # Only its own pods, in its own namespace, by its own account, and no subresource.
    proxy = {**POD, "metadata": {**POD["metadata"], "labels": {"k8s-app": "kube-proxy"}}}
    assert not hami_scheduler_update({**proxy, "metadata": {**proxy["metadata"],
                                                            "labels": {"k8s-app": "kube-proxy",
                                                                       "hami.io/scheduler-role": "leader"}}}, proxy)
    assert not hami_scheduler_update(relabelled(leader), namespace="kube-flannel")
    assert not hami_scheduler_update(relabelled(leader), user=account("kube-system", "hami-device-plugin"))
    assert not hami_scheduler_update(relabelled(leader), subresource="ephemeralcontainers")


@pytest.mark.parametrize("operation, subresource", [("UPDATE", ""), ("CREATE", "binding")])
@pytest.mark.parametrize("user", [account("kube-system", "hami-scheduler"), account("kube-system",
                                                                                    "hami-device-plugin")],
                         ids=["hami-scheduler", "hami-device-plugin"])
def test_hami_still_patches_and_binds_gpu_pods_in_team_namespaces(user, operation, subresource):
    # HAMi's Bind patches the pod's annotations and binds it (Project-HAMi/HAMi pkg/scheduler/scheduler.go,
    # pkg/util/util.go@v2.10.0); its NVIDIA plugin patches the pod it allocates for (nvinternal/plugin/server.go).
    assert not pod_write(operation, subresource, user, "team-a")


@pytest.mark.parametrize("operation, subresource", [*ATTACKS, ("DELETE", "")], ids=lambda value: value or "pod")
def test_the_team_keeps_every_pod_write_in_its_own_namespaces(operation, subresource):
    assert not pod_write(operation, subresource, TEAM_SA, "team-a")


# --- the role, matched as RBAC matches ---------------------------------------------------------------------------


def rule_allows(rule: dict, verb: str, group: str, resource: str, subresource: str, name: str) -> bool:
    """One PolicyRule against a resource request (kubernetes/kubernetes pkg/apis/rbac/v1/evaluation_helpers.go
    VerbMatches, APIGroupMatches, ResourceMatches with `*` and `*/subresource`, ResourceNameMatches)."""
    if not ({"*", verb} & set(rule.get("verbs", []))) or not ({"*", group} & set(rule.get("apiGroups", []))):
        return False
    combined = f"{resource}/{subresource}" if subresource else resource
    resources = rule.get("resources", [])
    if not any(found in ("*", combined) or (subresource and found == f"*/{subresource}") for found in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or name in names


def role_allows(verb: str, group: str, resource: str, subresource: str = "", name: str = "") -> bool:
    return any(rule_allows(rule, verb, group, resource, subresource, name) for rule in team_access.team_rules())


ALLOWED = [
    ("create", "", "namespaces", ""), ("delete", "", "namespaces", ""), ("create", "", "pods", ""),
    ("create", "", "pods", "exec"), ("get", "", "pods", "exec"), ("get", "", "pods", "log"),
    ("create", "", "pods", "portforward"), ("create", "", "pods", "attach"), ("create", "", "pods", "eviction"),
    ("patch", "", "pods", "ephemeralcontainers"), ("create", "", "services", ""), ("get", "", "services", "proxy"),
    ("create", "", "configmaps", ""), ("get", "", "secrets", ""), ("create", "", "secrets", ""),
    ("create", "", "persistentvolumeclaims", ""), ("create", "", "serviceaccounts", ""),
    ("create", "", "serviceaccounts", "token"), ("create", "", "events", ""), ("create", "", "limitranges", ""),
    ("create", "apps", "deployments", ""), ("patch", "apps", "deployments", "scale"),
    ("create", "apps", "statefulsets", ""), ("create", "apps", "daemonsets", ""), ("create", "batch", "jobs", ""),
    ("create", "batch", "cronjobs", ""), ("create", "autoscaling", "horizontalpodautoscalers", ""),
    ("create", "policy", "poddisruptionbudgets", ""), ("create", "networking.k8s.io", "ingresses", ""),
    ("create", "networking.k8s.io", "networkpolicies", ""), ("create", "discovery.k8s.io", "endpointslices", ""),
    ("update", "coordination.k8s.io", "leases", ""),
    ("create", "apiextensions.k8s.io", "customresourcedefinitions", ""),
    ("create", RBAC, "roles", ""), ("create", RBAC, "rolebindings", ""), ("create", RBAC, "clusterroles", ""),
    ("create", RBAC, "clusterrolebindings", ""), ("get", "", "nodes", ""), ("list", "", "nodes", ""),
    ("watch", "", "nodes", ""), ("list", "", "persistentvolumes", ""), ("list", "", "resourcequotas", ""),
    ("list", "storage.k8s.io", "storageclasses", ""),
    ("list", "admissionregistration.k8s.io", "validatingadmissionpolicies", ""),
    ("create", "authorization.k8s.io", "selfsubjectaccessreviews", ""),
    ("create", "authentication.k8s.io", "selfsubjectreviews", ""),
]

REFUSED = [
    # Admission: an admission policy does not guard these objects; only RBAC keeps them the lab's.
    ("create", "admissionregistration.k8s.io", "validatingadmissionpolicies", ""),
    ("update", "admissionregistration.k8s.io", "validatingadmissionpolicies", ""),
    ("delete", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", ""),
    ("patch", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", ""),
    ("create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", ""),
    ("delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", ""),
    # A webhook by URL would be dialled from the management cluster, outside the network filter.
    ("create", "admissionregistration.k8s.io", "validatingwebhookconfigurations", ""),
    ("update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", ""),
    ("patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", ""),
    ("create", "admissionregistration.k8s.io", "mutatingadmissionpolicies", ""),
    # Certificates: approval and signing (a CSR for system:masters would make a master certificate).
    ("update", "certificates.k8s.io", "certificatesigningrequests", "approval"),
    ("update", "certificates.k8s.io", "certificatesigningrequests", "status"),
    ("approve", "certificates.k8s.io", "signers", ""),
    ("sign", "certificates.k8s.io", "signers", ""),
    # Becoming someone else.
    ("impersonate", "", "users", ""), ("impersonate", "", "groups", ""), ("impersonate", "", "serviceaccounts", ""),
    ("impersonate", "authentication.k8s.io", "uids", ""), ("impersonate", "authentication.k8s.io", "userextras", ""),
    ("escalate", RBAC, "clusterroles", ""), ("escalate", RBAC, "roles", ""),
    ("bind", RBAC, "clusterroles", ""), ("bind", RBAC, "roles", ""),
    # The kubelet's API (exec into the lab's pods), and nodes beyond reading.
    ("get", "", "nodes", "proxy"), ("create", "", "nodes", "proxy"), ("patch", "", "nodes", ""),
    ("update", "", "nodes", ""), ("delete", "", "nodes", ""), ("patch", "", "nodes", "status"),
    ("create", "", "nodes", ""),
    # A whole API group taken over.
    ("create", "apiregistration.k8s.io", "apiservices", ""), ("update", "apiregistration.k8s.io", "apiservices", ""),
    # Host paths, runtime handlers, preemption, the operator's quotas.
    ("create", "", "persistentvolumes", ""), ("create", "storage.k8s.io", "storageclasses", ""),
    ("create", "node.k8s.io", "runtimeclasses", ""), ("create", "scheduling.k8s.io", "priorityclasses", ""),
    ("update", "", "resourcequotas", ""), ("delete", "", "resourcequotas", ""),
    # Tokens of anyone, reviewed.
    ("create", "authentication.k8s.io", "tokenreviews", ""),
    ("create", "authorization.k8s.io", "subjectaccessreviews", ""),
    # Pods bound by hand bypass the scheduler (HAMi's).
    ("create", "", "pods", "binding"), ("create", "", "bindings", ""),
]


@pytest.mark.parametrize("verb, group, resource, subresource", ALLOWED)
def test_the_team_runs_its_workloads(verb, group, resource, subresource):
    assert role_allows(verb, group, resource, subresource)


@pytest.mark.parametrize("verb, group, resource, subresource", REFUSED)
def test_the_team_cannot_lift_a_guard_or_become_someone_else(verb, group, resource, subresource):
    assert not role_allows(verb, group, resource, subresource)


def test_the_role_lists_everything_it_grants():
    # RBAC has no deny: one wildcard would grant every guard above, now or in a later API.
    for rule in team_access.team_rules():
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key] and not any(item.startswith("*/") for item in rule[key]), rule
        assert not {"escalate", "bind", "impersonate", "approve", "sign"} & set(rule["verbs"]), rule


def test_the_matcher_treats_wildcards_as_rbac_does():
    # So the table above cannot pass because of the matcher: the same requests against rules with wildcards.
    everything = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
    assert rule_allows(everything, "get", "", "nodes", "proxy", "")
    assert rule_allows({"apiGroups": [""], "resources": ["*/proxy"], "verbs": ["get"]}, "get", "", "nodes", "proxy",
                       "")
    assert not rule_allows({"apiGroups": [""], "resources": ["*/proxy"], "verbs": ["get"]}, "get", "", "nodes", "", "")
    assert not rule_allows({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}, "get", "", "nodes", "proxy",
                           "")
    assert not rule_allows({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]},
                           "get", "", "pods", "", "b")


def test_the_kubeconfig_carries_the_decoded_token_and_never_the_admins_key():
    admin = yaml.safe_dump({
        "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.9:6443",
                                               "certificate-authority-data": "Q0E="}}],
        "users": [{"name": "admin", "user": {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "admin"}}], "current-context": "x",
    })
    answer = json.dumps({"token": base64.b64encode(b"eyJhbGciOi.team").decode(), "ca.crt": "Q0E="})
    text = team_access.team_kubeconfig("tenant-a", admin, answer)
    assert "a2V5" not in text and "Y2VydA==" not in text
    config = yaml.safe_load(text)
    assert config["users"] == [{"name": "tenant-a-team", "user": {"token": "eyJhbGciOi.team"}}]
    assert config["clusters"][0]["cluster"] == {"server": "https://10.0.0.9:6443", "certificate-authority-data": "Q0E="}
    with pytest.raises(ValueError, match="no token"):
        team_access.team_kubeconfig("tenant-a", admin, '{"token": "", "ca.crt": "Q0E="}')
