#!/usr/bin/env bash
# Waits until Kamaji reports a tenant's control plane running on the DataStore the stack names. When the stack
# changed the tenant's `dataStore`, that is Kamaji's own live migration (clastix/kamaji
# internal/resources/datastore/datastore_migrate.go@26.8.2-edge), which this script only watches:
# - it starts when spec.dataStore differs from .status.storage.dataStoreName: Kamaji creates the Job
#   migrate-<uid> in its namespace (labels kamaji.clastix.io/component=migrate, tcp.kamaji.clastix.io/name and
#   /namespace), whose pod copies the tenant's prefix (cmd/migrate/cmd.go, internal/datastore/etcd.go Migrate),
#   and reports the status Migrating, on which the tenant's API refuses writes (controllers/soot/controllers/
#   migrate.go: the kamaji-freeze webhook);
# - it ends once the Job is Complete: Kamaji points the API server at the new DataStore, sets
#   .status.storage.dataStoreName to it and reports Ready (Sleeping with no replicas) again;
# - a Job that failed stays, and Kamaji keeps the status Migrating (and writes refused) for as long as the
#   spec names the new DataStore: it never starts another Job on its own. Deleting the failed Job makes it
#   start one; naming the old DataStore again ends the move with the tenant where it was, and leaves the Job,
#   which a later move to the same DataStore would meet and never get past.
# The TenantControlPlane's own wait (pulumi.com/waitFor) holds only its version, so it passes on a failed move
# (Migrating) and this script runs again on the next `pulumi up`; this is the step after which its workers and
# HAMi go on, once Kamaji reports the state the stack asks for (Ready, or Sleeping for a tenant put to sleep).
#
# A failed Job toward this DataStore found when the script starts (an earlier `pulumi up` stopped on it, or an
# undone move left it) is deleted, so running `pulumi up` again retries the move; one that fails while it waits
# stops it, saying how to finish or undo.
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         TENANT           the TenantControlPlane's name
#         NAMESPACE        its namespace
#         DATASTORE        the DataStore its spec names
#         DATA_STORE_KEY   the tenant's dataStore key (shared or dedicated), for the messages
#         WANTED_STATE     the state the stack asks for: Ready, or Sleeping
#         WAIT_TIMEOUT     optional, seconds (default 1200)
# bound:  1260 s (WAIT_TIMEOUT 1200 + one last poll of three 20 s requests)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA TENANT NAMESPACE DATASTORE DATA_STORE_KEY WANTED_STATE
[[ $WANTED_STATE == Ready || $WANTED_STATE == Sleeping ]] || die "WANTED_STATE must be Ready or Sleeping, got '$WANTED_STATE'"
timeout=${WAIT_TIMEOUT:-1200}
kubeconfig_file KUBECONFIG_DATA
case $DATA_STORE_KEY in
shared) other_key=dedicated ;;
dedicated) other_key=shared ;;
*) die "DATA_STORE_KEY must be shared or dedicated, got '$DATA_STORE_KEY'" ;;
esac

undo="undo: set the tenant's dataStore back to $other_key and run make up (Kamaji then ends the move, the tenant where it was)"
finish="finish: run make up again (the lab deletes the failed Job, Kamaji starts another and first clears what the failed one copied)"
pending="Kamaji to report tenant $TENANT $WANTED_STATE on DataStore $DATASTORE"
first_look=true

# "<namespace>/<name>|<Failed status>|<reason>|<message>|<args>|<failed pods>" of the tenant's migration Job,
# or nothing (batch/v1 JobStatus: conditions, failed).
migration_job() {
	kube get jobs.batch --all-namespaces \
		-l "kamaji.clastix.io/component=migrate,tcp.kamaji.clastix.io/name=$TENANT,tcp.kamaji.clastix.io/namespace=$NAMESPACE" \
		-o 'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}|{.status.conditions[?(@.type=="Failed")].status}|{.status.conditions[?(@.type=="Failed")].reason}|{.status.conditions[?(@.type=="Failed")].message}|{.spec.template.spec.containers[0].args}|{.status.failed}{"\n"}{end}'
}

moved() {
	local state source status job name failed reason message args retries
	state=$(kube -n "$NAMESPACE" get tenantcontrolplanes.kamaji.clastix.io "$TENANT" \
		-o 'jsonpath={.status.storage.dataStoreName}|{.status.kubernetesResources.version.status}') || {
		pending="the API server to answer"
		return 1
	}
	IFS='|' read -r source status <<<"$state"
	# Kamaji reports Ready, or Sleeping with no replicas, once no move is under way (clastix/kamaji
	# internal/resources/k8s_deployment_resource.go@26.8.2-edge, computeStatus).
	if [[ $source == "$DATASTORE" && $status == "$WANTED_STATE" ]]; then
		return 0
	fi
	job=$(migration_job) || {
		pending="the API server to list Kamaji's migration Jobs"
		return 1
	}
	job=${job%%$'\n'*}
	IFS='|' read -r name failed reason message args retries <<<"$job"
	if [[ $failed == True && $args == *"\"--target-datastore=$DATASTORE\""* ]]; then
		if [[ $first_look == true ]]; then
			warn "Kamaji's migration Job $name of tenant $TENANT failed before ($reason); deleting it so Kamaji starts the move to $DATASTORE again"
			kube -n "${name%%/*}" delete job "${name#*/}" --ignore-not-found >&2 ||
				die "could not delete the failed migration Job $name; delete it (kubectl -n ${name%%/*} delete job ${name#*/}) and run make up again, or $undo"
			first_look=false
			pending="Kamaji to start the move of tenant $TENANT to $DATASTORE again"
			return 1
		fi
		die "Kamaji could not move tenant $TENANT from DataStore ${source:-?} to $DATASTORE: its Job $name failed ($reason: $message; its log: kubectl -n ${name%%/*} logs job/${name#*/}). The tenant runs on ${source:-?}, whole, but its API refuses writes until the move ends. To $finish; to $undo"
	fi
	first_look=false
	if [[ $source == "$DATASTORE" ]]; then
		pending="Kamaji to report tenant $TENANT $WANTED_STATE on DataStore $DATASTORE (status ${status:-unknown})"
	elif [[ -n $name ]]; then
		pending="Kamaji to move tenant $TENANT from ${source:-?} to $DATASTORE (status ${status:-unknown}; its Job $name is running${retries:+, after $retries failed attempts})"
	else
		pending="Kamaji to move tenant $TENANT from ${source:-?} to $DATASTORE (status ${status:-unknown})"
	fi
	progress "waiting for $pending"
	return 1
}

retry "$timeout" "$RETRY_INTERVAL" moved ||
	die "timed out after ${timeout}s waiting for $pending. While Kamaji reports Migrating the tenant's API refuses writes; finish: run make up again to keep waiting; $undo"
log "tenant $TENANT runs on DataStore $DATASTORE"
