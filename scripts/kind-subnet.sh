#!/usr/bin/env bash
# Prints the IPv4 subnet of the docker network kind attaches its nodes to
# (docker IPAM picks it, not kind; the network usually also has an IPv6 /64).
#
# env:    KIND_NETWORK  optional docker network name (default: kind)
# stdout: the IPv4 subnet in CIDR form, e.g. 172.18.0.0/16
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

network=${KIND_NETWORK:-kind}

subnets=$(docker network inspect --format '{{range .IPAM.Config}}{{.Subnet}} {{end}}' "$network") ||
	die "cannot inspect docker network $network (does it exist? kind creates it with the first cluster)"

for subnet in $subnets; do
	if [[ $subnet =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$ ]]; then
		printf '%s\n' "$subnet"
		exit 0
	fi
done
die "docker network $network has no IPv4 subnet (IPAM subnets: ${subnets:-none})"
