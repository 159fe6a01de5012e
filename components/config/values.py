"""Config value types: what each accepts, how the JSON Schema shows it, what a bad one reads as.

A bad value raises `invalid(message)`; the message names the value, `messages` adds the key path.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, Field, PlainValidator, StrictStr, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

from components.addresses import DEFAULT_KIND_SUBNET, parse_address_range
from components.config.ssh_keys import UnusableKey, check_private_key
from components.settings import POD_SECURITY_LEVELS

MAX_LABEL = 63
VALUE_ERROR = "lab_value"
# The largest count: every count ends in a 32-bit signed field (a Deployment's replicas, HAMi's DeviceInfo
# count and devmem: Project-HAMi/HAMi pkg/device/devices.go@v2.10.0), and Pulumi sends numbers as doubles.
MAX_COUNT = 2**31 - 1
# A value longer than this is echoed shortened: its start, its end and its length.
MAX_SHOWN = 80


def show(value: Any) -> str:
    """A config value as the user wrote it: strings quoted, the rest as JSON; shortened when long."""
    try:
        text = repr(value) if isinstance(value, str) else json.dumps(value)
    except (ValueError, RecursionError):  # a number of thousands of digits, or nesting beyond Python's stack
        return f"a {type(value).__name__} too large to show"
    if len(text) <= MAX_SHOWN:
        return text
    return f"{text[:50]}…{text[-10:]} ({len(text)} characters)"


def read_json(text: str) -> Any:
    """JSON text the CLI hands over (objects, lists); ValueError with a message of our own, whatever the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as problem:
        raise ValueError(f"not valid JSON ({problem})") from None
    except ValueError:  # Python refuses to read an integer of more than 4300 digits
        raise ValueError("not valid JSON: a number too long to read") from None
    except RecursionError:
        raise ValueError("not valid JSON: nested too deeply to read") from None


def invalid(message: str) -> PydanticCustomError:
    # Without context the message is printed as it is, braces included.
    return PydanticCustomError(VALUE_ERROR, message)


# Scalar keys come from the CLI as text, stripped; values inside the tenants' JSON are taken as written.
CliText = Annotated[StrictStr, StringConstraints(strip_whitespace=True)]


def _count(text_too: bool) -> tuple[PlainValidator, WithJsonSchema]:
    """A positive integer; the CLI hands scalar keys over as text, the tenants' JSON keeps integers."""

    def check(value: Any) -> int:
        number = value
        if text_too and isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
            # Python refuses to read thousands of digits; past 20, the number is past MAX_COUNT anyway.
            digits = value.strip()
            number = int(digits) if len(digits) <= 20 else -1 if digits.startswith("-") else MAX_COUNT + 1
        # A bool or 2.0 is not a count, though Python would take either as one.
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise invalid(f"expected a positive integer, got {show(value)}")
        if number > MAX_COUNT:
            raise invalid(f"expected a count of at most {MAX_COUNT} (it ends in a 32-bit field), got {show(value)}")
        return number

    # One schema, no anyOf: editors then name the bound ("less than the minimum of 1") for a 0.
    count = {"type": ["integer", "string"] if text_too else "integer", "minimum": 1, "maximum": MAX_COUNT}
    return PlainValidator(check, json_schema_input_type=int), WithJsonSchema(
        {**count, "pattern": "^[1-9][0-9]*$"} if text_too else count)


def _parsed(parse: Callable[[str], Any], expected: str) -> AfterValidator:
    """Text turned into a value by `parse`; empty text means unset (None)."""

    def check(text: str) -> Any:
        try:
            return parse(text) if text else None
        except ValueError as problem:
            # The parser's own words quote the value in full: kept only when short.
            detail = f" ({problem})" if len(str(problem)) <= 2 * MAX_SHOWN else ""
            raise invalid(f"{show(text)} is not {expected}{detail}") from None

    return AfterValidator(check)


