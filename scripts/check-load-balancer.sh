#!/usr/bin/env bash
# Checks a LoadBalancer the management cluster already provides (loadBalancer:
# provided): creates a probe Service of type LoadBalancer without a selector,
# waits until the cluster gives it an address (.status.loadBalancer.ingress, an
# ip or a hostname), and deletes it again whatever happened. Each tenant API
# server is such a Service; without an address its control plane never gets
# Ready, so this fails first, naming the key.
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         NAMESPACE        where the probe Service goes (the program's tenants namespace)
#         WAIT_TIMEOUT     optional, seconds (default 180)
# bound:  260 s (WAIT_TIMEOUT 180 + create, last poll, delete and a 20 s margin; 20 s requests)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA NAMESPACE
timeout=${WAIT_TIMEOUT:-180}
kubeconfig_file KUBECONFIG_DATA

probe=kamaji-hami-lab-lb-probe
# No selector: the address is handed out for the Service alone, and nothing receives traffic.
probe_service="apiVersion: v1
kind: Service
metadata:
  name: $probe
  namespace: $NAMESPACE
  labels:
    app.kubernetes.io/managed-by: kamaji-hami-lab
spec:
  type: LoadBalancer
  ports:
  - name: probe
    port: 6443
    protocol: TCP"

remove_probe() {
	kube -n "$NAMESPACE" delete service "$probe" --ignore-not-found --wait=false >/dev/null
}
# Registered before the create: a create that timed out may still have stored it.
at_exit remove_probe
# apply: a probe left behind by a killed run is taken over, not refused.
created=$(kube apply -f - <<<"$probe_service" 2>&1) ||
	die "cannot create the probe Service $NAMESPACE/$probe to check kamaji-hami-lab:loadBalancer (${created##*$'\n'})"

address=
answer=
has_address() {
	answer=$(kube -n "$NAMESPACE" get service "$probe" \
		-o 'jsonpath={range .status.loadBalancer.ingress[*]}{.ip}{.hostname} {end}' 2>&1) || {
		answer=${answer##*$'\n'}
		return 1
	}
	read -r address _ <<<"$answer" || true
	[[ -n ${address:-} ]] && return 0
	answer="no address yet"
	progress "waiting for the cluster's LoadBalancer to give Service $NAMESPACE/$probe an address"
	return 1
}
retry "$timeout" "$RETRY_INTERVAL" has_address ||
	die "kamaji-hami-lab:loadBalancer is provided, but after ${timeout}s the probe Service $NAMESPACE/$probe of type LoadBalancer still has no address ($answer); give the cluster a LoadBalancer implementation (e.g. MetalLB with an address pool), or set loadBalancer to metallb with metallbAddressRange"
log "the cluster's LoadBalancer hands out addresses (the probe got $address)"
