#!/usr/bin/env bash
# Drains a worker and removes its Node object from its tenant before the
# container is deleted: on destroy, and before the container is replaced (a new
# node image, e.g. a tenant upgrade). The drain evicts pods, so PodDisruptionBudgets
# and grace periods hold; DaemonSet pods stay, and a pod without a controller is
# deleted (it would die with the container anyway). A drain still blocked after
# DRAIN_TIMEOUT is given up with a warning and the node removed all the same, so
# neither an upgrade nor a destroy waits on a budget that never allows an eviction.
# A machine (NODE_TRANSPORT=ssh) outlives its worker: it is then reset (lib.sh
# reset_node, as before a join), but only while it is still bound to this tenant, so
# a machine that has meanwhile joined another tenant is left alone.
# Best effort: when the tenant API or the machine is unreachable (e.g. the control
# plane is already gone) it warns and succeeds, so `pulumi destroy` never hangs. A reset
# that runs and fails is an error: the machine keeps the lab's mark and its state.
#
# env:    KUBECONFIG_DATA  tenant admin kubeconfig
#         NODE             Kubernetes node name (container or machine name)
#         NODE_TRANSPORT   optional, docker (default) or ssh, with the SSH_* variables (scripts/lib.sh)
#         DRAIN_TIMEOUT    optional, seconds the drain may take (default 120)
#         RESET_TIMEOUT    optional, seconds `kubeadm reset` may take on a machine (default 60)
# bound:  360 s (DRAIN_TIMEOUT 120 + up to five 10 s requests + RESET_TIMEOUT 60 + three ssh calls of at most 70 s + slack)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA NODE
drain_timeout=${DRAIN_TIMEOUT:-120}
reset_timeout=${RESET_TIMEOUT:-60}
kubeconfig_file KUBECONFIG_DATA
export KUBECTL_REQUEST_TIMEOUT=10s

remove_node() {
	local found
	if ! found=$(kube get node "$NODE" --ignore-not-found -o name); then
		warn "could not read node $NODE (tenant API unreachable or refused); continuing so destroy is not blocked"
		return 0
	fi
	if [[ -z $found ]]; then
		log "node $NODE is already gone from its tenant; nothing to drain"
		return 0
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
}

reset_machine() {
	local binding wanted
	if ! node_exec true; then
		warn "machine $NODE is unreachable over ssh; it keeps its kubelet configuration (run 'kubeadm reset' on it)"
		return 0
	fi
	wanted="$(kubeconfig_endpoint) $(tenant_ca_hash)"
	binding=$(node_binding)
	if [[ $binding != "$wanted" ]]; then
		log "machine $NODE is not bound to this tenant (${binding:-not joined}); leaving it as it is"
		return 0
	fi
	reset_node "$reset_timeout" ||
		die "resetting machine $NODE failed (see above); it keeps the lab's mark, so the next pulumi destroy or up can reset it again"
	log "machine $NODE reset (kubeadm reset, flannel's CNI config, state and links, KUBE-*/FLANNEL-* chains, the lab's mark)"
}

remove_node
if [[ ${NODE_TRANSPORT:-docker} == ssh ]]; then
	reset_machine
fi
