#!/usr/bin/env bash
# Deletes the kind management cluster; succeeds when it is already gone. Then removes
# the lab's docker network if it is the lab's (kind-up.sh's label) and no container
# of any lab on this host is left on it, stopped ones included: a sleeping tenant's
# workers are stopped containers, which `docker network inspect` does not list (it
# lists the network's endpoints, which only a running container has: moby/moby
# daemon/network.go@v28.5.2, buildContainerAttachments), while `docker ps -a --filter
# network=` goes by each container's own network settings (daemon/list.go@v28.5.2).
#
# env:    CLUSTER_NAME  kind cluster name
#         KIND_NETWORK  the lab's docker network (absent in stacks made before it existed)
# bound:  150 s (kind delete cluster: stops and removes the node container; four docker calls)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env CLUSTER_NAME

clusters=$(kind get clusters)
if grep -Fxq -- "$CLUSTER_NAME" <<<"$clusters"; then
	# kind would otherwise remove the cluster's context from ~/.kube/config.
	throwaway_kubeconfig=$(mktemp)
	remove_on_exit "$throwaway_kubeconfig"
	log "deleting kind cluster $CLUSTER_NAME"
	kind delete cluster --name "$CLUSTER_NAME" --kubeconfig "$throwaway_kubeconfig" >&2
else
	log "kind cluster $CLUSTER_NAME is already gone"
fi

network=${KIND_NETWORK:-}
[[ -n $network ]] || exit 0
listed=0
said=$(docker_network_exists "$network" 2>&1) || listed=$?
case $listed in
0) ;;
1) exit 0 ;;
*)
	warn "cannot tell whether docker network $network exists, left as it is: $said"
	exit 0
	;;
esac
if ! label=$(docker network inspect --format '{{index .Labels "kamaji-hami-lab.io/layout"}}' "$network" 2>&1); then
	warn "cannot inspect docker network $network, left as it is: $label"
	exit 0
fi
if [[ -z $label ]]; then
	log "docker network $network was not made by kamaji-hami-lab; left as it is"
	exit 0
fi
if ! containers=$(docker ps --all --filter "network=$network" --format '{{.Names}}' 2>&1); then
	warn "cannot list the containers on docker network $network, left as it is: $containers"
	exit 0
fi
if [[ -n $containers ]]; then
	log "docker network $network still has $(grep -c . <<<"$containers") containers of other labs, running or stopped (${containers//$'\n'/, }); left for the last one to remove"
# Docker refuses to remove a network a container joined meanwhile: then that lab removes it later.
elif ! said=$(docker network rm "$network" 2>&1 >/dev/null); then
	warn "docker network $network was not removed: $said"
fi
