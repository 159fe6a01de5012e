#!/usr/bin/env bash
# Waits until Kamaji can accept TenantControlPlanes: its controller Deployment
# is Available and the default DataStore reports ready (the DataStore CRD has
# no usable conditions, only .status.ready).
#
# A `pulumi destroy` stopped after delete-datastore.sh but before the Kamaji
# release was uninstalled leaves the release without its DataStore, which Helm
# never re-creates on its own. This script restores it from the release's
# recorded manifest (after any deletion still in progress has finished), or
# fails at once with the command that restores it.
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
scripts_dir=$(dirname "${BASH_SOURCE[0]}")
namespace=kamaji-system
release=kamaji

# The DataStore is a plain template of Kamaji's kamaji-etcd subchart
# (clastix/kamaji-etcd charts/kamaji-etcd/templates/etcd_datastore.yaml@92f31f0), so the
# release's record holds it. Helm stores a release as Secret data `release`:
# base64 of gzipped JSON (helm/helm pkg/storage/driver/util.go encodeRelease, Helm v3).
restore_datastore() {
	local record
	record=$(kube -n "$namespace" get secret -l "owner=helm,name=$release,status=deployed" \
		-o 'jsonpath={.items[0].data.release}') && [[ -n $record ]] &&
		base64 -d <<<"$record" | base64 -d | gunzip |
		python3 "$scripts_dir/helm_release_object.py" DataStore default |
			kube create -f - >&2
}

pending=
kamaji_ready() {
	local available datastore
	available=$(kube -n "$namespace" get deployment kamaji \
		-o 'jsonpath={.status.conditions[?(@.type=="Available")].status}' 2>/dev/null)
	if [[ $available != True ]]; then
		pending="Deployment $namespace/kamaji to become Available"
		progress "waiting for $pending"
		return 1
	fi
	# "<deletionTimestamp>|<ready>", or nothing at all when there is no DataStore.
	if ! datastore=$(kube get datastores.kamaji.clastix.io default --ignore-not-found \
		-o 'jsonpath={.metadata.deletionTimestamp}|{.status.ready}'); then
		pending="the API server to answer"
		return 1
	fi
	if [[ -z $datastore ]]; then
		warn "DataStore default is missing (an interrupted destroy?); restoring it from the $release release"
		restore_datastore ||
			die "could not restore DataStore default; restore it from the release with: helm -n $namespace get manifest $release | kubectl apply -f - (KUBECONFIG=kubeconfigs/management.kubeconfig, written by make kubeconfigs), then run pulumi up again"
		pending="restored DataStore default to report .status.ready=true"
		return 1
	fi
	if [[ $datastore != "|"* ]]; then
		pending="DataStore default to finish its deletion, so it can be restored"
		progress "waiting for $pending"
		return 1
	fi
	if [[ $datastore != "|true" ]]; then
		pending="DataStore default to report .status.ready=true"
		progress "waiting for $pending"
		return 1
	fi
}

retry "$timeout" "$RETRY_INTERVAL" kamaji_ready ||
	die "timed out after ${timeout}s waiting for $pending"
log "Kamaji is ready"
