#!/usr/bin/env bash
# Waits until MetalLB admits address pools. Its controller reports Ready before
# its validating webhook has certificates, and that webhook fails closed, so an
# IPAddressPool created right after the Helm release can be refused. A
# server-side dry run of a probe pool succeeds only once the webhook answers.
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         NAMESPACE        MetalLB's namespace
#         WAIT_TIMEOUT     optional, seconds (default 300)
# bound:  330 s (WAIT_TIMEOUT 300 + one last 20 s dry run)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA NAMESPACE
timeout=${WAIT_TIMEOUT:-300}
kubeconfig_file KUBECONFIG_DATA

# TEST-NET-1: a documentation address, never announced (a dry run stores nothing anyway).
probe_pool="apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: kamaji-hami-lab-probe
  namespace: $NAMESPACE
spec:
  addresses: [192.0.2.1/32]"

pool_admitted() {
	local answer
	answer=$(kube apply --dry-run=server -f - <<<"$probe_pool" 2>&1) && return 0
	progress "waiting for MetalLB's webhook to admit address pools (${answer##*$'\n'})"
	return 1
}
retry "$timeout" "$RETRY_INTERVAL" pool_admitted ||
	die "timed out after ${timeout}s waiting for MetalLB's webhook to admit an IPAddressPool in $NAMESPACE"
log "MetalLB admits address pools"
