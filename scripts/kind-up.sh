#!/usr/bin/env bash
# Creates the kind management cluster, or adopts it when this lab created it
# before (a re-run after a failed `pulumi up`). A same-named cluster that
# someone else created is refused: `pulumi destroy` would delete it.
#
# First it makes sure the lab's docker network (KIND_NETWORK, shared by the labs on
# this host) leaves room for fixed addresses:
# it creates the network when it is missing, with a subnet and an --ip-range
# that keeps Docker's own addresses in the subnet's first quarter (the workers'
# fixed ones are in the second, the MetalLB pools in the upper half:
# components/addresses.py). kind then reuses it as it finds it
# (kubernetes-sigs/kind pkg/cluster/internal/providers/docker/network.go@v0.33.0-alpha,
# ensureNetwork; unchanged since v0.32.0). A network someone else made is used only
# if its --ip-range keeps out of the rest as well. Before it creates the network, the planned
# subnet is compared with the host's own networks, which Docker does not do for a given subnet
# (preflight.py --planned-subnet names each overlap and a free subnet).
#
# env:    CLUSTER_NAME   kind cluster name
#         NODE_IMAGE     kindest/node image for a new cluster (ignored when adopting)
#         LAB_OWNER      ownership mark (project.stack) put on the cluster's node as a label
#         KIND_NETWORK   the lab's docker network, where kind puts the cluster's node
#         KIND_SUBNET    IPv4 subnet of a new network (kindSubnet, or the lab's default)
#         KIND_IP_RANGE  its first quarter, where Docker picks addresses (docker network create --ip-range)
#         PREFLIGHT_ROOT where preflight.py reads the host's files (/proc/net/route, resolv.conf); tests only
# bound:  600 s (kind create --wait 120s, after pulling the node image, which no flag bounds)
# stdout: nothing (kind-kubeconfig.sh reads the kubeconfig)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env CLUSTER_NAME NODE_IMAGE LAB_OWNER KIND_NETWORK KIND_SUBNET KIND_IP_RANGE
network=$KIND_NETWORK
# The lab's own network, not kind's `kind`: Docker picked that one's IPv4 subnet, and Docker gives fixed
# addresses only on a subnet the network was created with. kind puts the cluster's node on the network
# this names (kubernetes-sigs/kind pkg/cluster/internal/providers/docker/provider.go@v0.33.0-alpha, Provision).
export KIND_EXPERIMENTAL_DOCKER_NETWORK=$network
owner_label=kamaji-hami-lab.io/owner
network_label=kamaji-hami-lab.io/layout

# network_layout: "<the lab's label>|<subnet>=<its ip-range> ..." of the network; fails if it is missing.
# An empty ip-range is empty here too: Docker 29 holds it as a netip.Prefix, whose zero value prints as
# "invalid Prefix" (moby/moby api/types/network/ipam.go@docker-v29.7.2, IPAMConfig.IPRange).
network_layout() {
	local layout
	layout=$(docker network inspect --format \
		"{{index .Labels \"$network_label\"}}|{{range .IPAM.Config}}{{.Subnet}}={{.IPRange}} {{end}}" "$network") || return
	printf '%s\n' "${layout//=invalid Prefix/=}"
}

# keeps_docker_in_first_quarter SUBNET RANGE: whether RANGE (a CIDR) lies in SUBNET's first quarter.
keeps_docker_in_first_quarter() {
	awk -v subnet="$1" -v range="$2" '
		function int_of(ip,   octets) { split(ip, octets, "."); return ((octets[1] * 256 + octets[2]) * 256 + octets[3]) * 256 + octets[4] }
		BEGIN {
			if (split(subnet, s, "/") != 2 || split(range, r, "/") != 2) exit 1
			first = int_of(s[1]); quarter = 2 ^ (32 - s[2]) / 4
			start = int_of(r[1]); end = start + 2 ^ (32 - r[2]) - 1
			exit !(start >= first && end < first + quarter)
		}'
}

# check_host_networks: refuses a planned subnet that overlaps the host's own networks or nameservers
# (warns of one that overlaps a route through a gateway); Docker itself refuses one of another docker network.
check_host_networks() {
	local said
	said=$(python3 "$(dirname "${BASH_SOURCE[0]}")/preflight.py" --planned-subnet "$KIND_SUBNET") ||
		die "not creating docker network $network on $KIND_SUBNET:"$'\n'"$said"
	[[ -z $said ]] || warn "docker network $network on $KIND_SUBNET:"$'\n'"$said"
}

