"""Tenant workers: kindest/node containers that join their own tenant, and the tenant CNI."""

import hashlib

from tests.plan import NODE_IMAGE, dev_config, plan, reveal

CONTAINER = "docker:index/container:Container"
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"


def containers(plan_):
    return {r.inputs["name"]: r for r in plan_.of_type(CONTAINER)}


def by_node(commands):
    return {c.inputs["environment"]["NODE"]: c for c in commands}


def test_one_container_per_configured_worker(dev_plan):
    assert sorted(containers(dev_plan)) == ["kamaji-tenant-a-w1", "kamaji-tenant-b-w1"]


def test_container_runs_like_a_kind_node(dev_plan):
    worker = containers(dev_plan)["kamaji-tenant-a-w1"].inputs
    assert worker["hostname"] == "kamaji-tenant-a-w1"
    assert worker["privileged"] is True
    # label=disable is what Docker adds to a privileged container; stating it avoids a diff on every up.
    assert sorted(worker["securityOpts"]) == ["apparmor=unconfined", "label=disable", "seccomp=unconfined"]
    assert worker["cgroupnsMode"] == "private"
    # kind runs nodes with --userns=host under userns-remap; the workers always do (a no-op otherwise).
    assert worker["usernsMode"] == "host"
    assert worker["tmpfs"] == {"/tmp": "", "/run": ""}
    # On the network kind-up.sh puts the management cluster's node on, and no other.
    (kind_up,) = dev_plan.commands("kind-up.sh")
    assert [n["name"] for n in worker["networksAdvanced"]] == [kind_up.inputs["environment"]["KIND_NETWORK"]]
    # kind's node flags (kubernetes-sigs/kind pkg/cluster/internal/providers/docker/provision.go@fed268827e21):
    # --restart=on-failure:1 (come back after a reboot only), --init=false (systemd must be PID 1,
    # not docker-init), --tty (the entrypoint's logs).
    assert (worker["restart"], worker["maxRetryCount"]) == ("on-failure", 1)
    assert worker["init"] is False and worker["tty"] is True
    assert worker["removeVolumes"] is True
    mounts = {v["containerPath"]: v for v in worker["volumes"]}
    assert "hostPath" not in mounts["/var"], "/var must be a (removable) anonymous volume"
    assert mounts["/lib/modules"] == {"containerPath": "/lib/modules", "hostPath": "/lib/modules", "readOnly": True}


def test_container_labels_are_ours_and_never_kinds(dev_plan):
    labels = {entry["label"]: entry["value"] for entry in containers(dev_plan)["kamaji-tenant-b-w1"].inputs["labels"]}
    assert labels["kamaji-hami-lab.io/tenant"] == "tenant-b"
    assert labels["kamaji-hami-lab.io/role"] == "worker"
    assert not any(label.startswith("io.x-k8s.kind") for label in labels)


def test_node_image_comes_from_the_shared_pulled_image(up_plan):
    (image,) = up_plan.of_type("docker:index/remoteImage:RemoteImage")
    for worker in containers(up_plan).values():
        assert image.urn in worker.property_dependencies["image"]


def test_fixed_container_names_are_deleted_before_replacement(dev_plan):
    for worker in containers(dev_plan).values():
        assert worker.delete_before_replace


def test_join_waits_for_its_container_and_its_own_control_plane(dev_plan):
    joins = by_node(dev_plan.commands("join-worker.sh"))
    workers = containers(dev_plan)
    readers = {r.inputs["environment"]["TENANT"]: r for r in dev_plan.commands("tenant-kubeconfig.sh")}
    for node, tenant in (("kamaji-tenant-a-w1", "tenant-a"), ("kamaji-tenant-b-w1", "tenant-b")):
        upstream = dev_plan.upstream(joins[node].urn)
        assert workers[node].urn in upstream
        assert readers[tenant].urn in upstream
        other = readers["tenant-b" if tenant == "tenant-a" else "tenant-a"]
        assert other.urn not in upstream


def test_join_uses_only_its_own_tenants_credentials(up_plan):
    for node, join in by_node(up_plan.commands("join-worker.sh")).items():
        tenant = "tenant-a" if "tenant-a" in node else "tenant-b"
        assert f"server: {up_plan.tenant_server(tenant)}" in join.inputs["environment"]["KUBECONFIG_DATA"]
        assert f"secret-key-of-{tenant}-admin" in join.inputs["environment"]["KUBECONFIG_DATA"]


def test_join_secrets_stay_secret(dev_plan):
    for join in dev_plan.commands("join-worker.sh"):
        assert "environment" in join.secret_inputs
        assert {"stdout", "stderr"} <= set(join.secret_outputs)


