"""The CN of a certificate, as etcd takes it for the user's name (validation/checks/certificates.py).

Certificates come from the openssl CLI (tests/real_etcd.py), the same way the datastore tests' etcd
users get theirs; Hypothesis feeds the reader damaged and arbitrary input, which it must refuse, not crash on.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.real_etcd import issue, make_ca
from validation.checks.certificates import common_name


@pytest.fixture(scope="module")
def signed(tmp_path_factory) -> tuple[Path, str]:
    directory = tmp_path_factory.mktemp("certificates")
    make_ca(directory)
    cert, _ = issue(directory, "client", "6f1c2b2e-93b4-4a57-9d0c-2f1f0f3b9a11", "extendedKeyUsage=clientAuth\n")
    return directory, cert.read_text()


def test_the_cn_of_a_client_certificate_is_its_etcd_user_not_the_issuers(signed):
    _, pem = signed

    assert common_name(pem) == "6f1c2b2e-93b4-4a57-9d0c-2f1f0f3b9a11"  # the CA's CN is kamaji-etcd-ca


def test_a_subject_with_more_attributes_and_unicode_is_read_whole(signed):
    directory, _ = signed
    subprocess.run(
        ["openssl", "req", "-new", "-x509", "-key", "ca.key", "-days", "1", "-utf8",
         "-subj", "/O=system:masters/CN=tenant-ä-legacy/OU=etcd", "-out", "many.crt"],
        cwd=directory, check=True, capture_output=True,
    )  # fmt: skip

    assert common_name((directory / "many.crt").read_text()) == "tenant-ä-legacy"


def test_a_certificate_without_a_cn_has_none(signed):
    directory, _ = signed
    subprocess.run(
        ["openssl", "req", "-new", "-x509", "-key", "ca.key", "-days", "1", "-subj", "/O=no-name",
         "-out", "nameless.crt"],
        cwd=directory, check=True, capture_output=True,
    )  # fmt: skip

    assert common_name((directory / "nameless.crt").read_text()) is None


@pytest.mark.parametrize(
    "text", ["", "not a certificate", "-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----"]
)
def test_text_that_holds_no_certificate_has_no_cn(text):
    assert common_name(text) is None


@settings(max_examples=200)
@given(st.data())
def test_a_damaged_certificate_is_refused_or_read_never_a_crash(signed, data):
    _, pem = signed
    body = "".join(pem.split("-----")[2].split())
    cut = data.draw(st.integers(0, len(body)))
    changed = data.draw(
        st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", max_size=4)
    )
    damaged = (
        f"-----BEGIN CERTIFICATE-----\n{body[:cut]}{changed}{body[cut + len(changed) :]}\n-----END CERTIFICATE-----\n"
    )

    found = common_name(damaged)

    assert found is None or isinstance(found, str)


@given(st.binary(max_size=64))
def test_arbitrary_bytes_in_a_pem_block_are_refused_or_read_never_a_crash(raw):
    found = common_name(f"-----BEGIN CERTIFICATE-----\n{base64.b64encode(raw).decode()}\n-----END CERTIFICATE-----")

    assert found is None or isinstance(found, str)


def der(tag: int, content: bytes) -> bytes:
    """X.690's definite length: short form below 128, else its bytes behind 0x80 + their count."""
    size = len(content)
    length = (
        bytes([size])
        if size < 0x80
        else bytes([0x80 + (size.bit_length() + 7) // 8]) + size.to_bytes((size.bit_length() + 7) // 8, "big")
    )
    return bytes([tag]) + length + content


def name(common: str) -> bytes:
    attribute = der(0x30, der(0x06, bytes([0x55, 0x04, 0x03])) + der(0x0C, common.encode()))
    return der(0x30, der(0x31, attribute))


@given(st.text(min_size=1, max_size=300), st.text(min_size=1, max_size=20), st.booleans())
def test_the_subjects_cn_is_read_back_not_the_issuers_whatever_its_length(subject, issuer, versioned):
    version = der(0xA0, der(0x02, b"\x02")) if versioned else b""
    tbs = version + der(0x02, b"\x01") + der(0x30, der(0x06, b"\x2a")) + name(issuer) + der(0x30, b"") + name(subject)
    certificate = der(0x30, der(0x30, tbs) + der(0x30, b"") + der(0x03, b"\x00"))
    pem = f"-----BEGIN CERTIFICATE-----\n{base64.b64encode(certificate).decode()}\n-----END CERTIFICATE-----\n"

    assert common_name(pem) == subject
