"""Optional encryption of a snapshot with age: what the program encrypts the real age CLI decrypts and the other way
round, and every encrypted file the identity cannot open whole is refused before anything changes."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from snapshot import archive, encryption
from snapshot.archive import Refused
from tests import test_snapshot_live as live
from tests.plan import ROOT
from tests.snapshot_etcd import put, root
from tests.test_make_and_workflows import make, needs_make, workflow
from tests.test_snapshot_archive import mutate, mutations
from tests.test_snapshot_format import forged
from tests.test_validation import FakeLab
from validation.exit_codes import EXIT_USAGE

MISSING = [tool for tool in ("age", "age-keygen") if not shutil.which(tool)]
if MISSING and os.environ.get("CI"):
    # CI installs Debian's age: a skip there would hide that the interop checks never ran.
    pytest.fail(f"CI is set but these are not installed: {', '.join(MISSING)} (Debian's age)", pytrace=False)
needs_age = pytest.mark.skipif(bool(MISSING), reason="needs Debian's age package (.ci/run installs it)")

SNAPSHOT = forged()
# Past one 64 KiB age chunk, so a cut at a chunk's end is tried too.
LARGE = os.urandom(3 * 64 * 1024 + 17)


@pytest.fixture
def keys(tmp_path) -> tuple[Path, str, Path]:
    """An identity file as age-keygen writes it, its public key, and another identity file."""
    if MISSING:
        pytest.skip("needs Debian's age package (.ci/run installs it)")
    identity, other = tmp_path / "key.txt", tmp_path / "other.txt"
    made = subprocess.run(["age-keygen", "-o", str(identity)], capture_output=True, text=True, check=True)
    subprocess.run(["age-keygen", "-o", str(other)], capture_output=True, check=True)
    public = made.stderr.strip().removeprefix("Public key: ")
    return identity, public, other


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """Where the decrypted copy's own directory is made, to see it made and removed."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


def program_encrypts(tmp_path: Path, data: bytes, public: str) -> Path:
    plain, sealed = tmp_path / "plain.tar.gz", tmp_path / "plain.tar.gz.age"
    plain.write_bytes(data)
    encryption.encrypt(plain, sealed, encryption.recipient(public))
    return sealed


def opened(sealed: Path, identity: Path) -> bytes:
    with encryption.decrypted(sealed, identity) as plain:
        return plain.read_bytes()


@pytest.mark.parametrize("data", [SNAPSHOT, LARGE, b""], ids=["snapshot", "four chunks", "empty"])
def test_what_the_program_encrypts_the_age_cli_decrypts(tmp_path, keys, data):
    identity, public, _ = keys
    sealed = program_encrypts(tmp_path, data, public)
    assert stat.S_IMODE(sealed.stat().st_mode) == 0o600
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []  # no partial file left
    done = subprocess.run(["age", "-d", "-i", str(identity), str(sealed)], capture_output=True, check=True)
    assert done.stdout == data


@pytest.mark.parametrize("armor", [[], ["-a"]], ids=["binary", "armored"])
def test_what_the_age_cli_encrypts_the_program_decrypts(tmp_path, keys, private_tmp, armor):
    identity, public, _ = keys
    sealed = tmp_path / "s.tar.gz.age"
    subprocess.run(["age", "-r", public, *armor, "-o", str(sealed)], input=LARGE, check=True)
    assert encryption.is_encrypted(sealed)
    assert opened(sealed, identity) == LARGE


def test_the_decrypted_copy_is_private_and_removed_afterwards(tmp_path, keys, private_tmp):
    identity, public, _ = keys
    sealed = program_encrypts(tmp_path, SNAPSHOT, public)
    with encryption.decrypted(sealed, identity) as plain:
        assert stat.S_IMODE(plain.stat().st_mode) == 0o600
        assert stat.S_IMODE(plain.parent.stat().st_mode) == 0o700 and plain.parent.parent == private_tmp
        assert plain.read_bytes() == SNAPSHOT
    assert list(private_tmp.iterdir()) == []


def cut(at: int):
    return lambda data: data[:at]


