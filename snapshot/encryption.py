"""Optional age encryption of a snapshot file: to one recipient's public key, and back with its identity file.

pyrage (requirements.txt) rather than the age CLI: it installs with the venv, so the Docker host needs no other
tool, and it streams through a file object without holding the file in memory (woodruffw/pyrage src/lib.rs
encrypt_io/decrypt_io@v1.3.0). What it writes is age-encryption.org/v1, which the age CLI reads and writes
(tests/test_snapshot_encryption.py checks both ways).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pyrage
from pyrage import x25519

from snapshot import archive, core
from snapshot.archive import Refused

SUFFIX = ".age"
# How an age file starts, binary or armored (FiloSottile/age internal/format/format.go and armor/armor.go@v1.1.1).
MAGIC = (b"age-encryption.org/v1\n", b"-----BEGIN AGE ENCRYPTED FILE-----")
# The age CLI reads at most this much of an identity file (FiloSottile/age parse.go@v1.1.1, ParseIdentities).
MAX_IDENTITY_FILE = 1 << 24


def recipient(text: str) -> x25519.Recipient:
    """An age public key as age-keygen prints it (age1...); ValueError naming it otherwise."""
    try:
        return x25519.Recipient.from_str(text.strip())
    except pyrage.RecipientError:
        raise ValueError(f"{text!r} is not an age public key (age1..., as age-keygen prints it)") from None


def is_encrypted(path: Path) -> bool:
    """Whether the file is age-encrypted, by its first bytes (its name may say otherwise)."""
    try:
        with path.open("rb") as source:
            start = source.read(max(map(len, MAGIC)))
    except OSError as problem:
        raise Refused(f"cannot read {path}: {problem.strerror or problem}") from None
    return start.startswith(MAGIC)


def identities(path: Path) -> list[x25519.Identity]:
    """The secret keys of an age identity file (age-keygen's: a key a line, '#' comments); Refused, without
    quoting a line (it may be a key), when it cannot be read or holds none."""
    try:
        with path.open("rb") as source:
            text = source.read(MAX_IDENTITY_FILE + 1)
    except OSError as problem:
        raise Refused(f"cannot read the identity file {path}: {problem.strerror or problem}") from None
    if len(text) > MAX_IDENTITY_FILE:
        raise Refused(f"the identity file {path} is larger than any age identity file")
    found = []
    for number, line in enumerate(text.decode("utf-8", errors="replace").splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            try:
                found.append(x25519.Identity.from_str(line.strip()))
            except pyrage.IdentityError:
                raise Refused(f"the identity file {path}: line {number} is not an age secret key") from None
    if not found:
        raise Refused(f"the identity file {path} holds no age secret key (AGE-SECRET-KEY-1...)")
    return found


def encrypt(plain: Path, sealed: Path, to: x25519.Recipient) -> None:
    """plain encrypted to sealed, a new 0600 file that appears under its name only when complete."""
    with plain.open("rb") as source:
        core.written_into_place(sealed, lambda out: pyrage.encrypt_io(source, out, [to]))


def decrypt(sealed: Path, identity_file: Path, out: IO[bytes]) -> None:
    """sealed decrypted into out, a private file of the caller's; Refused when the identity does not open it or
    it was truncated or altered. age authenticates each 64 KiB chunk as it comes, so out may hold a part of the
    plaintext when it is refused: the caller discards it."""
    keys = identities(identity_file)
    try:
        with sealed.open("rb") as source:
            pyrage.decrypt_io(source, out, keys)
    except pyrage.DecryptError as problem:
        said = (str(problem).splitlines() or ["no reason given"])[0]
        # age tells a stanza made for another key from an altered one by neither: both fail to open.
        if said.startswith("No matching keys"):
            raise Refused(
                f"no key in the identity file {identity_file} opens it: it was encrypted to another public key, or "
                "its header was altered"
            ) from None
        raise Refused(f"it is not an age file, or it is damaged ({said})") from None
    except OSError as problem:
        if problem.errno is not None:  # the file itself could not be read
            raise Refused(f"cannot read {sealed}: {problem.strerror or problem}") from None
        # age's own: a chunk that does not authenticate, or the last chunk missing.
        raise Refused(f"age could not authenticate it to its end ({problem}): it was truncated or altered") from None


@contextmanager
def decrypted(sealed: Path, identity_file: Path) -> Iterator[Path]:
    """The plaintext of sealed in a private file (0600, in a core.private_scratch directory), removed afterwards."""
    with core.private_scratch() as scratch:
        plain = scratch / "snapshot.tar.gz"
        with archive.private_file(plain) as out:
            decrypt(sealed, identity_file, out)
        yield plain


@contextmanager
def private_plaintext(path: Path, identity_file: Path | None) -> Iterator[Path]:
    """The snapshot as one private file that the restore verifies and then writes: core.private_copy of path, or
    its plaintext when it is encrypted."""
    if not is_encrypted(path):
        with core.private_copy(path) as copy:
            yield copy
        return
    if identity_file is None:
        raise Refused("it is encrypted with age: give the identity file that opens it (make restore IDENTITY=<file>)")
    with decrypted(path, identity_file) as plain:
        yield plain
