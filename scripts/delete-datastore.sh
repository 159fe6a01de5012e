#!/usr/bin/env bash
# On destroy, deletes Kamaji's `default` DataStore while the Kamaji controller
# still runs: its finalizer is removed only by that controller, and uninstalling
# the Kamaji release first (controller and RBAC gone) would leave the DataStore
# stuck in Terminating and the uninstall waiting until it times out. By now every
# tenant control plane is gone, so nothing uses the DataStore any more.
#
# If the controller does not release it in time (not running, or crash-looping)
# and no TenantControlPlane uses it, the finalizer is removed here, exactly as the
# controller would, so the uninstall that follows does not hang on it.
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         DELETE_TIMEOUT   optional, seconds to wait for the controller (default 180)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA
kubeconfig_file KUBECONFIG_DATA
datastore=datastores.kamaji.clastix.io/default
# clastix/kamaji api/v1alpha1/datastore_types.go@26.8.2-edge (DataStoreTCPFinalizer).
finalizer=kamaji.clastix.io/TenantControlPlane

datastore_gone() {
	local found
	found=$(kube get "$datastore" --ignore-not-found -o name) || return 1
	[[ -z $found ]]
}

if ! kube delete "$datastore" --ignore-not-found --wait=false >&2; then
	# A cluster already gone (or unreachable) has nothing left to clean up.
	warn "could not delete DataStore default; continuing so destroy is not blocked"
	exit 0
fi
if retry "${DELETE_TIMEOUT:-180}" "$RETRY_INTERVAL" datastore_gone; then
	log "DataStore default deleted"
	exit 0
fi

# The controller lets a DataStore go once no TenantControlPlane has it as
# .status.storage.dataStoreName (clastix/kamaji controllers/datastore_controller.go@26.8.2-edge).
if ! users=$(kube get tenantcontrolplanes.kamaji.clastix.io --all-namespaces \
	-o 'jsonpath={range .items[?(@.status.storage.dataStoreName=="default")]}{.metadata.namespace}/{.metadata.name} {end}'); then
	warn "DataStore default is still terminating and its users cannot be listed; continuing so destroy is not blocked"
	exit 0
fi
if [[ -n ${users// /} ]]; then
	warn "DataStore default is still terminating and still used by: $users; leaving its finalizer in place"
	exit 0
fi

log "DataStore default is unused but still terminating; removing the finalizer $finalizer"
finalizers=$(kube get "$datastore" -o 'jsonpath={range .metadata.finalizers[*]}{@}{"\n"}{end}') || {
	warn "could not read the finalizers of DataStore default; continuing so destroy is not blocked"
	exit 0
}
remaining=()
while IFS= read -r name; do
	if [[ -n $name && $name != "$finalizer" ]]; then remaining+=("\"$name\""); fi
done <<<"$finalizers"
kept=$(
	IFS=,
	printf '%s' "${remaining[*]}"
)
kube patch "$datastore" --type=merge -p "{\"metadata\":{\"finalizers\":[$kept]}}" >&2 ||
	warn "could not remove the finalizer of DataStore default"
if retry 30 "$RETRY_INTERVAL" datastore_gone; then
	log "DataStore default deleted"
else
	warn "DataStore default is still there; continuing so destroy is not blocked"
fi
