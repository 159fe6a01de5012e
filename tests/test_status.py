"""Offline tests for `python -m validation.status` on hand-made `kubectl -o json` answers.

tests/fixtures/status/ holds a three-tenant lab: tenant-a has one worker with two A100s (three
pods share the first, the second is idle apart from a finished pod), tenant-b's API server is
unreachable, tenant-c has no GPUs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from validation.host import CommandResult
from validation.status import Style, bar, gpus, main, quota_usage, render

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "status"
GOLDEN = FIXTURES / "status.txt"
# What kubectl prints when a MetalLB address is not routable from the host.
NO_ROUTE = (
    'E1202 10:11:31.341365 1 memcache.go:265] "Unhandled Error" err="couldn\'t get current server API group list"\n'
    "Unable to connect to the server: dial tcp 172.18.255.201:6443: connect: no route to host\n"
)
GPU_1 = "GPU-7c9e2a41-5d3b-4f60-a8e1-0a1000000001"
GPU_2 = "GPU-7c9e2a41-5d3b-4f60-a8e1-0a1000000002"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


class FakeKubectl:
    """Answers `kubectl --kubeconfig <dir>/<cluster>.kubeconfig ...` from the fixtures; records every command."""

    def __init__(self, unreachable: Sequence[str] = ("tenant-b",)):
        self.unreachable = set(unreachable)
        self.commands: list[tuple[str, ...]] = []
        self.kubeconfigs: set[Path] = set()
        self.sleeps: list[float] = []

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 60, env=None) -> CommandResult:
        argv = tuple(argv)
        assert argv[:2] == ("kubectl", "--kubeconfig"), argv
        # Every API call carries a request timeout (validation/kube.py), so a hung API server cannot stall the view.
        assert argv[3].startswith("--request-timeout="), argv
        cluster, args = Path(argv[2]).stem, argv[4:]
        self.commands.append(args)
        self.kubeconfigs.add(Path(argv[2]))
        if cluster in self.unreachable:
            return CommandResult(argv, 1, "", NO_ROUTE)
        answers = {
            ("get", "--raw", "/version"): "version.json",
            ("get", "nodes", "-o", "json"): f"nodes-{cluster}.json",
            ("get", "pods", "--all-namespaces", "-o", "json"): f"pods-{cluster}.json",
            ("get", "resourcequotas", "--all-namespaces", "-o", "json"): f"resourcequotas-{cluster}.json",
        }
        if cluster == "management" and args[:2] == ("get", "tenantcontrolplanes.kamaji.clastix.io"):
            # The tenants' namespace of outputs.json; a call the fake does not model fails the test.
            assert args[3:] == ("-n", "tenants", "-o", "json"), args
            return CommandResult(argv, 0, fixture(f"tcp-{args[2]}.json"), "")
        return CommandResult(argv, 0, fixture(answers[args]), "")

    # Clock for --watch: stop after the second refresh. Not KeyboardInterrupt, which would stop pytest
    # itself when a refresh loop runs where none should.
    def now(self) -> float:
        return 0.0

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if len(self.sleeps) == 2:
            raise StopWatching


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


def test_healthy_tenant_reports_version_control_plane_nodes_and_quota_usage():
    _, doc = status_json()
    a = tenant(doc, "tenant-a")
    assert (a["endpoint"], a["version"], a["reachable"], a["error"]) == (
        "https://172.18.255.200:6443",
        "v1.36.4",
        True,
        None,
    )
    assert a["controlPlaneReady"] is True
    assert a["nodes"] == {"ready": 1, "total": 1}
    assert a["healthy"] is True
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
    assert c["nodes"] == {"ready": 1, "total": 1}
    assert c["healthy"] is True


def test_unreachable_tenant_says_why_and_the_others_still_print():
    code, doc = status_json()
    b = tenant(doc, "tenant-b")
    assert b["reachable"] is False and b["healthy"] is False
    assert "no route to host" in b["error"] and "memcache.go" not in b["error"]
    assert b["controlPlaneReady"] is True  # the management cluster still answers for it
    # Nothing is known of its nodes, GPUs or quotas: the JSON still has every key, empty.
    assert (b["nodes"], b["gpus"], b["quotas"]) == ({"ready": 0, "total": 0}, [], [])
    assert [item["name"] for item in doc["tenants"]] == ["tenant-a", "tenant-b", "tenant-c"]
    assert doc["ok"] is False and code == 1


def test_exit_status_is_zero_when_every_tenant_is_healthy():
    code, doc = status_json(fake=FakeKubectl(unreachable=()))
    assert doc["ok"] is True and code == 0


def test_tenant_option_narrows_to_the_named_tenants():
    fake = FakeKubectl()
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


def test_terminal_layout_matches_the_golden_file():
    """After an intended layout change, write run_status()[1] to status.txt and update the README sample."""
    code, text = run_status()
    assert code == 1
    assert "\033[" not in text  # a StringIO is not a terminal: no colour
    assert text == GOLDEN.read_text()


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


def test_readme_sample_is_the_current_layout():
    assert GOLDEN.read_text() in (ROOT / "README.md").read_text()


def test_watch_needs_a_positive_interval(capsys):
    with pytest.raises(SystemExit) as exit_:
        run_status("--watch", "0")
    assert exit_.value.code == 64
    assert "positive number of seconds" in capsys.readouterr().err


def test_without_the_management_cluster_the_control_plane_is_unknown_and_tenants_still_show():
    code, doc = status_json(fake=FakeKubectl(unreachable=("management",)))
    a = tenant(doc, "tenant-a")
    assert a["controlPlaneReady"] is None and a["healthy"] is False
    assert a["error"].startswith("control plane unknown:") and "no route to host" in a["error"]
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

    fake = Pulumi(unreachable=())
    for args, stack in (((), "dev"), (("--stack", "lab"), "lab")):
        assert main(["--json", *args], runner=fake, stdout=io.StringIO(), clock=fake) == 0
        assert fake.pulumi[-2:] == ("--stack", stack)


def test_json_is_indented_for_people_and_tools_alike():
    _, text = run_status("--json")
    assert text.startswith('{\n  "ok": false,\n  "tenants": [\n    {\n')


def test_colour_marks_health_errors_and_the_verdict():
    _, doc = status_json()
    text = render(doc, Style(True))
    green, red, reset = "\033[32m", "\033[31m", "\033[0m"
    assert f"{green}healthy{reset}" in text and f"{red}UNHEALTHY{reset}" in text
    assert f"  {red}unreachable: " in text
    assert text.endswith(f"{red}NOT OK: some tenants are unhealthy or unreachable{reset}\n")
    doc = {**doc, "ok": True}
    assert render(doc, Style(True)).endswith(f"{green}OK: every tenant is healthy{reset}\n")


def test_a_watched_terminal_is_cleared_before_each_refresh_and_json_never_is():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    clear = "\033[H\033[2J"  # cursor home, then erase the screen (ECMA-48 CUP and ED 2)
    for args, cleared in ((["--watch", "5"], True), (["--json", "--watch", "5"], False), ([], False)):
        fake, screen = FakeKubectl(), Terminal()
        with contextlib.suppress(StopWatching):
            main(["--outputs", str(FIXTURES / "outputs.json"), *args], runner=fake, stdout=screen, clock=fake)
        frames = screen.getvalue().split(clear)
        if cleared:
            assert frames[0] == "" and len(frames) == 3, args
            assert all(frame.startswith("tenant-a ") for frame in frames[1:]), args
        else:
            assert len(frames) == 1, args


def test_the_control_plane_line_says_ready_not_ready_or_unknown():
    _, doc = status_json()
    plain = Style(False)
    lines = {True: "control plane Ready;", False: "control plane not Ready;", None: "control plane unknown;"}
    for ready, said in lines.items():
        tenant_a = {**tenant(doc, "tenant-a"), "controlPlaneReady": ready}
        assert said in render({"ok": False, "tenants": [tenant_a]}, plain)


def test_a_quota_not_yet_counted_shows_zero_used_and_one_without_status_shows_nothing():
    fresh = {"metadata": {"name": "gpu-quota", "namespace": "team-a"},
             "status": {"hard": {"limits.nvidia.com/gpumem": "8192"}}}
    assert quota_usage(fresh)["resources"] == {"limits.nvidia.com/gpumem": {"used": "0", "hard": "8192"}}
    unwritten = {"metadata": {"name": "gpu-quota", "namespace": "team-a"}}
    assert quota_usage(unwritten) == {"namespace": "team-a", "name": "gpu-quota", "resources": {}}


def test_usage_bars_fill_in_proportion_and_stay_empty_without_a_total():
    empty = "[" + "." * 10 + "]"
    assert (bar(0, 0), bar(5, 10), bar(10, 10), bar(1, 100)) == (empty, "[#####.....]", "[##########]", empty)


def test_a_tenant_unreachable_beside_its_management_cluster_gives_both_reasons_in_one_line():
    _, doc = status_json(fake=FakeKubectl(unreachable=("management", "tenant-b")))
    reasons = tenant(doc, "tenant-b")["error"].split("; ")
    assert [reason.split(":")[0] for reason in reasons] == ["unreachable", "control plane unknown"]
    assert all("no route to host" in reason for reason in reasons)


def test_a_finished_pod_listed_before_running_ones_hides_none_of_them():
    nodes = json.loads(fixture("nodes-tenant-a.json"))["items"]
    pods = json.loads(fixture("pods-tenant-a.json"))["items"]
    finished = [pod for pod in pods if pod["status"]["phase"] == "Succeeded"]
    running = [pod for pod in pods if pod["status"]["phase"] == "Running"]
    first = gpus(nodes, finished + running)[0]
    assert [pod["name"] for pod in first["pods"]] == ["share-0", "share-1", "train-0"]


def test_nodes_without_a_usable_gpu_registration_are_left_out_and_absent_fields_are_empty():
    registered = json.loads(fixture("nodes-tenant-a.json"))["items"][0]

    def node(name: str, **annotations: str) -> dict[str, Any]:
        return {"metadata": {"name": name, **({"annotations": annotations} if annotations else {})}}

    register = "hami.io/node-nvidia-register"
    shown = gpus(
        [
            node("no-annotations"),
            node("half-written", **{register: '[{"id": "GPU-'}),
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