def _matching(pattern: str, expected: str, strip: bool = True) -> Any:
    """Text matching `pattern` (also put in the JSON Schema); else "'<value>' is not <expected>"."""

    def check(text: str) -> str:
        if not re.fullmatch(pattern, text):
            raise invalid(f"{show(text)} is not {expected}")
        return text

    schema = WithJsonSchema({"type": "string", "pattern": f"^{pattern}$"})
    return Annotated[StrictStr, StringConstraints(strip_whitespace=strip), AfterValidator(check), schema]


def _choice(*choices: str) -> Any:
    """CLI text naming one of `choices` (an enum in the JSON Schema)."""

    def check(text: str) -> str:
        if text not in choices:
            raise invalid(f"{show(text)} is not one of {', '.join(map(repr, choices))}")
        return text

    return Annotated[CliText, AfterValidator(check), WithJsonSchema({"type": "string", "enum": list(choices)})]


def _secret_text(value: Any) -> str:
    # Never echoed: the value is a credential.
    if not isinstance(value, str):
        raise invalid("expected a string (not shown: the value is a secret)")
    return value.strip()


def _port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise invalid(f"expected a TCP port (1-65535), got {show(value)}")
    return value


def _secret_map(value: Any) -> dict[str, str]:
    # The CLI hands a secret object over as JSON text; never echoed.
    try:
        keys = read_json(value) if isinstance(value, str) else value
    except ValueError:
        raise invalid("not valid JSON, or too deep or long to read (not shown: the value is a secret)") from None
    if not isinstance(keys, dict) or not all(isinstance(key, str) for key in keys.values()):
        raise invalid("expected an object of name: private key text (not shown: the value is a secret)")
    # A key ssh cannot use would fail only at the first machine's join, after its control plane exists.
    unusable = []
    for name, key in keys.items():
        try:
            check_private_key(key)
        except UnusableKey as problem:
            unusable.append(f"entry {show(name)}: {problem}")
    if unusable:
        raise invalid(f"{'; '.join(unusable)} (the keys are not shown: they are secrets)")
    return {name: key.strip() for name, key in keys.items()}


def _ipv4_network(text: str) -> ipaddress.IPv4Network:
    network = ipaddress.ip_network(text, strict=True)
    if network.version != 4:
        raise ValueError("IPv6 is not supported")
    return network


PositiveInt = Annotated[int, *_count(text_too=False)]
CliPositiveInt = Annotated[int, *_count(text_too=True)]
Cidr = Annotated[StrictStr, _parsed(lambda text: str(_ipv4_network(text)), "an IPv4 CIDR")]
# An IPv4 address as Python's ipaddress reads it: four decimal octets of 0-255, no leading zeros.
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(\.{_OCTET}){{3}}"
# Editors check the shape (octets within 0-255); the program also checks the order and the CIDR's host bits.
_POOL_SCHEMA = rf"^\s*({_IPV4}\s*-\s*{_IPV4}|{_IPV4}/([12]?[0-9]|3[0-2]))?\s*$"
AddressPool = Annotated[CliText, _parsed(parse_address_range, "an IPv4 range a.b.c.d-a.b.c.e or a CIDR"),
                        WithJsonSchema({"type": "string", "pattern": _POOL_SCHEMA})]
def _private_network(network: ipaddress.IPv4Network | None) -> ipaddress.IPv4Network | None:
    # Docker's default address pools are private (172.17.0.0/16 up, 192.168.0.0/16); 0.0.0.0/0 would carve
    # a pool of multicast and public addresses.
    if network is not None and not network.is_private:
        raise invalid(f"{str(network)!r} is not a private network; the lab's docker network needs one, e.g. "
                      f"{DEFAULT_KIND_SUBNET} (the default) or a /16 of 10.0.0.0/8")
    return network


KindSubnet = Annotated[CliText, _parsed(_ipv4_network, f"an IPv4 CIDR such as {DEFAULT_KIND_SUBNET}"),
                       AfterValidator(_private_network)]
