"""sshPrivateKeys: each entry must be a private key ssh can use unattended, checked before anything exists.

The keys are made by the real ssh-keygen in every format it writes; refusals name the entry and never show
the key. The formats: openssh/openssh-portable PROTOCOL.key@V_10_0_P1 (OpenSSH's own container), and the
PEM armours ssh-keygen -m PEM / -m PKCS8 write.
"""

from __future__ import annotations

import base64
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.config import ConfigError, parse_settings
from components.config.ssh_keys import UnusableKey, check_private_key
from tests.plan import dev_config, plan
from tests.ssh_keys import made_key, public_key
from tests.test_config_machines import GPU_1

MACHINE_TENANT = {"name": "lab", "machines": [GPU_1]}
OPENSSH_BEGIN, OPENSSH_END = "-----BEGIN OPENSSH PRIVATE KEY-----", "-----END OPENSSH PRIVATE KEY-----"
# Long enough that a PEM passphrase is accepted (ssh-keygen wants five characters or more).
PASSPHRASE = "correct horse"

USABLE = {
    "ed25519": ("ed25519",),
    "rsa": ("rsa",),
    "ecdsa": ("ecdsa",),
    "rsa PEM": ("rsa", "", "-m", "PEM"),
    "ecdsa PEM": ("ecdsa", "", "-m", "PEM"),
    "rsa PKCS8": ("rsa", "", "-m", "PKCS8"),
    "ecdsa PKCS8": ("ecdsa", "", "-m", "PKCS8"),
}
WITH_PASSPHRASE = {
    "ed25519": ("ed25519",),
    "rsa PEM": ("rsa", "", "-m", "PEM"),
    "ecdsa PKCS8": ("ecdsa", "", "-m", "PKCS8"),
}


def settings_with(keys: dict[str, str]):
    return parse_settings(dev_config(tenants=[MACHINE_TENANT], sshPrivateKeys=keys), secret_keys={"sshPrivateKeys"})


def refusal_of(keys: dict[str, str]) -> str:
    """The sshPrivateKeys line of the refusal; no key's text may appear anywhere in it."""
    with pytest.raises(ConfigError) as raised:
        settings_with(keys)
    message = str(raised.value)
    for key in keys.values():
        for line in key.splitlines():
            if len(line) >= 16 and not line.startswith("-----"):  # armour and short fragments show no key
                assert line.strip() not in message, "a refusal showed key material"
    (line,) = [line for line in message.splitlines() if line.startswith("  kamaji-hami-lab:sshPrivateKeys: ")]
    return line


def opened(key: str) -> bytes:
    """The binary container inside an OpenSSH key's armour."""
    return base64.b64decode("".join(key.removeprefix(OPENSSH_BEGIN).removesuffix(OPENSSH_END).split()))


def armoured(blob: bytes) -> str:
    return "\n".join([OPENSSH_BEGIN, *textwrap.wrap(base64.b64encode(blob).decode(), 70), OPENSSH_END])


@pytest.mark.parametrize("made", USABLE.values(), ids=USABLE)
def test_a_key_ssh_keygen_writes_without_a_passphrase_is_taken(made):
    key = made_key(*made)
    (machine,) = settings_with({"default": key + "\n"}).tenants[0].machines
    assert machine.private_key == key


@pytest.mark.parametrize("made", WITH_PASSPHRASE.values(), ids=WITH_PASSPHRASE)
def test_a_key_with_a_passphrase_is_refused_before_any_resource(made):
    key = made_key(*made, passphrase=PASSPHRASE)
    with pytest.raises(ConfigError) as raised:
        plan(dev_config(tenants=[MACHINE_TENANT]), preview=True, secrets={"sshPrivateKeys": {"default": key}})
    assert raised.value.plan.registrations == []

    line = refusal_of({"default": key})
    assert line.startswith("  kamaji-hami-lab:sshPrivateKeys: entry 'default': protected by a passphrase"), line
    assert "ssh-keygen -p" in line


def test_an_openssh_key_with_a_passphrase_names_its_cipher():
    line = refusal_of({"default": made_key("ed25519", passphrase=PASSPHRASE)})
    assert "(cipher aes256-ctr, KDF bcrypt)" in line  # ssh-keygen's defaults


