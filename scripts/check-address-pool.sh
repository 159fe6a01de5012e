#!/usr/bin/env bash
# Refuses a MetalLB pool that would hand out addresses already in use on the
# kind docker network: Docker's own allocations (its IP range and the
# containers on the network) and the MetalLB pools of the other kind clusters
# on it. Two pools announcing one address both answer ARP, and kubeconfigs
# then reach the wrong API server. Only running clusters whose MetalLB can be
# read are checked; the others are named in a warning.
#
# env:    POOL          the lab's pool, first-last (e.g. 172.30.149.0-172.30.149.50)
#         CLUSTER_NAME  this lab's kind cluster, which is not checked against itself
#         KIND_NETWORK  the docker network the lab's workers and pools are on
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env POOL CLUSTER_NAME
require_env KIND_NETWORK
network=$KIND_NETWORK
fix="set kamaji-hami-lab:metallbAddressRange to a free range of the $network network, or choose another kamaji-hami-lab:managementClusterName (each name gets its own block)"

# ipv4_span RANGE: "first last" as integers for a.b.c.d-e.f.g.h, a CIDR or a
# single address (MetalLB's and Docker's forms); nothing for IPv6.
ipv4_span() {
	awk -v range="$1" '
		function int_of(ip,   octets) { split(ip, octets, "."); return ((octets[1] * 256 + octets[2]) * 256 + octets[3]) * 256 + octets[4] }
		BEGIN {
			gsub(/[[:space:]]/, "", range)
			if (range == "" || range ~ /:/) exit
			if (split(range, ends, "-") == 2) { printf "%.0f %.0f\n", int_of(ends[1]), int_of(ends[2]); exit }
			if (split(range, cidr, "/") == 1) cidr[2] = 32
			size = 2 ^ (32 - cidr[2]); first = int_of(cidr[1]); first -= first % size
			printf "%.0f %.0f\n", first, first + size - 1
		}'
}

read -r pool_first pool_last <<<"$(ipv4_span "$POOL")" || true
[[ -n ${pool_last:-} ]] || die "POOL must be an IPv4 range first-last, got $POOL"

# overlaps RANGE: whether RANGE shares an address with the pool.
overlaps() {
	local first last
	read -r first last <<<"$(ipv4_span "$1")" || true
	[[ -n ${last:-} ]] && ((first <= pool_last && pool_first <= last))
}

if ! layout=$(docker network inspect --format \
	'{{range .IPAM.Config}}{{.IPRange}} {{end}}|{{range .Containers}}{{.Name}}={{.IPv4Address}} {{end}}' \
	"$network" 2>/dev/null); then
	log "docker network $network does not exist yet, so nothing on it can overlap $POOL"
	exit 0
fi

for ip_range in ${layout%%|*}; do
	! overlaps "$ip_range" ||
		die "the MetalLB pool $POOL overlaps $ip_range, the range Docker assigns container addresses from on network $network; $fix"
done
for container in ${layout#*|}; do
	address=${container#*=}
	address=${address%/*} # Docker writes it with the subnet's prefix length
	! overlaps "$address" ||
		die "the MetalLB pool $POOL contains $address, the address of container ${container%%=*} on network $network; $fix"
done

neighbours=$(docker ps --filter label=io.x-k8s.kind.role=control-plane --filter "network=$network" \
	--format '{{.Label "io.x-k8s.kind.cluster"}}' | sort -u)
for cluster in $neighbours; do
	[[ $cluster != "$CLUSTER_NAME" ]] || continue
	# shellcheck disable=SC2034 # read by kubeconfig_file through its name
	if ! neighbour_kubeconfig=$(kind get kubeconfig --name "$cluster" 2>/dev/null); then
		warn "cannot read kind cluster $cluster's kubeconfig; make sure its load-balancer addresses stay out of $POOL"
		continue
	fi
	kubeconfig_file neighbour_kubeconfig
	if ! pools=$(kube get ipaddresspools.metallb.io -A -o 'jsonpath={.items[*].spec.addresses[*]}' 2>&1); then
		[[ $pools == *"doesn't have a resource type"* ]] ||
			warn "cannot read kind cluster $cluster's MetalLB pools ($pools); make sure they stay out of $POOL"
		continue
	fi
	for range in $pools; do
		! overlaps "$range" ||
			die "the MetalLB pool $POOL overlaps $range, a MetalLB pool of kind cluster $cluster on network $network; $fix"
	done
done
log "MetalLB pool $POOL is clear of Docker's addresses and of the other kind clusters' pools on $network"
