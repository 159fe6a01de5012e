"""Stack files and their passphrase salt in git: secrets survive commit, clone, stash, checkout and branch switches.

Real git with the filter `make` defines, and real Pulumi passphrase decryption: PyPI's pulumi-crypto implements
the CLI's scheme (the Python SDK does not), and the first test shows it opens the CLI's own test vector.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pulumi_crypto import PassphraseCipher, PulumiCryptoBadPassphraseError

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed"),
]

# The passphrase manager's state the Pulumi CLI's own tests open with the passphrase "password": "v1:<salt>:"
# then "pulumi" encrypted with PBKDF2-SHA256 (1,000,000 rounds, 32-byte key) and AES-256-GCM, 12-byte nonce
# (pulumi/pulumi pkg/secrets/passphrase/manager_test.go `state`, manager.go symmetricCrypterFromPhraseAndState,
# sdk/go/common/resource/config/crypt.go NewSymmetricCrypterFromPassphrase and DecryptValue @1b5949891b).
CLI_STATE = "v1:fozI5u6B030=:v1:F+6ZduKKd8G0/V7L:PGMFeIzwobWRKmEAzUdaQHqC5mMRIQ=="
CLI_PASSPHRASE = "password"
PASSPHRASE = "team passphrase"
SECRET_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n-----END OPENSSH PRIVATE KEY-----"
# `pulumi stack select --create` on a stack file that already has its salt leaves it alone; the fake says
# when it is asked for anything else.
FAKE_PULUMI = r"""#!/bin/sh
case "$*" in
  version) echo v3.272.0 ;;
  "stack select --create "*|"stack select "*) ;;
  *) echo "fake pulumi: unexpected $*" >&2; exit 97 ;;