def test_join_reruns_for_a_new_container_or_tenant_ca_and_removes_the_node_on_destroy(up_plan):
    workers = containers(up_plan)
    # tests/plan.py's fake tenant kubeconfigs carry certificate-authority-data "Q0E=".
    ca_fingerprint = hashlib.sha256(b"Q0E=").hexdigest()
    for node, join in by_node(up_plan.commands("join-worker.sh")).items():
        assert join.inputs["triggers"] == [f"{workers[node].name}-id", ca_fingerprint]
        assert "triggers" not in join.secret_inputs  # a CA fingerprint is public
        assert join.inputs["delete"].endswith("/leave-worker.sh")
        # The old node object (same name) must leave before the new container joins.
        assert join.delete_before_replace


def test_admin_credentials_never_enter_the_container(up_plan):
    for worker in containers(up_plan).values():
        assert "secret-key-of" not in str(reveal(worker.inputs))
        assert not worker.secret_inputs


def test_cni_lands_in_each_tenant_with_its_pod_cidr():
    custom = plan(
        dev_config(tenants=[{"name": "a"}, {"name": "b", "podCidr": "10.123.0.0/16"}]),
        preview=False,
    )
    cni = {
        c.inputs["environment"]["KUBECONFIG_DATA"]: c.inputs["environment"] for c in custom.commands("install-cni.sh")
    }
    pod_cidrs = {
        tenant: env["POD_CIDR"]
        for kubeconfig, env in cni.items()
        for tenant in ("a", "b")
        if custom.tenant_server(tenant) in kubeconfig
    }
    assert pod_cidrs == {"a": "10.244.0.0/16", "b": "10.123.0.0/16"}
    assert all(env["NODE_IMAGE"] == NODE_IMAGE for env in cni.values())


def test_two_workers_give_two_containers_and_two_joins():
    two = plan(dev_config(tenants=[{"name": "a", "workers": 2}, {"name": "b"}]), preview=True)
    assert sorted(containers(two)) == ["kamaji-a-w1", "kamaji-a-w2", "kamaji-b-w1"]
    assert sorted(by_node(two.commands("join-worker.sh"))) == ["kamaji-a-w1", "kamaji-a-w2", "kamaji-b-w1"]


def test_a_tenants_workers_follow_one_another_so_an_upgrade_replaces_one_at_a_time():
    three = plan(dev_config(tenants=[{"name": "a", "workers": 3, "gpus": [{"model": "NVIDIA L4 24GB"}]}]), preview=True)
    workers = containers(three)
    joins, registrations = by_node(three.commands("join-worker.sh")), by_node(three.commands("register-gpus.sh"))
    for earlier, later in (("kamaji-a-w1", "kamaji-a-w2"), ("kamaji-a-w2", "kamaji-a-w3")):
        # The next container is (re)created only once the previous worker joined and has its GPUs.
        assert {joins[earlier].urn, registrations[earlier].urn} <= three.upstream(workers[later].urn)
        assert workers[later].urn not in three.upstream(registrations[earlier].urn)


def test_workers_of_different_tenants_do_not_wait_on_each_other():
    two = plan(dev_config(tenants=[{"name": "a"}, {"name": "b"}]), preview=True)
    joins = by_node(two.commands("join-worker.sh"))
    first, second = joins["kamaji-a-w1"], joins["kamaji-b-w1"]
    assert first.urn not in two.upstream(second.urn) and second.urn not in two.upstream(first.urn)


def test_a_container_starts_only_once_its_control_plane_runs_the_tenants_version(dev_plan):
    # A kubelet never runs newer than its API server: the TenantControlPlane waits for its version (test_tenants.py).
    planes = {r.inputs["metadata"]["name"]: r for r in dev_plan.of_type(TCP)}
    for node, worker in containers(dev_plan).items():
        tenant = "tenant-a" if "tenant-a" in node else "tenant-b"
        # Through the wait for Kamaji to run it on its DataStore (a move refuses the tenant's writes).
        assert planes[tenant].urn in dev_plan.upstream(worker.urn)


def test_a_worker_is_drained_within_a_pulumi_timeout_before_its_container_goes(up_plan):
    for join in up_plan.commands("join-worker.sh"):
        assert join.inputs["delete"].endswith("/leave-worker.sh")
        assert "delete" in join.custom_timeouts  # tests/test_guards.py checks it outlasts the drain


def test_workers_wait_for_the_platform_so_they_go_before_kamaji(dev_plan):
    (kamaji_ready,) = dev_plan.commands("wait-kamaji.sh")
    for worker in containers(dev_plan).values():
        assert kamaji_ready.urn in worker.dependencies


def test_a_container_workers_gpus_leave_with_its_container_not_by_a_script(up_plan):
    # leave-worker.sh deletes the node (and its GPU annotations) and the container goes: nothing is left to unregister.
    registrations = up_plan.commands("register-gpus.sh")
    assert registrations and all("delete" not in gpus.inputs for gpus in registrations)


def test_each_worker_component_records_the_node_it_became(up_plan):
    workers = up_plan.of_type("kamaji-hami-lab:index:WorkerNode")
    assert workers and all(
        up_plan.component_outputs[worker.urn] == {"nodeName": worker.name} for worker in workers
    )
