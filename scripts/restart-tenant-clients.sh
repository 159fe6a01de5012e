#!/usr/bin/env bash
# Restarts a tenant's in-cluster clients that the lab put there, once its kubelets restarted after a move to
# another DataStore: every Deployment and DaemonSet in the lab's namespaces of the tenant (kube-proxy, the pod
# network, CoreDNS, Konnectivity's agent, HAMi). Like the kubelets, they outlived the move with watches and
# caches keyed by the old DataStore's resourceVersions (docs/architecture.md, "Moving a datastore, step by
# step"); new pods list afresh. It waits until each is rolled out, as kubectl's `rollout status` decides it
# (kubernetes/kubectl pkg/polymorphichelpers/rollout_status.go: DeploymentStatusViewer, DaemonSetStatusViewer).
# The team's own workloads, outside these namespaces, are the team's to restart.
#
# env:    KUBECONFIG_DATA  the tenant's admin kubeconfig
#         TENANT           the tenant's name, for the messages
#         DATASTORE        the DataStore it now runs on, for the messages
#         NAMESPACES       the lab's namespaces in the tenant, space-separated (a missing one holds nothing)
#         ROLLOUT_TIMEOUT  optional, seconds for every rollout to finish (default 300)
# bound:  880 s (for the lab's 2 namespaces: a 20 s list each; the restart of at most MAX_WORKLOADS 12, a 20 s
#         read and patch each; ROLLOUT_TIMEOUT 300 and a last poll, a 20 s read each)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA TENANT DATASTORE NAMESPACES
kubeconfig_file KUBECONFIG_DATA
read -r -a lab_namespaces <<<"$NAMESPACES"
# More than the lab puts there (about 8): the bound above counts on it.
MAX_WORKLOADS=12
WORKLOADS=daemonsets.apps,deployments.apps

declare -A restart=()
total=0
for namespace in "${lab_namespaces[@]}"; do
	names=$(kube -n "$namespace" get "$WORKLOADS" -o 'jsonpath={range .items[*]}{.kind}/{.metadata.name}|{.spec.updateStrategy.type}{"\n"}{end}') ||
		die "tenant $TENANT: cannot list the Deployments and DaemonSets of namespace $namespace after the move to DataStore $DATASTORE; run make up again"
	while IFS='|' read -r name strategy; do
		[[ -n $name ]] || continue
		# A DaemonSet that updates OnDelete never rolls on a restart (apps/v1 DaemonSetUpdateStrategy).
		[[ $strategy != OnDelete ]] ||
			die "tenant $TENANT: $namespace/$name updates only OnDelete, so a restart would not roll it; delete its pods by hand after the move to DataStore $DATASTORE"
		restart[$namespace]+="${name,,} "
		total=$((total + 1))
	done <<<"$names"
done
((total <= MAX_WORKLOADS)) ||
	die "tenant $TENANT: $total Deployments and DaemonSets in the lab's namespaces ($NAMESPACES), more than the $MAX_WORKLOADS the lab puts there; none restarted"

for namespace in "${!restart[@]}"; do
	read -r -a names <<<"${restart[$namespace]}"
	log "tenant $TENANT: restarting ${names[*]} in $namespace after the move to DataStore $DATASTORE"
	kube -n "$namespace" rollout restart "${names[@]}" >&2 ||
		die "tenant $TENANT: cannot restart ${names[*]} in $namespace after the move to DataStore $DATASTORE; run make up again"
done

pending=
# "<kind>/<name>|generation|observed|spec replicas|replicas|updated|available|desired|updated scheduled|available"
# of each workload (apps/v1 DeploymentStatus, DaemonSetStatus).
STATUS='jsonpath={range .items[*]}{.kind}/{.metadata.name}|{.metadata.generation}|{.status.observedGeneration}|{.spec.replicas}|{.status.replicas}|{.status.updatedReplicas}|{.status.availableReplicas}|{.status.desiredNumberScheduled}|{.status.updatedNumberScheduled}|{.status.numberAvailable}{"\n"}{end}'
rolled_out() {
	local namespace state name generation observed wanted replicas updated available desired scheduled ready
	pending=
	for namespace in "${!restart[@]}"; do
		state=$(kube -n "$namespace" get "$WORKLOADS" -o "$STATUS") || {
			pending="the API server to answer for namespace $namespace"
			return 1
		}
		while IFS='|' read -r name generation observed wanted replicas updated available desired scheduled ready; do
			[[ -n $name && " ${restart[$namespace]} " == *" ${name,,} "* ]] || continue
			if ((${observed:-0} < ${generation:-1})); then
				pending+=" $namespace/$name (restart not yet seen)"
			elif [[ $name == Deployment/* ]] &&
				((${updated:-0} < ${wanted:-1} || ${replicas:-0} > ${updated:-0} || ${available:-0} < ${updated:-0})); then
				pending+=" $namespace/$name (${available:-0} of ${wanted:-1} new replicas available)"
			elif [[ $name == DaemonSet/* ]] && ((${scheduled:-0} < ${desired:-0} || ${ready:-0} < ${desired:-0})); then
				pending+=" $namespace/$name (${scheduled:-0} of ${desired:-0} new pods scheduled, ${ready:-0} available)"
			fi
		done <<<"$state"
	done
	[[ -z $pending ]] && return 0
	progress "waiting for:$pending"
	return 1
}

timeout=${ROLLOUT_TIMEOUT:-300}
retry "$timeout" "$RETRY_INTERVAL" rolled_out ||
	die "tenant $TENANT: not rolled out ${timeout}s after the restart that follows the move to DataStore $DATASTORE:$pending. Look at their pods (kubectl -n <namespace> get pods); run make up again to restart them again"
log "tenant $TENANT: its kubelets and the lab's clients run against DataStore $DATASTORE"
