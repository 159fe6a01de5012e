"""scripts/reset_policy.py: which machines a join may reset, as one table of machine state -> decision.

How join-worker.sh reads a machine over ssh and acts on the decision: tests/test_machine_ssh.py.
"""

from __future__ import annotations

import ast
import io
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.script_module import script_module

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "reset_policy.py"
reset_policy = script_module("reset_policy")
MachineState, ThisJoin = reset_policy.MachineState, reset_policy.ThisJoin

NODE = "m1"
LAB_ID, OTHER_LAB = "kamaji-hami-lab/dev/kamaji", "kamaji-hami-lab/prod/gpu-lab"
# Two stacks' random identities (scripts/lab-identity.sh); the same LAB_ID with another identity is a clone.
IDENTITY, OTHER_IDENTITY = "5f0c3a9e7d21b4c86e93f1a0d7b2c458", "0b7e1d94c3a2f58e6d10c9b7a4e3f2d1"
# Bindings (scripts/lib.sh node_binding): the one this join makes, the one an earlier join of the lab made
# (another tenant's), and another cluster's.
THIS = "172.18.255.200:6443 sha256:" + "a" * 64
MARKED = "172.18.255.201:6443 sha256:" + "b" * 64
FOREIGN = "10.0.0.9:6443 sha256:" + "c" * 64
KUBELET_CONF, ETCD = "/etc/kubernetes/kubelet.conf", "/var/lib/etcd/member"
BOOTSTRAP = "/etc/kubernetes/bootstrap-kubelet.conf"


def marked(lab: str = LAB_ID, identity: str | None = IDENTITY, tenant: str = "tenant-b", binding: str = MARKED,
           found: tuple[str, ...] = (KUBELET_CONF,), bound_now: str = "") -> MachineState:
    """A machine carrying a mark; `identity` None: a mark written before marks held one (lab= and tenant= only)."""
    mark = {"lab": lab, "tenant": tenant} | ({"id": identity, "binding": binding} if identity is not None else {})
    return MachineState(True, mark, found, bound_now)


def unmarked(*found: str, bound_now: str = "") -> MachineState:
    return MachineState(False, {}, found, bound_now)


OURS = {"lab": LAB_ID, "identity": IDENTITY}
OLDER = {"lab": LAB_ID, "identity": None}
ANOTHER_LAB = {"lab": OTHER_LAB, "identity": OTHER_IDENTITY}
NOT_PROVABLY_OURS = "not provably this lab's"

