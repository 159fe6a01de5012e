#!/usr/bin/env bash
# Drains a worker and removes its Node object from its tenant before the
# container is deleted: on destroy, and before the container is replaced (a new
# node image, e.g. a tenant upgrade). The drain evicts pods, so PodDisruptionBudgets
# and grace periods hold; DaemonSet pods stay, and a pod without a controller is
# deleted (it would die with the container anyway). A drain still blocked after
# DRAIN_TIMEOUT is given up with a warning and the node removed all the same, so
# neither an upgrade nor a destroy waits on a budget that never allows an eviction.
# Best effort: when the tenant API is unreachable (e.g. its control plane is
# already gone) it warns and succeeds, so `pulumi destroy` never hangs.
#
# env:    KUBECONFIG_DATA  tenant admin kubeconfig
#         NODE             Kubernetes node name
#         DRAIN_TIMEOUT    optional, seconds the drain may take (default 120)
# bound:  180 s (DRAIN_TIMEOUT 120 + up to five 10 s requests around it + slack)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA NODE
drain_timeout=${DRAIN_TIMEOUT:-120}
kubeconfig_file KUBECONFIG_DATA
export KUBECTL_REQUEST_TIMEOUT=10s

if ! found=$(kube get node "$NODE" --ignore-not-found -o name); then
	warn "could not read node $NODE (tenant API unreachable or refused); continuing so destroy is not blocked"
	exit 0
fi
if [[ -z $found ]]; then
	log "node $NODE is already gone from its tenant; nothing to drain"
	exit 0
fi

log "draining node $NODE (at most ${drain_timeout}s)"
if kube drain "$NODE" --ignore-daemonsets --delete-emptydir-data --force --timeout="${drain_timeout}s" >&2; then
	log "node $NODE drained"
else
	warn "node $NODE did not drain within ${drain_timeout}s (a PodDisruptionBudget or a slow pod?); removing it anyway"
fi

if kube delete node "$NODE" --ignore-not-found --wait=false >&2; then
	log "node $NODE removed from its tenant"
else
	warn "could not delete node $NODE (tenant API unreachable or refused); continuing so destroy is not blocked"
fi
