"""Whether text is a private key a machine worker's `ssh -i` can use unattended, read by structure only.

Two containers are accepted: OpenSSH's own (`openssh-key-v1`, what ssh-keygen writes by default) without a
passphrase, and PEM's RSA, EC and PKCS#8 armour (ssh-keygen -m PEM / -m PKCS8) without encryption. Nothing
here decodes the key itself: a key whose armour, container and checks hold but whose numbers are wrong is
found only by ssh. Every reason names what is wrong, never a byte of the key: the text is a secret.
"""

from __future__ import annotations

import base64
import re
import struct

# openssh/openssh-portable sshkey.c@V_10_0_P1: MARK_BEGIN/MARK_END, AUTH_MAGIC with its NUL.
_OPENSSH_BEGIN = "-----BEGIN OPENSSH PRIVATE KEY-----"
_OPENSSH_END = "-----END OPENSSH PRIVATE KEY-----"
_MAGIC = b"openssh-key-v1\x00"
# The cipher "none" pads to 8-byte blocks (cipher.c@V_10_0_P1, its ciphers table).
_NONE_BLOCK = 8
# What ssh reads through OpenSSL's PEM reader, and the armour of one needing a passphrase.
_PEM_KINDS = ("RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY")
_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)
# RFC 1421 4.6.1.1: a traditional PEM key encrypted with a passphrase says so in a header.
_ENCRYPTED_PEM = re.compile(r"^Proc-Type:\s*4,\s*ENCRYPTED", re.MULTILINE)
_PUBLIC = re.compile(r"((ssh|ecdsa|sk)-[a-z0-9@.-]+ |-----BEGIN ([A-Z]+ )?PUBLIC KEY-----|---- BEGIN SSH2 PUBLIC KEY)")


def _needs_passphrase(how: str = "") -> str:
    return (f"protected by a passphrase{how}, which ssh cannot be given unattended; give the lab a key without one "
            "(ssh-keygen -p -N '' -f KEY_FILE removes it from a copy)")


class UnusableKey(ValueError):
    """Why text is not a private key the lab can use; it never quotes the text."""


def check_private_key(text: str) -> None:
    """Raises UnusableKey unless `text` holds one unencrypted OpenSSH or PEM private key."""
    text = text.strip()
    if not text:
        raise UnusableKey("empty")
    if _PUBLIC.match(text):
        raise UnusableKey("a public key (the .pub file); give the private key")
    if text.startswith(_OPENSSH_BEGIN):
        _check_openssh(text)
        return
    found = _PEM.match(text)
    if found is None:
        raise UnusableKey("not a private key: expected '-----BEGIN OPENSSH PRIVATE KEY-----' or a PEM RSA, EC or "
                          "PKCS#8 private key, up to its END line")
    kind, body = found.groups()
    if kind == "ENCRYPTED PRIVATE KEY" or _ENCRYPTED_PEM.search(body):
        raise UnusableKey(_needs_passphrase())
    if kind not in _PEM_KINDS:
        raise UnusableKey(f"a PEM {kind.lower()[:40]}, not one of the private keys ssh reads: "
                          f"{', '.join(_PEM_KINDS)}")
    _check_der(_base64(body, f"PEM {kind}"))


def _base64(body: str, what: str) -> bytes:
    try:
        return base64.b64decode("".join(body.split()), validate=True)
    except ValueError:  # binascii.Error, or text that is not ASCII
        raise UnusableKey(f"its {what} body is not valid base64 (cut short, or changed?)") from None


def _check_der(der: bytes) -> None:
    """One DER SEQUENCE filling the body, whose first element is an INTEGER (the version of all three)."""
    sequence = _Reader(der, "its DER")
    if sequence.byte() != 0x30:
        raise UnusableKey("its DER is not a SEQUENCE")
    if sequence.der_length() != sequence.left:
        raise UnusableKey("its DER SEQUENCE does not fill the key (cut short?)")
    if sequence.byte() != 0x02:
        raise UnusableKey("its DER SEQUENCE does not start with a version INTEGER")


def _check_openssh(text: str) -> None:
    # openssh/openssh-portable PROTOCOL.key@V_10_0_P1: magic, ciphername, kdfname, kdfoptions, N, N public
    # keys, then the private section; unencrypted, it starts with two equal check integers.
    body, end, _ = text[len(_OPENSSH_BEGIN):].partition(_OPENSSH_END)
    if not end:
        raise UnusableKey(f"it has no {_OPENSSH_END} line (cut short?)")
    blob = _Reader(_base64(body, "OpenSSH"), "its OpenSSH container")
    if blob.take(len(_MAGIC)) != _MAGIC:
        raise UnusableKey("its OpenSSH container lacks the openssh-key-v1 magic")
    cipher, kdf = blob.name("cipher"), blob.name("KDF")
    blob.string()  # the KDF's options
    if (count := blob.uint32()) != 1:
        raise UnusableKey(f"its OpenSSH container holds {count} keys; ssh reads exactly 1")
    public_type = _Reader(blob.string(), "its public key").name("key type")
    if cipher != "none" or kdf != "none":
        raise UnusableKey(_needs_passphrase(f" (cipher {cipher}, KDF {kdf})"))
    private = _Reader(blob.string(), "its private section")
    if private.left < _NONE_BLOCK or private.left % _NONE_BLOCK:
        raise UnusableKey(f"its private section is not a whole number of {_NONE_BLOCK}-byte blocks")
    if private.uint32() != private.uint32():
        raise UnusableKey("its private section's check integers differ (damaged?)")
    if private.name("key type") != public_type:
        raise UnusableKey("its private key is not of the type of its public key (damaged?)")


class _Reader:
    """Reads SSH wire types (RFC 4251 5) and DER lengths; anything cut short is an UnusableKey."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.at, self.what = data, 0, what

    @property
    def left(self) -> int:
        return len(self.data) - self.at

    def take(self, size: int) -> bytes:
        if size > self.left:
            raise UnusableKey(f"{self.what} is cut short")
        self.at += size
        return self.data[self.at - size:self.at]

    def byte(self) -> int:
        return self.take(1)[0]

    def uint32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def string(self) -> bytes:
        return self.take(self.uint32())

    def name(self, what: str) -> str:
        """A short ASCII name (a cipher, a KDF, a key type): shown in messages, so checked first."""
        raw = self.string()
        if not re.fullmatch(rb"[a-z0-9@.+-]{1,64}", raw):
            raise UnusableKey(f"{self.what} has no readable {what} name (damaged?)")
        return raw.decode()

    def der_length(self) -> int:
        first = self.byte()
        if first < 0x80:
            return first
        if not 1 <= first - 0x80 <= 4:
            raise UnusableKey(f"{self.what} has a length DER does not allow")
        return int.from_bytes(self.take(first - 0x80), "big")
