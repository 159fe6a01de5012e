"""The network filter in the plan (components/network_filter.py): for container workers on the lab's own network
only, given every worker's fixed address and its tenant's API address as the rest of the plan pins them, in place
before any worker container starts, recomputed when they change and removed on destroy."""

from __future__ import annotations

from components import network_filter
from components.kind_management_cluster import KIND_NETWORK
from tests.plan import LAB_IDENTITY, NODE_IMAGE, changed, dev_config, is_unknown, plan, resolve
from tests.test_api_addresses import planned
from tests.test_tenant_versions import CONTAINER
from tests.test_worker_addresses import pinned

FILTER = "network-filter.sh"
TENANT_LABEL = "kamaji-hami-lab.io/tenant"


def the_filter(plan_):
    (command,) = plan_.commands(FILTER)
    return command


def parsed(spec: str) -> dict[str, tuple[str, str, list[str]]]:
    """TENANTS as the rules program reads it: tenant → (API address, pod CIDR, worker addresses)."""
    tenants = {}
    for line in spec.splitlines():
        name, api, pods, *workers = line.split()
        tenants[name] = (api, pods, workers)
    return tenants


def workers_by_tenant(plan_) -> dict[str, list[str]]:
    addresses = pinned(plan_)
    by_tenant: dict[str, list[str]] = {}
    for container in plan_.of_type(CONTAINER):
        labels = {label["label"]: label["value"] for label in container.inputs["labels"]}
        by_tenant.setdefault(labels[TENANT_LABEL], []).append(str(addresses[container.inputs["name"]]))
    return by_tenant


def test_each_tenants_workers_and_api_address_are_the_ones_the_plan_pins(up_plan):
    env = resolve(the_filter(up_plan).inputs["environment"])
    tenants = parsed(env["TENANTS"])

    assert {name: workers for name, (_, _, workers) in tenants.items()} == workers_by_tenant(up_plan)
    assert {name: api for name, (api, _, _) in tenants.items()} == planned(up_plan)
    assert {name: pods for name, (_, pods, _) in tenants.items()} == {"tenant-a": "10.244.0.0/16",
                                                                      "tenant-b": "10.244.0.0/16"}
    assert env["LAB_IDENTITY"] == LAB_IDENTITY and env["KIND_NETWORK"] == KIND_NETWORK
    assert env["NODE_IMAGE"] == NODE_IMAGE
    assert env["API_PORTS"] == "6443,8132"
    (kind_up,) = up_plan.commands("kind-up.sh")
    assert env["SUBNET"] == kind_up.inputs["environment"]["KIND_SUBNET"]


def test_a_tenants_own_pod_cidr_goes_to_its_line(shared):
    config = dev_config(tenants=[{"name": "tenant-a"}, {"name": "tenant-b", "podCidr": "10.200.0.0/16"}])
    lab = shared("filter-pod-cidrs", lambda: plan(config, preview=False))

    tenants = parsed(resolve(the_filter(lab).inputs["environment"])["TENANTS"])
    assert (tenants["tenant-a"][1], tenants["tenant-b"][1]) == ("10.244.0.0/16", "10.200.0.0/16")


def test_the_filter_is_in_place_before_any_worker_container_and_after_the_network(dev_plan):
    command = the_filter(dev_plan)
    (network_checked,) = dev_plan.commands("kind-subnet.sh")
    assert network_checked.urn in command.all_dependencies
    assert dev_plan.named("management-node-image").urn in command.all_dependencies
    containers = dev_plan.of_type(CONTAINER)
    assert containers and all(command.urn in container.all_dependencies for container in containers)


def test_destroy_removes_the_filter_before_a_replacement_installs_its_own(dev_plan):
    command = the_filter(dev_plan)

    assert command.inputs["delete"] == "exec bash scripts/network-filter-down.sh"
    assert command.delete_before_replace
    assert not command.inputs.get("triggers"), "a new plan of it updates the rules in place"


def test_the_first_preview_plans_the_filter_with_the_identity_still_unknown(preview_plan):
    env = the_filter(preview_plan).inputs["environment"]

    assert is_unknown(env["LAB_IDENTITY"])
    assert parsed(env["TENANTS"]).keys() == {"tenant-a", "tenant-b"}


def test_a_new_worker_updates_the_filter_with_its_address_and_nothing_else_of_it(up_plan):
    more = dev_config(tenants=[{"name": "tenant-a", "workers": 2, "gpus": [{"model": "NVIDIA A100 80GB"}]},
                               {"name": "tenant-b", "gpus": [{"model": "NVIDIA L4 24GB", "count": 2}]}])
    later = plan(more, preview=True, previous=up_plan)

    command = the_filter(later)
    assert command.urn in changed(later, up_plan)
    assert parsed(resolve(command.inputs["environment"])["TENANTS"])["tenant-a"][2] == workers_by_tenant(later)[
        "tenant-a"]
    assert len(workers_by_tenant(later)["tenant-a"]) == 2


def test_a_lab_of_machines_only_or_on_an_existing_cluster_has_no_filter(machine_plan, existing_plan):
    assert machine_plan("mock", False).commands(FILTER) == []
    assert existing_plan("installed", False).commands(FILTER) == []
    assert existing_plan("installed", False).of_type(CONTAINER), "its container workers are not on the lab's network"


def test_the_command_is_a_child_of_the_labs_network_filter_component(up_plan):
    (component,) = [r for r in up_plan.registrations if r.type == "kamaji-hami-lab:index:NetworkFilter"]
    assert the_filter(up_plan).parent == component.urn


def test_a_reboot_of_the_host_installs_the_filter_again_and_changes_nothing_else(tmp_path, monkeypatch):
    boot = tmp_path / "boot_id"
    monkeypatch.setattr(network_filter, "BOOT_ID", boot)
    boot.write_text("0b9e7c2a-first-boot\n")
    first_up = plan(dev_config(), preview=False)
    boot.write_text("5d1f3a8e-after-a-reboot\n")
    after_reboot = plan(dev_config(), preview=True, previous=first_up)

    assert changed(after_reboot, first_up) == {the_filter(after_reboot).urn}
    assert not the_filter(after_reboot).inputs.get("triggers"), "installed again in place, never removed first"
