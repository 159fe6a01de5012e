#!/usr/bin/env bash
# Puts the lab's filter on its docker network (FILTER_ACTION install, the default), or takes it away
# (remove: network-filter-down.sh), on the Docker host: scripts/network-filter-rules.sh says what it
# allows. The user is in the docker group, not root: the rules are written by a short-lived container
# of the node image in the host's network namespace, with NET_ADMIN (iptables) and SYS_MODULE with the
# host's /lib/modules read-only (to load br_netfilter, as every worker does in join-worker.sh).
#
# env:    LAB_IDENTITY   the lab's identity (scripts/lab-identity.sh)
#         NODE_IMAGE     kindest/node image to run iptables in (the lab's, already pulled)
#         KIND_NETWORK   the lab's docker network
#         SUBNET         its IPv4 subnet
#         API_PORTS      ports of a tenant's API address its workers may reach
#         TENANTS        a line per tenant: <name> <API address> <pod CIDR> <worker address>...
#         FILTER_ACTION  install (default) | remove, which needs only LAB_IDENTITY and NODE_IMAGE
#         HOST_BOOT      not read: the host's boot ID, whose change after a reboot makes Pulumi run this again
#         XTABLES_LOCK   the host's iptables-legacy lock file, default /run/xtables.lock; tests only
# bound:  none of its own (one `docker run` of an image already there)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

action=${FILTER_ACTION:-install}
require_env LAB_IDENTITY NODE_IMAGE
passed=(-e "FILTER_ACTION=$action" -e "LAB_IDENTITY=$LAB_IDENTITY")

if [[ $action == install ]]; then
	require_env KIND_NETWORK SUBNET API_PORTS TENANTS
	# Docker 29 names its firewall backend (moby/moby api/types/system/info.go@docker-v29.7.2, FirewallBackend);
	# an older one has only iptables. Read from the whole document: an older client's template has no such field.
	info=$(docker info --format '{{json .}}') || die "cannot read docker info, to tell Docker's firewall backend"
	backend=$(python3 -c 'import json, sys; print((json.load(sys.stdin).get("FirewallBackend") or {}).get("Driver", ""))' <<<"$info") ||
		die "cannot read Docker's firewall backend from docker info"
	[[ $backend != nftables* ]] ||
		log "Docker uses its nftables firewall backend, which has no DOCKER-USER chain: the lab's filter goes into iptables-nft's own FORWARD chain, where its drops are final too"
	# The bridge is br-<the network's ID, 12 digits> unless the network names one (moby/moby
	# libnetwork/drivers/bridge/bridge_linux.go@v28.5.2, the same at docker-v29.7.2).
	named=$(docker network inspect --format '{{.Id}} {{index .Options "com.docker.network.bridge.name"}}' "$KIND_NETWORK") ||
		die "cannot inspect docker network $KIND_NETWORK (kind-up.sh creates it before the cluster)"
	read -r id bridge <<<"$named"
	[[ -n $bridge ]] || bridge=br-${id:0:12}
	passed+=(-e "FIREWALL_BACKEND=$backend" -e "BRIDGE=$bridge" -e "SUBNET=$SUBNET" -e "API_PORTS=$API_PORTS"
		-e "TENANTS=$TENANTS")
fi

rules="$(dirname "${BASH_SOURCE[0]}")/network-filter-rules.sh"
# iptables-legacy rewrites a whole table, so every writer on the host takes this lock first (Docker, kube-proxy
# and the kubelet do); the container takes the host's, when there is one. Bound only if it exists: Docker would
# make a missing one a directory.
lock=${XTABLES_LOCK:-/run/xtables.lock}
shared_lock=()
[[ ! -f $lock ]] || shared_lock=(--mount "type=bind,source=$lock,target=/run/xtables.lock")
# The node image's entrypoint boots systemd; bash alone reads the rules program from stdin. --userns host: a
# dockerd that remaps user namespaces refuses the host's network otherwise (moby/moby daemon/daemon_unix.go@v28.5.2,
# verifyPlatformContainerSettings), and its remapped root could not write the host's rules (the workers run so
# too, components/worker_node.py).
docker run --rm -i --network host --userns host --cap-add NET_ADMIN --cap-add SYS_MODULE \
	-v /lib/modules:/lib/modules:ro "${shared_lock[@]}" \
	"${passed[@]}" --entrypoint bash "$NODE_IMAGE" -s <"$rules" ||
	die "could not $action the lab's network filter on docker network ${KIND_NETWORK:-of the lab} (its messages are above)"
