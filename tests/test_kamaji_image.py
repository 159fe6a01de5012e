"""The Kamaji controller image can be pinned; by default it is the release the lab was checked against."""

import pytest

from components.config import ConfigError
from tests.plan import dev_config, plan


def kamaji_release(**config):
    (release,) = [
        r
        for r in plan(dev_config(**config), preview=True).of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["chart"] == "kamaji"
    ]
    return release


def test_a_pinned_kamaji_image_tag_reaches_the_chart_values_and_is_pulled_once():
    release = kamaji_release(kamajiImageTag="26.8.2-edge")
    # clastix/kamaji charts/kamaji/values.yaml@26.8.2-edge: image.tag (default: appVersion), image.pullPolicy (Always).
    assert release.inputs["values"]["image"] == {"tag": "26.8.2-edge", "pullPolicy": "IfNotPresent"}
    assert release.inputs["version"] == "0.0.0+latest", "the chart stays the default; only the image is pinned"


def test_without_a_tag_the_image_is_the_release_the_lab_was_checked_against_pulled_once():
    # Not the chart's appVersion `latest`, pulled Always (clastix/kamaji charts/kamaji/Chart.yaml, values.yaml
    # @26.8.2-edge): the edge release the code's Kamaji citations name (26.8.2-edge is commit ddbabd8).
    release = kamaji_release(kamajiImageTag="")
    assert release.inputs["values"]["image"] == {"tag": "26.8.2-edge", "pullPolicy": "IfNotPresent"}
    assert release.inputs["version"] == "0.0.0+latest"


def test_the_pinned_default_is_the_kamaji_whose_kubernetes_limit_the_config_enforces():
    # KAMAJI_NEWEST_KUBERNETES is read at ddbabd8 = 26.8.2-edge; with the default image v1.37 is refused.
    with pytest.raises(ConfigError, match=r"v1\.37\.0 is newer than Kamaji supports \(v1\.36\.x"):
        plan(dev_config(kamajiImageTag="", tenants=[{"name": "a", "kubernetesVersion": "v1.37.0"}]), preview=True)


def test_a_malformed_image_tag_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"kamaji-hami-lab:kamajiImageTag: 'edge:26' is not an image tag"):
        plan(dev_config(kamajiImageTag="edge:26"), preview=True)