esac
"""


def test_pulumi_crypto_opens_the_clis_own_passphrase_state():
    assert PassphraseCipher(CLI_PASSPHRASE, salt_state=CLI_STATE).decrypt(CLI_STATE.split(":", 2)[2]) == "pulumi"
    with pytest.raises(PulumiCryptoBadPassphraseError):
        PassphraseCipher("wrong", salt_state=CLI_STATE)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True, text=True, check=True,
    ).stdout


@pytest.fixture(scope="module")
def cipher() -> PassphraseCipher:
    return PassphraseCipher(PASSPHRASE)  # a new salt, as `pulumi stack init` mints one


def stack_file(cipher: PassphraseCipher, with_secret: bool) -> str:
    # As Pulumi writes them: `pulumi config set --secret --path 'sshPrivateKeys.default'`, salt appended last.
    secret = f"  kamaji-hami-lab:sshPrivateKeys:\n    default:\n      secure: {cipher.encrypt(SECRET_KEY)}\n"
    return ("config:\n  kamaji-hami-lab:tenants:\n    - name: tenant-a\n"
            + (secret if with_secret else "") + f"encryptionsalt: {cipher.salt_state}\n")


@functools.cache
def opened(salt_state: str) -> PassphraseCipher:
    return PassphraseCipher(PASSPHRASE, salt_state=salt_state)  # about a second: PBKDF2's million rounds


def decrypts(text: str) -> str:
    """The secret of a stack file, decrypted as the CLI does: with the salt the file itself holds."""
    import yaml

    config = yaml.safe_load(text)
    assert "encryptionsalt" in config, "no salt: Pulumi would mint a new one and never decrypt this file"
    secret = config["config"]["kamaji-hami-lab:sshPrivateKeys"]["default"]["secure"]
    return opened(config["encryptionsalt"]).decrypt(secret)


@pytest.fixture
def lab(tmp_path, cipher):
    """A user's repository: the project's make entry points, a secret stack file committed, the filter defined."""
    repo = tmp_path / "lab"
    for name in ("Makefile", "Pulumi.yaml", "Pulumi.dev.yaml", ".gitattributes", "scripts/preflight.py",
                 "scripts/stack_file_clean.py"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, repo / name)
    git(repo, "init", "-q", "-b", "main")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text(FAKE_PULUMI)
    (bin_dir / "pulumi").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE}
    subprocess.run(["make", "-C", str(repo), "stack", "STACK=far"], env=env, capture_output=True, check=True)
    (repo / "Pulumi.far.yaml").write_text(stack_file(cipher, with_secret=True))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a lab beyond one host")
    return repo


def test_a_commit_of_a_stack_file_with_secrets_carries_its_salt(lab):
    assert decrypts(git(lab, "show", "HEAD:Pulumi.far.yaml")) == SECRET_KEY


def test_a_fresh_clone_decrypts_the_secrets(lab, tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(lab), str(clone)], check=True)

    assert decrypts((clone / "Pulumi.far.yaml").read_text()) == SECRET_KEY


def test_stash_and_pop_keep_the_salt(lab):
    stack = lab / "Pulumi.far.yaml"
    stack.write_text(stack.read_text().replace("tenant-a", "tenant-b"))
    git(lab, "stash", "-q")
    assert decrypts(stack.read_text()) == SECRET_KEY, "after stash"
    git(lab, "stash", "pop", "-q")

    assert "tenant-b" in stack.read_text()
    assert decrypts(stack.read_text()) == SECRET_KEY, "after pop"


def test_checkout_of_the_file_keeps_the_salt(lab):
    stack = lab / "Pulumi.far.yaml"
    stack.write_text(stack.read_text().replace("tenant-a", "tenant-b"))
    git(lab, "checkout", "--", "Pulumi.far.yaml")

    assert "tenant-a" in stack.read_text()
    assert decrypts(stack.read_text()) == SECRET_KEY


def test_switching_branches_keeps_the_salt(lab):
    git(lab, "checkout", "-q", "-b", "other")
    (lab / "Pulumi.far.yaml").unlink()
    git(lab, "commit", "-qam", "no far stack here")
    git(lab, "checkout", "-q", "main")

    assert decrypts((lab / "Pulumi.far.yaml").read_text()) == SECRET_KEY


def test_a_stack_file_without_secrets_is_committed_without_the_salt_and_stays_clean(lab, cipher):
    salted = (ROOT / "Pulumi.dev.yaml").read_text() + f"encryptionsalt: {cipher.salt_state}\n"
    (lab / "Pulumi.dev.yaml").write_text(salted)
    git(lab, "add", "Pulumi.dev.yaml")

    assert git(lab, "status", "--porcelain") == ""
    assert "encryptionsalt" not in git(lab, "show", ":Pulumi.dev.yaml")
    assert "encryptionsalt" in (lab / "Pulumi.dev.yaml").read_text(), "Pulumi still reads it from the file"


def test_a_secret_added_later_brings_its_salt_into_the_next_commit(lab, cipher):
    stack = lab / "Pulumi.dev.yaml"
    stack.write_text((ROOT / "Pulumi.dev.yaml").read_text() + f"encryptionsalt: {cipher.salt_state}\n")
    git(lab, "add", "Pulumi.dev.yaml")
    # As `pulumi config set --secret` would: the value goes in, the salt line stays last.
    text = stack.read_text().replace("encryptionsalt:", f"  kamaji-hami-lab:x:\n    secure: {cipher.encrypt('s')}\n"
                                     "encryptionsalt:")
    stack.write_text(text)
    git(lab, "commit", "-qam", "a secret")

    assert "encryptionsalt: v1:" in git(lab, "show", "HEAD:Pulumi.dev.yaml")


@pytest.mark.parametrize(("text", "keeps_salt"), [
    ("config:\n  a:\n    secure: v1:x\nencryptionsalt: v1:s\n", True),
    ("config:\n  a: {secure: v1:x}\nencryptionsalt: v1:s\n", True),
    ("config:\n  a:\n    - secure: v1:x\nencryptionsalt: v1:s\n", True),
    ("config:\n  insecure: 1\n  a: secured\nencryptionsalt: v1:s\n", False),
    ("encryptionsalt: v1:s\nconfig:\n  a: 1\n", False),
])
def test_the_filter_keeps_the_salt_exactly_where_a_secret_is(text, keeps_salt):
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from stack_file_clean import cleaned

    assert cleaned(text) == (text if keeps_salt else text.replace("encryptionsalt: v1:s\n", ""))