# (machine, adopt: true, decision, what its reason must say)
TABLE = {
    "clean": (unmarked(), False, "join", [f"{NODE} holds no Kubernetes state and no mark; joining it without a reset"]),
    "clean-adopted": (unmarked(), True, "join", ["no Kubernetes state and no mark"]),
    "signs-no-mark": (
        unmarked(KUBELET_CONF, ETCD, bound_now=FOREIGN), False, "refuse",
        [f"{NODE} holds Kubernetes state that is not this lab's, and a reset would delete it",
         f"found {KUBELET_CONF}, {ETCD}; bound to {FOREIGN}; lab mark:   (this lab is {LAB_ID} {IDENTITY})",
         "set adopt: true on it"]),
    "signs-no-mark-bound-to-nothing": (unmarked("a running kubelet service"), False, "refuse",
                                       ["found a running kubelet service; bound to no API server;"]),
    "signs-no-mark-adopted": (unmarked(KUBELET_CONF), True, "adopt",
                              [f"{NODE} holds Kubernetes state ({KUBELET_CONF}) that is {NOT_PROVABLY_OURS} "
                               "(mark:  ); adopt: true, so resetting it"]),
    "ours-half-joined": (marked(**OURS, tenant="tenant-a", found=(BOOTSTRAP,)), False, "reset",
                         [f"{NODE} carries this lab's mark (tenant tenant-a); resetting it"]),
    "ours-no-signs": (marked(**OURS, found=()), False, "reset", ["(tenant tenant-b); resetting it"]),
    "ours-bound-as-marked": (marked(**OURS, bound_now=MARKED), False, "reset", ["carries this lab's mark"]),
    "ours-bound-to-this-tenant": (marked(**OURS, bound_now=THIS), False, "reset", ["carries this lab's mark"]),
    "ours-bound-elsewhere": (
        marked(**OURS, bound_now=FOREIGN), False, "refuse",
        [f"{NODE} carries this lab's mark (tenant tenant-b, bound to {MARKED}), but its kubelet is now bound to "
         f"{FOREIGN}, which this lab never joined it to", "If it may be wiped, set adopt: true on it"]),
    "ours-bound-elsewhere-adopted": (marked(**OURS, bound_now=FOREIGN), True, "adopt",
                                     [f"({KUBELET_CONF}) that is {NOT_PROVABLY_OURS} (mark: {LAB_ID} {IDENTITY})"]),
    "ours-bound-elsewhere-no-signs-adopted": (marked(**OURS, found=(), bound_now=FOREIGN), True, "adopt",
                                              [f"holds Kubernetes state (none) that is {NOT_PROVABLY_OURS}"]),
    "older-mark": (
        marked(**OLDER, found=(KUBELET_CONF, ETCD)), False, "refuse",
        [f"{NODE} carries the mark of an earlier kamaji-hami-lab (lab={LAB_ID})", f"Found: {KUBELET_CONF}, {ETCD}.",
         "set adopt: true on it for one pulumi up"]),
    "older-mark-adopted": (marked(**OLDER), True, "adopt", [f"(mark: {LAB_ID} )"]),
    "older-mark-no-signs": (marked(**OLDER, found=()), False, "join",
                            [f"{NODE} holds no Kubernetes state (its mark names lab {LAB_ID}); joining it without "
                             "a reset"]),
    "another-lab": (marked(**ANOTHER_LAB, bound_now=FOREIGN), False, "refuse",
                    [f"found {KUBELET_CONF}; bound to {FOREIGN}; lab mark: {OTHER_LAB} {OTHER_IDENTITY} (this lab "
                     f"is {LAB_ID} {IDENTITY})"]),
    "another-lab-adopted": (marked(**ANOTHER_LAB), True, "adopt", [f"(mark: {OTHER_LAB} {OTHER_IDENTITY})"]),
    "another-lab-no-signs": (marked(**ANOTHER_LAB, found=()), False, "join", [f"its mark names lab {OTHER_LAB})"]),
    "another-lab-bound-to-this-tenant": (marked(**ANOTHER_LAB, bound_now=THIS), False, "refuse",
                                         ["not this lab's"]),
    "a-clone-with-the-same-names": (marked(lab=LAB_ID, identity=OTHER_IDENTITY, bound_now=MARKED), False, "refuse",
                                    [f"lab mark: {LAB_ID} {OTHER_IDENTITY} (this lab is {LAB_ID} {IDENTITY})"]),
    "an-identity-that-starts-like-ours": (marked(lab=LAB_ID, identity=IDENTITY[:-1]), False, "refuse",
                                          ["not this lab's"]),
}


@pytest.mark.parametrize(("machine", "adopt", "action", "says"), TABLE.values(), ids=TABLE.keys())
def test_which_machines_a_join_may_reset(machine, adopt, action, says):
    decision = reset_policy.decide(machine, ThisJoin(NODE, LAB_ID, IDENTITY, THIS, adopt))

    assert decision.action == action
    assert [part for part in says if part not in decision.reason] == []


# What a refusal tells the user, whole: why the machine is not provably the lab's and how to allow the reset.
REFUSALS = {
    "ours-bound-elsewhere":
        f"{NODE} carries this lab's mark (tenant tenant-b, bound to {MARKED}), but its kubelet is now bound to "
        f"{FOREIGN}, which this lab never joined it to (reset by hand and joined elsewhere?); a reset would take it "
        "from that cluster. If it may be wiped, set adopt: true on it",
    "older-mark":
        f"{NODE} carries the mark of an earlier kamaji-hami-lab (lab={LAB_ID}), which named a lab only by project, "
        "stack and cluster name: two clones with default names would take each other's machines. Marks now hold a "
        "random identity kept in this stack's state, which this mark lacks, so the lab cannot tell it is its own. "
        f"Found: {KUBELET_CONF}, {ETCD}. If this machine is this lab's, set adopt: true on it for one pulumi up: the "
        "join then resets it and marks it as this stack's",
    "signs-no-mark":
        f"{NODE} holds Kubernetes state that is not this lab's, and a reset would delete it: found {KUBELET_CONF}, "
        f"{ETCD}; bound to {FOREIGN}; lab mark:   (this lab is {LAB_ID} {IDENTITY}). Check the machine's address; if "
        "it may be wiped, set adopt: true on it",
}


