#!/usr/bin/env bash
# Waits until Kamaji can accept TenantControlPlanes: its controller Deployment
# is Available and the default DataStore reports ready (the DataStore CRD has
# no usable conditions, only .status.ready).
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         WAIT_TIMEOUT     optional, seconds (default 600)
# bound:  660 s (WAIT_TIMEOUT 600 + one last poll of two 20 s requests)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA
timeout=${WAIT_TIMEOUT:-600}
kubeconfig_file KUBECONFIG_DATA

pending=
kamaji_ready() {
	local available ready
	available=$(kube -n kamaji-system get deployment kamaji \
		-o 'jsonpath={.status.conditions[?(@.type=="Available")].status}' 2>/dev/null)
	if [[ $available != True ]]; then
		pending="Deployment kamaji-system/kamaji to become Available"
		progress "waiting for $pending"
		return 1
	fi
	ready=$(kube get datastores.kamaji.clastix.io default -o 'jsonpath={.status.ready}' 2>/dev/null)
	if [[ $ready != true ]]; then
		pending="DataStore default to report .status.ready=true"
		progress "waiting for $pending"
		return 1
	fi
}

retry "$timeout" "$RETRY_INTERVAL" kamaji_ready ||
	die "timed out after ${timeout}s waiting for $pending"
log "Kamaji is ready"
