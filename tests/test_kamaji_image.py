"""The Kamaji controller image can be pinned; by default it follows the chart."""

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


def test_without_a_tag_the_chart_chooses_the_image():
    assert "image" not in kamaji_release().inputs.get("values", {})


def test_a_malformed_image_tag_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"kamaji-hami-lab:kamajiImageTag: 'edge:26' is not an image tag"):
        plan(dev_config(kamajiImageTag="edge:26"), preview=True)
