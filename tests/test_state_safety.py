"""What Pulumi records must survive a cluster that is only briefly unreachable, and a new version of this program."""

from pathlib import Path


def test_no_kubernetes_provider_forgets_objects_of_an_unreachable_cluster(dev_plan):
    # pulumi/pulumi-kubernetes#2489: deleteUnreachable makes refresh report every object of an
    # unreachable cluster as deleted; a reboot or Docker restart would then lose the whole lab's state.
    providers = dev_plan.of_type("pulumi:providers:kubernetes")
    assert providers
    for provider in providers:
        assert provider.inputs.get("deleteUnreachable") in (None, False, "false"), provider.name


# A resource's URN holds the type tokens of its parents and its own name: a program that
# renames a component type or moves a resource under another parent makes Pulumi replace it
# (a new container, a new control plane) on the next `up`.
RUNNING_LAB = Path(__file__).parent / "fixtures" / "dev-lab-resources.txt"


def qualified(plan_, registration) -> str:
    """Its parents' types, outermost first, then its own type and name, as Pulumi puts them in a URN."""
    by_urn = plan_.by_urn
    types, parent = [registration.type], by_urn.get(registration.parent)
    while parent is not None and parent.type != "pulumi:pulumi:Stack":
        types.insert(0, parent.type)
        parent = by_urn.get(parent.parent)
    return "$".join(types) + "::" + registration.name


def test_the_resources_of_a_running_lab_keep_their_urns(dev_plan):
    running = {line for line in RUNNING_LAB.read_text().splitlines() if line and not line.startswith("#")}
    found = {qualified(dev_plan, r) for r in dev_plan.registrations}
    assert found >= running, sorted(running - found)


def test_every_resource_belongs_to_a_component_and_is_named_after_it(dev_plan):
    assert dev_plan.outside_components() == []
    assert dev_plan.misnamed() == []
