"""What Pulumi records must survive a cluster that is only briefly unreachable."""


def test_no_kubernetes_provider_forgets_objects_of_an_unreachable_cluster(dev_plan):
    # pulumi/pulumi-kubernetes#2489: deleteUnreachable makes refresh report every object of an
    # unreachable cluster as deleted; a reboot or Docker restart would then lose the whole lab's state.
    providers = dev_plan.of_type("pulumi:providers:kubernetes")
    assert providers
    for provider in providers:
        assert provider.inputs.get("deleteUnreachable") in (None, False, "false"), provider.name