# In a stack file a secret is {secure: <ciphertext>}, which the CLI decrypts before the program sees it.
_ENCRYPTED = {"type": "object", "properties": {"secure": {"type": "string"}}, "required": ["secure"]}
_SECRET_STRING = {"anyOf": [{"type": "string"}, _ENCRYPTED]}
SecretText = Annotated[str, PlainValidator(_secret_text), WithJsonSchema(_SECRET_STRING)]
# Set whole, or one key at a time with `pulumi config set --secret --path 'sshPrivateKeys.<name>'`.
SecretMap = Annotated[
    dict,
    PlainValidator(_secret_map),
    WithJsonSchema({"anyOf": [_ENCRYPTED, {"type": "object", "additionalProperties": _SECRET_STRING}]}),
]
Port = Annotated[int, PlainValidator(_port, json_schema_input_type=Annotated[int, Field(ge=1, le=65535)])]
ManagementClusterMode = _choice("kind", "existing")
GpuDevices = _choice("mock", "real")
DataStoreMode = _choice("shared", "dedicated")
PieceMode = _choice("install", "provided")
LoadBalancerMode = _choice("metallb", "provided")
PodSecurityLevel = _choice(*POD_SECURITY_LEVELS)
# Patterns also held against what other programs read back (a snapshot's manifest: snapshot/archive.py).
DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
TENANT_NAME = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
KUBERNETES_VERSION = r"v\d{1,5}\.\d{1,5}\.\d{1,5}"
DnsLabel = _matching(DNS_LABEL, "a DNS label", strip=False)
TenantName = _matching(
    TENANT_NAME,
    f"a DNS-1035 label (lower-case letters, digits and '-', starting with a letter, at most {MAX_LABEL} characters)",
    strip=False,
)
# kind names its node container, hostname and Kubernetes node <name>-control-plane, which must stay a DNS label
# (kind warns above 50 characters: kubernetes-sigs/kind pkg/cluster/internal/create/create.go, clusterNameMax,
# on master; its validNameRE in pkg/internal/apis/config/validate.go sets no length). Docker's container names
# and the kubeconfig context kind-<name> have no limit of their own (moby daemon/names/names.go).
MAX_CLUSTER_NAME = MAX_LABEL - len("-control-plane")
ClusterName = _matching(
    rf"[a-z0-9]([-a-z0-9]{{0,{MAX_CLUSTER_NAME - 2}}}[a-z0-9])?",
    f"a lower-case DNS label of at most {MAX_CLUSTER_NAME} characters (kind's node is <name>-control-plane, "
    f"a host name of at most {MAX_LABEL})",
)
KubernetesVersion = _matching(KUBERNETES_VERSION, "v<major>.<minor>.<patch>, e.g. v1.36.4")
# Kubernetes object names (DataStores) and Docker network names, as each accepts them.
ObjectName = _matching(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", "a DNS subdomain name")
# Where a machine worker is reached over SSH, and as whom.
_DNS_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def host_address(text: str) -> str:
    """A canonical IPv4 literal, an IPv6 literal, or a DNS name; never a form only some resolvers read.

    getaddrinfo takes 010.0.1.21 as octal (8.0.1.21) and 0x7f.1 or 1.2.3 as shorthand: a name whose last
    label is all digits is no DNS name (RFC 1123 2.1, RFC 3696 2), so it must be a dotted quad as written.
    """
    if ":" in text:
        try:
            if ipaddress.IPv6Address(text).scope_id is None:
                return text
        except ValueError:
            pass
        raise invalid(f"{show(text)} is not an IPv6 address (without a %zone)")
    labels = text.split(".")
    if labels[-1].isdigit() or re.fullmatch(r"0[xX][0-9a-fA-F]*", labels[-1]):
        try:
            if str(ipaddress.IPv4Address(text)) == text:
                return text
        except ValueError:
            pass
        raise invalid(f"{show(text)} is not an IPv4 address as a.b.c.d (0-255 each, no leading zeros), nor a "
                      "DNS name")
    if len(text) > 253 or not all(_DNS_LABEL.fullmatch(label) for label in labels):
        raise invalid(f"{show(text)} is not a host name or IP address")
    return text


HostAddress = Annotated[
    StrictStr, AfterValidator(host_address),
    WithJsonSchema({"type": "string", "pattern": r"^[A-Za-z0-9]([A-Za-z0-9.:-]*[A-Za-z0-9])?$",
                    "maxLength": 253}),
]
SshUser = _matching(r"[a-z_][a-z0-9_-]{0,31}", "a user name", strip=False)
# The public half of a host key as sshd's key files and ssh-keyscan print it: "<type> <base64>".
SshHostKey = _matching(r"(ssh|ecdsa|sk)-[a-z0-9@.-]+ [A-Za-z0-9+/]+={0,2}", "'<key type> <base64 key>'",
                       strip=False)
# One IPv4 address: a machine's own (the kubelet's node-ip, flannel's interface), a tenant's API address.
IPv4Text = Annotated[StrictStr, _parsed(lambda text: str(ipaddress.IPv4Address(text)), "an IPv4 address")]
# A Linux interface name (IFNAMSIZ: at most 15 characters, no '/' or whitespace) or an IPv4 address.
NetworkInterface = _matching(r"[A-Za-z0-9_.:-]{1,15}", "an interface name (at most 15 characters) or IPv4 address",
                             strip=False)
DockerNetwork = _matching(r"([a-zA-Z0-9][a-zA-Z0-9_.-]*)?", "a docker network name")
_IMAGE = r"[a-z0-9][a-z0-9._/:@-]*"


def _tagged_or_digested(image: str) -> str:
    # Without a tag or digest a runtime pulls :latest, whatever that is today; a registry's port is no tag.
    if image and ":" not in image.rsplit("/", 1)[-1] and "@" not in image:
        raise invalid(f"{show(image)} names no tag or digest; e.g. kindest/node:v1.36.4")
    return image


ImageReference = Annotated[
    _matching(f"({_IMAGE})?", "an image reference"), AfterValidator(_tagged_or_digested)
]
# opencontainers/distribution-spec spec.md@v1.1.0: a tag is [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}.
ImageTag = _matching(r"([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?", "an image tag")
# A tag is required: HAMi's chart always writes <registry>/<repository>:<tag>
# (charts/hami/templates/_commons.tpl@v2.10.0, common.images.image).
TaggedImage = _matching(
    r"([a-z0-9.-]+(:[0-9]+)?/)?[a-z0-9._/-]+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}(@sha256:[a-f0-9]{64})?",
    "an image reference with a tag, e.g. docker.io/projecthami/mock-device-plugin:1.0.1",
)
_SEMVER = r"v?\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?"
CertManagerVersion = _matching(_SEMVER, "a semantic version, e.g. v1.21.2")
MetallbVersion = _matching(_SEMVER, "a semantic version, e.g. v0.16.1")
HamiChartVersion = _matching(_SEMVER, "a chart version, e.g. 2.10.0")


def _chart_not_edge_release(version: str) -> str:
    # Kamaji's edge releases are image and git tags (e.g. 26.8.2-edge), never chart versions.
    if version.endswith("-edge"):
        raise invalid(
            f"{version!r} is a Kamaji edge release, an image tag rather than a chart version; "
            f"keep 0.0.0+latest and set kamaji-hami-lab:kamajiImageTag to {version}"
        )
    return version


KamajiChartVersion = Annotated[
    _matching(_SEMVER, "a chart version, e.g. 0.0.0+latest"), AfterValidator(_chart_not_edge_release)
]

# A bastion list as ssh -J takes it: [user@]host[:port], comma-separated; no leading '-', so never an option.
ProxyJump = _matching(
    r"([a-z_][a-z0-9_-]{0,31}@)?[A-Za-z0-9]([A-Za-z0-9.:-]*[A-Za-z0-9])?"
    r"(,([a-z_][a-z0-9_-]{0,31}@)?[A-Za-z0-9]([A-Za-z0-9.:-]*[A-Za-z0-9])?)*",
    "bastions as ssh -J takes them, [user@]host[:port][,...]", strip=False)

def _switch(value: Any) -> bool:
    # The CLI hands scalar keys over as text; YAML booleans arrive as bools.
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise invalid(f"expected true or false, got {show(value)}")


# An on/off key (observability): true or false, as a YAML boolean or as the CLI's text.
CliSwitch = Annotated[bool, PlainValidator(_switch, json_schema_input_type=bool),
                      WithJsonSchema({"type": ["boolean", "string"], "pattern": "^(true|false)$"})]
