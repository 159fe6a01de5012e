"""Plans of the dev stack, made once per test session (tests only read them)."""

import os
import shutil
from collections.abc import Callable
from typing import Any

import pytest

from tests.etcd_pods import stop_shared
from tests.plan import dev_config, plan
from tests.real_etcd import start_etcd


def under_mutmut_stats() -> bool:
    # mutmut's stats run records which functions each test calls and later runs only those
    # tests against a function's mutants; a plan built once would count for its first test only.
    return os.environ.get("MUTANT_UNDER_TEST") == "stats"


@pytest.fixture(scope="session")
def shared() -> Callable[[str, Callable[[], Any]], Any]:
    """`shared(key, build)`: build once per session, except in mutmut's stats run (once per test)."""
    made: dict[str, Any] = {}

    def get(key: str, build: Callable[[], Any]) -> Any:
        if under_mutmut_stats():
            return build()
        if key not in made:
            made[key] = build()
        return made[key]

    return get


@pytest.fixture(params=[True, False], ids=["first-preview", "up"])
def dev_plan(request, shared):
    """The dev stack as a first `pulumi preview` on an empty stack, and as a `pulumi up`."""
    return shared(f"dev-{request.param}", lambda: plan(dev_config(), preview=request.param))


@pytest.fixture
def up_plan(shared):
    return shared("dev-False", lambda: plan(dev_config(), preview=False))


@pytest.fixture
def machine_plan(shared):
    """`machine_plan(gpus, preview)`: every tenant on machines, on an existing cluster (no Docker anywhere)."""
    from tests.test_machines import EXISTING, MOCK_GPU_TENANT, REAL_GPU_TENANT, SECRETS

    def get(gpus: str, preview: bool):
        tenant = MOCK_GPU_TENANT if gpus == "mock" else REAL_GPU_TENANT
        config = dev_config(tenants=[tenant], **EXISTING)
        return shared(f"machines-{gpus}-{preview}", lambda: plan(config, preview=preview, secrets=SECRETS))

    return get


@pytest.fixture
def real_etcd(request):
    """A real etcd server on loopback with client-certificate auth, stopped and removed when the test ends."""
    server, directory = start_etcd()

    def stop() -> None:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)

    request.addfinalizer(stop)
    return server


@pytest.fixture(scope="session", autouse=True)
def shared_etcd_stops():
    """Stops the real etcd that tests/etcd_pods.py shares between tests, if one was started."""
    yield
    stop_shared()
