#!/usr/bin/env bash
# Waits until a DataStore the lab installed for one tenant (components/dedicated_datastore.py) reports ready:
# Kamaji's controller reconciles no TenantControlPlane on a DataStore that is not (clastix/kamaji
# controllers/tenantcontrolplane_controller.go@26.8.2-edge), and sets .status.ready from the DataStore's Valid
# condition once it could connect (controllers/datastore_controller.go@26.8.2-edge).
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         DATASTORE        the DataStore's name
#         WAIT_TIMEOUT     optional, seconds (default 600)
# bound:  620 s (WAIT_TIMEOUT 600 + one last poll of a 20 s request)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA DATASTORE
timeout=${WAIT_TIMEOUT:-600}
kubeconfig_file KUBECONFIG_DATA

pending="DataStore $DATASTORE to exist"
datastore_ready() {
	local ready
	ready=$(kube get datastores.kamaji.clastix.io "$DATASTORE" --ignore-not-found -o 'jsonpath={.status.ready}') || {
		pending="the API server to answer"
		return 1
	}
	[[ $ready == true ]] && return 0
	pending="DataStore $DATASTORE to report .status.ready=true"
	progress "waiting for $pending"
	return 1
}

retry "$timeout" "$RETRY_INTERVAL" datastore_ready ||
	die "timed out after ${timeout}s waiting for $pending (its etcd: kubectl -n $DATASTORE get pods)"
log "DataStore $DATASTORE is ready"
