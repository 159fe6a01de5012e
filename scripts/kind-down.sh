#!/usr/bin/env bash
# Deletes the kind management cluster; succeeds when it is already gone.
#
# env:    CLUSTER_NAME  kind cluster name
# bound:  120 s (kind delete cluster: stops and removes the node container)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env CLUSTER_NAME

clusters=$(kind get clusters)
if ! grep -Fxq -- "$CLUSTER_NAME" <<<"$clusters"; then
	log "kind cluster $CLUSTER_NAME is already gone"
	exit 0
fi

# kind would otherwise remove the cluster's context from ~/.kube/config.
throwaway_kubeconfig=$(mktemp)
remove_on_exit "$throwaway_kubeconfig"
log "deleting kind cluster $CLUSTER_NAME"
kind delete cluster --name "$CLUSTER_NAME" --kubeconfig "$throwaway_kubeconfig" >&2
