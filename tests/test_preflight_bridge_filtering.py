"""make preflight and br_netfilter: the lab's network filter sees traffic between two containers of its network
only while net.bridge.bridge-nf-call-iptables is on (scripts/network-filter-rules.sh refuses to install otherwise)."""

from __future__ import annotations

import pytest

from tests.test_preflight import make_host, preflight, run_preflight

SETTING = "proc/sys/net/bridge/bridge-nf-call-iptables"
FIX = "fix: sudo sysctl -w net.bridge.bridge-nf-call-iptables=1"


def test_bridge_filtering_switched_off_is_an_error_with_the_fix(tmp_path, capsys):
    host, _ = make_host(tmp_path, {SETTING: "0\n"})

    code, out = run_preflight(host, capsys)

    assert code == 1
    assert "net.bridge.bridge-nf-call-iptables is 0" in out and "network filter could not hold" in out
    assert FIX in out


@pytest.mark.parametrize("value", ["1\n", None], ids=["on", "br_netfilter-not-loaded"])
def test_bridge_filtering_on_or_not_loaded_yet_passes(tmp_path, capsys, value):
    # Not loaded: the filter loads br_netfilter (as every worker does), whose default is on.
    host, _ = make_host(tmp_path, {SETTING: value})

    code, out = run_preflight(host, capsys)

    assert code == 0, out
    assert "bridge-nf-call-iptables" not in out


def test_a_lab_without_its_own_network_is_not_asked_for_it(tmp_path):
    # On an existing cluster's dockerNetwork the lab installs no filter (docs/architecture.md).
    host, _ = make_host(tmp_path, {SETTING: "0\n"})

    findings = preflight.preflight(host, preflight.Mode(kind=False, docker=True))

    assert not [finding for finding in findings if "bridge-nf-call-iptables" in finding.problem]
