"""`make up`, `make sleep` and `make wake` refuse a tenant that a restore holds: the TenantControlPlane is applied
with pulumi.com/patchForce, so an apply would start its API servers on a prefix the restore emptied or half wrote.
scripts/check-tenant-version.sh, which runs before the apply, reads the hold's annotation (snapshot/live.py)."""

from __future__ import annotations

import pytest

from snapshot.live import HOLD_ANNOTATION
from tests.test_scripts import MANAGEMENT_KUBECONFIG
from tests.test_scripts import TCP_VERSIONS as TCP


def check(fakes, answer: str, sleeping: str = "false"):
    """What kubectl prints for the versions and, on the next line, the hold's replica count (empty: none)."""
    fakes.on("kubectl", TCP, answer)
    return fakes.run(
        "check-tenant-version.sh",
        KUBECONFIG_DATA=MANAGEMENT_KUBECONFIG,
        TENANT="tenant-a",
        NAMESPACE="tenants",
        KUBERNETES_VERSION="v1.36.4",
        SLEEPING=sleeping,
    )


@pytest.mark.parametrize("versions", ["v1.36.4 v1.36.4", "v1.36.4 "])  # the second not Ready: no running version
@pytest.mark.parametrize("sleeping", ["true", "false"])
def test_a_tenant_held_by_an_unfinished_restore_is_not_applied(fakes, versions, sleeping):
    result = check(fakes, f"{versions}\n2", sleeping)
    assert result.returncode == 1
    assert "tenant tenant-a is held asleep by a restore that did not finish" in result.stderr
    assert "make restore TENANT=tenant-a SNAPSHOT=" in result.stderr and result.stdout == ""
    (read,) = fakes.calls("kubectl")
    jsonpath = next(arg for arg in read["argv"] if arg.startswith("jsonpath="))
    assert jsonpath.endswith('{"\\n"}{.metadata.annotations.' + HOLD_ANNOTATION + "}")


@pytest.mark.parametrize("answer", ["v1.36.4 v1.36.4", "v1.36.4 v1.36.4\n"])
def test_a_tenant_no_restore_holds_is_applied(fakes, answer):
    result = check(fakes, answer)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "tenant-a: v1.36.4 -> v1.36.4\n"
