"""A scratch namespace that cannot be confirmed gone: the warning says why, in kubectl's words."""

from tests.test_validation import FakeClock, error, healthy_lab, validate

# kubectl's words for an unreachable server and for a refused request:
# kubernetes/kubectl pkg/cmd/util/helpers.go, StandardErrorMessage.
NO_ROUTE = "Unable to connect to the server: dial tcp 172.18.255.201:6443: connect: no route to host\n"
FORBIDDEN = 'Error from server (Forbidden): namespaces "x" is forbidden: User "u" cannot get resource "namespaces"\n'


def test_a_cluster_lost_during_cleanup_is_named_in_the_warning():
    lab = healthy_lab()
    lab.on("tenant-b", r"^delete namespace validate-", error(NO_ROUTE))

    _, report = validate(lab, "--only", "konnectivity", clock=FakeClock())

    (warning,) = report["warnings"]
    assert "was not deleted (cannot reach the tenant-b API server: Unable to connect to the server" in warning


def test_a_failing_check_for_the_namespace_gives_kubectls_error_not_a_timeout():
    lab = healthy_lab()
    lab.on("tenant-b", r"^get namespace validate-", error(FORBIDDEN))

    _, report = validate(lab, "--only", "konnectivity", clock=FakeClock())

    (warning,) = report["warnings"]
    assert "was not deleted (Error from server (Forbidden)" in warning
    assert "still there" not in warning
