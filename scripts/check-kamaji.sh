#!/usr/bin/env bash
# Checks a Kamaji the management cluster already runs (kamaji: provided): its
# CRDs, both TenantControlPlane admission webhooks (they fail closed) with a
# CA and a ready endpoint behind them, and the DataStore the tenants use,
# which must report .status.ready. Waits for each, then fails naming the
# first that is still missing. Changes nothing on the cluster.
#
# Names from clastix/kamaji charts/kamaji/templates/{validating,mutating}webhookconfiguration.yaml
# and charts/kamaji/controller-gen/*-webhook.yaml@26.8.2-edge; DataStore
# readiness from api/v1alpha1/datastore_types.go@26.8.2-edge (status.ready).
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         DATASTORE        name of the DataStore the tenants use
#         WAIT_TIMEOUT     optional, seconds (default 180)
# bound:  300 s (WAIT_TIMEOUT 180 + one last poll of six 20 s requests)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA DATASTORE
timeout=${WAIT_TIMEOUT:-180}
kubeconfig_file KUBECONFIG_DATA

missing=
# webhook_served KIND CONFIGURATION WEBHOOK: the webhook has a CA and a ready endpoint.
webhook_served() {
	local kind=$1 configuration=$2 webhook=$3 found namespace service ca ready
	found=$(kube get "$kind" "$configuration" --ignore-not-found -o "jsonpath={range .webhooks[?(@.name==\"$webhook\")]}{.clientConfig.service.namespace} {.clientConfig.service.name} {.clientConfig.caBundle}{end}") ||
		return 1
	read -r namespace service ca <<<"$found"
	if [[ -z ${ca:-} ]]; then
		missing="webhook $webhook of $kind $configuration, with its CA injected"
		return 1
	fi
	# One line per endpoint: "endpoint:" and its conditions.ready. An unset ready means unknown, which
	# consumers read as ready (kubernetes staging/src/k8s.io/api/discovery/v1/types.go, EndpointConditions).
	ready=$(kube -n "$namespace" get endpointslices -l "kubernetes.io/service-name=$service" \
		-o 'jsonpath={range .items[*].endpoints[*]}endpoint:{.conditions.ready}{"\n"}{end}') || return 1
	if ! grep -qxE 'endpoint:(true)?' <<<"$ready"; then
		missing="a ready endpoint of service $namespace/$service, which serves webhook $webhook"
		return 1
	fi
}

kamaji_served() {
	local crds state
	crds=$(kube get crd tenantcontrolplanes.kamaji.clastix.io datastores.kamaji.clastix.io --ignore-not-found -o name) || return 1
	if [[ $(wc -l <<<"$crds") -lt 2 ]]; then
		missing="Kamaji's CRDs tenantcontrolplanes.kamaji.clastix.io and datastores.kamaji.clastix.io"
		return 1
	fi
	webhook_served mutatingwebhookconfiguration kamaji-mutating-webhook-configuration mtenantcontrolplane.kb.io || return 1
	webhook_served validatingwebhookconfiguration kamaji-validating-webhook-configuration vtenantcontrolplane.kb.io || return 1
	# "<name>|<ready>", or nothing at all when there is no such DataStore.
	state=$(kube get datastores.kamaji.clastix.io "$DATASTORE" --ignore-not-found -o 'jsonpath={.metadata.name}|{.status.ready}') ||
		return 1
	if [[ $state != "$DATASTORE|true" ]]; then
		missing="DataStore $DATASTORE reporting .status.ready=true (kamaji-hami-lab:kamajiDataStore)"
		return 1
	fi
}

check() {
	kamaji_served && return 0
	progress "waiting for ${missing:-the API server to answer}"
	return 1
}
retry "$timeout" "$RETRY_INTERVAL" check ||
	die "kamaji-hami-lab:kamaji is provided, but after ${timeout}s there is still no ${missing:-answer from the API server}; install Kamaji there, or set kamaji to install"
log "Kamaji serves its webhooks and DataStore $DATASTORE is ready"
