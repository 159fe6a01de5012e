"""The subject's common name of a PEM certificate, read with the standard library only.

etcd takes a client certificate's CN as the user's name (etcd-io/etcd server/auth/store.go@v3.5.1:
AuthInfoFromTLS). A certificate is DER (ITU-T X.690): tag, length, content. Its TBSCertificate holds,
in order, an optional [0] version, the serial number, the signature algorithm, the issuer, the
validity and the subject (RFC 5280, section 4.1); the CN is the attribute 2.5.4.3 of the subject.
"""

from __future__ import annotations

import base64
import binascii
import re

SEQUENCE, SET, OID, VERSION = 0x30, 0x31, 0x06, 0xA0
COMMON_NAME = bytes([0x55, 0x04, 0x03])  # 2.5.4.3
# The string types a name attribute may have (RFC 5280 DirectoryString, and IA5String), and how they decode.
STRINGS = {0x0C: "utf-8", 0x13: "ascii", 0x14: "latin-1", 0x16: "ascii", 0x1E: "utf-16-be", 0x1C: "utf-32-be"}
PEM = re.compile(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", re.DOTALL)


def element(data: bytes) -> tuple[int, bytes, bytes]:
    """(tag, content, what follows) of the first DER element; ValueError when data holds none."""
    if len(data) < 2 or data[0] & 0x1F == 0x1F:
        raise ValueError("no DER element with a one-byte tag")
    tag, first = data[0], data[1]
    if first < 0x80:
        start, length = 2, first
    else:
        count = first & 0x7F
        if not 1 <= count <= 4 or len(data) < 2 + count:
            raise ValueError("a DER length that is not 1 to 4 bytes long")
        start, length = 2 + count, int.from_bytes(data[2 : 2 + count], "big")
    if len(data) < start + length:
        raise ValueError("a DER element longer than the data")
    return tag, data[start : start + length], data[start + length :]


def elements(data: bytes) -> list[tuple[int, bytes]]:
    found = []
    while data:
        tag, content, data = element(data)
        found.append((tag, content))
    return found


def common_name(pem: str) -> str | None:
    """The first certificate's subject CN, or None when the text holds no certificate with one."""
    block = PEM.search(pem)
    if block is None:
        return None
    try:
        der = base64.b64decode("".join(block[1].split()), validate=True)
        tag, certificate, _ = element(der)
        tag_tbs, tbs, _ = element(certificate)
        if (tag, tag_tbs) != (SEQUENCE, SEQUENCE):
            return None
        fields = elements(tbs)
        if fields and fields[0][0] == VERSION:
            fields = fields[1:]
        if len(fields) < 5 or fields[4][0] != SEQUENCE:
            return None
        for tag_rdn, rdn in elements(fields[4][1]):
            for tag_pair, pair in elements(rdn) if tag_rdn == SET else []:
                parts = elements(pair) if tag_pair == SEQUENCE else []
                if len(parts) == 2 and parts[0] == (OID, COMMON_NAME) and parts[1][0] in STRINGS:
                    return parts[1][1].decode(STRINGS[parts[1][0]])
    except (ValueError, binascii.Error):  # UnicodeDecodeError is a ValueError
        return None
    return None
