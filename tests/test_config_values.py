"""Values that passed and failed later, or silently did harm: refused at config time, naming the key."""

from __future__ import annotations

import copy
import shlex
import subprocess

import pytest

from components.addresses import DEFAULT_KIND_SUBNET
from components.config import ConfigError, parse_settings
from tests.plan import dev_config
from tests.test_machines import EXISTING, MOCK_GPU_TENANT, SECRETS


def problem(config: dict) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_settings(config)
    return str(raised.value).splitlines()[1]


def with_address(address) -> dict:
    tenant = copy.deepcopy(MOCK_GPU_TENANT)
    tenant["machines"][0]["address"] = address
    return dev_config(tenants=[tenant], **EXISTING, **SECRETS)


@pytest.mark.parametrize("subnet", ["0.0.0.0/0", "8.8.8.0/24", "224.0.0.0/4", "100.64.0.0/10"])
def test_a_kind_subnet_that_is_not_private_is_refused(subnet):
    assert problem(dev_config(kindSubnet=subnet)) == (
        f"  kamaji-hami-lab:kindSubnet: {subnet!r} is not a private network; the lab's docker network needs one, "
        f"e.g. {DEFAULT_KIND_SUBNET} (the default) or a /16 of 10.0.0.0/8")


@pytest.mark.parametrize("subnet", ["172.18.0.0/16", "10.89.0.0/24", "192.168.49.0/24"])
def test_a_private_kind_subnet_is_taken(subnet):
    assert str(parse_settings(dev_config(kindSubnet=subnet)).kind_subnet) == subnet


# getaddrinfo, which ssh uses, reads all of these as some address: 010.0.1.21 is 8.0.1.21.
@pytest.mark.parametrize("address", ["010.0.1.21", "0x7f.1", "1.2.3", "300.1.1.1", "1.2.3.4.5", "127.1"])
def test_an_address_only_some_resolvers_read_is_refused(address):
    assert problem(with_address(address)).startswith(
        f"  kamaji-hami-lab:tenants[0].machines[0].address: {address!r} is not an IPv4 address as a.b.c.d")


@pytest.mark.parametrize("address", ["fe80::1%eth0", "1::2::3", "a..b", "-gpu.lab", "gpu_1.lab", "x" * 64 + ".lab"])
def test_an_address_that_is_no_ip_literal_or_dns_name_is_refused(address):
    assert problem(with_address(address)).startswith("  kamaji-hami-lab:tenants[0].machines[0].address: ")


@pytest.mark.parametrize("address", ["10.0.1.21", "255.255.255.255", "::1", "2001:db8::21", "gpu-1.lab.example",
                                     "gpu1", "a1.example.com"])
def test_a_canonical_ip_or_dns_name_is_taken(address):
    (tenant,) = parse_settings(with_address(address)).tenants
    assert tenant.machines[0].address == address


@pytest.mark.parametrize("image", ["kindest/node", "localhost:5000/kindest/node", "registry.local/lab/node"])
def test_a_node_image_without_tag_or_digest_is_refused(image):
    assert problem(dev_config(nodeImage=image)) == (
        f"  kamaji-hami-lab:nodeImage: {image!r} names no tag or digest; e.g. kindest/node:v1.36.4")
    tenant = {"name": "a", "kubernetesVersion": "v1.35.1", "nodeImage": image}
    assert problem(dev_config(tenants=[tenant])).startswith(f"  kamaji-hami-lab:tenants[0].nodeImage: {image!r} names")


@pytest.mark.parametrize("image", ["kindest/node:v1.36.4", "localhost:5000/kindest/node:v1.36.4",
                                   "kindest/node@sha256:" + "a" * 64])
def test_a_node_image_with_tag_or_digest_is_taken(image):
    assert parse_settings(dev_config(nodeImage=image)).node_image == image


@pytest.mark.parametrize("address", ["gpu-1.lab.example", "10.0.0.11"])
def test_the_host_key_hint_is_a_command_that_copies_safely(address):
    tenant = copy.deepcopy(MOCK_GPU_TENANT)
    del tenant["machines"][0]["hostKey"]
    tenant["machines"][0]["address"] = address
    message = problem(dev_config(tenants=[tenant], **EXISTING, **SECRETS))
    assert f"`ssh-keyscan -t ed25519 -p 22 {address}`" in message


def test_a_hostile_address_in_the_host_key_hint_stays_one_shell_word(tmp_path):
    address = "$(touch pwned);x"
    tenant = copy.deepcopy(MOCK_GPU_TENANT)
    del tenant["machines"][0]["hostKey"]
    tenant["machines"][0]["address"] = address
    tenant["machines"][0]["port"] = "22; touch pwned2"
    with pytest.raises(ConfigError) as raised:
        parse_settings(dev_config(tenants=[tenant], **EXISTING, **SECRETS))
    command = str(raised.value).split("`")[1]

    words = subprocess.run(["bash", "-c", f"printf '%s\\n' {command.removeprefix('ssh-keyscan ')}"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert words == ["-t", "ed25519", "-p", "22; touch pwned2", address]
    assert list(tmp_path.iterdir()) == []
    assert shlex.split(command)[-1] == address