@pytest.mark.parametrize("row", REFUSALS)
def test_a_refusal_says_in_full_why_and_how_to_allow_the_reset(row):
    machine, adopt, _, _ = TABLE[row]

    decision = reset_policy.decide(machine, ThisJoin(NODE, LAB_ID, IDENTITY, THIS, adopt))

    assert (decision.action, decision.reason) == ("refuse", REFUSALS[row])


def test_a_decision_names_the_node_it_is_about():
    for machine, adopt, _, _ in TABLE.values():
        reason = reset_policy.decide(machine, ThisJoin("gpu-box-7", LAB_ID, IDENTITY, THIS, adopt)).reason
        assert reason.startswith("gpu-box-7 ") and f"{NODE} " not in reason


def printed(state: MachineState) -> str:
    """What join-worker.sh's look at the machine prints for `state` (its in_machine_state)."""
    mark = ["mark=present", *(f"mark_{name}={value}" for name, value in state.mark.items())] if state.marked else []
    return "".join(f"{line}\n" for line in [*mark, *(f"found={sign}" for sign in state.found)])


one_line = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"))


@given(marked_=st.booleans(), mark=st.dictionaries(st.sampled_from(reset_policy.MARK_FIELDS), one_line),
       found=st.lists(one_line, max_size=4), bound_now=one_line)
def test_the_state_a_machine_prints_is_read_back_whole(marked_, mark, found, bound_now):
    state = MachineState(marked_, mark if marked_ else {}, tuple(found), bound_now)

    assert reset_policy.parse_state(printed(state), bound_now) == state


@given(st.text())
def test_any_output_reads_as_some_state(output):
    state = reset_policy.parse_state(output)

    assert set(state.mark) <= set(reset_policy.MARK_FIELDS)
    assert state.marked == ("mark=present" in output.split("\n"))


def test_a_field_the_mark_holds_twice_counts_once_and_other_lines_not_at_all():
    output = ("mark=present\nmark_lab=first\nmark_lab=second\nmark_owner=someone\nmark_id\nfound\n"
              "Welcome to the machine\nfound=/etc/kubernetes/admin.conf\n")

    assert reset_policy.parse_state(output) == MachineState(True, {"lab": "first"}, ("/etc/kubernetes/admin.conf",))


def test_a_line_is_split_at_its_first_equals_sign_so_a_value_may_hold_one():
    # The mark is a file on someone's machine, and a sign is whatever the look at it printed.
    output = "mark=present\nmark_tenant=team=gpu\nfound=kubelet --config=/var/lib/kubelet/config.yaml\n"

    assert reset_policy.parse_state(output) == MachineState(
        True, {"tenant": "team=gpu"}, ("kubelet --config=/var/lib/kubelet/config.yaml",))


@pytest.mark.parametrize("line", ["mark=present ", " mark=present", "mark=presently", "mark=absent", "mark=present\r"])
def test_only_the_whole_line_says_the_machine_is_marked(line):
    assert reset_policy.parse_state(f"{line}\nmark_id={IDENTITY}\n").marked is False


