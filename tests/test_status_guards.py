"""`make status` against answers no tenant should be able to use to blank or mislead the fleet view.

Each malformed answer below crashed the whole view before issue 36 (exit 1, no tenant shown).
Anyone who may patch a node (a tenant admin) can write HAMi's register annotation, so one tenant
must never hide another: its own row says what could not be read, every other row is unchanged.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.status_refresh import lab_outputs
from tests.test_status import (
    FIXTURES,
    GPU_1,
    ROOT,
    FakeKubectl,
    as_list,
    fixture,
    items,
    run_status,
    status_json,
    tenant,
)
from validation.answers import MalformedAnswer
from validation.checks.hami import REGISTER_ANNOTATION, decode_register
from validation.checks.tenancy import node_problems, pod_readiness_problem, tcp_status
from validation.exit_codes import EXIT_INTERNAL
from validation.host import CommandResult, SubprocessRunner
from validation.pods import describe_pod, vgpu_allocations
from validation.results import CheckFailed
from validation.status import cli, gather, render, rows


def register(*entries: dict[str, Any]) -> str:
    return json.dumps(list(entries))


A100 = json.loads(items("nodes-tenant-a.json")[0]["metadata"]["annotations"][REGISTER_ANNOTATION])[0]


def nodes_with_register(annotation: str) -> dict[str, Any]:
    nodes = json.loads(fixture("nodes-tenant-a.json"))
    nodes["items"][0]["metadata"]["annotations"][REGISTER_ANNOTATION] = annotation
    return nodes


def pods_where(change) -> dict[str, Any]:
    pods = json.loads(fixture("pods-tenant-a.json"))
    change(pods["items"][0])
    return pods


def quotas_where(change) -> dict[str, Any]:
    quotas = json.loads(fixture("resourcequotas-tenant-a.json"))
    change(quotas["items"][0])
    return quotas


# (resource, answer, what tenant-a's row says: an error naming the fault, or None when it reads as valid).
MALFORMED = {
    "items-null": (
        "nodes",
        {"apiVersion": "v1", "kind": "List", "items": None},
        "expected a list of items, got items null",
    ),
    "pod-without-status": ("pods", pods_where(lambda pod: pod.pop("status")), None),
    "quota-without-metadata": (
        "resourcequotas",
        quotas_where(lambda quota: quota.pop("metadata")),
        "malformed answer: ResourceQuota: no metadata",
    ),
    "node-without-metadata": (
        "nodes",
        {"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node"}]},
        "malformed answer: node 0: no metadata",
    ),
    "pod-annotations-null": ("pods", pods_where(lambda pod: pod["metadata"].update(annotations=None)), None),
    "register-count-ten": (
        "nodes",
        nodes_with_register(register({**A100, "count": "ten"})),
        f'node kamaji-tenant-a-w1: {REGISTER_ANNOTATION} entry 0: count is "ten"',
    ),
    "register-id-a-list": (
        "nodes",
        nodes_with_register(register({**A100, "id": [GPU_1]})),
        f"{REGISTER_ANNOTATION} entry 0: id is [",
    ),
    "register-type-a-number": (
        "nodes",
        nodes_with_register(register({**A100, "type": 100})),
        f"{REGISTER_ANNOTATION} entry 0: type is 100",
    ),
}


def tenant_blocks(text: str) -> dict[str, str]:
    """The rendered frame cut into each tenant's lines, by name."""
    blocks = text.split("\n\n")[1:-1]
    return {block.split()[0]: block for block in blocks}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_one_tenant_s_malformed_answer_marks_its_own_row_and_hides_no_other(case):
    resource, answer, said = MALFORMED[case]
    fake = FakeKubectl(answers={("tenant-a", resource): answer})
    baseline_code, baseline = run_status("--wide", fake=FakeKubectl())
    code, text = run_status("--wide", fake=fake)
    _, doc = status_json(fake=FakeKubectl(answers={("tenant-a", resource): answer}))

    before, after = tenant_blocks(baseline), tenant_blocks(text)
    assert [after["tenant-b"], after["tenant-c"]] == [before["tenant-b"], before["tenant-c"]]
    a = tenant(doc, "tenant-a")
    if said is None:  # absent or null where the API allows it: read as empty, nothing lost
        assert a["error"] is None and a["reachable"]
        assert after["tenant-a"].splitlines()[0] == before["tenant-a"].splitlines()[0]
    else:
        assert said in a["error"] and not a["healthy"]
        # A list without its items is no answer at all; any other fault is in an object the list holds.
        assert a["problems"] == ["cluster not read" if case == "items-null" else "malformed answer"]
        assert said in " ".join(after["tenant-a"].split()) and "UNHEALTHY" in after["tenant-a"].splitlines()[0]
        assert len(a["error"]) < 200  # short: one line on a wide terminal
    assert code == baseline_code == 1  # unhealthy, not an internal error


