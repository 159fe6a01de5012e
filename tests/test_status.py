"""Offline tests for `python -m validation.status` on hand-made `kubectl -o json` answers.

tests/fixtures/status/ holds a three-tenant lab: tenant-a has one worker with two A100s (three
pods share the first, the second is idle apart from a finished pod), tenant-b's API server is
unreachable, tenant-c has no GPUs.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from benchmarks import status_refresh
from tests.test_validation_bounds import SilentServer, outputs_pointing_at
from validation.answers import MalformedAnswer
from validation.checks.hami import REGISTER_ANNOTATION
from validation.host import TIMED_OUT, CommandResult
from validation.status import gather
from validation.status import render as render_module
from validation.status.cli import main
from validation.status.gather import (
    CLUSTER_BOUND,
    GRACE,
    STATUS_CALL_TIMEOUT,
    STATUS_REQUEST_TIMEOUT,
    read_side_by_side,
)
from validation.status.render import WIDTH, Style, bar, memory, render, short_node
from validation.status.rows import gpus, pending_gpu_pods, quota_usage

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "status"
GOLDEN = FIXTURES / "status.txt"
# What kubectl prints when a MetalLB address is not routable from the host.
NO_ROUTE = (
    'E1202 10:11:31.341365 1 memcache.go:265] "Unhandled Error" err="couldn\'t get current server API group list"\n'
    "Unable to connect to the server: dial tcp 172.30.149.40:6443: connect: no route to host\n"
)
WIDE_GOLDEN = FIXTURES / "status-wide.txt"
REFRESHED = datetime.datetime(2026, 9, 14, 8, 32, 5, tzinfo=datetime.UTC)
GPU_1 = "GPU-7c9e2a41-5d3b-4f60-a8e1-0a1000000001"
GPU_2 = "GPU-7c9e2a41-5d3b-4f60-a8e1-0a1000000002"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def healed(nodes: dict[str, Any]) -> dict[str, Any]:
    """The nodes answer with every GPU in the register annotation healthy."""
    nodes = json.loads(json.dumps(nodes))
    for node in nodes["items"]:
        found = node["metadata"].get("annotations") or {}
        if REGISTER_ANNOTATION in found:
            found[REGISTER_ANNOTATION] = json.dumps(
                [{**device, "health": True} for device in json.loads(found[REGISTER_ANNOTATION])]
            )
    return nodes


HEALED_NODES_A = healed(json.loads(fixture("nodes-tenant-a.json")))


class FakeKubectl:
    """Answers `kubectl --kubeconfig <dir>/<cluster>.kubeconfig ...` from the fixtures; records every command.

    It is also the clock: each thread (one per cluster read side by side) has its own time, which a
    call advances by `slow[cluster]` seconds (at most the call's limit, as a killed kubectl would).
    `before` runs first in each call, where a test holds one cluster back.
    """

    def __init__(
        self,
        unreachable: Sequence[str] = ("tenant-b",),
        answers: dict[tuple[str, str], Any] | None = None,
        gpus_healthy: bool = False,
    ):
        self.unreachable = set(unreachable)
        # (cluster, resource) -> a replacement answer; gpus_healthy: tenant-a's second GPU reports health too.
        self.answers = {("tenant-a", "nodes"): HEALED_NODES_A} if gpus_healthy else {}
        self.answers.update(answers or {})
        self.slow: dict[str, float] = {}
        self.before: Callable[[str, tuple[str, ...]], CommandResult | None] = lambda cluster, args: None
        self.commands: list[tuple[str, ...]] = []
        self.calls: list[tuple[str, tuple[str, ...], float, float, int]] = []  # cluster, args, start, timeout, request
        self.kubeconfigs: set[Path] = set()
        self.sleeps: list[float] = []
        self._time = threading.local()

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 60, env=None) -> CommandResult:
        argv = tuple(argv)
        assert argv[:2] == ("kubectl", "--kubeconfig"), argv
        # Every API call carries a request timeout (validation/kube.py), so a hung API server cannot stall the view.
        assert argv[3].startswith("--request-timeout="), argv
        cluster, args = Path(argv[2]).stem, argv[4:]
        self.commands.append(args)
        self.kubeconfigs.add(Path(argv[2]))
        request = int(argv[3].removeprefix("--request-timeout=").removesuffix("s"))
        self.calls.append((cluster, args, self.now(), timeout, request))
        self._time.now = self.now() + min(self.slow.get(cluster, 0.0), timeout)
        if (held := self.before(cluster, args)) is not None:
            return held
        if cluster in self.unreachable:
            return CommandResult(argv, 1, "", NO_ROUTE)
        answers = {
            ("get", "--raw", "/version"): "version.json",
            ("get", "nodes", "-o", "json"): f"nodes-{cluster}.json",
            ("get", "pods", "--all-namespaces", "-o", "json"): f"pods-{cluster}.json",
            ("get", "resourcequotas", "--all-namespaces", "-o", "json"): f"resourcequotas-{cluster}.json",
        }
        if cluster == "management":
            # One list of every TenantControlPlane, as kubectl prints it; a call the fake does not model fails.
            assert args == ("get", "tenantcontrolplanes.kamaji.clastix.io", "--all-namespaces", "-o", "json"), args
            tcps = [json.loads(fixture(f"tcp-{name}.json")) for name in ("tenant-a", "tenant-b", "tenant-c")]
            answer = self.answers.get((cluster, "tenantcontrolplanes"), as_list(tcps))
            return CommandResult(argv, 0, json.dumps(answer), "")
        resource = args[1] if args[1] != "--raw" else "version"
        if (cluster, resource) in self.answers:
            return CommandResult(argv, 0, json.dumps(self.answers[(cluster, resource)]), "")
        return CommandResult(argv, 0, fixture(answers[args]), "")

    # Clock for --watch: stop after the second refresh. Not KeyboardInterrupt, which would stop pytest
    # itself when a refresh loop runs where none should.
    def now(self) -> float:
        return getattr(self._time, "now", 0.0)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if len(self.sleeps) == 2:
            raise StopWatching

    def wall(self) -> datetime.datetime:
        return REFRESHED


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """kubectl get -o json's answer for several objects."""
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def items(name: str) -> list[dict[str, Any]]:
    return json.loads(fixture(name))["items"]


class StopWatching(Exception):
    """What the fake clock raises where a user would press Ctrl-C."""


def run_status(*args: str, fake: FakeKubectl | None = None) -> tuple[int, str]:
    fake = fake or FakeKubectl()
    stdout = io.StringIO()
    code = main(["--outputs", str(FIXTURES / "outputs.json"), *args], runner=fake, stdout=stdout, clock=fake)
    return code, stdout.getvalue()


def status_json(*args: str, fake: FakeKubectl | None = None) -> tuple[int, dict[str, Any]]:
    code, text = run_status("--json", *args, fake=fake)
    return code, json.loads(text)


def tenant(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(item for item in doc["tenants"] if item["name"] == name)


def test_pods_sharing_one_gpu_add_up_and_each_shows_its_slice():
    _, doc = status_json()
    shared = next(gpu for gpu in tenant(doc, "tenant-a")["gpus"] if gpu["uuid"] == GPU_1)
    assert shared["model"] == "NVIDIA A100 80GB"
    assert shared["memoryMiB"] == {"allocated": 4096 + 8192 + 4096, "total": 81920}
    assert shared["cores"] == {"allocated": 25 + 30 + 25, "total": 100}
    assert shared["pods"] == [
        {"namespace": "ml", "name": "share-0", "memoryMiB": 4096, "cores": 25},
        {"namespace": "ml", "name": "share-1", "memoryMiB": 8192, "cores": 30},
        {"namespace": "team-a", "name": "train-0", "memoryMiB": 4096, "cores": 25},
    ]


def test_a_gpu_whose_only_pod_finished_is_idle():
    _, doc = status_json()
    idle = next(gpu for gpu in tenant(doc, "tenant-a")["gpus"] if gpu["uuid"] == GPU_2)
    assert idle["memoryMiB"] == {"allocated": 0, "total": 81920}
    assert idle["cores"] == {"allocated": 0, "total": 100}
    assert idle["pods"] == []


def test_a_tenant_reports_version_control_plane_nodes_quota_usage_and_its_unhealthy_gpu():
    _, doc = status_json()
    a = tenant(doc, "tenant-a")
    assert (a["endpoint"], a["version"], a["reachable"], a["error"]) == (
        "https://172.30.149.37:6443",
        "v1.36.4",
        True,
        None,
    )
    assert a["controlPlaneReady"] is True
    assert a["nodes"] == {"ready": 1, "total": 1, "missing": [], "notReady": []}
    # Its second A100 registers without health: HAMi places nothing on it, so the tenant is not healthy.
    assert a["healthy"] is False and a["problems"] == [f"GPU kamaji-tenant-a-w1/1 ({GPU_2}) unhealthy"]
    assert a["gpuHealth"] == {"missing": [], "unhealthy": [{"node": "kamaji-tenant-a-w1", "index": 1, "uuid": GPU_2}]}
    assert a["quotas"] == [
        {
            "namespace": "team-a",
            "name": "gpu-quota",
            "resources": {
                "limits.nvidia.com/gpucores": {"used": "25", "hard": "50"},
                "limits.nvidia.com/gpumem": {"used": "4096", "hard": "8192"},
                "requests.nvidia.com/gpu": {"used": "1", "hard": "4"},
            },
        }
    ]


def test_cpu_only_tenant_has_no_gpus_and_is_healthy():
    _, doc = status_json()
    c = tenant(doc, "tenant-c")
    assert c["gpus"] == [] and c["quotas"] == []
    assert c["nodes"] == {"ready": 1, "total": 1, "missing": [], "notReady": []}
    assert c["healthy"] is True


def test_unreachable_tenant_says_why_and_the_others_still_print():
    code, doc = status_json()
    b = tenant(doc, "tenant-b")
    assert b["reachable"] is False and b["healthy"] is False and b["problems"] == ["cluster not read"]
    assert "no route to host" in b["error"] and "memcache.go" not in b["error"]
    assert b["controlPlaneReady"] is True  # the management cluster still answers for it
    # Nothing is known of its nodes, GPUs, Pending pods or quotas: the JSON still has every key, empty.
    assert (b["nodes"], b["gpus"], b["pending"], b["quotas"]) == (
        {"ready": 0, "total": 0, "missing": [], "notReady": []},
        [],
        [],
        [],
    )
    assert [item["name"] for item in doc["tenants"]] == ["tenant-a", "tenant-b", "tenant-c"]
    assert doc["ok"] is False and code == 1


def test_exit_status_is_zero_when_every_tenant_is_healthy():
    code, doc = status_json(fake=FakeKubectl(unreachable=(), gpus_healthy=True))
    assert doc["ok"] is True and code == 0


def test_tenant_option_narrows_to_the_named_tenants():
    fake = FakeKubectl(gpus_healthy=True)
    code, doc = status_json("--tenant", "tenant-a", "tenant-c", fake=fake)
    assert [item["name"] for item in doc["tenants"]] == ["tenant-a", "tenant-c"]
    assert code == 0  # the unreachable tenant-b was not asked
    assert ("get", "tenantcontrolplanes.kamaji.clastix.io", "tenant-b", "-n", "tenants", "-o", "json") not in (
        fake.commands
    )


def test_unknown_tenant_is_an_error_naming_the_known_ones(capsys):
    code, _ = run_status("--tenant", "tenant-z")
    assert code == 64  # a usage error (EX_USAGE), as in the validation suite; 2 is only "no stack outputs"
    assert "tenant-z" in capsys.readouterr().err


def test_only_reads_the_clusters():
    fake = FakeKubectl()
    run_status(fake=fake)
    assert {command[0] for command in fake.commands} == {"get"}


def test_watch_refreshes_until_interrupted():
    fake = FakeKubectl()
    with pytest.raises(StopWatching):
        run_status("--json", "--watch", "5", fake=fake)
    assert fake.sleeps == [5, 5]
    assert fake.commands.count(("get", "--raw", "/version")) == 3 * 2


def test_colour_only_on_a_terminal_without_no_color(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    fake = FakeKubectl()
    outputs = ["--outputs", str(FIXTURES / "outputs.json")]
    monkeypatch.delenv("NO_COLOR", raising=False)
    coloured = Terminal()
    main(outputs, runner=fake, stdout=coloured, clock=fake)
    assert "\033[31m" in coloured.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    plain = Terminal()
    main(outputs, runner=fake, stdout=plain, clock=fake)
    assert plain.getvalue() == GOLDEN.read_text()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_status_reads_the_existing_stack_and_passes_its_options(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "PULUMI_BACKEND_URL"}
    dry = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(ROOT),
            "-n",
            "status",
            f"VENV={tmp_path / 'venv'}",
            "STATUS_ARGS=--tenant tenant-a --json",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert dry.returncode == 0, dry.stderr
    assert "pulumi stack select dev" in dry.stdout and "--create" not in dry.stdout
    assert "-m validation.status --stack dev --tenant tenant-a --json" in dry.stdout


def test_the_readme_shows_a_frame_the_code_prints_for_the_fixtures():
    """The README's "Status at a glance" frame is this code's output for tests/fixtures/status/."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Status at a glance") :]
    frame = section[section.index("```\n") + 4 : section.index("\n```", section.index("```\n"))] + "\n"
    assert frame == run_status()[1]
    assert f"each within its own\nbound ({CLUSTER_BOUND} s)" in section  # the bound it names is the code's


def test_watch_needs_a_positive_interval(capsys):
    with pytest.raises(SystemExit) as exit_:
        run_status("--watch", "0")
    assert exit_.value.code == 64
    assert "positive number of seconds" in capsys.readouterr().err


def test_without_the_management_cluster_the_control_plane_is_unknown_and_tenants_still_show():
    code, doc = status_json(fake=FakeKubectl(unreachable=("management",)))
    assert doc["management"]["reachable"] is False and "no route to host" in doc["management"]["error"]
    a = tenant(doc, "tenant-a")
    assert a["controlPlaneReady"] is None and a["healthy"] is False and a["error"] is None
    assert len(a["gpus"]) == 2
    assert code == 1


@pytest.mark.parametrize("interval", ["abc", "-1", "0"])
def test_watch_refuses_an_interval_that_is_not_a_positive_number(capsys, interval):
    with pytest.raises(SystemExit) as exit_:
        run_status("--watch", interval)
    assert exit_.value.code == 64
    assert f"expected a positive number of seconds, got '{interval}'" in capsys.readouterr().err


def test_watch_takes_fractions_of_a_second():
    fake = FakeKubectl()
    with pytest.raises(StopWatching):
        run_status("--json", "--watch", "0.5", fake=fake)
    assert fake.sleeps == [0.5, 0.5]


def test_every_unknown_tenant_is_named_beside_the_known_ones(capsys):
    code, _ = run_status("--tenant", "tenant-z", "tenant-a", "tenant-y")
    assert code == 64
    assert "status: no tenant named tenant-y, tenant-z; tenants: tenant-a, tenant-b, tenant-c" in (
        capsys.readouterr().err
    )


def test_unreadable_outputs_are_reported_on_stderr(tmp_path, capsys):
    broken = tmp_path / "outputs.json"
    broken.write_text("{not json")
    stdout = io.StringIO()
    code = main(["--outputs", str(broken)], runner=FakeKubectl(), stdout=stdout, clock=FakeKubectl())
    assert code == 2 and stdout.getvalue() == ""
    assert capsys.readouterr().err.startswith("status: ")


def test_without_outputs_the_stack_s_own_are_read(capsys):
    class Pulumi(FakeKubectl):
        def run(self, argv, stdin=None, timeout=60, env=None):
            if argv[0] == "pulumi":
                self.pulumi = tuple(argv)
                return CommandResult(tuple(argv), 0, fixture("outputs.json"), "")
            return super().run(argv, stdin, timeout, env)

    fake = Pulumi(unreachable=(), gpus_healthy=True)
    for args, stack in (((), "dev"), (("--stack", "lab"), "lab")):
        assert main(["--json", *args], runner=fake, stdout=io.StringIO(), clock=fake) == 0
        assert fake.pulumi[-2:] == ("--stack", stack)


def test_json_is_indented_for_people_and_tools_alike():
    _, text = run_status("--json")
    assert text.startswith('{\n  "ok": false,\n  "refreshed": "2026-09-14T08:32:05Z",\n  "management": {\n')


def test_colour_marks_health_errors_and_the_verdict():
    _, doc = status_json()
    text = render(doc, Style(True))
    green, red, reset = "\033[32m", "\033[31m", "\033[0m"
    assert f"{green}tenant-c  v1.36.4  healthy" in text and f"{red}tenant-b  -  UNHEALTHY" in text
    assert f"{red}tenant-a  v1.36.4  UNHEALTHY" in text
    assert f"{red}  GPUs unhealthy (HAMi places no pod on them): w1/1" in text
    assert f"{red}  cannot reach the tenant-b API server: " in text
    assert f"{red}  w1/1  NVIDIA A100 80GB  UNHEALTHY" in text  # the card HAMi will not place pods on
    assert f"{red}  Pending ml/big-0: " in text
    assert text.endswith(f"{red}NOT OK: some tenants are unhealthy or unreachable{reset}\n")
    doc = {**doc, "ok": True}
    assert render(doc, Style(True)).endswith(f"{green}OK: every tenant is healthy{reset}\n")


def test_an_unreachable_management_cluster_and_a_tenant_that_cannot_be_drawn_are_red(monkeypatch):
    _, doc = status_json()
    doc["management"] = {**doc["management"], "reachable": False, "error": "connection refused"}
    monkeypatch.setattr(render_module, "bar", lambda used, total: 1 / 0)  # only tenant-a has GPUs
    red, reset = "\033[31m", "\033[0m"
    lines = render(doc, Style(True)).splitlines()
    assert f"{red}management  UNREACHABLE: connection refused{reset}" in lines
    drawn_instead = lines.index(f"{red}tenant-a  UNHEALTHY{reset}")
    assert lines[drawn_instead + 1] == f"{red}  internal error: ZeroDivisionError: division by zero{reset}"


def test_each_problem_line_is_red_and_a_healthy_gpu_row_uncoloured_narrow_and_wide():
    _, doc = status_json("--tenant", "tenant-a")
    a = tenant(doc, "tenant-a")
    third = {"node": "kamaji-tenant-a-w3", "index": 0, "uuid": "GPU-w3-0"}
    a["nodes"].update(missing=["kamaji-tenant-a-w2"], notReady=["kamaji-tenant-a-w3"])
    a["gpuHealth"]["missing"] = [
        {"worker": "kamaji-tenant-a-w3", "model": "NVIDIA A100 80GB", "registered": 1, "configured": 2}
    ]
    a["gpuHealth"]["unhealthy"].append(third)
    a["pending"] = []  # red too, tested above
    red, reset = "\033[31m", "\033[0m"
    lines = render(doc, Style(True)).splitlines()
    assert [line for line in lines if line.startswith(red + "  ")] == [
        f"{red}  worker kamaji-tenant-a-w2 has no Node{reset}",
        f"{red}  node kamaji-tenant-a-w3 not Ready{reset}",
        f"{red}  GPUs missing: w3 registers 1 of 2 NVIDIA A100 80GB{reset}",
        f"{red}  GPUs unhealthy (HAMi places no pod on them): w1/1, w3/0{reset}",
        f"{red}  w1/1  NVIDIA A100 80GB  UNHEALTHY  0/10   0/80 GiB   [..........]  0/100   [..........]{reset}",
    ]
    assert any(line.startswith("  w1/0  NVIDIA A100 80GB  ok ") for line in lines)  # healthy: no colour at all
    wide = render(doc, Style(False), wide=True).splitlines()
    assert "  GPUs missing: kamaji-tenant-a-w3 registers 1 of 2 NVIDIA A100 80GB" in wide
    assert f"  GPUs unhealthy (HAMi places no pod on them): {GPU_2}, GPU-w3-0" in wide


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


CLEAR = "\033[H\033[2J"  # cursor home, then erase the screen (ECMA-48 CUP and ED 2)


def watch(stdout: io.StringIO, *args: str) -> str:
    fake = FakeKubectl()
    with contextlib.suppress(StopWatching):
        main(["--outputs", str(FIXTURES / "outputs.json"), *args], runner=fake, stdout=stdout, clock=fake)
    return stdout.getvalue()


def test_a_watched_terminal_is_cleared_before_each_refresh_and_json_never_is(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    for args, cleared in ((["--watch", "5"], True), (["--json", "--watch", "5"], False), ([], False)):
        frames = watch(Terminal(), *args).split(CLEAR)
        if cleared:
            assert frames[0] == "" and len(frames) == 3, args
            assert all(frame.startswith("\033[0mrefreshed ") or frame.startswith("refreshed ") for frame in frames[1:])
        else:
            assert len(frames) == 1, args


def test_no_color_turns_colour_off_and_still_redraws(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    frames = watch(Terminal(), "--watch", "5").split(CLEAR)
    assert frames == ["", GOLDEN.read_text(), GOLDEN.read_text()]


def test_a_redirected_watch_appends_one_plain_frame_per_refresh(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    text = watch(io.StringIO(), "--watch", "5")  # a file or a pipe: not a terminal
    assert "\033[" not in text
    assert text == GOLDEN.read_text() * 2


def test_the_control_plane_line_says_ready_not_ready_or_unknown():
    _, doc = status_json()
    plain = Style(False)
    lines = {True: "control plane Ready;", False: "control plane not Ready;", None: "control plane unknown;"}
    for ready, said in lines.items():
        tenant_a = {**tenant(doc, "tenant-a"), "controlPlaneReady": ready}
        assert said in render({**doc, "ok": False, "tenants": [tenant_a]}, plain)


def test_a_quota_not_yet_counted_shows_zero_used_and_one_without_status_shows_nothing():
    fresh = {
        "metadata": {"name": "gpu-quota", "namespace": "team-a"},
        "status": {"hard": {"limits.nvidia.com/gpumem": "8192"}},
    }
    assert quota_usage(fresh)["resources"] == {"limits.nvidia.com/gpumem": {"used": "0", "hard": "8192"}}
    unwritten = {"metadata": {"name": "gpu-quota", "namespace": "team-a"}}
    assert quota_usage(unwritten) == {"namespace": "team-a", "name": "gpu-quota", "resources": {}}


QUOTA = {
    "metadata": {"name": "gpu-quota", "namespace": "team-a"},
    "status": {"hard": {"limits.nvidia.com/gpumem": "8192"}, "used": {"limits.nvidia.com/gpumem": "4096"}},
}


def quota_where(change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    quota = json.loads(json.dumps(QUOTA))
    change(quota)
    return quota


@pytest.mark.parametrize(
    ("quota", "error"),
    [
        (quota_where(lambda quota: quota["metadata"].pop("namespace")), "ResourceQuota: metadata has no namespace"),
        (
            quota_where(lambda quota: quota.update(status=[])),
            "ResourceQuota team-a/gpu-quota: status is a list, not an object",
        ),
        (
            quota_where(lambda quota: quota["status"].update(hard="8192")),
            "ResourceQuota team-a/gpu-quota: hard is a string, not an object",
        ),
        (
            quota_where(lambda quota: quota["status"].update(used=["4096"])),
            "ResourceQuota team-a/gpu-quota: used is a list, not an object",
        ),
        (
            quota_where(lambda quota: quota["status"]["used"].update({"limits.nvidia.com/gpumem": 4096})),
            "ResourceQuota team-a/gpu-quota: limits.nvidia.com/gpumem is a number, not a string",
        ),
        (
            quota_where(lambda quota: quota["status"]["hard"].update({"limits.nvidia.com/gpumem": 8192})),
            "ResourceQuota team-a/gpu-quota: limits.nvidia.com/gpumem is a number, not a string",
        ),
    ],
    ids=["no-namespace", "status", "hard", "used", "used-amount", "hard-amount"],
)
def test_a_malformed_quota_is_refused_naming_the_quota_and_the_field(quota, error):
    assert quota_usage(QUOTA)["resources"] == {"limits.nvidia.com/gpumem": {"used": "4096", "hard": "8192"}}
    with pytest.raises(MalformedAnswer) as refused:
        quota_usage(quota)
    assert str(refused.value) == error


def test_usage_bars_fill_in_proportion_and_stay_empty_without_a_total():
    empty = "[" + "." * 10 + "]"
    assert (bar(0, 0), bar(5, 10), bar(10, 10), bar(1, 100)) == (empty, "[#####.....]", "[##########]", empty)


def test_an_unreachable_management_cluster_is_one_line_not_repeated_per_tenant():
    code, text = run_status("--wide", fake=FakeKubectl(unreachable=("management", "tenant-b")))
    reasons = [line for line in text.splitlines() if "no route to host" in line]
    assert [reason.split(":")[0] for reason in reasons] == [
        "management  UNREACHABLE",
        "  cannot reach the tenant-b API server",  # tenant-b's own, beside it
    ]
    assert text.count("control plane unknown") == 3  # each tenant says what it lacks, not why again
    assert code == 1


def test_a_finished_pod_listed_before_running_ones_hides_none_of_them():
    nodes = json.loads(fixture("nodes-tenant-a.json"))["items"]
    pods = json.loads(fixture("pods-tenant-a.json"))["items"]
    finished = [pod for pod in pods if pod["status"]["phase"] == "Succeeded"]
    running = [pod for pod in pods if pod["status"]["phase"] == "Running"]
    first = gpus(nodes, finished + running)[0]
    assert [pod["name"] for pod in first["pods"]] == ["share-0", "share-1", "train-0"]


def test_nodes_without_a_gpu_registration_are_left_out_and_absent_fields_are_empty():
    registered = json.loads(fixture("nodes-tenant-a.json"))["items"][0]

    def node(name: str, **annotations: str) -> dict[str, Any]:
        return {"metadata": {"name": name, **({"annotations": annotations} if annotations else {})}}

    register = "hami.io/node-nvidia-register"
    shown = gpus(
        [
            node("no-annotations"),
            # HAMi leaves out every empty field (DeviceInfo is all omitempty, pkg/device/devices.go@v2.10.0).
            node("bare", **{register: '[{"count": 10}]'}),
            registered,
        ],
        pods=[],
    )
    assert [(gpu["node"], gpu["uuid"], gpu["model"], gpu["memoryMiB"]["total"]) for gpu in shown] == [
        ("bare", "", "", 0),
        ("kamaji-tenant-a-w1", GPU_1, "NVIDIA A100 80GB", 81920),
        ("kamaji-tenant-a-w1", GPU_2, "NVIDIA A100 80GB", 81920),
    ]


def test_outputs_can_come_on_standard_input():
    fake, stdout = FakeKubectl(), io.StringIO()
    outputs = io.StringIO(fixture("outputs.json"))
    code = main(["--outputs", "-", "--json"], runner=fake, stdout=stdout, stdin=outputs, clock=fake)
    assert [item["name"] for item in json.loads(stdout.getvalue())["tenants"]] == ["tenant-a", "tenant-b", "tenant-c"]
    assert code == 1  # tenant-b is unreachable


def test_kubeconfigs_live_in_one_temporary_directory_named_for_the_view_and_are_removed():
    fake = FakeKubectl()
    run_status(fake=fake)
    (directory,) = {kubeconfig.parent for kubeconfig in fake.kubeconfigs}
    assert directory.name.startswith("kamaji-hami-lab-status-")
    assert not directory.exists()


# --- Side by side: each cluster is read in its own thread, within its own bound. ---


def hold_back(fake: FakeKubectl, held: str, until: Sequence[str]) -> list[bool]:
    """held's first call waits until each cluster in until has made its last call, then times out.

    If the view read the clusters one after another, held would wait for clusters not yet started:
    the wait ends after 10 s and the returned flag says so.
    """
    last_call = {name: threading.Event() for name in until}
    waited: list[bool] = []

    def before(cluster: str, args: tuple[str, ...]) -> CommandResult | None:
        if cluster in last_call and args[1] in ("resourcequotas", "tenantcontrolplanes.kamaji.clastix.io"):
            last_call[cluster].set()
        if cluster != held:
            return None
        waited.append(all(event.wait(10) for event in last_call.values()))
        # What SubprocessRunner returns for a kubectl it had to stop at the call's limit.
        return CommandResult((), TIMED_OUT, "", f"kubectl timed out after {STATUS_CALL_TIMEOUT}s")

    fake.before = before
    return waited


@pytest.mark.parametrize("held", ["tenant-a", "tenant-b"])
def test_a_hung_tenant_does_not_delay_the_others_and_rows_keep_their_order(held):
    fake = FakeKubectl(unreachable=(), gpus_healthy=True)
    others = [name for name in ("management", "tenant-a", "tenant-b", "tenant-c") if name != held]
    waited = hold_back(fake, held, others)

    code, doc = status_json(fake=fake)

    assert waited == [True]  # the others were all read while the held one hung
    assert [item["name"] for item in doc["tenants"]] == ["tenant-a", "tenant-b", "tenant-c"]  # config order
    hung = tenant(doc, held)
    assert hung["error"] == f"cannot reach the {held} API server: kubectl timed out after {STATUS_CALL_TIMEOUT}s"
    assert [command for cluster, command, *_ in fake.calls if cluster == held] == [("get", "--raw", "/version")]
    assert all(tenant(doc, name)["healthy"] for name in others if name != "management")
    assert code == 1


def test_a_management_cluster_that_hangs_delays_no_tenant_row():
    fake = FakeKubectl(unreachable=(), gpus_healthy=True)
    waited = hold_back(fake, "management", ["tenant-a", "tenant-b", "tenant-c"])

    _, doc = status_json(fake=fake)

    assert waited == [True]
    assert not doc["management"]["reachable"]
    assert [len(item["gpus"]) for item in doc["tenants"]] == [2, 2, 0]


def test_a_slow_tenant_is_cut_off_when_its_bound_ends_and_no_call_outlives_it():
    fake = FakeKubectl(unreachable=(), gpus_healthy=True)
    fake.slow["tenant-b"] = 5.0  # every call takes 5 s of tenant-b's own time; the others' time stands still

    _, doc = status_json(fake=fake)

    b = tenant(doc, "tenant-b")
    assert b["error"] == "tenant-b ran out of time before `kubectl get resourcequotas --all-namespaces -o json`"
    assert not b["reachable"] and not b["healthy"]
    slow_calls = [(start, limit) for cluster, _, start, limit, _ in fake.calls if cluster == "tenant-b"]
    assert [start for start, _ in slow_calls] == [0, 5, 10]
    assert all(start + limit <= CLUSTER_BOUND for start, limit in slow_calls)  # none may run past the bound
    assert tenant(doc, "tenant-a")["healthy"] and tenant(doc, "tenant-c")["healthy"]


def test_a_reader_that_never_returns_is_left_behind_when_the_wait_ends():
    release = threading.Event()
    try:
        answers = read_side_by_side({"quick": lambda: "answer", "stuck": lambda: release.wait(60)}, wait=0.3)
    finally:
        release.set()
    assert answers["quick"] == "answer"
    assert isinstance(answers["stuck"], TimeoutError) and str(answers["stuck"]) == "no answer within 0.3s"


def test_the_wait_for_the_readers_never_runs_past_its_bound(monkeypatch):
    waits: list[float | None] = []

    def recorded(event: threading.Event, timeout: float | None = None) -> bool:
        waits.append(timeout)
        return real(event, timeout)

    real = gather.wait_for
    monkeypatch.setattr(gather, "wait_for", recorded)
    release = threading.Event()
    try:
        answers = read_side_by_side({"first": lambda: release.wait(60), "second": lambda: release.wait(60)}, wait=0.2)
    finally:
        release.set()
    assert [type(answer) for answer in answers.values()] == [TimeoutError, TimeoutError]
    assert len(waits) == 2 and all(left is not None and 0 <= left <= 0.2 for left in waits), waits


def test_a_reader_left_behind_does_not_keep_the_program_from_ending():
    # A cluster that never answers must not hold `make status` open once its frame is printed.
    script = (
        "import threading\n"
        "from validation.status.gather import read_side_by_side\n"
        "print(read_side_by_side({'stuck': threading.Event().wait}, wait=0.1)['stuck'])\n"
    )
    ended = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (ended.returncode, ended.stdout) == (0, "no answer within 0.1s\n"), ended.stderr


def test_each_reader_runs_in_a_thread_named_for_its_cluster():
    # A thread dump of a refresh that hangs (py-spy, faulthandler) names the cluster each thread waits on.
    def thread_name() -> str:
        return threading.current_thread().name

    answers = read_side_by_side({"management": thread_name, "tenant-a": thread_name}, wait=5)
    assert answers == {"management": "status-management", "tenant-a": "status-tenant-a"}


def test_kubectl_s_request_timeout_ends_before_each_call_is_stopped_and_a_call_before_the_cluster_s_bound():
    assert STATUS_REQUEST_TIMEOUT < STATUS_CALL_TIMEOUT < CLUSTER_BOUND
    assert GRACE > 0  # the view waits for a reader past its bound, never less
    fake = FakeKubectl(unreachable=(), gpus_healthy=True)
    fake.slow = {"tenant-a": 3.0, "tenant-b": 5.5, "tenant-c": 0.5}
    run_status(fake=fake)
    assert {limit for *_, limit, _ in fake.calls} != {STATUS_CALL_TIMEOUT}  # some calls had less time left
    assert all(request < limit <= STATUS_CALL_TIMEOUT for *_, limit, request in fake.calls)


def test_the_view_reads_each_cluster_once_per_refresh_in_one_call_for_all_control_planes():
    fake = FakeKubectl(unreachable=(), gpus_healthy=True)
    run_status(fake=fake)
    clusters = [cluster for cluster, *_ in fake.calls]
    assert clusters.count("management") == 1
    assert all(clusters.count(name) == 4 for name in ("tenant-a", "tenant-b", "tenant-c"))


# --- Healthy means healthy: control plane Ready, every configured worker a Node, every Node Ready. ---


def not_ready(node: dict[str, Any]) -> dict[str, Any]:
    node = json.loads(json.dumps(node))
    ready = next(item for item in node["status"]["conditions"] if item["type"] == "Ready")
    ready.update(status="False", reason="KubeletNotReady", message="container runtime network not ready")
    return node


def tcps_with(name: str, status: str) -> dict[str, Any]:
    tcps = [json.loads(fixture(f"tcp-{item}.json")) for item in ("tenant-a", "tenant-b", "tenant-c")]
    for tcp in tcps:
        if tcp["metadata"]["name"] == name:
            if status:
                tcp["status"]["kubernetesResources"]["version"]["status"] = status
            else:
                tcps.remove(tcp)
    return as_list(tcps)


def tcps_unreconciled(name: str) -> dict[str, Any]:
    """The TenantControlPlanes, the named one as created, before Kamaji first writes its status."""
    tcps = tcps_with(name, "Ready")
    for tcp in tcps["items"]:
        if tcp["metadata"]["name"] == name:
            del tcp["status"]
    return tcps


NODE_C = items("nodes-tenant-c.json")[0]
STRANGER = {**NODE_C, "metadata": {**NODE_C["metadata"], "name": "someone-elses-node"}}


@pytest.mark.parametrize(
    ("broken", "problem", "plane_ready"),
    [
        (
            {("management", "tenantcontrolplanes"): tcps_with("tenant-c", "Upgrading")},
            "control plane Upgrading, not Ready",
            False,
        ),
        (
            {("management", "tenantcontrolplanes"): tcps_unreconciled("tenant-c")},
            "control plane without status, not Ready",
            False,
        ),
        (
            {("management", "tenantcontrolplanes"): tcps_with("tenant-c", "")},
            "no TenantControlPlane tenants/tenant-c",
            False,
        ),
        ({("tenant-c", "nodes"): as_list([])}, "worker kamaji-tenant-c-w1 has no Node", True),
        ({("tenant-c", "nodes"): as_list([STRANGER])}, "worker kamaji-tenant-c-w1 has no Node", True),
        ({("tenant-c", "nodes"): as_list([not_ready(NODE_C)])}, "node kamaji-tenant-c-w1 not Ready", True),
        ({("tenant-c", "nodes"): as_list([NODE_C, not_ready(STRANGER)])}, "node someone-elses-node not Ready", True),
    ],
    ids=[
        "control-plane-not-ready",
        "control-plane-without-status",
        "no-control-plane",
        "no-nodes",
        "worker-missing",
        "worker-not-ready",
        "extra-node-not-ready",
    ],
)
def test_a_tenant_missing_any_piece_is_unhealthy_and_the_exit_status_says_so(broken, problem, plane_ready):
    healthy_code, _ = status_json("--tenant", "tenant-c", fake=FakeKubectl(unreachable=(), gpus_healthy=True))
    code, doc = status_json("--tenant", "tenant-c", fake=FakeKubectl(unreachable=(), answers=broken))
    c = tenant(doc, "tenant-c")
    assert (healthy_code, code) == (0, 1)
    assert not c["healthy"] and not doc["ok"]
    assert c["problems"] == [problem]
    assert c["controlPlaneReady"] is plane_ready  # False, not unknown, when Kamaji has none or it is not Ready
    _, text = run_status("--tenant", "tenant-c", fake=FakeKubectl(unreachable=(), answers=broken))
    assert "tenant-c  v1.36.4  UNHEALTHY" in text
    assert f"control plane {'Ready' if plane_ready else 'not Ready'};" in text


def test_nodes_ready_counts_the_ready_ones_of_every_listed_node():
    broken = {("tenant-c", "nodes"): as_list([NODE_C, not_ready(STRANGER)])}
    _, doc = status_json("--tenant", "tenant-c", fake=FakeKubectl(unreachable=(), answers=broken))
    nodes = {"ready": 1, "total": 2, "missing": [], "notReady": ["someone-elses-node"]}
    assert tenant(doc, "tenant-c")["nodes"] == nodes
    _, text = run_status("--tenant", "tenant-c", fake=FakeKubectl(unreachable=(), answers=broken))
    assert "  control plane Ready; nodes 1/2 Ready\n" in text


# --- What a GPU-sharing user looks for, against HAMi v2.10.0's annotation formats. ---


@dataclass(frozen=True)
class RegisteredDevice:
    """One entry of hami.io/node-nvidia-register: HAMi's DeviceInfo and its json tags, every one omitempty.

    Source: Project-HAMi/HAMi pkg/device/devices.go@v2.10.0 (DeviceInfo, MarshalNodeDevices); a false
    health is thus left out, and the scheduler refuses such a card (CardNotHealth) and one whose
    count is used up (CardTimeSlicingExhausted): pkg/device/nvidia/device.go@v2.10.0, Fit.
    """

    id: str
    index: int = 0
    count: int = 0
    devmem: int = 0
    devcore: int = 0
    type: str = ""
    health: bool = False

    def encode(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value not in (0, "", False)}


@dataclass(frozen=True)
class ContainerDevice:
    """One device of hami.io/vgpu-devices-allocated: "<uuid>,<type>,<usedmem MiB>,<usedcores>" and ":",
    containers joined by ";" (pkg/device/devices.go@v2.10.0, EncodeContainerDevices, EncodePodSingleDevice)."""

    uuid: str
    type: str
    usedmem: int
    usedcores: int

    def encode(self) -> str:
        return f"{self.uuid},{self.type},{self.usedmem},{self.usedcores}:"


def gpu_node(*devices: RegisteredDevice) -> dict[str, Any]:
    node = json.loads(json.dumps(NODE_C))
    node["metadata"]["annotations"][REGISTER_ANNOTATION] = json.dumps([device.encode() for device in devices])
    return node


def gpu_pod(name: str, *containers: Sequence[ContainerDevice], phase: str = "Running") -> dict[str, Any]:
    pod = json.loads(json.dumps(items("pods-tenant-a.json")[1]))
    pod["metadata"]["name"] = name
    pod["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = (
        ";".join("".join(device.encode() for device in container) for container in containers) + ";"
    )
    pod["status"]["phase"] = phase
    return pod


def test_each_gpu_shows_slots_memory_cores_and_health_from_hami_s_annotations():
    card = RegisteredDevice("GPU-c0", index=0, count=4, devmem=24576, devcore=100, type="NVIDIA L4 24GB", health=True)
    sick = RegisteredDevice("GPU-c1", index=1, count=4, devmem=24576, devcore=100, type="NVIDIA L4 24GB")
    slice_of = ContainerDevice("GPU-c0", "NVIDIA", 6144, 30)
    pods = [
        gpu_pod("one", [slice_of]),
        gpu_pod("two-containers", [slice_of], [slice_of]),  # each container's device takes a slot
        gpu_pod("done", [slice_of], phase="Succeeded"),
    ]
    shown = gpus([gpu_node(card, sick)], pods)
    assert [(gpu["index"], gpu["healthy"]) for gpu in shown] == [(0, True), (1, False)]
    assert shown[0]["slots"] == {"used": 3, "total": 4}
    assert shown[0]["memoryMiB"] == {"allocated": 3 * 6144, "total": 24576}
    assert shown[0]["cores"] == {"allocated": 90, "total": 100}
    assert [pod["name"] for pod in shown[0]["pods"]] == ["one", "two-containers", "two-containers"]
    assert shown[1]["slots"] == {"used": 0, "total": 4}


def test_the_fixture_lab_s_gpus_and_tenant_totals():
    _, doc = status_json()
    a = tenant(doc, "tenant-a")
    assert [(gpu["uuid"], gpu["healthy"], gpu["slots"]) for gpu in a["gpus"]] == [
        (GPU_1, True, {"used": 3, "total": 10}),
        (GPU_2, False, {"used": 0, "total": 10}),  # its register entry has no health: HAMi's false
    ]
    assert a["totals"] == {
        "gpus": 2,
        "healthy": 1,
        "slots": {"used": 3, "total": 20},
        "memoryMiB": {"allocated": 16384, "total": 2 * 81920},
        "cores": {"allocated": 80, "total": 200},
    }


# --- GPU pods stuck in Pending, with the scheduler's reason from their PodScheduled condition. ---


def test_a_pending_gpu_pod_shows_the_scheduler_s_reason():
    _, doc = status_json()
    (stuck,) = tenant(doc, "tenant-a")["pending"]
    assert (stuck["namespace"], stuck["name"]) == ("ml", "big-0")
    assert stuck["reason"].startswith("Unschedulable: 0/1 nodes are available: 1 1/2 CardInsufficientMemory")


def test_only_gpu_pods_that_no_scheduler_could_place_are_pending_ones():
    (unplaced,) = [pod for pod in items("pods-tenant-a.json") if pod["status"]["phase"] == "Pending"]
    placed = json.loads(json.dumps(unplaced))
    placed["metadata"]["name"] = "pulling-image"
    placed["status"]["conditions"][0].update(status="True", reason=None, message=None)
    no_gpu = json.loads(json.dumps(unplaced))
    no_gpu["metadata"]["name"] = "cpu-only"
    no_gpu["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "64"}}
    untried = json.loads(json.dumps(unplaced))
    untried["metadata"]["name"] = "untried"
    untried["status"]["conditions"] = []
    shown = pending_gpu_pods([placed, no_gpu, untried, unplaced])
    assert [(pod["name"], pod["reason"].split(":")[0]) for pod in shown] == [
        ("untried", "no scheduler has tried it yet (is hami-scheduler running?)"),
        ("big-0", "Unschedulable"),
    ]


def unplaced_pod(change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """tenant-a's GPU pod that no node could take (ml/big-0), changed as given."""
    (unplaced,) = [pod for pod in items("pods-tenant-a.json") if pod["status"]["phase"] == "Pending"]
    pod = json.loads(json.dumps(unplaced))
    change(pod)
    return pod


def test_a_gpu_in_a_container_s_limits_alone_or_its_requests_alone_makes_a_gpu_pod():
    # The API server fills requests from limits (and wants them equal for an extended resource); either one names it.
    limits_only = unplaced_pod(lambda pod: pod["spec"]["containers"][0]["resources"].pop("requests"))
    requests_only = unplaced_pod(lambda pod: pod["spec"]["containers"][0]["resources"].pop("limits"))
    limits_only["metadata"]["name"], requests_only["metadata"]["name"] = "limits-only", "requests-only"
    assert [pod["name"] for pod in pending_gpu_pods([limits_only, requests_only])] == ["limits-only", "requests-only"]


def resources_where(key: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda pod: pod["spec"]["containers"][0]["resources"].__setitem__(key, value)


# (what is malformed, the pod, what pending_gpu_pods and gpus say: pod namespace/name and the field).
MALFORMED_PODS = {
    "no-namespace": (unplaced_pod(lambda pod: pod["metadata"].pop("namespace")), "pod 0: metadata has no namespace"),
    "status": (unplaced_pod(lambda pod: pod.update(status=[])), "pod ml/big-0: status is a list, not an object"),
    "phase": (
        unplaced_pod(lambda pod: pod["status"].update(phase=1)),
        "pod ml/big-0: phase is a number, not a string",
    ),
    "spec": (unplaced_pod(lambda pod: pod.update(spec=[])), "pod ml/big-0: spec is a list, not an object"),
    "containers": (
        unplaced_pod(lambda pod: pod["spec"].update(containers="gpu")),
        "pod ml/big-0: containers is a string, not a list",
    ),
    "resources": (
        unplaced_pod(lambda pod: pod["spec"]["containers"][0].update(resources=[])),
        "pod ml/big-0: resources is a list, not an object",
    ),
    "limits": (unplaced_pod(resources_where("limits", [])), "pod ml/big-0: limits is a list, not an object"),
    "requests": (unplaced_pod(resources_where("requests", "1")), "pod ml/big-0: requests is a string, not an object"),
}


@pytest.mark.parametrize("case", list(MALFORMED_PODS))
def test_a_malformed_pod_is_refused_naming_the_pod_and_the_field(case):
    pod, error = MALFORMED_PODS[case]
    with pytest.raises(MalformedAnswer) as refused:
        pending_gpu_pods([pod])
    assert str(refused.value) == error


@pytest.mark.parametrize(
    ("nodes", "pods", "error"),
    [([], [MALFORMED_PODS[case][0]], MALFORMED_PODS[case][1]) for case in ("no-namespace", "status", "phase")]
    + [([{"kind": "Node"}], [], "node 0: no metadata")],
    ids=["pod-without-namespace", "pod-status", "pod-phase", "node-without-metadata"],
)
def test_the_gpu_reader_refuses_a_malformed_pod_or_node_naming_it(nodes, pods, error):
    with pytest.raises(MalformedAnswer) as refused:
        gpus(nodes, pods)
    assert str(refused.value) == error


# --- Fits a terminal: the default layout within 100 columns, --wide in full. ---


def test_the_default_layout_fits_100_columns_with_short_gpu_ids_and_gib():
    code, text = run_status()
    assert code == 1
    assert text == GOLDEN.read_text()
    assert max(map(len, text.splitlines())) <= WIDTH
    assert "  w1/0  NVIDIA A100 80GB  ok         3/10   16/80 GiB" in text
    assert GPU_1 not in text


def test_the_wide_layout_has_full_node_names_uuids_and_mib():
    _, text = run_status("--wide")
    assert text == WIDE_GOLDEN.read_text()
    assert f"kamaji-tenant-a-w1  {GPU_1}  NVIDIA A100 80GB  ok         3/10   16384/81920 MiB" in text
    assert "no route to host" in next(line for line in text.splitlines() if "cannot reach the tenant-b" in line)


@pytest.mark.parametrize(
    ("mib", "narrow", "wide"),
    [
        ((16384, 81920), "16/80 GiB", "16384/81920 MiB"),
        ((0, 23034), "0/22.5 GiB", "0/23034 MiB"),
        ((512,), "0.5 GiB", "512 MiB"),
    ],
)
def test_memory_reads_in_gib_and_in_mib_with_wide(mib, narrow, wide):
    assert (memory(*mib, wide=False), memory(*mib, wide=True)) == (narrow, wide)


@pytest.mark.parametrize(
    ("node", "short"),
    [
        ("kamaji-tenant-a-w1", "w1"),
        ("lab2-tenant-a-w12", "w12"),
        ("gpu-box-3", "gpu-box-3"),
        ("x-tenant-a-", "x-tenant-a-"),
    ],
)
def test_a_worker_is_named_by_what_follows_its_tenant(node, short):
    assert short_node(node, "tenant-a") == short


def test_the_refresh_benchmark_runs_and_prints_its_ratio(monkeypatch, capsys):
    """benchmarks/status_refresh.py is not a timed test; this only keeps it working."""
    monkeypatch.setattr(status_refresh, "CALL_SECONDS", 0.0)
    assert status_refresh.main(["--tenants", "3", "--check"]) == 0
    printed = capsys.readouterr().out
    assert "side by side" in printed and "13 calls" in printed  # 1 + 3 x 4 calls, both ways
    assert "one by one / side by side: " in printed


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs a real kubectl")
def test_clusters_that_accept_connections_and_never_answer_end_one_refresh_within_the_bound(tmp_path, monkeypatch):
    # Short limits keep the test quick; read one after another, the four clusters would take 4 x 2 s.
    monkeypatch.setattr(gather, "STATUS_REQUEST_TIMEOUT", 1)
    monkeypatch.setattr(gather, "STATUS_CALL_TIMEOUT", 2)
    monkeypatch.setattr(gather, "CLUSTER_BOUND", 3)
    monkeypatch.setattr(gather, "GRACE", 1)
    server = SilentServer()
    outputs = outputs_pointing_at(tmp_path, f"https://127.0.0.1:{server.port}", FIXTURES / "outputs.json")
    stdout = io.StringIO()
    started = time.monotonic()
    try:
        code = main(["--outputs", str(outputs), "--json"], stdout=stdout)
    finally:
        server.close()
    elapsed = time.monotonic() - started

    assert elapsed < gather.CLUSTER_BOUND + gather.GRACE + 2  # 2 s for starting kubectl and Python
    doc = json.loads(stdout.getvalue())
    assert code == 1 and not doc["management"]["reachable"]
    assert [(item["name"], item["reachable"]) for item in doc["tenants"]] == [
        ("tenant-a", False),
        ("tenant-b", False),
        ("tenant-c", False),
    ]
    assert all(item["error"].startswith(f"cannot reach the {item['name']} API server: ") for item in doc["tenants"])


def with_data_stores(tenant_c: dict[str, str]) -> FakeKubectl:
    """The fixtures' TenantControlPlanes, tenant-c's naming the DataStores given (spec, status) and in that state."""
    tcps = [json.loads(fixture(f"tcp-{name}.json")) for name in ("tenant-a", "tenant-b", "tenant-c")]
    tcps[2]["spec"]["dataStore"] = tenant_c["spec"]
    tcps[2]["status"]["storage"]["dataStoreName"] = tenant_c["status"]
    tcps[2]["status"]["kubernetesResources"]["version"]["status"] = tenant_c.get("state", "Ready")
    return FakeKubectl(answers={("management", "tenantcontrolplanes"): as_list(tcps)})


def test_each_tenant_says_the_datastore_its_control_plane_names_in_its_status():
    fake = with_data_stores({"spec": "team-c-etcd", "status": "team-c-etcd"})
    _, doc = status_json(fake=fake)
    assert [(row["name"], row["dataStore"]) for row in doc["tenants"]] == [
        ("tenant-a", "default"), ("tenant-b", "default"), ("tenant-c", "team-c-etcd"),
    ]  # fmt: skip
    assert tenant(doc, "tenant-c")["healthy"] is True
    _, text = run_status(fake=with_data_stores({"spec": "team-c-etcd", "status": "team-c-etcd"}))
    assert "tenant-c  v1.36.4  healthy  https://172.30.149.14:6443  datastore team-c-etcd\n" in text


@pytest.mark.parametrize(
    ("stores", "problem"),
    [
        ({"spec": "team-c-etcd", "status": "default"},
         "not on one DataStore: it is on DataStore default and its spec names team-c-etcd: a move has not finished"),
        ({"spec": "team-c-etcd", "status": "default", "state": "Migrating"},
         "not on one DataStore: Kamaji is moving it to DataStore team-c-etcd (its status is Migrating)"),
    ],
    ids=["move-not-finished", "kamaji-migrating"],
)  # fmt: skip
def test_a_tenant_between_two_datastores_is_unhealthy_on_the_one_its_data_is_in(stores, problem):
    code, doc = status_json(fake=with_data_stores(stores))
    c = tenant(doc, "tenant-c")
    assert c["dataStore"] == "default" and c["healthy"] is False
    assert problem in c["problems"]
    assert code == 1


def test_a_tenant_control_plane_without_a_namespace_is_a_malformed_management_answer():
    # A TenantControlPlane is namespaced: one listed without a namespace is no answer Kubernetes gives.
    tcps = [json.loads(fixture(f"tcp-{name}.json")) for name in ("tenant-a", "tenant-b", "tenant-c")]
    del tcps[2]["metadata"]["namespace"]
    _, doc = status_json(fake=FakeKubectl(answers={("management", "tenantcontrolplanes"): as_list(tcps)}))
    assert doc["management"] == {
        "reachable": False,
        "error": "TenantControlPlane 2: metadata has no namespace",
        "internalError": False,
    }
    c = tenant(doc, "tenant-c")
    assert c["problems"] == ["control plane unknown (management cluster not read)"]
    assert c["controlPlaneReady"] is None


def tenant_c_tcp_with(path: tuple[str, ...], value: Any) -> FakeKubectl:
    """The fixtures' TenantControlPlanes, tenant-c's with the field at path set to value."""
    tcps = [json.loads(fixture(f"tcp-{name}.json")) for name in ("tenant-a", "tenant-b", "tenant-c")]
    parent = tcps[2]
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return FakeKubectl(answers={("management", "tenantcontrolplanes"): as_list(tcps)})


@pytest.mark.parametrize(
    ("path", "value", "fault"),
    [
        (("spec",), ["default"], "spec is a list, not an object"),
        (("spec", "dataStore"), 7, "dataStore is a number, not a string"),
        (("status", "storage"), "default", "storage is a string, not an object"),
        (("status", "storage", "dataStoreName"), ["default"], "dataStoreName is a list, not a string"),
    ],
    ids=["spec", "spec-datastore", "storage", "storage-datastore-name"],
)
def test_a_datastore_field_of_the_wrong_type_is_a_malformed_answer_naming_it_not_a_crash(path, value, fault):
    _, doc = status_json(fake=tenant_c_tcp_with(path, value))
    c = tenant(doc, "tenant-c")
    assert (c["dataStore"], c["controlPlaneReady"], c["internalError"]) == (None, None, False)
    assert c["problems"] == [f"control plane unknown (TenantControlPlane tenants/tenant-c: {fault})"]
