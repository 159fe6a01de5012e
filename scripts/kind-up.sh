#!/usr/bin/env bash
# Creates (or adopts) the kind management cluster.
#
# env:    CLUSTER_NAME  kind cluster name
#         NODE_IMAGE    kindest/node image for a new cluster (ignored when adopting)
# stdout: the host-side kubeconfig of the cluster (`kind get kubeconfig`)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env CLUSTER_NAME NODE_IMAGE

clusters=$(kind get clusters)
if grep -Fxq -- "$CLUSTER_NAME" <<<"$clusters"; then
	log "kind cluster $CLUSTER_NAME already exists; adopting it (NODE_IMAGE is not applied)"
else
	# kind would otherwise merge the new context into ~/.kube/config.
	throwaway_kubeconfig=$(mktemp)
	remove_on_exit "$throwaway_kubeconfig"
	log "creating kind cluster $CLUSTER_NAME from $NODE_IMAGE"
	kind create cluster --name "$CLUSTER_NAME" --image "$NODE_IMAGE" --wait 120s \
		--kubeconfig "$throwaway_kubeconfig" >&2
fi

kind get kubeconfig --name "$CLUSTER_NAME"