SIXTEEN = [f"tenant-{index:02}" for index in range(1, 17)]


class Fleet(FakeKubectl):
    """Sixteen copies of tenant-a (benchmarks/status_refresh.py's outputs), each answered from its fixtures."""

    def __init__(self, answers: dict):
        super().__init__(unreachable=(), answers=answers)
        tcp = json.loads(fixture("tcp-tenant-a.json"))
        self.tcps = as_list([{**tcp, "metadata": {**tcp["metadata"], "name": name}} for name in SIXTEEN])

    def run(self, argv, stdin=None, timeout=60, env=None) -> CommandResult:
        cluster, args = Path(argv[2]).stem, tuple(argv[4:])
        if cluster == "management":
            return CommandResult(tuple(argv), 0, json.dumps(self.tcps), "")
        resource = args[1] if args[1] != "--raw" else "version"
        if (cluster, resource) in self.answers:
            return CommandResult(tuple(argv), 0, json.dumps(self.answers[(cluster, resource)]), "")
        return CommandResult(
            tuple(argv), 0, fixture(f"{resource}-tenant-a.json" if resource != "version" else "version.json"), ""
        )


def fleet_view(outputs: Path, answers: dict, *args: str) -> tuple[int, str]:
    stdout = io.StringIO()
    fleet = Fleet(answers)
    code = cli.main(["--outputs", str(outputs), *args], runner=fleet, stdout=stdout, clock=fleet)
    return code, stdout.getvalue()


@pytest.mark.parametrize("case", list(MALFORMED))
def test_one_tenant_of_sixteen_gives_a_malformed_answer_and_the_other_fifteen_are_intact(case, tmp_path):
    resource, answer, said = MALFORMED[case]
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(lab_outputs(16)))
    broken = {("tenant-07", resource): answer}

    _, clean_text = fleet_view(outputs, {}, "--wide")
    code, text = fleet_view(outputs, broken, "--wide")
    rows = {row["name"]: row for row in json.loads(fleet_view(outputs, broken, "--json")[1])["tenants"]}
    clean_rows = {row["name"]: row for row in json.loads(fleet_view(outputs, {}, "--json")[1])["tenants"]}

    assert list(rows) == SIXTEEN
    changed = [name for name in SIXTEEN if rows[name] != clean_rows[name]]
    assert changed == ([] if said is None else ["tenant-07"])
    blocks, clean_blocks = tenant_blocks(text), tenant_blocks(clean_text)
    assert [name for name in SIXTEEN if blocks[name] != clean_blocks[name]] == changed
    if said is not None:
        assert said in rows["tenant-07"]["error"]
    assert code == 1  # the copies of tenant-a have its unhealthy GPU: unhealthy, never an internal error


# --- Random JSON shapes: the readers report, they never raise anything but a MalformedAnswer. ---

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
KEYS = ("items", "metadata", "status", "annotations", "name", "namespace", "phase", "conditions", "type", "spec")


@st.composite
def mutated(draw, document: Any) -> Any:
    """The document with one subtree (found by walking down from the top) replaced by random JSON."""
    if isinstance(document, dict) and document and draw(st.integers(0, 3)):
        key = draw(st.sampled_from(sorted(document)))
        return {**document, key: draw(mutated(document[key]))}
    if isinstance(document, list) and document and draw(st.integers(0, 3)):
        position = draw(st.integers(0, len(document) - 1))
        return [*document[:position], draw(mutated(document[position])), *document[position + 1 :]]
    return draw(JSON | st.dictionaries(st.sampled_from(KEYS), JSON, max_size=3))


