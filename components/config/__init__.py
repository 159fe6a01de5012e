"""Stack configuration, read once and validated into frozen settings.

Every problem is reported before any resource is registered, one line each,
naming the key path as users write it and the offending value. The models in
``models.py`` describe the config, ``rules.py`` checks its values against each other
and ``conversion.py`` turns it into settings; nothing outside this package sees pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pydantic import ValidationError

from components.config.conversion import lab_settings
from components.config.messages import PROJECT, key_path, problem_lines, rules_held_back
from components.config.models import StackConfig
from components.config.rules import stack_warnings
from components.settings import LabSettings

# Rules joining several keys (a pool within the lab's subnet, a quota against its tenant's GPUs) run only once
# every key they join is valid and meets its own rules.
MORE_MAY_FOLLOW = ("More problems may follow: rules that join a key to other keys run once the problems above "
                   "are fixed.")


class ConfigError(pulumi.RunError):
    """Raised with every config problem found, one per line."""


def load_settings() -> LabSettings:
    """Reads this project's stack config (as the CLI hands it to the program)."""
    from pulumi.runtime.config import CONFIG, get_config_env, get_config_secret_keys_env, is_config_secret

    prefix = f"{PROJECT}:"
    raw = {**get_config_env(), **CONFIG.get()}
    ours = {key[len(prefix) :]: value for key, value in raw.items() if key.startswith(prefix)}
    # The language host names secret keys in the environment
    # (pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go@1b5949891b); mocks set them in the runtime.
    secret = set(get_config_secret_keys_env())
    config = _validated(ours, {key for key in ours if prefix + key in secret or is_config_secret(prefix + key)})
    for path, message in stack_warnings(config):
        pulumi.log.warn(f"{key_path(path)}: {message}")
    return lab_settings(config)


def parse_settings(raw: Mapping[str, Any], secret_keys: set[str] | None = None) -> LabSettings:
    """Validates config values (strings from the CLI, or YAML values) into LabSettings.

    `secret_keys`, when known, are the keys the stack stores as secrets: a
    credential stored in plain text is refused.
    """
    return lab_settings(_validated(raw, secret_keys))


def _validated(raw: Mapping[str, Any], secret_keys: set[str] | None) -> StackConfig:
    try:
        return StackConfig.model_validate(dict(raw), context={"secret_keys": secret_keys})
    except ValidationError as invalid:
        note = f"\n{MORE_MAY_FOLLOW}" if rules_held_back(invalid) else ""
        raise ConfigError("invalid stack configuration:\n  " + "\n  ".join(problem_lines(invalid)) + note) from None