def flipped(at: int):
    return lambda data: data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (cut(-1), "truncated or altered"),
        (cut(-16), "truncated or altered"),  # within the last chunk's tag
        (cut(-(len(LARGE) % (64 * 1024)) - 16), "truncated or altered"),  # the last chunk gone, whole
        (cut(60), "not an age file, or it is damaged"),  # within the header
        (flipped(-1), "truncated or altered"),
        (flipped(-70_000), "truncated or altered"),  # in an earlier chunk
        (flipped(3), "not an age file, or it is damaged"),  # the version line
        (flipped(25), "no key in the identity file .* opens it"),  # the stanza's key share: opens for no key
        (flipped(-len(LARGE) - 4 * 16 - 40), "not an age file, or it is damaged"),  # header MAC
    ],
)
def test_a_truncated_or_altered_encrypted_file_is_refused_and_nothing_is_left(
    tmp_path, keys, private_tmp, damage, words
):
    identity, public, _ = keys
    sealed = program_encrypts(tmp_path, LARGE, public)
    sealed.write_bytes(damage(sealed.read_bytes()))
    with pytest.raises(Refused, match=words):
        opened(sealed, identity)
    assert list(private_tmp.iterdir()) == []  # the part decrypted before the damage is gone too



@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=mutations())
def test_any_change_to_an_encrypted_file_is_refused(tmp_path, keys, private_tmp, mutation):
    """An encrypted file is outside input too: any change is a refusal with a sentence, never another exception."""
    identity, public, _ = keys
    sealed = tmp_path / "s.tar.gz.age"
    if not sealed.exists():
        program_encrypts(tmp_path, SNAPSHOT, public).rename(sealed)
    changed = tmp_path / "changed.tar.gz.age"
    changed.write_bytes(mutate(sealed.read_bytes(), mutation))
    with pytest.raises(Refused) as refusal:
        opened(changed, identity)
    assert str(refusal.value).isprintable()
    assert list(private_tmp.iterdir()) == []

def test_the_wrong_identity_is_refused(tmp_path, keys, private_tmp):
    _, public, other = keys
    sealed = program_encrypts(tmp_path, SNAPSHOT, public)
    with pytest.raises(Refused, match=f"no key in the identity file {other} opens it"):
        opened(sealed, other)
    assert list(private_tmp.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "cannot read the identity file .*: No such file or directory"),
        ("", "holds no age secret key"),
        ("# created: 2026-12-04T18:30:05Z\n\n", "holds no age secret key"),
        ("AGE-SECRET-KEY-1NOTAKEY\n", "line 1 is not an age secret key"),
    ],
)
def test_a_missing_or_unusable_identity_file_is_refused_without_quoting_it(
    tmp_path, keys, private_tmp, content, words
):
    _, public, _ = keys
    sealed = program_encrypts(tmp_path, SNAPSHOT, public)
    identity = tmp_path / "identity.txt"
    if content is not None:
        identity.write_text(content)
    with pytest.raises(Refused, match=words) as refusal:
        opened(sealed, identity)
    assert "NOTAKEY" not in str(refusal.value)
    assert list(private_tmp.iterdir()) == []


def test_an_encrypted_file_without_an_identity_is_refused_and_a_plain_one_is_read_as_it_is(tmp_path, keys):
    _, public, _ = keys
    sealed = program_encrypts(tmp_path, SNAPSHOT, public)
    refused = pytest.raises(Refused, match="encrypted with age: give the identity file")
    with refused, encryption.private_plaintext(sealed, None):
        pass
    with encryption.private_plaintext(tmp_path / "plain.tar.gz", None) as plain:
        assert plain.read_bytes() == (tmp_path / "plain.tar.gz").read_bytes()
        assert plain != tmp_path / "plain.tar.gz"  # a private copy, not the file itself


@pytest.mark.parametrize("text", ["", "age1", "AGE-SECRET-KEY-1ABC", "ssh-ed25519 AAAA", "age1\x1b[2J"])
def test_a_recipient_that_is_no_age_public_key_is_a_usage_error_before_the_stack_is_read(tmp_path, capsys, text):
    lab = FakeLab()
    with pytest.raises(SystemExit) as exit:
        live.run(lab, tmp_path, "take", "tenant-a", "--recipient", text)
    assert exit.value.code == EXIT_USAGE and lab.calls == []
    assert "is not an age public key" in capsys.readouterr().err