ANSWERS = {
    "nodes": json.loads(fixture("nodes-tenant-a.json")),
    "pods": json.loads(fixture("pods-tenant-a.json")),
    "resourcequotas": json.loads(fixture("resourcequotas-tenant-a.json")),
    "version": json.loads(fixture("version.json")),
}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_answers_never_make_an_internal_error_or_hide_another_tenant(data):
    resource = data.draw(st.sampled_from(sorted(ANSWERS)), label="resource")
    answer = data.draw(mutated(ANSWERS[resource]), label="answer")
    fake = FakeKubectl(answers={("tenant-a", resource): answer})

    code, text = run_status(fake=fake)

    assert code == 1, text  # tenant-b is unreachable: unhealthy, and no answer makes it an internal error
    assert "internal error" not in text
    assert tenant_blocks(text)["tenant-c"] == tenant_blocks(run_status()[1])["tenant-c"]


@settings(max_examples=300, deadline=None)
@given(answer=JSON | mutated(ANSWERS["nodes"]["items"][0]) | mutated(ANSWERS["pods"]["items"][1]))
def test_the_shared_readers_take_any_json_and_raise_only_a_check_failure(answer):
    readers = [
        lambda: decode_register(answer if isinstance(answer, str) else json.dumps(answer)),
        lambda: vgpu_allocations(answer),
        lambda: describe_pod(answer),
        lambda: tcp_status(answer),
        lambda: pod_readiness_problem(answer),
        lambda: node_problems([answer], ("kamaji-tenant-a-w1",), "v1.36.4"),
        lambda: rows.gpus([answer], [answer]),
        lambda: rows.pending_gpu_pods([answer]),
        lambda: rows.quota_usage(answer),
    ]
    for read in readers:
        if not isinstance(answer, dict) and read is not readers[0]:
            continue  # an item is an object once listed() has read the list (tested above, end to end)
        with contextlib.suppress(CheckFailed):
            read()


# --- An internal error (a bug) shows in its tenant's row and has its own exit status. ---


def test_an_internal_error_building_one_row_shows_there_and_exits_70(monkeypatch):
    real = rows.gpu_health

    def broken(tenant, found, nodes):
        if tenant.name == "tenant-c":
            raise ZeroDivisionError("division by zero")
        return real(tenant, found, nodes)

    monkeypatch.setattr(rows, "gpu_health", broken)
    code, text = run_status()
    _, doc = status_json()
    assert code == EXIT_INTERNAL == 70 and EXIT_INTERNAL not in (0, 1, 2, 64)
    c = tenant(doc, "tenant-c")
    assert c["error"] == "internal error: ZeroDivisionError: division by zero" and c["internalError"]
    assert "  internal error: ZeroDivisionError: division by zero" in tenant_blocks(text)["tenant-c"]
    assert tenant_blocks(text)["tenant-a"] == tenant_blocks(run_status(fake=FakeKubectl())[1])["tenant-a"]


def test_an_internal_error_rendering_one_tenant_shows_there_and_exits_70(monkeypatch):
    monkeypatch.setattr(render, "bar", lambda used, total: 1 / 0)  # only tenant-a has GPUs, so bars
    code, text = run_status()
    blocks = tenant_blocks(text)
    assert blocks["tenant-a"] == "tenant-a  UNHEALTHY\n  internal error: ZeroDivisionError: division by zero"
    assert blocks["tenant-c"].startswith("tenant-c  v1.36.4  healthy")
    assert code == EXIT_INTERNAL


@pytest.mark.parametrize("cluster", ["tenant-c", "management"])
def test_a_bug_while_reading_a_cluster_is_an_internal_error_and_the_others_still_show(cluster):
    def before(name, args):
        if name == cluster:
            raise RuntimeError("a bug in the reader")

    fake = FakeKubectl()
    fake.before = before
    code, text = run_status(fake=fake)
    assert code == EXIT_INTERNAL
    assert "internal error: RuntimeError: a bug in the reader" in text
    assert "w1/0  NVIDIA A100 80GB  ok" in tenant_blocks(text)["tenant-a"]  # tenant-a is still read and shown


def test_an_answer_the_api_never_gives_is_not_an_internal_error():
    assert issubclass(MalformedAnswer, CheckFailed)
    code, _ = run_status(fake=FakeKubectl(answers={("tenant-c", "nodes"): {"items": "none"}}))
    assert code == 1


# --- Health includes the GPUs: each worker registers every configured GPU, and each is healthy. ---

