#!/usr/bin/env bash
# Refuses a change of the DataStore a running tenant's TenantControlPlane names, before it is sent, unless it is
# a move between the lab's shared DataStore and the tenant's own, two different etcds. Naming another DataStore
# starts Kamaji's migration (clastix/kamaji internal/resources/datastore/datastore_migrate.go@26.8.2-edge), whose
# Job, with the lab's cleanup-prior-migration, first deletes the tenant's prefix on the target, then copies the
# source's (cmd/migrate/cmd.go: it refuses only a target of the same name; internal/datastore/etcd.go: DBExists is
# always true, DeleteDB deletes by prefix). Two DataStores on one etcd would have it delete the tenant's live data
# and copy nothing; a DataStore that is not the lab's (kamajiDataStore changed) would be left out of the clean-up
# and the datastore check.
#
# Naming the DataStore the tenant runs on again (the undo of a failed move) is always allowed. A move and an
# upgrade in one run are refused: Kamaji upgrades nothing while it reports Migrating, and a failed move would then
# hold the TenantControlPlane's wait for the new version for good.
#
# An in-cluster endpoint (<...>.<namespace>.svc[.cluster.local]) counts as its namespace's etcd, so a pod's and a
# Service's names of one etcd match; a DataStore whose endpoints the other names too is the same etcd.
#
# env:    KUBECONFIG_DATA      management cluster kubeconfig
#         TENANT               the TenantControlPlane's name
#         NAMESPACE            its namespace
#         DATASTORE            the DataStore the stack names for it
#         SHARED_DATASTORE     the lab's shared DataStore (kamaji-hami-lab:kamajiDataStore)
#         DEDICATED_DATASTORE  the tenant's own DataStore (made with dataStore: dedicated)
#         KUBERNETES_VERSION   the version the stack asks for
# stdout: one line, e.g. "tenant-b: default -> etcd-tenant-b"
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA TENANT NAMESPACE DATASTORE SHARED_DATASTORE DEDICATED_DATASTORE KUBERNETES_VERSION
kubeconfig_file KUBECONFIG_DATA
key="kamaji-hami-lab:tenants[].dataStore of tenant $TENANT"

# member ENDPOINT: one name per etcd for an endpoint of a DataStore, as validation/checks/datastore.py (etcd_of)
# reads it.
member() {
	local endpoint=${1,,} host port
	endpoint=${endpoint#*://}
	endpoint=${endpoint%%/*}
	host=${endpoint%:*}
	port=${endpoint##*:}
	# No port, an IPv6 literal's last colon included ("[fd00::1]").
	if [[ $endpoint != *:* || $port == *\]* ]]; then
		host=$endpoint port=2379
	fi
	host=${host%.}
	host=${host%.cluster.local}
	if [[ $host =~ \.([a-z0-9-]+)\.svc$ ]]; then
		printf 'namespace %s\n' "${BASH_REMATCH[1]}"
	else
		printf '%s:%s\n' "$host" "$port"
	fi
}

# data_store NAME: "<driver>|<endpoints, space-separated>" of a DataStore; dies when it cannot be read, so call
# it as store=$(data_store NAME), which set -e stops on.
data_store() {
	kube get datastores.kamaji.clastix.io "$1" -o 'jsonpath={.spec.driver}|{.spec.endpoints[*]}' ||
		die "tenant $TENANT: cannot read DataStore $1 from the management cluster, so cannot tell whether the move" \
			"to $DATASTORE is safe; nothing was changed. Run make up again once it answers"
}

state=$(kube -n "$NAMESPACE" get tenantcontrolplanes.kamaji.clastix.io "$TENANT" --ignore-not-found \
	-o 'jsonpath={.spec.dataStore}|{.status.storage.dataStoreName}|{.spec.kubernetes.version}') ||
	die "tenant $TENANT: cannot read its TenantControlPlane from the management cluster"
if [[ -z $state ]]; then
	log "tenant $TENANT has no control plane yet; it is created on DataStore $DATASTORE"
	printf '%s: new on %s\n' "$TENANT" "$DATASTORE"
	exit 0
fi
IFS='|' read -r named used spec_version <<<"$state"
used=${used:-$named}
if [[ $named == "$DATASTORE" || $used == "$DATASTORE" ]]; then
	log "tenant $TENANT stays on, or goes back to, DataStore $DATASTORE: no move to check"
	printf '%s: %s\n' "$TENANT" "$DATASTORE"
	exit 0
fi

if ! [[ ($used == "$SHARED_DATASTORE" && $DATASTORE == "$DEDICATED_DATASTORE") ||
	($used == "$DEDICATED_DATASTORE" && $DATASTORE == "$SHARED_DATASTORE") ]]; then
	die "tenant $TENANT runs on DataStore $used, and the stack now names $DATASTORE for it: the lab moves a tenant" \
		"only between the shared DataStore ($SHARED_DATASTORE, kamaji-hami-lab:kamajiDataStore) and its own" \
		"($DEDICATED_DATASTORE, $key: dedicated), as no other is the lab's to check and clean. Nothing was changed." \
		"Set kamaji-hami-lab:kamajiDataStore back to $used while tenants run on it, or $key back to where it is"
fi
[[ $spec_version == "$KUBERNETES_VERSION" ]] ||
	die "tenant $TENANT would move from DataStore $used to $DATASTORE and be upgraded from $spec_version to" \
		"$KUBERNETES_VERSION in one run; Kamaji upgrades nothing while it moves. Nothing was changed. Keep its" \
		"kubernetesVersion at $spec_version until the move is done, or keep $key until the upgrade is done"

source_store=$(data_store "$used")
target_store=$(data_store "$DATASTORE")
IFS='|' read -r source_driver source_endpoints <<<"$source_store"
IFS='|' read -r target_driver target_endpoints <<<"$target_store"
[[ $source_driver == "$target_driver" ]] ||
	die "tenant $TENANT cannot move from DataStore $used ($source_driver) to $DATASTORE ($target_driver): Kamaji" \
		"moves a tenant only between DataStores of one driver. Nothing was changed; set $key back to where it is"
declare -A source_members=()
for endpoint in $source_endpoints; do
	source_members[$(member "$endpoint")]=$endpoint
done
for endpoint in $target_endpoints; do
	shared=${source_members[$(member "$endpoint")]:-}
	[[ -z $shared ]] ||
		die "DataStores $used and $DATASTORE are one etcd ($DATASTORE names $endpoint, $used names $shared):" \
			"Kamaji's move to it would first delete tenant $TENANT's data there, which is its live data, then" \
			"copy nothing. Nothing was changed. Set $key back to where it is, and point the two DataStores at" \
			"different etcds"
done

log "tenant $TENANT may move from DataStore $used to $DATASTORE"
printf '%s: %s -> %s\n' "$TENANT" "$used" "$DATASTORE"