create_network() {
	local mtu args=(network create -d=bridge -o com.docker.network.bridge.enable_ip_masquerade=true
		--subnet "$KIND_SUBNET" --ip-range "$KIND_IP_RANGE" --label "$network_label=quarters")
	# As kind makes it: masquerading on, and the MTU of Docker's default bridge when that sets one.
	mtu=$(docker network inspect bridge --format '{{index .Options "com.docker.network.driver.mtu"}}' 2>/dev/null) || mtu=
	[[ ! $mtu =~ ^[1-9][0-9]*$ ]] || args+=(-o "com.docker.network.driver.mtu=$mtu")
	log "creating docker network $network: subnet $KIND_SUBNET, Docker's own addresses from $KIND_IP_RANGE"
	local said
	said=$(docker "${args[@]}" "$network" 2>&1 >/dev/null) && return 0
	# Another lab may have created it meanwhile; then it is checked like any existing one.
	network_layout >/dev/null 2>&1 ||
		die "cannot create docker network $network with subnet $KIND_SUBNET ($said); if another docker network uses those addresses (docker network ls), set kamaji-hami-lab:kindSubnet to a free private subnet, e.g. a /16 of 10.0.0.0/8"
}

listed=0
said=$(docker_network_exists "$network" 2>&1) || listed=$?
case $listed in
0) ;;
1)
	check_host_networks
	create_network
	;;
*) die "cannot tell whether docker network $network exists: $said" ;;
esac
layout=$(network_layout 2>&1) || die "cannot inspect docker network $network: $layout"
label=${layout%%|*} ipam=${layout#*|}
subnet='' ip_range=''
for entry in $ipam; do
	if [[ ${entry%%=*} =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$ ]]; then
		subnet=${entry%%=*} ip_range=${entry#*=}
		break
	fi
done
[[ -n $subnet ]] || die "docker network $network has no IPv4 subnet (IPAM: ${ipam:-none}); remove it once no container uses it (docker network inspect $network) with docker network rm $network, and run again"
origin="not created by kamaji-hami-lab"
[[ -z $label ]] || origin="labelled $network_label=$label"
if [[ -z $ip_range ]]; then
	dynamic="any address of $subnet"
elif ! keeps_docker_in_first_quarter "$subnet" "$ip_range"; then
	dynamic="addresses of $ip_range, beyond the first quarter of $subnet"
else
	dynamic=''
fi
[[ -z $dynamic ]] ||
	die "docker network $network ($origin) lets Docker give $dynamic to containers, so the workers' fixed addresses could be taken (and Docker refuses fixed addresses on a subnet it picked itself). Once no container uses it (docker network inspect $network), remove it (docker network rm $network) and run again, or name another network: the lab then creates it with room for them"
[[ -n $label ]] ||
	warn "docker network $network was not created by kamaji-hami-lab, but its --ip-range $ip_range keeps Docker's own addresses in the first quarter of $subnet as the lab needs; using it"

clusters=$(kind get clusters)
if grep -Fxq -- "$CLUSTER_NAME" <<<"$clusters"; then
	# shellcheck disable=SC2034 # read by kubeconfig_file through its name
	existing_kubeconfig=$(kind get kubeconfig --name "$CLUSTER_NAME")
	kubeconfig_file existing_kubeconfig
	owner=$(kube get nodes -o "jsonpath={.items[0].metadata.labels.${owner_label//./\\.}}") ||
		die "kind cluster $CLUSTER_NAME exists but its API server does not answer; start its container or delete it (kind delete cluster --name $CLUSTER_NAME)"
	[[ $owner == "$LAB_OWNER" ]] ||
		die "a kind cluster named $CLUSTER_NAME already exists and was not created by this lab ($LAB_OWNER); delete it (kind delete cluster --name $CLUSTER_NAME) or choose another kamaji-hami-lab:managementClusterName"
	# A cluster made before the lab had its own network sits on kind's `kind`, where the workers cannot reach it.
	attached=$(docker inspect --format "{{if index .NetworkSettings.Networks \"$network\"}}yes{{end}}" \
		"$CLUSTER_NAME-control-plane") || die "cannot inspect the node container $CLUSTER_NAME-control-plane of kind cluster $CLUSTER_NAME"
	[[ $attached == yes ]] ||
		die "kind cluster $CLUSTER_NAME belongs to this lab but its node is not on docker network $network, where the lab now puts its workers at fixed addresses (it was created on kind's own network by an earlier version); make down, then make up re-creates it there"
	log "kind cluster $CLUSTER_NAME already exists and belongs to $LAB_OWNER; adopting it (NODE_IMAGE is not applied)"
else
	cluster_config=$(mktemp)
	remove_on_exit "$cluster_config"
	cat >"$cluster_config" <<CONFIG
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
    labels:
      $owner_label: "$LAB_OWNER"
CONFIG
	# kind would otherwise merge the new context into ~/.kube/config. It holds the admin credentials, so it
	# goes to the runtime tmpfs like every other kubeconfig of the scripts: a killed run leaves it on no disk.
	scratch_file throwaway_kubeconfig
	log "creating kind cluster $CLUSTER_NAME from $NODE_IMAGE"
	# shellcheck disable=SC2154 # throwaway_kubeconfig is set by scratch_file through its name
	kind create cluster --name "$CLUSTER_NAME" --image "$NODE_IMAGE" --wait 120s \
		--kubeconfig "$throwaway_kubeconfig" --config "$cluster_config" >&2
fi