HEALTHY_A100 = {**A100, "health": True}


@pytest.mark.parametrize(
    ("annotation", "missing"),
    [
        (register(HEALTHY_A100), "registers 1 of 2 NVIDIA A100 80GB"),
        (register(), "registers 0 of 2 NVIDIA A100 80GB"),
        (
            register({**HEALTHY_A100, "type": "NVIDIA L4 24GB"}, {**HEALTHY_A100, "type": "NVIDIA L4 24GB"}),
            "registers 0 of 2 NVIDIA A100 80GB",
        ),
    ],
    ids=["one-of-two", "none", "another-model"],
)
def test_a_worker_registering_fewer_gpus_than_configured_makes_its_tenant_unhealthy(annotation, missing):
    broken = {("tenant-a", "nodes"): nodes_with_register(annotation)}
    code, doc = status_json("--tenant", "tenant-a", fake=FakeKubectl(unreachable=(), answers=broken))
    _, text = run_status("--tenant", "tenant-a", fake=FakeKubectl(unreachable=(), answers=broken))
    a = tenant(doc, "tenant-a")
    assert a["problems"] == [f"worker kamaji-tenant-a-w1 {missing}"] and not a["healthy"]
    assert f"  GPUs missing: w1 {missing}" in text and "tenant-a  v1.36.4  UNHEALTHY" in text
    assert code == 1
    assert status_json("--tenant", "tenant-a", fake=FakeKubectl(unreachable=(), gpus_healthy=True))[0] == 0


def test_an_unhealthy_gpu_alone_makes_its_tenant_unhealthy_and_the_row_names_it():
    code, doc = status_json("--tenant", "tenant-a", fake=FakeKubectl(unreachable=()))
    _, wide = run_status("--tenant", "tenant-a", "--wide", fake=FakeKubectl(unreachable=()))
    a = tenant(doc, "tenant-a")
    unhealthy_uuid = a["gpuHealth"]["unhealthy"][0]["uuid"]
    assert a["problems"] == [f"GPU kamaji-tenant-a-w1/1 ({unhealthy_uuid}) unhealthy"]
    assert f"  GPUs unhealthy (HAMi places no pod on them): {unhealthy_uuid}" in wide
    assert code == 1


def tenant_a_outputs(tmp_path: Path, **changes: Any) -> Path:
    """The fixtures' outputs with tenant-a's keys changed as given."""
    document = json.loads((FIXTURES / "outputs.json").read_text())
    document["tenants"]["tenant-a"].update(changes)
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(document))
    return outputs


def test_a_worker_without_a_node_leaves_the_gpus_of_the_next_one_counted(tmp_path):
    outputs = tenant_a_outputs(tmp_path, workers=["kamaji-tenant-a-w0", "kamaji-tenant-a-w1"])
    fake = FakeKubectl(unreachable=(), answers={("tenant-a", "nodes"): nodes_with_register(register(HEALTHY_A100))})
    stdout = io.StringIO()
    cli.main(["--outputs", str(outputs), "--json", "--tenant", "tenant-a"], runner=fake, stdout=stdout, clock=fake)
    assert json.loads(stdout.getvalue())["tenants"][0]["problems"] == [
        "worker kamaji-tenant-a-w0 has no Node",
        "worker kamaji-tenant-a-w1 registers 1 of 2 NVIDIA A100 80GB",
    ]


# The outputs list no configured GPUs for real ones; any they still list are not counted as missing either.
@pytest.mark.parametrize("configured", [[], [{"count": 2, "memoryMiB": 81920, "model": "NVIDIA A100 80GB"}]])
def test_a_tenant_with_real_gpus_counts_only_their_health(tmp_path, configured):
    outputs = tenant_a_outputs(tmp_path, gpusPerWorker=configured, gpuDevices="real")
    fake = FakeKubectl(unreachable=(), gpus_healthy=True, answers={})
    fake.answers[("tenant-a", "nodes")] = nodes_with_register(register(HEALTHY_A100))  # one card, none configured
    stdout = io.StringIO()
    code = cli.main(
        ["--outputs", str(outputs), "--json", "--tenant", "tenant-a"], runner=fake, stdout=stdout, clock=fake
    )
    assert json.loads(stdout.getvalue())["tenants"][0]["problems"] == [] and code == 0