def decide_as_join_worker_does(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    # join-worker.sh runs it with the host's python3, outside the venv: the standard library only.
    return subprocess.run([sys.executable, "-I", str(SCRIPT), *args], input=stdin, capture_output=True, text=True,
                          check=False)


JOIN_ARGS = ("--node", NODE, "--lab-id", LAB_ID, "--identity", IDENTITY, "--binding", THIS)


@pytest.mark.parametrize(("adopt", "action"), [("true", "adopt"), ("false", "refuse"), ("TRUE", "refuse"),
                                               ("", "refuse")])
def test_the_command_prints_the_decision_then_its_reason_and_only_true_adopts(adopt, action):
    done = decide_as_join_worker_does(*JOIN_ARGS, "--bound-now", FOREIGN, "--adopt", adopt,
                                      stdin=f"found={KUBELET_CONF}\n")

    assert done.returncode == 0 and done.stderr == ""
    decision, reason = done.stdout.split(" ", 1)
    assert decision == action and reason.startswith(f"{NODE} holds Kubernetes state") and reason.endswith("it\n")
    assert len(done.stdout.splitlines()) == 1


# (what the machine printed, its kubelet's binding now): a machine that is not the lab's, and the lab's own one
# bound to the tenant this join binds it to.
COMMAND_CASES = {
    "not-the-labs": (f"found={KUBELET_CONF}\n", FOREIGN),
    "ours-bound-to-this-tenant": (f"mark=present\nmark_lab={LAB_ID}\nmark_id={IDENTITY}\nmark_binding={MARKED}\n"
                                  f"found={KUBELET_CONF}\n", THIS),
}


@pytest.mark.parametrize(("printed_state", "bound_now"), COMMAND_CASES.values(), ids=COMMAND_CASES.keys())
def test_the_command_prints_the_decision_the_policy_makes_on_its_arguments(printed_state, bound_now):
    done = decide_as_join_worker_does(*JOIN_ARGS, "--bound-now", bound_now, stdin=printed_state)

    decision = reset_policy.decide(reset_policy.parse_state(printed_state, bound_now),
                                   ThisJoin(NODE, LAB_ID, IDENTITY, THIS))
    assert done.stdout == f"{decision.action} {decision.reason}\n"


def test_the_command_reads_the_binding_of_the_kubelet_now_from_its_argument():
    state = f"mark=present\nmark_lab={LAB_ID}\nmark_id={IDENTITY}\nmark_binding={MARKED}\nfound={KUBELET_CONF}\n"

    elsewhere = decide_as_join_worker_does(*JOIN_ARGS, "--bound-now", FOREIGN, stdin=state)
    unbound = decide_as_join_worker_does(*JOIN_ARGS, stdin=state)

    assert elsewhere.stdout.startswith("refuse ") and f"now bound to {FOREIGN}," in elsewhere.stdout
    assert unbound.stdout.startswith("reset ")


def test_a_mark_that_is_no_utf8_is_still_judged():
    done = subprocess.run([sys.executable, "-I", str(SCRIPT), *JOIN_ARGS], capture_output=True, check=False,
                          input=b"mark=present\nmark_lab=caf\xe9-lab\nmark_id=\xff\xfe\nfound=/var/lib/etcd/member\n")

    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith("refuse ") and "lab mark: caf\ufffd-lab \ufffd\ufffd" in done.stdout.decode()


def test_an_empty_identity_is_refused_as_it_would_match_every_mark_without_one():
    done = decide_as_join_worker_does("--node", NODE, "--lab-id", LAB_ID, "--identity", "", "--binding", THIS,
                                      stdin="mark=present\nfound=/etc/kubernetes/kubelet.conf\n")

    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1] == (
        "reset_policy.py: error: --identity is empty: an empty identity would match every mark without one")


def run_main(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """The command in this process, on a machine that printed nothing: (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    monkeypatch.setenv("COLUMNS", "120")  # argparse wraps its help to the terminal
    monkeypatch.setattr(sys, "argv", [str(SCRIPT)])
    try:
        code = reset_policy.main(list(args))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("option", ["--node", "--lab-id", "--identity", "--binding"])
def test_each_thing_the_join_must_say_is_a_required_option(monkeypatch, capsys, option):
    pairs = zip(JOIN_ARGS[::2], JOIN_ARGS[1::2], strict=True)
    args = [arg for name, value in pairs if name != option for arg in (name, value)]

    code, out, err = run_main(monkeypatch, capsys, *args)

    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == f"reset_policy.py: error: the following arguments are required: {option}"


def test_the_help_is_the_scripts_description_as_written_and_says_what_adopt_takes(monkeypatch, capsys):
    code, out, _ = run_main(monkeypatch, capsys, "--help")

    assert code == 0
    assert reset_policy.__doc__.strip() in out  # line by line, as written: stdin, argv and stdout
    (adopt,) = [line.split(None, 2) for line in out.splitlines() if line.lstrip().startswith("--adopt")]
    assert adopt == ["--adopt", "ADOPT", "true lets a join reset what is not provably the lab's"]


def test_the_policy_needs_only_the_standard_library():
    tree = ast.parse(SCRIPT.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}

    assert imported and imported <= set(sys.stdlib_module_names) | {"__future__"}
