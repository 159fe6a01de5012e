#!/usr/bin/env bash
# Runs when a tenant leaves the stack, before its TenantControlPlane is deleted. Kamaji's deletion removes the
# tenant's data, etcd user and role only from the DataStore its spec names (clastix/kamaji
# controllers/tenantcontrolplane_controller.go@26.8.2-edge: dataStore), and a move leaves them in the DataStore
# it left (snapshot/leftovers.py says why): there they would stay for good, and a tenant of the same name added
# later would fail on the stale role when Kamaji creates it again.
#
# So this refuses while the tenant is between two DataStores (Kamaji reports Migrating, its spec and status name
# two, or its migrate Job runs), and otherwise removes what it left in the lab's other DataStores
# (python -m snapshot.leftovers TENANT). A tenant whose TenantControlPlane is already gone has nothing to remove.
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         TENANT           the TenantControlPlane's name
#         NAMESPACE        its namespace
#         STACK            the stack whose outputs name the lab's DataStores and tenants
#         LAB_PYTHON       optional; the Python with the lab's requirements (default .venv/bin/python)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA TENANT NAMESPACE STACK
kubeconfig_file KUBECONFIG_DATA
finish="finish or undo the move first (set its dataStore to the one it is on, or let the move end, with make up; docs/operations.md, moving a tenant's datastore), then remove it again"

state=$(kube -n "$NAMESPACE" get tenantcontrolplanes.kamaji.clastix.io "$TENANT" --ignore-not-found \
	-o 'jsonpath={.spec.dataStore}|{.status.storage.dataStoreName}|{.status.kubernetesResources.version.status}') ||
	die "tenant $TENANT: cannot read its TenantControlPlane from the management cluster, so cannot tell which" \
		"DataStores hold its data; nothing was removed. Run the removal again once it answers"
if [[ -z $state ]]; then
	log "tenant $TENANT has no TenantControlPlane: nothing of it to remove from the DataStores"
	exit 0
fi
IFS='|' read -r named used status <<<"$state"
# Kamaji's migrate Job labels (clastix/kamaji internal/resources/datastore/datastore_migrate.go@26.8.2-edge).
running=$(kube get jobs.batch --all-namespaces \
	-l "kamaji.clastix.io/component=migrate,tcp.kamaji.clastix.io/name=$TENANT,tcp.kamaji.clastix.io/namespace=$NAMESPACE" \
	-o 'jsonpath={range .items[?(@.status.active)]}{.metadata.namespace}/{.metadata.name} {end}') ||
	die "tenant $TENANT: cannot list Kamaji's migrate Jobs, so cannot tell whether it moves; nothing was removed"
if [[ $status == Migrating || (-n $used && $named != "$used") || -n $running ]]; then
	die "tenant $TENANT is between two DataStores (spec $named, status ${used:-none}, ${status:-no state}${running:+, Job $running}):" \
		"removing it now would leave its data in one of them for good. Nothing was removed; $finish"
fi

"${LAB_PYTHON:-.venv/bin/python}" -m snapshot.leftovers --stack "$STACK" "$TENANT" >&2 ||
	die "tenant $TENANT: could not remove what it left in the lab's other DataStores (above); nothing of the tenant" \
		"was deleted yet. Run make datastore-clean TENANT=$TENANT, then remove it again"
log "tenant $TENANT: nothing of it is left in a DataStore it no longer uses"
