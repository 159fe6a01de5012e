#!/usr/bin/env bash
# Prints the IPv4 subnet of the docker network kind's node and the workers are on
# (kind-up.sh creates the lab's with a chosen subnet; a network may also have an IPv6 /64).
#
# With EXPECTED_SUBNET, fails unless that is the network's subnet: the program plans
# every address (MetalLB's pool, the workers' fixed ones) with the subnet it was given.
#
# env:    KIND_NETWORK     the docker network (the lab's own, or an existing cluster's dockerNetwork)
#         EXPECTED_SUBNET  optional IPv4 subnet the network must have (kindSubnet, or its default)
# stdout: the IPv4 subnet in CIDR form, e.g. 172.30.0.0/16
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KIND_NETWORK
network=$KIND_NETWORK

subnets=$(docker network inspect --format '{{range .IPAM.Config}}{{.Subnet}} {{end}}' "$network") ||
	die "cannot inspect docker network $network (does it exist? kind-up.sh creates it before the cluster)"

for subnet in $subnets; do
	if [[ $subnet =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$ ]]; then
		[[ -z ${EXPECTED_SUBNET:-} || $subnet == "$EXPECTED_SUBNET" ]] ||
			die "the lab plans its addresses in $EXPECTED_SUBNET (kamaji-hami-lab:kindSubnet, or its default when empty), but docker network $network has the subnet $subnet: the MetalLB pool and the workers' fixed addresses would lie outside it; pulumi config set kamaji-hami-lab:kindSubnet $subnet"
		printf '%s\n' "$subnet"
		exit 0
	fi
done
die "docker network $network has no IPv4 subnet (IPAM subnets: ${subnets:-none})"
