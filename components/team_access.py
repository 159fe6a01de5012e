"""A tenant's team credential: a ServiceAccount token that runs the tenant's workloads, cannot lift the lab's
guards, and can be taken back (`make revoke-team`) without rotating the tenant's CA.

The admin kubeconfig Kamaji issues is in group system:masters, which every request of is allowed before RBAC is
asked (kubernetes/kubernetes pkg/kubeapiserver/authorizer/config.go, the privileged-groups authorizer), and which
may delete any admission policy. The team's ServiceAccount is bounded three ways:

- RBAC (team_rules): an explicit list of what a team runs, and nothing that lifts a guard or becomes someone else.
- A ValidatingAdmissionPolicy (guard_policy_spec) that, for every identity but the lab's, refuses writes into the
  lab's namespaces and any change to a namespace's Pod Security labels; and, for the lab's too, any write to a pod of
  the lab's namespaces that only the admin, the control plane or a kubelet makes (refused_pod_write). The team cannot
  change the policy: it has no write to admissionregistration.k8s.io, which admission does not guard
  (staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go,
  IsExemptAdmissionConfigurationResource).
- Its token is a legacy token Secret: deleting the Secret ends it at once (--service-account-lookup, the API
  server's default, which Kamaji does not set: clastix/kamaji internal/builders/controlplane/deployment.go
  @26.8.2-edge), and the team cannot mint bound tokens for the account (its namespace is guarded).

The kubernetes/kubernetes files named here were read in the search index's stored copies (the repository is too
large to mirror here), not checked line by line at the v1.36.0 tag.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.commands import script_command
from components.gpu_sharing import HAMI_NAMESPACE, HAMI_RELEASE, HAMI_SCHEDULER_LEADER_LABELS
from components.kubeconfig import current_cluster
from components.observability_values import token_secret_data
from components.pod_security import EXEMPT_NAMESPACES

TEAM_NAMESPACE = "lab-team-access"
"""Holds the team's ServiceAccount and its token Secret: the lab's, so the team cannot write there."""
TEAM_ACCOUNT = "team"
TEAM_ROLE = "lab-team"
TEAM_POLICY = "lab-team-guards"
POD_SECURITY_LABEL_PREFIX = "pod-security.kubernetes.io/"
# kube-public holds cluster-info, which steers every worker's `kubeadm join`; kube-node-lease holds the kubelets'
# heartbeats, which a forged lease would keep a dead node Ready with.
PROTECTED_NAMESPACES: tuple[str, ...] = tuple(
    sorted({*EXEMPT_NAMESPACES, TEAM_NAMESPACE, "kube-public", "kube-node-lease"})
)
# The in-cluster API address every pod (the lab's HAMi and kube-proxy too) trusts: its Service, Endpoints and
# EndpointSlice are all named `kubernetes` in `default` (kubernetes/kubernetes pkg/controlplane/controller/
# kubernetesservice/controller.go). Rewritten, they would send lab pods' tokens to a team pod.
API_SERVICE = ("default", "kubernetes", ("services", "endpoints", "endpointslices"))

WRITE = ["create", "update", "patch", "delete", "deletecollection"]
READ = ["get", "list", "watch"]
ALL = [*READ, *WRITE]


# Who the guards do not hold: the lab's own identities (but for pods: refused_pod_write). Everyone else is held, not
# only the team's ServiceAccount: the team may bind the rights it has to identities of its own (a ServiceAccount of its
# namespace), which must not be a way around the guards, nor outlive a revocation with more than the team's rights.
# system:masters: the admin kubeconfigs (the operator, Pulumi, Kamaji); system:nodes: the kubelets; the ServiceAccounts
# of the lab's namespaces (HAMi, kube-proxy, CoreDNS, flannel, the controller-manager's controllers:
# kubernetes/kubernetes pkg/serviceaccount/util.go MakeGroupNames); and the control plane's own users
# (staging/src/k8s.io/apiserver/pkg/authentication/user/user.go).
LAB_GROUPS: tuple[str, ...] = (
    "system:masters", "system:nodes", *(f"system:serviceaccounts:{namespace}" for namespace in EXEMPT_NAMESPACES),
)
LAB_USERS: tuple[str, ...] = ("system:apiserver", "system:kube-controller-manager", "system:kube-scheduler")

# Pods of the lab's namespaces run privileged, where Pod Security does not apply: writing one, or exec into one, is
# host root. A node joined with a stolen bootstrap token may request the tokens of the lab's DaemonSet pods that land
# on it (the Node authorizer), so exemption as a lab ServiceAccount is not enough to write pods there: only the
# identities that must do so may. Kamaji runs kube-controller-manager with --use-service-account-credentials
# (clastix/kamaji internal/builders/controlplane/deployment.go@26.8.2-edge), so each controller writes on a
# kube-system ServiceAccount of its own: these are those whose bootstrap role writes pods or their subresources
# (kubernetes/kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go; node lifecycle and
# taint eviction run on node-controller's, device taint eviction on its own: cmd/kube-controller-manager/app/
# core.go). Of the other lab ServiceAccounts only HAMi's scheduler writes pods there, its own role label
# (HAMI_ROLE_LABEL); it and the device plugins otherwise patch and bind only pods that ask for HAMi's GPUs
# (Project-HAMi/HAMi pkg/scheduler/webhook.go, pkg/util/util.go@v2.10.0), which none of the lab's do (its
# kube-scheduler, bound to system:kube-scheduler by charts/hami/templates/scheduler/clusterrolebinding.yaml, may
# no longer preempt a lab pod for one); flannel,
# kube-proxy (system:node-proxier), CoreDNS, Konnectivity's agent and the metrics reader have no pod write at all
# (flannel-io/flannel chart/kube-flannel/templates/rbac.yaml@v0.28.9, clastix/kamaji
# internal/resources/konnectivity/cluster_role_binding_resource.go@26.8.2-edge). Nor does any of them write workloads
# (DaemonSets, Deployments...), whose pod templates the controllers above turn into pods, so RBAC alone keeps those
# the admin's and the controllers'.
POD_CONTROLLERS: tuple[str, ...] = (
    "cronjob-controller", "daemon-set-controller", "deployment-controller", "device-taint-eviction-controller",
    "disruption-controller", "ephemeral-volume-controller", "generic-garbage-collector", "job-controller",
    "namespace-controller", "node-controller", "persistent-volume-binder", "pod-garbage-collector",
    "replicaset-controller", "replication-controller", "resource-claim-controller", "statefulset-controller",
    "storage-version-migrator-controller",
)
# The control plane's writers: they create, bind, update and delete pods, never exec nor add an ephemeral
# container. The scheduler binds, sets the PodScheduled condition and deletes preemption victims.
POD_WRITERS: tuple[str, ...] = (
    "system:kube-controller-manager", "system:kube-scheduler",
    *(f"system:serviceaccount:kube-system:{controller}" for controller in POD_CONTROLLERS),
)
# HAMi's scheduler labels its own pods leader or follower, and its Service (and the lab's metrics Service) selects
# the leader by that label (pkg/scheduler/scheduler.go updateSchedulerLabel, pkg/util/util.go PatchPodLabels, a
# merge patch of the labels alone@v2.10.0). Its account is the chart's `<fullname>-scheduler`, the fullname being
# the release's name (charts/hami/templates/_helpers.tpl@v2.10.0). That label on its own pods is all it may change.
HAMI_SCHEDULER_ACCOUNT = f"system:serviceaccount:{HAMI_NAMESPACE}:{HAMI_RELEASE}-scheduler"
HAMI_ROLE_LABEL = "hami.io/scheduler-role"
HAMI_COMPONENT_LABEL = "app.kubernetes.io/component"


def team_rules() -> list[dict]:
    """What the team may do, listed (RBAC has no deny, so a wildcard would include every guard).

    Left out, each for a reason (kubernetes/kubernetes plugin/pkg/auth/authorizer/rbac and pkg/registry/rbac):
    admissionregistration.k8s.io writes (admission skips those objects, so only RBAC keeps the guard);
    certificates.k8s.io approval and signing (a CSR approved for system:masters is a master certificate);
    impersonate; the escalate and bind verbs (without them a role or binding holds only rights the team has:
    pkg/registry/rbac/escalation_check.go); nodes/proxy (the kubelet's exec into the lab's pods);
    apiregistration.k8s.io writes (an APIService takes over a whole API group); node writes (RBAC cannot allow
    cordon alone: a node patch may also move its labels, taints and the lab's annotations); PersistentVolume,
    StorageClass, RuntimeClass and PriorityClass writes (a hostPath volume and a runtime handler are host access
    that Pod Security does not see in a PVC; a priority class preempts the lab's pods); ResourceQuota writes (the
    GPU quotas are the operator's); token and access reviews of others; pod bindings (they bypass HAMi's scheduler).
    """
    return [
        {"apiGroups": [""], "resources": [
            "namespaces", "pods", "services", "endpoints", "configmaps", "secrets", "persistentvolumeclaims",
            "serviceaccounts", "replicationcontrollers", "replicationcontrollers/scale", "limitranges",
            "podtemplates", "events",
        ], "verbs": ALL},
        {"apiGroups": [""], "resources": [
            "pods/exec", "pods/attach", "pods/portforward", "pods/proxy", "services/proxy",
        ], "verbs": ["get", "create", "update", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["pods/log", "pods/status", "services/status", "resourcequotas",
                                          "resourcequotas/status", "nodes", "nodes/status", "persistentvolumes",
                                          "namespaces/status"],
         "verbs": READ},
        {"apiGroups": [""], "resources": ["pods/eviction", "serviceaccounts/token"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["get", "update", "patch"]},
        {"apiGroups": ["apps"], "resources": [
            "deployments", "deployments/scale", "statefulsets", "statefulsets/scale", "replicasets",
            "replicasets/scale", "daemonsets", "controllerrevisions",
        ], "verbs": ALL},
        {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ALL},
        {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": ALL},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ALL},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "networkpolicies"], "verbs": ALL},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingressclasses"], "verbs": READ},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ALL},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ALL},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ALL},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ALL},
        {"apiGroups": ["rbac.authorization.k8s.io"],
         "resources": ["roles", "rolebindings", "clusterroles", "clusterrolebindings"], "verbs": ALL},
        {"apiGroups": ["storage.k8s.io"],
         "resources": ["storageclasses", "csidrivers", "csinodes", "volumeattachments"], "verbs": READ},
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": READ},
        {"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"], "verbs": READ},
        {"apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"], "verbs": READ},
        # Seeing the guards helps a team understand a refusal; changing them is what it may not do.
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": [
            "validatingadmissionpolicies", "validatingadmissionpolicybindings",
        ], "verbs": READ},
        {"apiGroups": ["authorization.k8s.io"],
         "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
    ]


def _cel_strings(values) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


def guard_variables() -> list[dict]:
    """Each written never to fail: an object is read only for the operations that carry it (DELETE has no
    `object`, CREATE and CONNECT no `oldObject`), so evaluated eagerly each means the same as lazily."""

    def labels(name: str, operations: tuple[str, ...]) -> str:
        return (f"request.operation in {_cel_strings(operations)} && has({name}.metadata) && "
                f"has({name}.metadata.labels) ? {name}.metadata.labels : {{}}")

    return [
        {"name": "isNamespace", "expression": "request.resource.group == '' && "
                                              "request.resource.resource == 'namespaces'"},
        # A delete-collection admits each item with an empty request.name and the item as oldObject
        # (kubernetes/apiserver pkg/endpoints/handlers/delete.go DeleteCollection, pkg/registry/rest/delete.go
        # AdmissionToValidateObjectDeleteFunc, @v0.36.0): the name-based guards read the object's own name there.
        {"name": "objectName", "expression": "request.name != '' ? request.name : ("
                                             "request.operation == 'DELETE' && has(oldObject.metadata) && "
                                             "has(oldObject.metadata.name) ? oldObject.metadata.name : '')"},
        {"name": "newLabels", "expression": labels("object", ("CREATE", "UPDATE"))},
        {"name": "oldLabels", "expression": labels("oldObject", ("UPDATE", "DELETE"))},
    ]


def lab_identity() -> str:
    """Whether the request is made by one of the lab's own identities (LAB_USERS, LAB_GROUPS)."""
    return (f"request.userInfo.username in {_cel_strings(LAB_USERS)} || (has(request.userInfo.groups) && "
            f"request.userInfo.groups.exists(g, g in {_cel_strings(LAB_GROUPS)}))")


def _hami_role_relabel(subresource: str) -> str:
    """Whether the request is HAMi's scheduler changing nothing but HAMI_ROLE_LABEL of one of its own pods."""
    labels = {name: f"(has({name}.metadata.labels) ? {name}.metadata.labels : {{}})"
              for name in ("object", "oldObject")}
    annotations = {name: f"(has({name}.metadata.annotations) ? {name}.metadata.annotations : {{}})"
                   for name in ("object", "oldObject")}
    new, old = labels["object"], labels["oldObject"]
    component = HAMI_SCHEDULER_LEADER_LABELS[HAMI_COMPONENT_LABEL]
    return (f"request.userInfo.username == '{HAMI_SCHEDULER_ACCOUNT}' && request.namespace == '{HAMI_NAMESPACE}' && "
            f"request.operation == 'UPDATE' && {subresource} == '' && "
            f"'{HAMI_COMPONENT_LABEL}' in {old} && {old}['{HAMI_COMPONENT_LABEL}'] == '{component}' && "
            f"object.spec == oldObject.spec && {annotations['object']} == {annotations['oldObject']} && "
            f"{new}.all(k, k == '{HAMI_ROLE_LABEL}' || (k in {old} && {old}[k] == {new}[k])) && "
            f"{old}.all(k, k == '{HAMI_ROLE_LABEL}' || k in {new})")


def refused_pod_write() -> str:
    """Whether the request writes a pod of the lab's namespaces (a subresource, exec and the other CONNECTs
    included) without being one the lab needs: the admin's, the control plane's but exec and ephemeral containers,
    a kubelet's status update and delete (NodeRestriction keeps both to its own node's pods:
    plugin/pkg/admission/noderestriction/admission.go), and HAMi's scheduler's role label. A kubelet's mirror pod
    is refused too: the lab's workers run no static pods."""
    groups = "(has(request.userInfo.groups) ? request.userInfo.groups : [])"
    # Absent from the request, not empty, when there is none (admission.k8s.io/v1 AdmissionRequest: omitempty).
    subresource = "(has(request.subResource) ? request.subResource : '')"
    return (f"request.resource.group == '' && request.resource.resource == 'pods' && "
            f"request.namespace in {_cel_strings(PROTECTED_NAMESPACES)} && "
            f"!({groups}.exists(g, g == 'system:masters') || "
            f"(request.userInfo.username in {_cel_strings(POD_WRITERS)} && request.operation != 'CONNECT' && "
            f"{subresource} != 'ephemeralcontainers') || "
            f"({groups}.exists(g, g == 'system:nodes') && "
            f"(request.operation == 'UPDATE' && {subresource} == 'status' || "
            f"request.operation == 'DELETE' && {subresource} == '')) || "
            f"({_hami_role_relabel(subresource)}))")


def guard_policy_spec() -> dict:
    """The ValidatingAdmissionPolicy that keeps the team's hands off the lab's guards.

    Matching (staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/matching/matching.go): resourceRules
    with `*/*` take every subresource (pods/exec is CONNECT, serviceaccounts/token is CREATE; the policy plugin
    handles CONNECT: .../policy/validating/plugin.go NewPlugin); an empty namespaceSelector matches every request,
    a Namespace object included; matchConditions leave out the lab's own identities but for their pod writes in
    the lab's namespaces (refused_pod_write). For a request on a Namespace the
    API server gives its name as request.namespace too (staging/src/k8s.io/apiserver/pkg/endpoints/request/
    requestinfo.go), a create as request.name; both are checked. On UPDATE oldObject is the stored object,
    on CREATE it is null.
    """
    protected = _cel_strings(PROTECTED_NAMESPACES)
    namespace, name, resources = API_SERVICE
    prefix = POD_SECURITY_LABEL_PREFIX
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [{
                "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*", "*/*"],
                "operations": ["CREATE", "UPDATE", "DELETE", "CONNECT"],
            }],
        },
        "matchConditions": [
            {"name": "not-the-lab-or-a-refused-pod-write",
             "expression": f"!({lab_identity()}) || ({refused_pod_write()})"},
        ],
        "variables": guard_variables(),
        "validations": [
            {
                # First, so its message is the answer: the API server reports the first refusal (staging/src/
                # k8s.io/apiserver/pkg/admission/plugin/policy/validating/dispatcher.go), and the next one
                # refuses every write in those namespaces too.
                "expression": f"!({refused_pod_write()})",
                "message": "only the admin and the control plane may write pods of the lab's namespaces "
                           f"({', '.join(PROTECTED_NAMESPACES)}), exec into them or add ephemeral containers; "
                           "a kubelet may only update their status and delete its own",
                "reason": "Forbidden",
            },
            {
                "expression": f"!(request.namespace in {protected}) && "
                              f"!(variables.isNamespace && variables.objectName in {protected})",
                "message": "the team credential may not change the lab's namespaces "
                           f"({', '.join(PROTECTED_NAMESPACES)})",
                "reason": "Forbidden",
            },
            {
                "expression": f"!(request.namespace == '{namespace}' && variables.objectName == '{name}' && "
                              f"request.resource.resource in {_cel_strings(resources)})",
                "message": f"the team credential may not change the API server's own Service {namespace}/{name}",
                "reason": "Forbidden",
            },
            {
                # The API server's own roles and bindings (the lab's nodes and controllers run on them), and any
                # grant to the built-in users and groups (system:unauthenticated would outlive a revocation).
                "expression": "!(request.resource.group == 'rbac.authorization.k8s.io' && "
                              "variables.objectName.startsWith('system:')) && "
                              "!(request.resource.group == 'rbac.authorization.k8s.io' && "
                              "request.resource.resource in ['rolebindings', 'clusterrolebindings'] && "
                              "request.operation in ['CREATE', 'UPDATE'] && has(object.subjects) && "
                              "object.subjects.exists(s, s.kind in ['User', 'Group'] && s.name.startsWith('system:')))",
                "message": "the team credential may not change system: roles and bindings, nor bind system: users "
                           "and groups",
                "reason": "Forbidden",
            },
            {
                # The team's own role and binding: a subject it added to the binding would keep the team's rights
                # past a revocation unseen, and the role is the lab's statement of those rights.
                "expression": "!(request.resource.group == 'rbac.authorization.k8s.io' && "
                              "request.resource.resource in ['clusterroles', 'clusterrolebindings'] && "
                              f"variables.objectName == '{TEAM_ROLE}')",
                "message": "the team credential may not change the lab's ClusterRole and ClusterRoleBinding "
                           f"{TEAM_ROLE}",
                "reason": "Forbidden",
            },
            {
                # A ServiceAccount of the lab's namespaces is exempt from these guards (LAB_GROUPS): bound to the
                # team's rights, it would hold them unguarded. A RoleBinding's subject without a namespace is of
                # the binding's own (kubernetes/kubernetes
                # pkg/registry/rbac/validation/rule.go appliesToUser).
                "expression": "!(request.resource.group == 'rbac.authorization.k8s.io' && "
                              "request.resource.resource in ['rolebindings', 'clusterrolebindings'] && "
                              "request.operation in ['CREATE', 'UPDATE'] && has(object.subjects) && "
                              "object.subjects.exists(s, s.kind == 'ServiceAccount' && "
                              "(has(s.namespace) && s.namespace != '' ? s.namespace : request.namespace) "
                              f"in {protected}))",
                "message": "the team credential may not bind ServiceAccounts of the lab's namespaces "
                           f"({', '.join(PROTECTED_NAMESPACES)})",
                "reason": "Forbidden",
            },
            {
                # A conversion webhook by URL is dialled from the API server in the management cluster over the
                # controlplane egress, not through Konnectivity (kubernetes/apiserver pkg/util/webhook/
                # authentication.go@v0.36.0: ClientConfigFor uses ControlPlane, ClientConfigForService Cluster), and
                # Kamaji's egress selector configures only `cluster` (clastix/kamaji internal/resources/
                # konnectivity/constants.go@26.8.2-edge): so a direct dial, outside the lab's network filter.
                "expression": "!(request.resource.group == 'apiextensions.k8s.io' && "
                              "request.resource.resource == 'customresourcedefinitions' && "
                              "request.operation in ['CREATE', 'UPDATE'] && has(object.spec) && "
                              "has(object.spec.conversion) && has(object.spec.conversion.webhook) && "
                              "has(object.spec.conversion.webhook.clientConfig) && "
                              "has(object.spec.conversion.webhook.clientConfig.url))",
                "message": "the team credential may not give a CustomResourceDefinition a conversion webhook by URL "
                           "(spec.conversion.webhook.clientConfig.url): use a Service of the tenant",
                "reason": "Forbidden",
            },
            {
                "expression": "!variables.isNamespace || !(request.operation in ['CREATE', 'UPDATE']) || ("
                              f"variables.newLabels.all(k, !k.startsWith('{prefix}') || "
                              "(k in variables.oldLabels && variables.oldLabels[k] == variables.newLabels[k])) && "
                              f"variables.oldLabels.all(k, !k.startsWith('{prefix}') || k in variables.newLabels))",
                "message": f"the team credential may not add, change or remove {prefix}* labels: the lab sets "
                           "the tenant's Pod Security level",
                "reason": "Forbidden",
            },
        ],
    }


