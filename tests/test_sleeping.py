"""A sleeping tenant (`sleeping: true`), as `pulumi preview` shows its sleep and its wake on a running lab.

Each direction is a preview against the up before it (tests/plan.py): what changes is one tenant's, and
each change is an update the provider makes in place, never a replacement or a deletion.
"""

from __future__ import annotations

import json

import pytest

from components.config import ConfigError, parse_settings
from tests.plan import ROOT, SLEEPER_REPLICAS, Plan, changed, dev_config, plan, resolve, sleeping_containers_lab
from tests.test_machines import EXISTING, MOCK_GPU_TENANT, REAL_GPU_TENANT, SECRETS
from tests.test_tenant_versions import CONTAINER, TCP, of_tenant

COMMAND = "command:local:Command"
def machines_lab(asleep: bool) -> dict:
    research = {**MOCK_GPU_TENANT, **({"sleeping": True} if asleep else {})}
    return dev_config(tenants=[research, REAL_GPU_TENANT], **EXISTING)


@pytest.fixture
def machines(shared):
    """The same for the machine tenant research, next to the machine tenant training."""

    def build():
        awake = plan(machines_lab(False), preview=False, secrets=SECRETS)
        asleep = plan(machines_lab(True), preview=False, secrets=SECRETS)
        return (
            awake,
            plan(machines_lab(True), True, awake, SECRETS),
            asleep,
            plan(machines_lab(False), True, asleep, SECRETS),
        )

    return shared("sleeping-machines", build)


def script_of(resource) -> str:
    return resource.inputs.get("create", "").rsplit("/", 1)[-1]


def environment(resource) -> dict:
    return resolve(resource.inputs["environment"])


def what_changed(preview: Plan, previous: Plan) -> list[tuple[str, str]]:
    """(type or script, name) of each resource whose inputs differ, sorted."""
    by_urn = preview.by_urn
    return sorted((script_of(by_urn[urn]) or by_urn[urn].type, by_urn[urn].name) for urn in changed(preview, previous))


def replacements(preview: Plan, previous: Plan) -> list[str]:
    """Changed resources their provider would replace rather than update in place.

    pulumi-command replaces a Command only when its triggers change; other inputs update it, rerunning
    `create` (pulumi/pulumi-command provider/pkg/provider/common/inputs.go@v1.2.1, Triggers
    replaceOnChanges; local/commandController.go, Update). A docker Container is replaced on a change
    to anything but the few fields that are not ForceNew, must_run among them
    (kreuzwerker/terraform-provider-docker internal/provider/resource_docker_container.go@v4.5.0).
    pulumi-kubernetes replaces an object when apiVersion, kind, metadata.name or metadata.namespace
    change (pulumi/pulumi-kubernetes provider/pkg/provider/diff.go@94977969).
    """
    before, found = previous.by_urn, []
    for urn in changed(preview, previous):
        after = preview.by_urn[urn]
        old = before.get(urn)
        if old is None:
            found.append(f"{after.name} (created)")
        elif after.type == COMMAND:
            if after.inputs.get("triggers") != old.inputs.get("triggers"):
                found.append(after.name)
        elif after.type == CONTAINER:
            moved = {
                key for key in after.inputs.keys() | old.inputs.keys() if after.inputs.get(key) != old.inputs.get(key)
            }
            if moved - {"mustRun"}:
                found.append(f"{after.name} ({sorted(moved)})")
        elif after.type.startswith("kubernetes:"):
            identity = [(key, after.inputs.get(key), old.inputs.get(key)) for key in ("apiVersion", "kind")] + [
                (key, after.inputs["metadata"].get(key), old.inputs["metadata"].get(key))
                for key in ("name", "namespace")
            ]
            if any(new != was for _, new, was in identity):
                found.append(after.name)
        else:
            found.append(f"{after.name} ({after.type}: no rule, counted as replaced)")
    return found


def deleted(preview: Plan, previous: Plan) -> set[str]:
    return {r.urn for r in previous.registrations} - {r.urn for r in preview.registrations}