ED25519 = made_key("ed25519", "refused")
BLOB = opened(ED25519)
CHECKINTS_AT = BLOB.index(b"ssh-ed25519", BLOB.index(b"ssh-ed25519") + 1) - 4 - 8  # before the private key type


def with_bytes(at: int, new: bytes) -> str:
    return armoured(BLOB[:at] + new + BLOB[at + len(new):])


REFUSED = {
    "empty": ("", "empty"),
    "blank": ("  \n ", "empty"),
    "junk": ("not a key at all", "not a private key"),
    "public key": (public_key(ED25519), "a public key (the .pub file)"),
    "public key, PEM": ("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----", "a public key"),
    "cut before its END line": (ED25519[: len(ED25519) // 2], f"no {OPENSSH_END} line"),
    "a line cut out": ("\n".join(line for n, line in enumerate(ED25519.splitlines()) if n != 2),
                       "not valid base64"),
    "container cut short": (armoured(BLOB[: len(BLOB) // 2]), "its OpenSSH container is cut short"),
    "not base64": (f"{OPENSSH_BEGIN}\n%%%%\n{OPENSSH_END}", "not valid base64"),
    "no magic": (armoured(b"openssh-key-v2\x00" + BLOB[15:]), "lacks the openssh-key-v1 magic"),
    "two keys": (with_bytes(BLOB.index(b"\x00\x00\x00\x01"), b"\x00\x00\x00\x02"), "holds 2 keys"),
    "check integers differ": (with_bytes(CHECKINTS_AT, bytes(4)), "check integers differ"),
    "private key of another type": (with_bytes(CHECKINTS_AT + 8 + 4, b"ssh-ed25518"), "not of the type"),
    "PEM not DER": ("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----", "not a SEQUENCE"),
    "PEM cut short": ("\n".join(made_key("rsa", "", "-m", "PEM").splitlines()[:-3]) +
                      "\n-----END RSA PRIVATE KEY-----", "does not fill the key"),
    "PEM of another kind": ("-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----", "a PEM certificate"),
}


@pytest.mark.parametrize(("key", "problem"), REFUSED.values(), ids=REFUSED)
def test_text_ssh_cannot_use_is_refused_naming_the_entry(key, problem):
    line = refusal_of({"default": made_key("ed25519"), "gpu-1": key})
    assert line.startswith("  kamaji-hami-lab:sshPrivateKeys: entry 'gpu-1': "), line
    assert problem in line
    assert line.endswith("(the keys are not shown: they are secrets)")


def test_every_unusable_entry_is_named_in_one_refusal():
    line = refusal_of({"a": "", "default": made_key("ed25519"), "b": "junk"})
    assert "entry 'a': empty; entry 'b': not a private key" in line


def test_a_refused_key_comes_before_any_resource_even_in_a_full_plan():
    with pytest.raises(ConfigError) as raised:
        plan(dev_config(tenants=[MACHINE_TENANT]), preview=False, secrets={"sshPrivateKeys": {"default": "junk"}})
    assert raised.value.plan.registrations == []
    assert "kamaji-hami-lab:sshPrivateKeys: entry 'default': not a private key" in str(raised.value)


def accepted_or_refused(text: str) -> None:
    try:
        check_private_key(text)
    except UnusableKey as refused:
        assert str(refused)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_is_taken_or_refused_in_the_parsers_own_words(text):
    accepted_or_refused(text)


@settings(max_examples=300, deadline=None)
@given(st.binary(), st.sampled_from(["OPENSSH", "RSA", "EC", ""]))
def test_any_bytes_in_any_armour_are_taken_or_refused_in_the_parsers_own_words(blob, kind):
    label = f"{kind} PRIVATE KEY".strip()
    accepted_or_refused(f"-----BEGIN {label}-----\n{base64.b64encode(blob).decode()}\n-----END {label}-----")


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(BLOB) - 1), st.binary(min_size=1, max_size=8), st.integers(0, len(BLOB)))
def test_a_damaged_real_key_is_taken_or_refused_in_the_parsers_own_words(at, new, cut):
    accepted_or_refused(armoured((BLOB[:at] + new + BLOB[at + len(new):])[:cut]))
