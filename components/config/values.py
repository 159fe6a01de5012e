"""Config values: what each accepts, how it appears in the JSON Schema, and what a bad one reads as.

Every check raises `invalid(message)`; the message already names the value, so
`messages` only puts the key path in front.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from annotated_types import Gt
from pydantic import AfterValidator, Field, PlainValidator
from pydantic_core import PydanticCustomError, core_schema

from components.addresses import AddressRange, parse_address_range

MAX_LABEL = 63
VALUE_ERROR = "lab_value"


def show(value: Any) -> str:
    """A config value as the user wrote it: strings quoted, the rest as JSON."""
    return repr(value) if isinstance(value, str) else json.dumps(value)


def invalid(message: str) -> PydanticCustomError:
    # Without context the message is printed as it is, braces included.
    return PydanticCustomError(VALUE_ERROR, message)


def _value(check: Callable[[Any], Any], schema: Any) -> PlainValidator:
    """A value checked by `check` (which raises `invalid`), documented in the JSON Schema as `schema`."""
    return PlainValidator(check, json_schema_input_type=schema)


@dataclass(frozen=True)
class Format:
    """Text matching `pattern` (also put in the JSON Schema); else "'<value>' is not <expected>"."""

    pattern: str
    expected: str

    def __get_pydantic_core_schema__(self, source: Any, handler: Callable) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: Callable) -> dict:
        return {**handler(schema), "pattern": f"^{self.pattern}$"}

    def _check(self, value: str) -> str:
        if not re.fullmatch(self.pattern, value):
            raise invalid(f"{value!r} is not {self.expected}")
        return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise invalid(f"expected a str, got {show(value)}")
    return value


def _cli_text(value: Any) -> str:
    if not isinstance(value, str):
        raise invalid(f"expected a string, got {show(value)}")
    return value.strip()


def _count(number: Any, written: Any) -> int:
    # A bool or 2.0 is not a count, though Python would take either as one.
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise invalid(f"expected a positive integer, got {show(written)}")
    return number


def _positive(value: Any) -> int:
    return _count(value, value)


def _cli_positive(value: Any) -> int:
    # The CLI hands scalar keys over as text; inside the tenants JSON integers stay integers.
    return _count(int(value) if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value) else value, value)


def _ipv4_network(value: Any) -> ipaddress.IPv4Network:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    network = ipaddress.ip_network(value, strict=True)
    if not isinstance(network, ipaddress.IPv4Network):
        raise ValueError("IPv6 is not supported")
    return network


def _cidr(value: Any) -> str:
    try:
        return str(_ipv4_network(value))
    except (TypeError, ValueError) as problem:
        raise invalid(f"{show(value)} is not an IPv4 CIDR ({problem})") from None


def _secret_text(value: Any) -> str:
    # Never echoed: the value is a credential.
    if not isinstance(value, str):
        raise invalid("expected a string (not shown: the value is a secret)")
    return value.strip()


def _choice(*choices: str) -> PlainValidator:
    """CLI text that must be one of `choices` (an enum in the JSON Schema)."""

    def check(value: Any) -> str:
        text = _cli_text(value)
        if text not in choices:
            raise invalid(f"{text!r} is not one of {', '.join(map(repr, choices))}")
        return text

    return _value(check, Literal[choices])


def _optional(parse: Callable[[str], Any], expected: str) -> PlainValidator:
    """CLI text parsed by `parse`; empty text means unset (None)."""

    def check(value: Any) -> Any:
        text = _cli_text(value)
        try:
            return parse(text) if text else None
        except ValueError as problem:
            raise invalid(f"{text!r} is not {expected} ({problem})") from None

    return _value(check, str)


Text = Annotated[str, _value(_text, str)]
CliText = Annotated[str, _value(_cli_text, str)]
PositiveInt = Annotated[int, _value(_positive, Annotated[int, Gt(0)])]
# Absent means "use the default"; an explicit null is not a count.
OptionalPositiveInt = Annotated[int | None, _value(_positive, Annotated[int, Gt(0)])]
CliPositiveInt = Annotated[
    int, _value(_cli_positive, Annotated[int, Gt(0)] | Annotated[str, Field(pattern=r"^[1-9][0-9]*$")])
]
Cidr = Annotated[str, _value(_cidr, str)]
SecretText = Annotated[str, _value(_secret_text, str)]
ManagementClusterMode = Annotated[str, _choice("kind", "existing")]
PieceMode = Annotated[str, _choice("install", "provided")]
LoadBalancerMode = Annotated[str, _choice("metallb", "provided")]
DnsLabel = Annotated[Text, Format(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "a DNS label")]
ClusterName = Annotated[CliText, Format(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", "a lower-case DNS label")]
KubernetesVersion = Annotated[CliText, Format(r"v\d+\.\d+\.\d+", "v<major>.<minor>.<patch>, e.g. v1.36.4")]
# Kubernetes object names (DataStores) and Docker network names, as each accepts them.
ObjectName = Annotated[CliText, Format(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", "a DNS subdomain name")]
DockerNetwork = Annotated[CliText, Format(r"([a-zA-Z0-9][a-zA-Z0-9_.-]*)?", "a docker network name")]
ImageReference = Annotated[CliText, Format(r"([a-z0-9][a-z0-9._/:@-]*)?", "an image reference")]
# opencontainers/distribution-spec spec.md@v1.1.0: a tag is [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}.
ImageTag = Annotated[CliText, Format(r"([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?", "an image tag")]
AddressPool = Annotated[AddressRange | None, _optional(parse_address_range, "an IPv4 range a.b.c.d-a.b.c.e or a CIDR")]
KindSubnet = Annotated[ipaddress.IPv4Network | None, _optional(_ipv4_network, "an IPv4 CIDR such as 172.18.0.0/16")]
TenantName = Annotated[
    Text,
    Format(
        r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?",
        "a DNS-1035 label (lower-case letters, digits and '-', starting with a letter, "
        f"at most {MAX_LABEL} characters)",
    ),
]


def _version(expected: str) -> Any:
    return Annotated[CliText, Format(r"v?\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?", expected)]


CertManagerVersion = _version("a semantic version, e.g. v1.21.2")
MetallbVersion = _version("a semantic version, e.g. v0.16.1")


def _chart_not_edge_release(version: str) -> str:
    # Kamaji's edge releases are image and git tags (e.g. 26.8.2-edge), never chart versions.
    if version.endswith("-edge"):
        raise invalid(
            f"{version!r} is a Kamaji edge release, an image tag rather than a chart version; "
            f"keep 0.0.0+latest and set kamaji-hami-lab:kamajiImageTag to {version}"
        )
    return version


KamajiChartVersion = Annotated[_version("a chart version, e.g. 0.0.0+latest"), AfterValidator(_chart_not_edge_release)]
HamiChartVersion = _version("a chart version, e.g. 2.10.0")