# --- containers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("direction", ["sleep", "wake"])
def test_toggling_a_container_tenant_changes_exactly_its_control_plane_workers_and_gpu_wait(containers, direction):
    awake, sleep, asleep, wake = containers
    preview, previous = (sleep, awake) if direction == "sleep" else (wake, asleep)
    assert what_changed(preview, previous) == [
        ("check-tenant-version.sh", "a-version-check"),
        (CONTAINER, "kamaji-a-w1-container"),
        (CONTAINER, "kamaji-a-w2-container"),
        (TCP, "a-control-plane"),
        # Waits for Kamaji's Sleeping, or Ready on waking.
        ("wait-datastore-move.sh", "a-datastore-moved"),
        ("wait-gpus.sh", "a-gpus-ready"),
        ("worker-power.sh", "kamaji-a-w1-power"),
        ("worker-power.sh", "kamaji-a-w2-power"),
    ]
    tenant_a = {r.urn for r in of_tenant(preview, "a")}
    assert changed(preview, previous) <= tenant_a


@pytest.mark.parametrize("direction", ["sleep", "wake"])
def test_toggling_a_tenant_replaces_and_deletes_nothing(containers, machines, direction):
    for awake, sleep, asleep, wake in (containers, machines):
        preview, previous = (sleep, awake) if direction == "sleep" else (wake, asleep)
        assert replacements(preview, previous) == []
        assert deleted(preview, previous) == set()


def test_asleep_the_control_plane_asks_for_no_replicas_and_waits_for_kamajis_sleeping(containers):
    awake, sleep, asleep, wake = containers
    for preview, replicas, state in ((sleep, 0, "Sleeping"), (wake, SLEEPER_REPLICAS, "Ready")):
        (tcp,) = [r for r in of_tenant(preview, "a") if r.type == TCP]
        assert tcp.inputs["spec"]["controlPlane"]["deployment"]["replicas"] == replicas
        (moved,) = [c for c in preview.commands("wait-datastore-move.sh") if c.inputs["environment"]["TENANT"] == "a"]
        assert moved.inputs["environment"]["WANTED_STATE"] == state
        assert moved.urn in changed(preview, awake if state == "Sleeping" else asleep)
    # Only the replicas move: same Service type, network, datastore schema, so the same address and data.
    (before,) = [r for r in of_tenant(awake, "a") if r.type == TCP]
    (after,) = [r for r in of_tenant(sleep, "a") if r.type == TCP]
    spec = json.loads(json.dumps(after.inputs["spec"]))
    spec["controlPlane"]["deployment"]["replicas"] = SLEEPER_REPLICAS
    assert spec == before.inputs["spec"]


def test_a_sleeping_tenant_keeps_its_endpoint_kubeconfig_and_other_tenant(containers):
    awake, sleep, asleep, wake = containers
    # The admin kubeconfig is not read again, so users and workers keep theirs and the address.
    for preview, previous in ((sleep, awake), (wake, asleep)):
        for read in preview.commands("tenant-kubeconfig.sh"):
            assert read.urn not in changed(preview, previous)
            assert read.outputs == previous.by_urn[read.urn].outputs
    assert resolve(asleep.outputs["tenants"])["a"]["endpoint"] == resolve(awake.outputs["tenants"])["a"]["endpoint"]
    assert resolve(asleep.outputs["tenants"])["b"] == resolve(awake.outputs["tenants"])["b"]


def test_the_outputs_say_which_tenant_sleeps(containers):
    awake, _, asleep, _ = containers
    assert {name: facts["sleeping"] for name, facts in resolve(asleep.outputs["tenants"]).items()} == {
        "a": True,
        "b": False,
    }
    assert not any(facts["sleeping"] for facts in resolve(awake.outputs["tenants"]).values())


def test_asleep_the_workers_are_stopped_and_kept_not_removed(containers):
    awake, sleep, _, wake = containers
    for preview, must_run, state in ((sleep, False, "asleep"), (wake, True, "awake")):
        workers = sorted((r for r in of_tenant(preview, "a") if r.type == CONTAINER), key=lambda r: r.name)
        assert [w.inputs["name"] for w in workers] == ["kamaji-a-w1", "kamaji-a-w2"]
        assert all(w.inputs["mustRun"] is must_run for w in workers)
        powers = sorted((r for r in of_tenant(preview, "a") if script_of(r) == "worker-power.sh"), key=lambda r: r.name)
        assert [(environment(p)["NODE"], environment(p)["STATE"]) for p in powers] == [
            ("kamaji-a-w1", state),
            ("kamaji-a-w2", state),
        ]
        assert all("NODE_TRANSPORT" not in environment(p) for p in powers), "docker, the scripts' default"
        assert all(p.inputs.get("delete") is None for p in powers), "destroying a tenant removes its containers"
    # Tenant b's workers stay as they were.
    assert all(r.inputs["mustRun"] is True for r in of_tenant(sleep, "b") if r.type == CONTAINER)


