#!/usr/bin/env bash
# On destroy, deletes a DataStore the lab installed (Kamaji's `default`, or a
# tenant's dedicated one) while the Kamaji controller still runs: its finalizer
# is removed only by that controller, and uninstalling the release first
# (controller and RBAC gone) would leave the DataStore stuck in Terminating and
# the uninstall waiting until it times out. By now every tenant control plane
# that used it is gone (or, for a dedicated one, moved off it), so nothing uses
# the DataStore any more; with REFUSE_IF_USED that is checked first.
#
# If the controller does not release it in time (not running, or crash-looping)
# and no TenantControlPlane uses it, the finalizer is removed here, exactly as the
# controller would, so the uninstall that follows does not hang on it.
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         DATASTORE        optional, the DataStore's name (default: default)
#         REFUSE_IF_USED   optional, true: fail, deleting nothing, while a TenantControlPlane still has its data
#                          there (a tenant's dedicated store, whose etcd goes with it)
#         DELETE_TIMEOUT   optional, seconds to wait for the controller (default 180)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA
kubeconfig_file KUBECONFIG_DATA
name=${DATASTORE:-default}
datastore=datastores.kamaji.clastix.io/$name
# clastix/kamaji api/v1alpha1/datastore_types.go@26.8.2-edge (DataStoreTCPFinalizer).
finalizer=kamaji.clastix.io/TenantControlPlane

datastore_gone() {
	local found
	found=$(kube get "$datastore" --ignore-not-found -o name) || return 1
	[[ -z $found ]]
}

# The controller lets a DataStore go once no TenantControlPlane has it as
# .status.storage.dataStoreName (clastix/kamaji controllers/datastore_controller.go@26.8.2-edge).
users_of_datastore() {
	kube get tenantcontrolplanes.kamaji.clastix.io --all-namespaces \
		-o 'jsonpath={range .items[?(@.status.storage.dataStoreName=="'"$name"'")]}{.metadata.namespace}/{.metadata.name} {end}'
}

if [[ ${REFUSE_IF_USED:-} == true ]]; then
	users=$(users_of_datastore) || die "cannot list the users of DataStore $name; deleting nothing (its etcd holds a tenant's data)"
	[[ -z ${users// /} ]] ||
		die "DataStore $name still holds the data of: ${users% }; deleting nothing. Finish or undo that tenant's move first (docs/operations.md, moving a tenant's datastore), then run pulumi up again"
fi

if ! kube delete "$datastore" --ignore-not-found --wait=false >&2; then
	# A cluster already gone (or unreachable) has nothing left to clean up.
	warn "could not delete DataStore $name; continuing so destroy is not blocked"
	exit 0
fi
if retry "${DELETE_TIMEOUT:-180}" "$RETRY_INTERVAL" datastore_gone; then
	log "DataStore $name deleted"
	exit 0
fi

if ! users=$(users_of_datastore); then
	warn "DataStore $name is still terminating and its users cannot be listed; continuing so destroy is not blocked"
	exit 0
fi
if [[ -n ${users// /} ]]; then
	warn "DataStore $name is still terminating and still used by: $users; leaving its finalizer in place"
	exit 0
fi

log "DataStore $name is unused but still terminating; removing the finalizer $finalizer"
finalizers=$(kube get "$datastore" -o 'jsonpath={range .metadata.finalizers[*]}{@}{"\n"}{end}') || {
	warn "could not read the finalizers of DataStore $name; continuing so destroy is not blocked"
	exit 0
}
remaining=()
while IFS= read -r entry; do
	if [[ -n $entry && $entry != "$finalizer" ]]; then remaining+=("\"$entry\""); fi
done <<<"$finalizers"
kept=$(
	IFS=,
	printf '%s' "${remaining[*]}"
)
kube patch "$datastore" --type=merge -p "{\"metadata\":{\"finalizers\":[$kept]}}" >&2 ||
	warn "could not remove the finalizer of DataStore $name"
if retry 30 "$RETRY_INTERVAL" datastore_gone; then
	log "DataStore $name deleted"
else
	warn "DataStore $name is still there; continuing so destroy is not blocked"
fi