def guard_binding_spec() -> dict:
    return {"policyName": TEAM_POLICY, "validationActions": ["Deny"]}


def team_kubeconfig(tenant: str, admin_kubeconfig: str, token_answer: str) -> str:
    """The team's kubeconfig: the tenant's API server and CA from the admin kubeconfig, the account's token."""
    cluster = current_cluster(admin_kubeconfig)
    token = base64.b64decode(token_secret_data(token_answer)["token"]).decode()
    user = f"{tenant}-team"
    return yaml.safe_dump({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": tenant, "cluster": {"server": cluster.server,
                                                  "certificate-authority-data": cluster.ca_data}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": tenant, "user": user}}],
        "current-context": user,
    }, sort_keys=False)


@dataclass(frozen=True)
class TeamAccessArgs:
    tenant: str
    provider: k8s.Provider
    """The tenant's own provider."""
    kubeconfig: pulumi.Input[str]
    """The tenant's admin kubeconfig (secret): read on the host only, to fetch the token and build the team's."""


class TeamAccess(pulumi.ComponentResource):
    """The team's ServiceAccount, token, role and guard policy in one tenant.

    Output: `kubeconfig` (secret), the team's. Nothing here depends on the tenant's sleep: asleep, its objects stay
    in the state unchanged and the provider leaves them alone (docs/architecture.md, "Sleep and wake").
    """

    kubeconfig: pulumi.Output[str]

    def __init__(self, name: str, args: TeamAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:TeamAccess", name, None, opts)
        in_tenant = pulumi.ResourceOptions(parent=self, provider=args.provider)
        prefix = f"{name}-team"
        namespace = k8s.core.v1.Namespace(f"{prefix}-namespace", metadata={"name": TEAM_NAMESPACE}, opts=in_tenant)
        in_namespace = pulumi.ResourceOptions.merge(in_tenant, pulumi.ResourceOptions(depends_on=[namespace]))
        account = k8s.core.v1.ServiceAccount(
            f"{prefix}-account", metadata={"name": TEAM_ACCOUNT, "namespace": TEAM_NAMESPACE}, opts=in_namespace
        )
        role = k8s.rbac.v1.ClusterRole(f"{prefix}-role", metadata={"name": TEAM_ROLE}, rules=team_rules(),
                                       opts=in_tenant)
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{prefix}-binding",
            metadata={"name": TEAM_ROLE},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": TEAM_ROLE},
            subjects=[{"kind": "ServiceAccount", "name": TEAM_ACCOUNT, "namespace": TEAM_NAMESPACE}],
            opts=in_tenant,
        )
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{prefix}-policy", metadata={"name": TEAM_POLICY}, spec=guard_policy_spec(), opts=in_tenant
        )
        policy_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{prefix}-policy-binding", metadata={"name": TEAM_POLICY}, spec=guard_binding_spec(),
            opts=pulumi.ResourceOptions.merge(in_tenant, pulumi.ResourceOptions(depends_on=[policy])),
        )
        # `make revoke-team` deletes this Secret (the token dies with it) and taints it here, so the next up
        # replaces it with a new token; scripts/revoke_team.py finds it by this name.
        token_secret = k8s.core.v1.Secret(
            token_resource_name(name),
            metadata={
                "name": TEAM_ACCOUNT,
                "namespace": TEAM_NAMESPACE,
                "annotations": {"kubernetes.io/service-account.name": TEAM_ACCOUNT},
            },
            type="kubernetes.io/service-account-token",
            # Replaced by a taint, with no input changed: the provider's diff asks to delete first for a fixed
            # name only when it sees a change that replaces (pulumi/pulumi-kubernetes provider/pkg/provider/
            # provider.go, Diff: deleteBeforeReplace). Created first, the new Secret would then be deleted under
            # the old one's name.
            opts=pulumi.ResourceOptions.merge(
                in_namespace, pulumi.ResourceOptions(depends_on=[account], delete_before_replace=True)
            ),
        )
        # The token controller fills the Secret after it is created: read on the host, kept secret. Handed out
        # only once the guards hold.
        token = script_command(
            f"{prefix}-token-read",
            "tenant-metrics-token.sh",
            {"KUBECONFIG_DATA": args.kubeconfig, "NAMESPACE": TEAM_NAMESPACE, "SECRET": TEAM_ACCOUNT},
            secret_output=True,
            triggers=[token_secret.metadata.apply(lambda metadata: metadata.get("uid"))],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[token_secret, role, binding, policy_binding]),
        )
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(args.kubeconfig, token.stdout).apply(
                lambda values: team_kubeconfig(args.tenant, values[0], values[1])
            )
        )
        self.register_outputs({"kubeconfig": self.kubeconfig})


def token_resource_name(tenant: str) -> str:
    """The stack's name for a tenant's team token Secret (unique in the stack: tenants' names are)."""
    return f"{tenant}-team-token"
