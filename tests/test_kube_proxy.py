"""kube-proxy in every tenant: installed by the lab, never writing host-wide conntrack sysctls."""

import pytest
import yaml

from tests.plan import dev_config, plan, tenants

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
# clastix/kamaji internal/constants/labels.go: Kamaji's addon clean-up deletes only objects with this label.
KAMAJI_MANAGED_LABEL = "kamaji.clastix.io/project"


# kubeadm's kube-proxy ConfigMap and DaemonSet, which the lab reproduces (kubernetes/kubernetes
# cmd/kubeadm/app/phases/addons/proxy/manifests.go@0e998fac8c71: KubeProxyConfigMap19, KubeProxyDaemonSet19).
KUBEADM_CONFIG_MAP_LABELS = {"app": "kube-proxy"}
KUBEADM_SELECTOR = {"k8s-app": "kube-proxy"}
KUBEADM_COMMAND = [
    "/usr/local/bin/kube-proxy",
    "--config=/var/lib/kube-proxy/config.conf",
    "--hostname-override=$(NODE_NAME)",
]
KUBEADM_NODE_NAME_ENV = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
# mount path -> (volume, read-only)
KUBEADM_MOUNTS = {
    "/var/lib/kube-proxy": ("kube-proxy", False),
    "/run/xtables.lock": ("xtables-lock", False),
    "/lib/modules": ("lib-modules", True),
}
KUBEADM_VOLUMES = {
    "kube-proxy": {"configMap": {"name": "kube-proxy"}},
    "xtables-lock": {"hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}},
    "lib-modules": {"hostPath": {"path": "/lib/modules"}},
}
KUBEADM_KUBECONFIG_CONTEXT = {
    "name": "default",
    "context": {"cluster": "default", "namespace": "default", "user": "default"},
}


def kube_proxy_objects(plan_, type_):
    return [r for r in plan_.of_type(type_) if r.inputs["metadata"]["name"] == "kube-proxy"]


def tenant_provider(plan_, tenant):
    (provider,) = [
        p
        for p in plan_.of_type("pulumi:providers:kubernetes")
        if p.inputs.get("clusterIdentifier", "").endswith(tenant)
    ]
    return provider.urn


def test_kamajis_kube_proxy_addon_is_off_in_every_tenant(dev_plan):
    for tcp in dev_plan.of_type(TCP):
        # clastix/kamaji internal/resources/addons/kube_proxy.go: a nil spec.addons.kubeProxy installs nothing.
        assert "kubeProxy" not in tcp.inputs["spec"]["addons"]


@pytest.mark.parametrize("count", [1, 3])
def test_every_tenant_gets_its_own_kube_proxy(count):
    plan_ = plan(dev_config(tenants=tenants(count)), preview=False)
    config_maps = kube_proxy_objects(plan_, CONFIG_MAP)
    daemon_sets = kube_proxy_objects(plan_, DAEMON_SET)
    assert len(config_maps) == len(daemon_sets) == count
    for index in range(count):
        provider = tenant_provider(plan_, f"t{index}")
        assert sum(r.provider_urn == provider for r in config_maps + daemon_sets) == 2


def test_kube_proxy_config_never_sets_conntrack_limits(dev_plan):
    for config_map in kube_proxy_objects(dev_plan, CONFIG_MAP):
        config = yaml.safe_load(config_map.inputs["data"]["config.conf"])
        assert config["kind"] == "KubeProxyConfiguration"
        # kubernetes-sigs/kind pkg/cluster/internal/kubeadm/config.go: maxPerCore 0 skips nf_conntrack_max
        # (and with it the hash size), which are host-wide and read-only in a container's namespace.
        assert config["conntrack"] == {"maxPerCore": 0}
        assert config["clientConnection"]["kubeconfig"] == "/var/lib/kube-proxy/kubeconfig.conf"


def test_kube_proxy_talks_to_its_own_tenants_api_server(up_plan):
    servers = {}
    for config_map in kube_proxy_objects(up_plan, CONFIG_MAP):
        kubeconfig = yaml.safe_load(config_map.inputs["data"]["kubeconfig.conf"])
        (cluster,) = kubeconfig["clusters"]
        servers[config_map.provider_urn] = cluster["cluster"]["server"]
        # kubeadm's kubeconfig.conf: the ServiceAccount's token and CA, no client certificate.
        assert cluster["cluster"]["certificate-authority"] == "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
        assert kubeconfig["users"][0]["user"] == {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}
    assert servers == {tenant_provider(up_plan, t): up_plan.tenant_server(t) for t in ("tenant-a", "tenant-b")}


def test_kube_proxy_runs_the_tenant_version_on_every_node(dev_plan):
    for daemon_set in kube_proxy_objects(dev_plan, DAEMON_SET):
        pod = daemon_set.inputs["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["image"] == "registry.k8s.io/kube-proxy:v1.36.4"
        assert "--config=/var/lib/kube-proxy/config.conf" in container["command"]
        assert pod["hostNetwork"] is True and pod["serviceAccountName"] == "kube-proxy"
        assert {"operator": "Exists"} in pod["tolerations"]  # also NotReady nodes, before the CNI is up


def config_checksum_of(tenant: dict, **lab: str) -> str:
    plan_ = plan(dev_config(tenants=[tenant], **lab), preview=False)
    (daemon_set,) = kube_proxy_objects(plan_, DAEMON_SET)
    return daemon_set.inputs["spec"]["template"]["metadata"]["annotations"]["kamaji-hami-lab.io/config-sha256"]


def test_a_new_endpoint_rolls_kube_proxy():
    # One tenant whose API address changes (and nothing else): 172.30.200.2 is not 172.30.200.20.
    pool = {"metallbAddressRange": "172.30.200.0-172.30.200.50"}
    assert config_checksum_of({"name": "a", "apiAddress": "172.30.200.2"}, **pool) != config_checksum_of(
        {"name": "a", "apiAddress": "172.30.200.20"}, **pool
    )


def test_a_new_pod_network_rolls_kube_proxy():
    # kube-proxy reads clusterCIDR from its config file once, at start.
    assert config_checksum_of({"name": "a1"}) != config_checksum_of({"name": "a1", "podCidr": "10.200.0.0/16"})


def test_kube_proxy_rbac_matches_kubeadms(dev_plan):
    # kubernetes/kubernetes cmd/kubeadm/app/phases/addons/proxy/proxy.go: the node-proxier binding for the
    # ServiceAccount, and read access to the ConfigMap for joining nodes' bootstrap tokens.
    bindings = [
        r
        for r in dev_plan.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
        if r.inputs["metadata"]["name"] == "kubeadm:node-proxier"
    ]
    role_bindings = kube_proxy_objects(dev_plan, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
    assert len(bindings) == len(role_bindings) == 2  # one each per tenant
    for binding, role_binding in zip(bindings, role_bindings, strict=True):
        assert binding.inputs["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:node-proxier",
        }
        assert binding.inputs["subjects"] == [
            {"kind": "ServiceAccount", "name": "kube-proxy", "namespace": "kube-system"}
        ]
        assert role_binding.inputs["subjects"] == [
            {"kind": "Group", "name": "system:bootstrappers:kubeadm:default-node-token"}
        ]
        assert role_binding.inputs["metadata"] == {"name": "kube-proxy", "namespace": "kube-system"}
        # Only a client allowed to `bind` may bind a Role that does not exist yet.
        (role,) = [r for r in dev_plan.registrations if r.urn in role_binding.dependencies]
        assert role.type == "kubernetes:rbac.authorization.k8s.io/v1:Role"
        assert role.provider_urn == role_binding.provider_urn
        role_ref = role_binding.inputs["roleRef"]
        assert role_ref == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kube-proxy"}
    for role in kube_proxy_objects(dev_plan, "kubernetes:rbac.authorization.k8s.io/v1:Role"):
        assert role.inputs["metadata"] == {"name": "kube-proxy", "namespace": "kube-system"}
        assert role.inputs["rules"] == [
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["kube-proxy"], "verbs": ["get"]}
        ]
    accounts = kube_proxy_objects(dev_plan, "kubernetes:core/v1:ServiceAccount")
    assert [account.inputs["metadata"]["namespace"] for account in accounts] == ["kube-system"] * 2


def test_kamajis_clean_up_never_takes_the_labs_kube_proxy(dev_plan):
    for resource in dev_plan.registrations:
        if resource.type.startswith("kubernetes:") and "kube-proxy" in resource.name:
            assert KAMAJI_MANAGED_LABEL not in (resource.inputs["metadata"].get("labels") or {})


def test_hami_waits_for_kube_proxy_in_its_own_tenant(dev_plan):
    # HAMi's scheduler and webhook reach the API server through the `kubernetes` Service, which kube-proxy serves.
    (hami_a,) = [
        r
        for r in dev_plan.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["chart"] == "hami" and r.provider_urn == tenant_provider(dev_plan, "tenant-a")
    ]
    upstream = dev_plan.upstream(hami_a.urn)
    daemon_sets = {r.provider_urn: r.urn for r in kube_proxy_objects(dev_plan, DAEMON_SET)}
    assert daemon_sets[tenant_provider(dev_plan, "tenant-a")] in upstream
    assert daemon_sets[tenant_provider(dev_plan, "tenant-b")] not in upstream


def test_kube_proxy_pods_start_after_their_account_binding_and_config(dev_plan):
    # A pod of a missing ServiceAccount is refused, and one of a missing ConfigMap never starts.
    for daemon_set in kube_proxy_objects(dev_plan, DAEMON_SET):
        dependencies = [
            r for r in dev_plan.registrations if r.urn in daemon_set.dependencies and r.type.startswith("kubernetes:")
        ]
        waits_for = {(r.type, r.inputs["metadata"]["name"]) for r in dependencies}
        assert waits_for == {
            ("kubernetes:core/v1:ServiceAccount", "kube-proxy"),
            ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "kubeadm:node-proxier"),
            ("kubernetes:core/v1:ConfigMap", "kube-proxy"),
        }


def test_kube_proxy_is_kubeadms_daemon_set(dev_plan):
    for daemon_set in kube_proxy_objects(dev_plan, DAEMON_SET):
        assert daemon_set.inputs["metadata"]["namespace"] == "kube-system"
        spec = daemon_set.inputs["spec"]
        labels = [daemon_set.inputs["metadata"]["labels"], spec["selector"]["matchLabels"]]
        assert labels + [spec["template"]["metadata"]["labels"]] == [KUBEADM_SELECTOR] * 3
        assert spec["updateStrategy"] == {"type": "RollingUpdate"}
        pod = spec["template"]["spec"]
        assert pod["priorityClassName"] == "system-node-critical"
        assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
        (container,) = pod["containers"]
        assert (container["name"], container["imagePullPolicy"]) == ("kube-proxy", "IfNotPresent")
        assert container["command"] == KUBEADM_COMMAND
        assert container["env"] == KUBEADM_NODE_NAME_ENV
        mounts = {m["mountPath"]: (m["name"], m.get("readOnly", False)) for m in container["volumeMounts"]}
        assert mounts == KUBEADM_MOUNTS
        volumes = {volume["name"]: {k: v for k, v in volume.items() if k != "name"} for volume in pod["volumes"]}
        assert volumes == KUBEADM_VOLUMES
        # kubeadm adds the NET_ADMIN and SYS_MODULE capabilities; privileged grants both.
        assert container["securityContext"] == {"privileged": True}


def test_kube_proxy_config_map_is_kubeadms_with_kinds_proxy_settings(up_plan):
    for config_map in kube_proxy_objects(up_plan, CONFIG_MAP):
        assert config_map.inputs["metadata"]["namespace"] == "kube-system"
        assert config_map.inputs["metadata"]["labels"] == KUBEADM_CONFIG_MAP_LABELS
        data = config_map.inputs["data"]
        assert sorted(data) == ["config.conf", "kubeconfig.conf"]
        kubeconfig = yaml.safe_load(data["kubeconfig.conf"])
        assert (kubeconfig["apiVersion"], kubeconfig["kind"]) == ("v1", "Config")
        assert kubeconfig["clusters"][0]["name"] == kubeconfig["users"][0]["name"] == "default"
        assert kubeconfig["contexts"] == [KUBEADM_KUBECONFIG_CONTEXT]
        assert kubeconfig["current-context"] == "default"
        config = yaml.safe_load(data["config.conf"])
        assert config["apiVersion"] == "kubeproxy.config.k8s.io/v1alpha1"
        # kind's defaults for its container nodes (kubernetes-sigs/kind
        # pkg/cluster/internal/kubeadm/config.go@fed268827e21, KubeProxyConfiguration).
        assert (config["mode"], config["iptables"]) == ("iptables", {"minSyncPeriod": "1s"})
