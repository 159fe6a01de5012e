#!/usr/bin/env bash
# Deletes the kind management cluster; succeeds when it is already gone. Then removes
# the lab's docker network if it is the lab's (kind-up.sh's label) and no container
# of any lab on this host is left on it.
#
# env:    CLUSTER_NAME  kind cluster name
#         KIND_NETWORK  the lab's docker network (absent in stacks made before it existed)
# bound:  150 s (kind delete cluster: stops and removes the node container; two docker calls)
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
if ! usage=$(docker network inspect --format '{{index .Labels "kamaji-hami-lab.io/layout"}}|{{len .Containers}}' "$network" 2>&1); then
	[[ $usage == *"not found"* ]] || warn "cannot inspect docker network $network, left as it is: $usage"
	exit 0
fi
if [[ -z ${usage%%|*} ]]; then
	log "docker network $network was not made by kamaji-hami-lab; left as it is"
elif [[ ${usage#*|} != 0 ]]; then
	log "docker network $network still has ${usage#*|} containers (another lab's); left for the last one to remove"
# Docker refuses to remove a network a container joined meanwhile: then that lab removes it later.
elif ! said=$(docker network rm "$network" 2>&1 >/dev/null); then
	warn "docker network $network was not removed: $said"
fi
