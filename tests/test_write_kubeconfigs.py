"""scripts/write_kubeconfigs.py: stack outputs in, private kubeconfig files out."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.script_module import script_module
from validation.host import CommandResult
from validation.stack_outputs import OutputsError, files_of

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "write_kubeconfigs.py"
OUTPUTS = ROOT / "tests" / "fixtures" / "validation" / "outputs.json"

write_kubeconfigs = script_module("write_kubeconfigs")


def outputs() -> dict:
    return json.loads(OUTPUTS.read_text())


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


class PulumiStub:
    def __init__(self, stdout: str, returncode: int = 0, stderr: str = ""):
        self.reply = (returncode, stdout, stderr)
        self.argv: tuple[str, ...] = ()
        self.env: dict | None = None

    def run(self, argv, stdin=None, timeout=None, env=None) -> CommandResult:
        self.argv, self.env = tuple(argv), env
        return CommandResult(self.argv, *self.reply)


def test_all_outputs_give_one_private_file_per_cluster(tmp_path, capsys):
    target = tmp_path / "kubeconfigs"

    assert write_kubeconfigs.main([str(OUTPUTS), "--dir", str(target)]) == 0

    document = outputs()
    expected = {"management.kubeconfig": document["managementKubeconfig"]}
    expected |= {f"{name}.kubeconfig": text for name, text in document["kubeconfigs"].items()}
    assert {path.name: path.read_text() for path in target.iterdir()} == expected
    assert {mode(path) for path in target.iterdir()} == {0o600}
    assert mode(target) == 0o700
    assert sorted(capsys.readouterr().out.split()) == sorted(str(target / name) for name in expected)


def test_the_kubeconfigs_output_alone_works_from_stdin(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(outputs()["kubeconfigs"])))

    assert write_kubeconfigs.main(["-", "--dir", str(tmp_path)]) == 0

    assert sorted(path.name for path in tmp_path.iterdir()) == ["tenant-a.kubeconfig", "tenant-b.kubeconfig"]


def test_without_a_source_it_asks_pulumi(tmp_path):
    pulumi = PulumiStub(OUTPUTS.read_text())

    assert write_kubeconfigs.main(["--dir", str(tmp_path)], runner=pulumi) == 0

    assert pulumi.argv[:3] == ("pulumi", "stack", "output") and "--show-secrets" in pulumi.argv
    assert (tmp_path / "management.kubeconfig").exists()


def test_pulumi_failure_is_reported_and_nothing_written(tmp_path, capsys):
    pulumi = PulumiStub("", returncode=255, stderr="error: passphrase must be set\n")

    assert write_kubeconfigs.main(["--dir", str(tmp_path / "out")], runner=pulumi) == 2

    assert "passphrase must be set" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_rewriting_replaces_a_world_readable_file_with_a_private_one(tmp_path):
    stale = tmp_path / "tenant-a.kubeconfig"
    stale.write_text("old")
    stale.chmod(0o644)
    old_umask = os.umask(0)  # the mode must not depend on a careful umask
    try:
        assert write_kubeconfigs.main([str(OUTPUTS), "--dir", str(tmp_path)]) == 0
    finally:
        os.umask(old_umask)

    assert mode(stale) == 0o600 and stale.read_text() == outputs()["kubeconfigs"]["tenant-a"]
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]  # no temp files left


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        ("not json", "not valid JSON"),
        (json.dumps({"kubeconfigs": {"management": "apiVersion: v1"}}), "'management'"),
        (json.dumps({"kubeconfigs": {"../../etc/cron.d/x": "apiVersion: v1"}}), "not usable as a tenant name"),
        (json.dumps({"kubeconfigs": {}}), "no kubeconfig"),
    ],
)
def test_bad_outputs_are_refused_without_writing(tmp_path, capsys, document, complaint):
    source = tmp_path / "outputs.json"
    source.write_text(document)

    assert write_kubeconfigs.main([str(source), "--dir", str(tmp_path / "out")]) == 2

    assert complaint in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_runs_as_the_readme_shows_with_the_standard_library_only(tmp_path):
    # The README pipes `pulumi stack output` into plain python3, outside the venv.
    probe = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    guard = "import sys; sys.modules['yaml'] = None; " + probe  # any `import yaml` would now fail
    completed = subprocess.run(
        [sys.executable, "-c", guard, str(SCRIPT), "-", "--dir", str(tmp_path)],
        input=OUTPUTS.read_text(),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    assert (tmp_path / "tenant-b.kubeconfig").exists()


def test_outputs_printed_without_show_secrets_say_how_to_print_them(tmp_path, monkeypatch, capsys):
    # `pulumi stack output --json kubeconfigs` without --show-secrets prints the string "[secret]".
    monkeypatch.setattr(sys, "stdin", io.StringIO('"[secret]"\n'))

    assert write_kubeconfigs.main(["-", "--dir", str(tmp_path / "out")]) == 2
    assert "pulumi stack output --show-secrets --json" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_without_a_source_it_reads_the_stack_make_uses(tmp_path, monkeypatch):
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    pulumi = PulumiStub(OUTPUTS.read_text())

    assert write_kubeconfigs.main(["--dir", str(tmp_path)], runner=pulumi) == 0
    assert pulumi.argv == ("pulumi", "stack", "output", "--show-secrets", "--json", "--stack", "dev")
    assert pulumi.env == {"PULUMI_BACKEND_URL": "file://~"}


def test_a_directory_that_cannot_be_made_is_refused_with_a_message(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    target = tmp_path / "a-file" / "kubeconfigs"

    assert write_kubeconfigs.main([str(OUTPUTS), "--dir", str(target)]) == 1

    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"write_kubeconfigs: cannot write the kubeconfigs to {target}: Not a directory; choose a directory "
                   "of yours with --dir (make: KUBECONFIG_DIR=...)\n")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any directory")
def test_a_directory_it_may_not_write_is_refused_with_a_message(tmp_path, capsys):
    target = tmp_path / "kubeconfigs"
    target.mkdir(mode=0o500)

    assert write_kubeconfigs.main([str(OUTPUTS), "--dir", str(target)]) == 1
    assert "write_kubeconfigs: cannot write the kubeconfigs to" in capsys.readouterr().err


def test_a_directory_left_readable_by_others_is_made_private(tmp_path):
    target = tmp_path / "kubeconfigs"
    target.mkdir()
    target.chmod(0o755)

    assert write_kubeconfigs.main([str(OUTPUTS), "--dir", str(target)]) == 0
    assert mode(target) == 0o700


def test_a_shared_sticky_directory_is_left_as_it_is(tmp_path):
    target = tmp_path / "shared"
    target.mkdir()
    target.chmod(0o1777)

    assert write_kubeconfigs.main([str(OUTPUTS), "--dir", str(target)]) == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o1777


def with_teams(document: dict, teams: dict[str, str]) -> dict:
    return {**document, "teamKubeconfigs": teams}


def team_kubeconfig(tenant: str) -> str:
    return f"apiVersion: v1\nkind: Config\nusers:\n- name: {tenant}-team\n  user:\n    token: token-of-{tenant}\n"


def test_each_teams_kubeconfig_is_written_beside_the_admin_one_privately(tmp_path):
    document = with_teams(outputs(), {name: team_kubeconfig(name) for name in outputs()["kubeconfigs"]})
    source = tmp_path / "outputs.json"
    source.write_text(json.dumps(document))

    assert write_kubeconfigs.main([str(source), "--dir", str(tmp_path / "out")]) == 0

    written = {path.name: path for path in (tmp_path / "out").iterdir()}
    for tenant, admin in document["kubeconfigs"].items():
        assert written[f"{tenant}.kubeconfig"].read_text() == admin
        assert written[f"{tenant}-team.kubeconfig"].read_text() == team_kubeconfig(tenant)
    assert set(written) == {"management.kubeconfig", *(f"{t}.kubeconfig" for t in document["kubeconfigs"]),
                            *(f"{t}-team.kubeconfig" for t in document["kubeconfigs"])}
    assert {mode(path) for path in written.values()} == {0o600}


def test_a_team_file_that_would_take_another_tenants_name_is_refused_and_nothing_written(tmp_path, capsys):
    document = outputs()
    document["kubeconfigs"] = {"ml": "apiVersion: v1\n", "ml-team": "apiVersion: v1\n"}
    source = tmp_path / "outputs.json"
    source.write_text(json.dumps(with_teams(document, {"ml": team_kubeconfig("ml")})))

    assert write_kubeconfigs.main([str(source), "--dir", str(tmp_path / "out")]) == 2

    assert ("tenant 'ml''s team kubeconfig would be ml-team.kubeconfig, the name of tenant 'ml-team''s admin one"
            in capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("teams", "complaint"), [
    ("[secret]", "outputs.teamKubeconfigs holds '[secret]'"),
    ({"tenant-a": "[secret]"}, "outputs.teamKubeconfigs.tenant-a holds '[secret]'"),
    ({"tenant-a": ""}, "teamKubeconfigs.tenant-a: expected kubeconfig YAML"),
    ({"Tenant A": "apiVersion: v1\n"}, "'Tenant A' is not usable as a tenant name"),
    (["apiVersion: v1"], "outputs.teamKubeconfigs: expected an object"),
])
def test_bad_team_kubeconfigs_are_refused_without_writing(tmp_path, capsys, teams, complaint):
    source = tmp_path / "outputs.json"
    source.write_text(json.dumps(with_teams(outputs(), teams)))

    assert write_kubeconfigs.main([str(source), "--dir", str(tmp_path / "out")]) == 2

    assert complaint in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12) | st.sampled_from(["[secret]", "ml", "ml-team"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8) | st.sampled_from(["ml", "a-team"]),
                                                               inner, max_size=3),
    max_leaves=8,
)


# Mostly valid, so that documents with every entry valid (where names may clash) come up often.
NAMES = st.sampled_from(["ml", "ml-team", "ml", "ml-team", "a", "a-team", "Bad", "management"])
TEXTS = st.sampled_from(["apiVersion: v1\n"] * 6 + ["", "[secret]"])


@given(st.dictionaries(NAMES, TEXTS, max_size=4), st.dictionaries(NAMES, TEXTS, max_size=4) | JSON)
def test_any_outputs_give_files_named_once_or_an_outputs_error(admins, teams):
    # Stack outputs are outside input: whatever teamKubeconfigs holds, the writer gets distinct file names
    # for non-empty texts, or one OutputsError to print, never a traceback.
    try:
        files = files_of({"kubeconfigs": admins, "teamKubeconfigs": teams})
    except OutputsError:
        return
    teams = {} if teams is None else teams  # a null output reads as none, as in a stack made before them
    assert set(files) >= set(admins) and all(isinstance(text, str) and text.strip() for text in files.values())
    assert len(files) == len(admins) + len(teams), "no team file took another's name"
    assert all(files[f"{tenant}-team"] == text for tenant, text in teams.items())