def test_workers_fall_asleep_and_wake_with_the_addresses_they_had(containers):
    # Docker gives a restarted container a new address unless it has a fixed one (kubernetes-sigs/kind#2045).
    def addresses(preview):
        return {r.name: r.inputs["networksAdvanced"] for r in preview.registrations if r.type == CONTAINER}

    awake, sleep, asleep, wake = containers
    pinned = addresses(awake)
    assert pinned and all(network[0].get("ipv4Address") for network in pinned.values())
    assert addresses(sleep) == addresses(asleep) == addresses(wake) == pinned


def test_workers_sleep_after_and_wake_after_the_control_plane(containers):
    _, sleep, _, wake = containers
    for preview in (sleep, wake):
        (tcp,) = [r for r in of_tenant(preview, "a") if r.type == TCP]
        for power in (r for r in of_tenant(preview, "a") if script_of(r) == "worker-power.sh"):
            assert tcp.urn in preview.upstream(power.urn)


def test_a_woken_tenant_is_done_once_its_gpus_are_advertised_again(containers):
    _, sleep, _, wake = containers
    for preview, sleeping in ((sleep, "true"), (wake, "false")):
        (ready,) = [r for r in of_tenant(preview, "a") if script_of(r) == "wait-gpus.sh"]
        assert environment(ready)["SLEEPING"] == sleeping
        powers = {r.urn for r in of_tenant(preview, "a") if script_of(r) == "worker-power.sh"}
        assert len(powers) == 2 and powers <= preview.upstream(ready.urn)


def test_the_version_check_knows_the_tenant_is_to_sleep(containers):
    _, sleep, _, wake = containers
    for preview, sleeping in ((sleep, "true"), (wake, "false")):
        (check,) = [r for r in of_tenant(preview, "a") if script_of(r) == "check-tenant-version.sh"]
        assert environment(check)["SLEEPING"] == sleeping


# --- machines ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("direction", ["sleep", "wake"])
def test_toggling_a_machine_tenant_changes_only_its_control_plane_kubelets_and_gpu_wait(machines, direction):
    awake, sleep, asleep, wake = machines
    preview, previous = (sleep, awake) if direction == "sleep" else (wake, asleep)
    assert what_changed(preview, previous) == [
        ("check-tenant-version.sh", "research-version-check"),
        (TCP, "research-control-plane"),
        ("wait-datastore-move.sh", "research-datastore-moved"),
        ("wait-gpus.sh", "research-gpus-ready"),
        ("worker-power.sh", "gpu-1-power"),
        ("worker-power.sh", "gpu-2-power"),
    ]
    research = {r.urn for r in of_tenant(preview, "research")}
    assert changed(preview, previous) <= research


def test_a_sleeping_machine_has_its_kubelet_stopped_over_ssh(machines):
    _, sleep, _, wake = machines
    for preview, state in ((sleep, "asleep"), (wake, "awake")):
        powers = {
            environment(r)["NODE"]: r for r in of_tenant(preview, "research") if script_of(r) == "worker-power.sh"
        }
        assert set(powers) == {"gpu-1", "gpu-2"}
        for node, power in powers.items():
            env = environment(power)
            assert env["STATE"] == state and env["NODE_TRANSPORT"] == "ssh"
            (check,) = [r for r in preview.commands("check-machine.sh") if environment(r)["NODE"] == node]
            # The same machine, reached as every other step reaches it.
            transport = {key: value for key, value in environment(check).items() if key.startswith("SSH_")}
            assert transport and {key: env[key] for key in transport} == transport
            assert "SSH_PRIVATE_KEY" in power.secret_inputs or "environment" in power.secret_inputs


# --- config ------------------------------------------------------------------------------------------


def test_sleeping_is_off_unless_set_and_false_wakes():
    lab = parse_settings(
        dev_config(tenants=[{"name": "a"}, {"name": "b", "sleeping": False}, {"name": "c", "sleeping": True}])
    )
    assert [tenant.sleeping for tenant in lab.tenants] == [False, False, True]


