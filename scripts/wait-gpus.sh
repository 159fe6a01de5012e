#!/usr/bin/env bash
# Waits until HAMi is usable in a tenant: scheduler Available and elected
# (its Service selects only the pod labelled hami.io/scheduler-role=leader),
# device plugin ready everywhere, webhook CA injected, and every worker
# advertising its GPUs: the expected nvidia.com/gpumem of mock GPUs, or for real
# GPUs (whatever the machine has) a positive nvidia.com/gpu and HAMi's register
# annotation, which the NVIDIA plugin writes once it has found them.
#
# env:    KUBECONFIG_DATA  tenant admin kubeconfig
#         NODES            space-separated worker node names (empty: no GPU nodes to wait for)
#         EXPECTED_GPUMEM  expected allocatable nvidia.com/gpumem of each node (MiB); empty: real GPUs
#         DEVICE_PLUGIN    optional, the device plugin DaemonSet (default hami-mock-device-plugin)
#         WAIT_TIMEOUT     optional, seconds (default 300)
#         SLEEPING         optional; "true": the tenant sleeps, its API is down, nothing to wait for
# bound:  440 s (WAIT_TIMEOUT 300 + one last poll: 4 requests and one per node, 20 s each)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA
if [[ ${SLEEPING:-false} == true ]]; then
	log "the tenant sleeps: its GPUs are checked again when it wakes"
	exit 0
fi
expected_gpumem=${EXPECTED_GPUMEM:-}
[[ $expected_gpumem =~ ^[0-9]*$ ]] || die "EXPECTED_GPUMEM must be an integer or empty, got '$expected_gpumem'"
device_plugin=${DEVICE_PLUGIN:-hami-mock-device-plugin}
timeout=${WAIT_TIMEOUT:-300}
# No GPU nodes (a CPU-only tenant) still waits for HAMi itself.
read -ra node_names <<<"${NODES:-}"
kubeconfig_file KUBECONFIG_DATA

namespace=kube-system
pending=
waiting_for() {
	pending=$1
	progress "waiting for $pending"
	return 1
}

hami_ready() {
	local available ready_endpoints rollout desired ready updated ca_bundle node gpumem gpus
	available=$(kube -n "$namespace" get deployment hami-scheduler \
		-o 'jsonpath={.status.conditions[?(@.type=="Available")].status}' 2>/dev/null)
	[[ $available == True ]] || waiting_for "Deployment $namespace/hami-scheduler to become Available" || return

	ready_endpoints=$(kube -n "$namespace" get endpointslices -l kubernetes.io/service-name=hami-scheduler \
		-o 'jsonpath={.items[*].endpoints[*].conditions.ready}' 2>/dev/null)
	[[ $ready_endpoints == *true* ]] ||
		waiting_for "Service $namespace/hami-scheduler to get a ready endpoint (leader-labelled scheduler pod)" || return

	# desired ready updated; "0 0 0" means no schedulable node yet.
	rollout=$(kube -n "$namespace" get daemonset "$device_plugin" -o \
		'jsonpath={.status.desiredNumberScheduled} {.status.numberReady} {.status.updatedNumberScheduled}' 2>/dev/null)
	read -r desired ready updated <<<"$rollout"
	[[ ${desired:-0} -gt 0 && $ready == "$desired" && $updated == "$desired" ]] ||
		waiting_for "DaemonSet $namespace/$device_plugin to be ready on all nodes (desired/ready/updated: ${rollout:-none})" || return

	ca_bundle=$(kube get mutatingwebhookconfiguration hami-webhook \
		-o 'jsonpath={.webhooks[0].clientConfig.caBundle}' 2>/dev/null)
	[[ -n $ca_bundle ]] || waiting_for "MutatingWebhookConfiguration hami-webhook to get a caBundle" || return

	for node in "${node_names[@]}"; do
		if [[ -n $expected_gpumem ]]; then
			gpumem=$(kube get node "$node" -o 'jsonpath={.status.allocatable.nvidia\.com/gpumem}' 2>/dev/null)
			[[ $gpumem == "$expected_gpumem" ]] ||
				waiting_for "node $node to advertise nvidia.com/gpumem=$expected_gpumem (now: ${gpumem:-none})" || return
		else
			gpus=$(kube get node "$node" -o \
				'jsonpath={.status.allocatable.nvidia\.com/gpu} {.metadata.annotations.hami\.io/node-nvidia-register}' 2>/dev/null)
			[[ $gpus =~ ^[1-9][0-9]*\ .*[^[:space:]] ]] ||
				waiting_for "node $node to advertise its GPUs (nvidia.com/gpu and hami.io/node-nvidia-register; now: ${gpus:-none})" || return
		fi
	done
}

retry "$timeout" "$RETRY_INTERVAL" hami_ready ||
	die "timed out after ${timeout}s waiting for $pending"
log "HAMi is ready on ${node_names[*]}"