# --- Bounded output: a real kubectl process (a script) that floods is stopped at the byte limit. ---

FAKE_KUBECTL = """\
import json, os, sys, time
from pathlib import Path
fixtures = Path(os.environ["FIXTURES"])
cluster, args = Path(sys.argv[2]).stem, sys.argv[4:]
mode, _, target = os.environ.get("FAKE_MODE", "").partition(":")
if cluster == target and mode in ("flood", "flood-stderr"):
    stream = sys.stdout.buffer if mode == "flood" else sys.stderr.buffer
    chunk, count = b"x" * 65536, open(os.environ["FAKE_COUNT"], "a")
    while True:  # until stopped; a line counted per chunk written shows how far it got
        stream.write(chunk)
        count.write("+")
        count.flush()
if args[0] in ("create", "delete"):  # the validation checks' scratch namespaces and pods
    sys.exit(0)
if cluster == target and (mode == "hang" or mode == "hang-get" and args[0] == "get"):  # until stopped
    Path(os.environ["FAKE_STARTED"]).write_text(str(os.getpid()))
    time.sleep(3600)
if cluster == "management":
    tcps = [json.loads((fixtures / f"tcp-{name}.json").read_text()) for name in ("tenant-a", "tenant-b", "tenant-c")]
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": tcps}))
elif args[1] == "--raw":
    print((fixtures / "version.json").read_text())
else:
    print((fixtures / f"{args[1]}-{cluster}.json").read_text())
"""