@pytest.mark.parametrize("value", ["yes", 1, "maybe"])
def test_a_sleeping_value_that_is_not_a_boolean_names_the_key_and_the_value(value):
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(tenants=[{"name": "a", "sleeping": value}]))
    assert (
        "tenants[0].sleeping" in str(raised.value)
        and repr(value) in str(raised.value)
        or str(value) in str(raised.value)
    )


# --- docs ----------------------------------------------------------------------------------------------


def test_the_memory_a_sleeping_tenant_frees_is_the_preflights_figures_for_what_stops():
    from tests.test_docs import preflight, rows

    text = (ROOT / "docs" / "operations.md").read_text().split("\n### Sleeping tenants\n", 1)[1].split("\n## ", 1)[0]
    header = "| tenant | memory freed, estimated |"
    table = rows(header + text.split(header, 1)[1])
    gib = preflight.SIZING_GIB
    shapes = {
        "1 control-plane replica, 1 container worker (the defaults)": (1, 1),
        "2 control-plane replicas, 2 container workers": (2, 2),
        "1 control-plane replica, machine workers": (1, 0),
    }
    assert [row[0] for row in table] == list(shapes)
    for shape, freed in table:
        replicas, workers = shapes[shape]
        expected = replicas * gib["control_plane_memory"] + workers * gib["worker_memory"]
        assert freed == f"{expected:g} GiB", shape
    # "the defaults" is what a tenant gets without controlPlaneReplicas or workersPerTenant.
    defaults = parse_settings(dev_config(tenants=[{"name": "a"}])).tenants[0]
    assert (defaults.control_plane_replicas, defaults.workers) == shapes[table[0][0]]


# --- observability turned on or off while a tenant sleeps (issue 49) ----------------------------------------


def observed_asleep(observability: bool) -> dict:
    return {**sleeping_containers_lab(True), "observability": observability}


@pytest.fixture
def observability_toggled(shared, containers):
    """{turned on: (previous up, preview)} with tenant a asleep throughout."""
    # The dev stack has observability on: the lab with it on is `containers`' asleep up.
    assert observed_asleep(True) == sleeping_containers_lab(True)
    _, _, on, _ = containers

    def build():
        off = plan(observed_asleep(False), preview=False)
        return {True: (off, plan(observed_asleep(True), True, off)),
                False: (on, plan(observed_asleep(False), True, on))}

    return shared("sleeping-observability", build)


@pytest.mark.parametrize("turned_on", [True, False], ids=["on", "off"])
def test_observability_turned_while_a_tenant_sleeps_is_first_checked_against_what_reads_the_tenant(
        observability_toggled, turned_on):
    previous, preview = observability_toggled[turned_on]
    (check,) = [r for r in of_tenant(preview, "a") if script_of(r) == "check-tenant-version.sh"]
    assert check.urn in changed(preview, previous), "the check runs again, and refuses it (test_sleep_scripts.py)"
    env = environment(check)
    assert (env["OBSERVABILITY"], env["SLEEPING"]) == (str(turned_on).lower(), "true")
    # It reads the very Secret observability keeps the tenant's reader token in, there only while it is on.
    observed = observability_toggled[True][1] if turned_on else previous
    (token,) = [r for r in observed.registrations if r.type == "kubernetes:core/v1:Secret"
                and r.name == "observability-a-token"]
    assert (env["MONITORING_NAMESPACE"], env["READER_SECRET"]) == (
        token.inputs["metadata"]["namespace"], token.inputs["metadata"]["name"])
    # Nothing of the sleeping tenant changes before the check has passed: HAMi's upgrade, the reader in it.
    tenant_a_provider = next(r.urn for r in of_tenant(preview, "a") if r.type == "pulumi:providers:kubernetes"
                             and r.name.startswith("a"))
    in_tenant_a = [urn for urn in changed(preview, previous) if preview.by_urn[urn].provider_urn == tenant_a_provider]
    assert in_tenant_a or not turned_on, "turning it on puts the reader into tenant a"
    assert all(check.urn in preview.upstream(urn) for urn in in_tenant_a), \
        [preview.by_urn[urn].name for urn in in_tenant_a if check.urn not in preview.upstream(urn)]
