"""Plans of the dev stack, made once per test session (tests only read them)."""

import pytest

from tests.plan import dev_config, plan


@pytest.fixture(scope="session", params=[True, False], ids=["first-preview", "up"])
def dev_plan(request):
    """The dev stack as a first `pulumi preview` on an empty stack, and as a `pulumi up`."""
    return plan(dev_config(), preview=request.param)


@pytest.fixture(scope="session")
def up_plan():
    return plan(dev_config(), preview=False)