@pytest.fixture
def kubectl_on_path(tmp_path, monkeypatch):
    """A kubectl script first on PATH, answering from the fixtures; FAKE_MODE makes one cluster misbehave."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "kubectl"
    script.write_text(f"#!{sys.executable}\n{FAKE_KUBECTL}")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FIXTURES", str(FIXTURES))
    monkeypatch.setenv("FAKE_COUNT", str(tmp_path / "count"))
    monkeypatch.setenv("FAKE_STARTED", str(tmp_path / "started"))
    return tmp_path


@pytest.mark.parametrize("stream", ["flood", "flood-stderr"])
def test_a_kubectl_that_floods_is_stopped_at_the_byte_limit_and_its_answer_reported_cut_short(
    kubectl_on_path, monkeypatch, stream
):
    monkeypatch.setattr(gather, "STATUS_STDOUT_LIMIT", 2**20)
    monkeypatch.setattr(gather, "STATUS_STDERR_LIMIT", 2**16)
    monkeypatch.setenv("FAKE_MODE", f"{stream}:tenant-a")
    stdout = io.StringIO()
    started = time.monotonic()
    code = cli.main(["--outputs", str(FIXTURES / "outputs.json"), "--json"], stdout=stdout)
    elapsed = time.monotonic() - started
    doc = json.loads(stdout.getvalue())

    written = (kubectl_on_path / "count").read_text().count("+") * 65536
    # Stopped right after the limit (plus what the pipe holds), not after its time bound: a flooding
    # kubectl printed gigabytes within the 8 s a call may take.
    assert written < 16 * 2**20 and elapsed < gather.STATUS_CALL_TIMEOUT
    a = tenant(doc, "tenant-a")
    if stream == "flood":
        assert a["error"].endswith(f"printed more than {2**20} bytes: cut short")
    else:
        assert f"failed: [stderr cut short at {2**16} bytes] xxx" in a["error"] and len(a["error"]) < 400
    assert tenant(doc, "tenant-c")["healthy"] and tenant(doc, "tenant-b")["error"] is None
    assert code == 1


def test_the_runner_keeps_at_most_its_limit_and_stops_what_the_command_started():
    runner = SubprocessRunner(stdout_limit=1000, stderr_limit=100)
    flood = runner.run(["sh", "-c", "yes & wait"])  # the flood comes from a child of the command
    assert (len(flood.stdout), flood.truncated) == (1000, 1000) and not flood.ok
    whole = runner.run(["sh", "-c", "printf %0999d 0"])
    assert (len(whole.stdout), whole.truncated, whole.ok) == (999, 0, True)
    exact = runner.run(["sh", "-c", "printf %01000d 0"])
    assert (len(exact.stdout), exact.truncated, exact.ok) == (1000, 0, True)  # at the limit is not past it
    assert runner.run(["cat"], stdin="to stdin").stdout == "to stdin"


# --- Scratch kubeconfigs are removed on every way out. ---


def scratch_dirs(tmp: Path, tool: str = "status") -> list[Path]:
    return list(tmp.glob(f"kamaji-hami-lab-{tool}-*"))


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone as far as work goes; it waits only for its parent (the ended view) to be reaped.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize(
    ("module", "tool", "ending", "hanging"),
    [
        ("validation.status", "status", signal.SIGTERM, "management"),
        ("validation.status", "status", signal.SIGHUP, "management"),  # the terminal of a --watch closed
        ("validation.status", "status", signal.SIGINT, "management"),
        ("validation.status", "status", signal.SIGINT, "tenant-a"),
        ("validation", "validation", signal.SIGTERM, "management"),
        ("validation", "validation", signal.SIGHUP, "management"),
        ("validation", "validation", signal.SIGINT, "management"),
        ("validation", "validation", signal.SIGINT, "tenant-a"),  # tenants' checks, side by side in threads
    ],
    ids=["status-TERM", "status-HUP", "status-INT", "status-INT-tenant", "validation-TERM", "validation-HUP",
         "validation-INT", "validation-INT-tenant"],
)
def test_a_signal_while_a_cluster_read_hangs_ends_the_run_at_once_without_its_kubectl_or_kubeconfigs(
    kubectl_on_path, module, tool, ending, hanging
):
    scratch = kubectl_on_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "FAKE_MODE": f"hang:{hanging}", "TMPDIR": str(scratch)}
    check = "platform" if hanging == "management" else "nodes"  # platform runs once, in the main thread
    extra = ["--watch", "5"] if tool == "status" else ["--only", check]
    view = subprocess.Popen(
        [sys.executable, "-m", module, "--outputs", str(FIXTURES / "outputs.json"), *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    started = kubectl_on_path / "started"
    try:
        while not started.exists() or not started.read_text():  # however loaded the machine: no bound here
            assert view.poll() is None, view.stderr.read()
            time.sleep(0.05)
        assert scratch_dirs(scratch, tool), "a cluster is being read, with the kubeconfigs written"
        view.send_signal(ending)
        # The hanging kubectl never ends by itself, and a call's own limit (8 s, 30 s) is longer than this:
        # only the signal can have ended the run.
        code = view.wait(gather.STATUS_CALL_TIMEOUT - 1)
    finally:
        view.kill()
        left = int(started.read_text() or 0) if started.exists() else 0
        still_running = bool(left) and running(left)
        if still_running:
            os.kill(left, signal.SIGKILL)  # never leave the fake behind, whatever the view did
    assert code == (130 if ending == signal.SIGINT else 128 + ending), view.stderr.read()
    assert scratch_dirs(scratch, tool) == []
    assert not still_running, "the hanging kubectl was stopped with the run"


# The kernel hands a process's signal to any thread that does not block it; here only the worker's.
SIGNAL_TO_ANOTHER_THREAD = """
import os, signal, sys, threading, time
from validation import host
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
def worker():
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(60)
threading.Thread(target=worker, daemon=True).start()
waits = {
    "event": lambda: host.wait_for(threading.Event(), 60),
    "sleep": lambda: host.Clock().sleep(60),
}
try:
    waits[sys.argv[1]]()
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.parametrize("wait", ["event", "sleep"])
def test_ctrl_c_handed_to_another_thread_ends_a_wait_of_the_main_thread_at_once(wait):
    ended = subprocess.run(
        [sys.executable, "-c", SIGNAL_TO_ANOTHER_THREAD, wait], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert ended.returncode == 130, ended.stderr


def test_ctrl_c_during_a_check_names_the_scratch_namespace_it_leaves_and_how_to_delete_it(kubectl_on_path):
    env = {**os.environ, "FAKE_MODE": "hang-get:tenant-a", "TMPDIR": str(kubectl_on_path)}
    view = subprocess.Popen(
        [sys.executable, "-m", "validation", "--outputs", str(FIXTURES / "outputs.json"), "--only", "konnectivity"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = kubectl_on_path / "started"
    try:
        while not started.exists() or not started.read_text():
            assert view.poll() is None, view.stderr.read()
            time.sleep(0.05)
        view.send_signal(signal.SIGINT)
        _, stderr = view.communicate(timeout=gather.STATUS_CALL_TIMEOUT - 1)
    finally:
        view.kill()
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(started.read_text()), signal.SIGKILL)
    assert view.returncode == 130
    left = re.search(r"tenant-a: namespace (validate-konnectivity-[0-9a-f]+) was not deleted .*interrupted", stderr)
    assert left, stderr
    assert f"kubectl --kubeconfig kubeconfigs/tenant-a.kubeconfig delete namespace {left[1]}" in stderr


def test_a_refresh_that_fails_removes_the_scratch_kubeconfigs(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def failing(*args):
        raise RuntimeError("the reads were interrupted")

    monkeypatch.setattr(gather, "read_side_by_side", failing)
    with pytest.raises(RuntimeError):
        run_status()
    assert scratch_dirs(tmp_path) == []


# --- Fits the terminal: its width on a terminal, readable at 80 columns; 100 columns elsewhere. ---

GOLDEN_80 = FIXTURES / "status-80.txt"
BAR = re.compile(r"\[[#.]{10}\]")


def run_on_terminal(columns: int, *args: str) -> str:
    """The frame as main prints it to a real pseudo-terminal this many columns wide (without colour)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    attributes = termios.tcgetattr(follower)
    attributes[1] &= ~termios.OPOST  # the terminal passes "\n" through as it is
    termios.tcsetattr(follower, termios.TCSANOW, attributes)
    received = bytearray()
    with open(follower, "w", closefd=True) as terminal:
        fake = FakeKubectl()
        reader = threading.Thread(target=_drain, args=(leader, received), daemon=True)
        reader.start()
        cli.main(["--outputs", str(FIXTURES / "outputs.json"), *args], runner=fake, stdout=terminal, clock=fake)
    reader.join(5)
    os.close(leader)
    return received.decode()


def _drain(leader: int, received: bytearray) -> None:
    with contextlib.suppress(OSError):  # EIO once the terminal's other end is closed
        while chunk := os.read(leader, 65536):
            received += chunk


def test_on_an_80_column_terminal_the_frame_fits_and_is_the_reviewed_one(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    text = run_on_terminal(80)
    assert text == GOLDEN_80.read_text()
    assert max(map(len, text.splitlines())) <= 80
    assert "CardInsufficientMemory," in text.split()  # whole, where it once broke into CardInsufficie / ntMemory


@pytest.mark.parametrize("columns", [40, 60, 80, 99, 100, 132])
def test_at_any_width_lines_fit_and_break_only_between_words(columns):
    _, doc = status_json()
    text = render.render(doc, render.Style(False), width=columns)
    at_100 = render.render(doc, render.Style(False), width=100)
    # A word longer than a whole line (a URL) is the only thing that may stick out.
    assert all(len(line) <= columns or len(line.split()) == 1 for line in text.splitlines())
    # The same words in the same order as at 100 columns; a narrow GPU table drops only its usage bars.
    widest_gpu_row = max(len(line) for line in at_100.splitlines() if BAR.search(line))
    assert bool(BAR.search(text)) == (columns >= widest_gpu_row)
    words = [word for word in at_100.split() if columns >= widest_gpu_row or not BAR.fullmatch(word)]
    assert text.split() == words


def test_the_gpu_table_keeps_its_usage_bars_at_exactly_its_width_and_drops_them_one_column_narrower():
    _, doc = status_json()
    at_100 = render.render(doc, render.Style(False), width=100)
    widest_gpu_row = max(len(line) for line in at_100.splitlines() if BAR.search(line))
    exact = render.render(doc, render.Style(False), width=widest_gpu_row)
    narrower = render.render(doc, render.Style(False), width=widest_gpu_row - 1)
    assert max(len(line) for line in exact.splitlines() if BAR.search(line)) == widest_gpu_row
    assert not BAR.search(narrower)


def test_the_width_is_the_terminal_s_at_least_40_and_100_when_not_on_a_terminal():
    assert render.terminal_width(io.StringIO()) == render.WIDTH == 100
    for columns, width in ((132, 132), (80, 80), (20, render.MIN_WIDTH)):
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
        with open(follower, "w") as terminal:
            assert render.terminal_width(terminal) == width
        os.close(leader)


def test_a_terminal_whose_size_cannot_be_read_gets_100_columns():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert render.terminal_width(Terminal()) == 100