@needs_age
def test_an_encrypted_snapshot_is_taken_and_restored_and_no_plaintext_is_left(
    real_etcd, port_forward, tmp_path, monkeypatch, keys, private_tmp
):
    identity, public, other = keys
    monkeypatch.chdir(tmp_path)
    live.seed(real_etcd, "first-lab")
    cluster = live.ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
    code, said = live.run(lab, tmp_path, "take", "tenant-a", "--recipient", public)
    assert code == 0, said
    (sealed,) = (tmp_path / "snapshots").iterdir()  # the encrypted file only: no plaintext beside it
    assert sealed.name == "tenant-a-20261204T183005Z.tar.gz.age" and f"encrypted to {public}" in said
    assert stat.S_IMODE(sealed.stat().st_mode) == 0o600
    plain = subprocess.run(["age", "-d", "-i", str(identity), str(sealed)], capture_output=True, check=True).stdout
    assert plain.startswith(archive.GZIP_HEADER)
    saved = live.prefix(real_etcd)

    put(root(real_etcd), f"/{live.SCHEMA}/configmaps/default/made-later".encode(), b"later")
    changed = live.prefix(real_etcd)
    code, _ = live.run(lab, tmp_path, "restore", "tenant-a", str(sealed), "--identity", str(other))
    assert code == 1 and cluster.events == [] and live.prefix(real_etcd) == changed
    code, said = live.run(lab, tmp_path, "restore", "tenant-a", str(sealed), "--identity", str(identity))
    assert code == 0, said
    assert live.prefix(real_etcd) == saved and cluster.replicas() == 1
    assert list(private_tmp.iterdir()) == []


@needs_age
def test_a_wrong_identity_is_refused_by_the_cli_before_anything_changes(
    real_etcd, port_forward, tmp_path, monkeypatch, keys, capsys
):
    identity, public, other = keys
    monkeypatch.chdir(tmp_path)
    live.seed(real_etcd, "first-lab")
    cluster = live.ManagementCluster(real_etcd, lab := FakeLab(), "first-lab")
    assert live.run(lab, tmp_path, "take", "tenant-a", "--recipient", public)[0] == 0
    (sealed,) = (tmp_path / "snapshots").iterdir()
    taken = len(lab.calls)
    for identity_arguments in (["--identity", str(other)], ["--identity", str(tmp_path / "absent")], []):
        code, _ = live.run(lab, tmp_path, "restore", "tenant-a", str(sealed), *identity_arguments)
        assert code == 1 and "refused, nothing changed" in capsys.readouterr().err
    # Read-only calls only, and the root credentials never even fetched.
    assert {call.command.split()[0] for call in lab.calls[taken:]} == {"get"}
    assert not [call for call in lab.calls[taken:] if "kamaji-system" in call.command]
    assert cluster.events == []


@needs_make
def test_make_passes_the_recipient_and_the_identity(tmp_path):
    dry = make("-n", "snapshot", "TENANT=tenant-b", "RECIPIENT=age1xyz", f"VENV={tmp_path / 'venv'}")
    assert '-m snapshot --stack dev take tenant-b --recipient "age1xyz"' in dry.stdout
    dry = make("-n", "restore", "TENANT=tenant-b", "SNAPSHOT=s/a.tar.gz.age", "IDENTITY=k b.txt",
               f"VENV={tmp_path / 'venv'}")  # fmt: skip
    assert '--stack dev restore tenant-b "s/a.tar.gz.age" --identity "k b.txt"' in dry.stdout
    plain = make("-n", "snapshot", "TENANT=tenant-b", f"VENV={tmp_path / 'venv'}")
    assert "--recipient" not in plain.stdout  # unencrypted stays the default


@needs_make
def test_make_restore_of_an_encrypted_file_asks_for_the_identity_before_any_venv_or_stack(tmp_path):
    done = make("restore", "TENANT=tenant-a", "SNAPSHOT=snapshots/a.tar.gz.age", f"VENV={tmp_path / 'venv'}")
    assert done.returncode != 0 and "IDENTITY=<age identity file>" in done.stderr
    assert not (tmp_path / "venv").exists() and "pulumi" not in done.stdout


def test_ci_installs_age_before_the_tests_which_fail_without_it_under_ci(ci_guard):
    runs = [step.get("run", "") for step in workflow("ci.yml")["jobs"]["test"]["steps"]]
    install = next(i for i, run in enumerate(runs) if "apt-get install" in run and "age" in run.split())
    assert install < next(i for i, run in enumerate(runs) if " test" in run and run.startswith("make "))
    (apt,) = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "apt-get install" in line]
    assert "age" in apt.split()
    ci_guard(ROOT / "tests" / "test_snapshot_encryption.py", "the_age_cli_decrypts",
             "CI is set but these are not installed: age, age-keygen")
