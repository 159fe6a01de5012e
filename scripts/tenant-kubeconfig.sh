#!/usr/bin/env bash
# Fetches a tenant's admin kubeconfig from Kamaji and waits until it is
# authorised: Kamaji binds kubeadm:cluster-admins shortly after the tenant is
# Ready, so the first requests with admin.conf can be Forbidden. An API server
# that never answers is reported as unreachable, not as unauthorised.
#
# With API_ADDRESS, it also waits until the kubeconfig names that address: Kamaji
# writes the one MetalLB gave the Service, and re-issues it when that changes.
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         TENANT           TenantControlPlane name
#         NAMESPACE        TenantControlPlane namespace
#         API_ADDRESS      optional, the IPv4 address the tenant's Service asks MetalLB for
#         SECRET_TIMEOUT   optional, seconds to wait for the Secret (and the address) (default 300)
#         AUTH_TIMEOUT     optional, seconds to wait for authorisation (default 180)
# stdout: the tenant admin kubeconfig (secret)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA TENANT NAMESPACE
secret_timeout=${SECRET_TIMEOUT:-300}
auth_timeout=${AUTH_TIMEOUT:-180}
secret=$TENANT-admin-kubeconfig
kubeconfig_file KUBECONFIG_DATA

admin_conf_base64=
read_admin_conf() {
	admin_conf_base64=$(kube -n "$NAMESPACE" get secret "$secret" \
		-o 'jsonpath={.data.admin\.conf}' 2>/dev/null) || true
	[[ -n $admin_conf_base64 ]] || {
		progress "waiting for Secret $NAMESPACE/$secret"
		return 1
	}
}

tenant_kubeconfig=
issued_endpoint=
read_for_address() {
	read_admin_conf || return 1
	tenant_kubeconfig=$(base64 -d <<<"$admin_conf_base64") ||
		die "key admin.conf of Secret $NAMESPACE/$secret is not valid base64"
	[[ -n ${API_ADDRESS:-} ]] || return 0
	local file
	scratch_file file
	printf '%s' "$tenant_kubeconfig" >"$file"
	issued_endpoint=$(KUBECONFIG=$file kubeconfig_endpoint) || return 1
	# The host in full: 172.30.255.2 is not 172.30.255.20.
	[[ ${issued_endpoint%:*} == "$API_ADDRESS" ]] && return 0
	progress "waiting for Kamaji to issue tenant $TENANT's admin kubeconfig for $API_ADDRESS (it names $issued_endpoint)"
	return 1
}
if ! retry "$secret_timeout" "$RETRY_INTERVAL" read_for_address; then
	[[ -n $issued_endpoint ]] ||
		die "timed out after ${secret_timeout}s waiting for Secret $NAMESPACE/$secret with key admin.conf"
	given=$(kube -n "$NAMESPACE" get service "$TENANT" -o 'jsonpath={.status.loadBalancer.ingress[*].ip}' 2>/dev/null) || true
	die "tenant $TENANT's admin kubeconfig still names $issued_endpoint after ${secret_timeout}s, not $API_ADDRESS:" \
		"MetalLB gave its Service ${given:-no address}. Another Service may hold $API_ADDRESS, or it lies outside" \
		"the pool (kubectl -n $NAMESPACE describe service $TENANT shows MetalLB's events)"
fi
kubeconfig_file tenant_kubeconfig

# kubectl answers "no" (exit 1) when the API server refuses the admin, and
# prints an error when it cannot reach it; the two need different fixes.
waiting_for=authorisation
last_answer=
admin_authorised() {
	local answer
	answer=$(kube auth can-i create secrets -n kube-system 2>&1) || true
	last_answer=${answer:-no answer}
	case $answer in
	yes) return 0 ;;
	no*)
		waiting_for=authorisation
		progress "waiting for tenant $TENANT to authorise its admin kubeconfig (can-i: $answer)"
		;;
	*)
		waiting_for=reachability
		progress "tenant $TENANT's API server is not reachable yet: $last_answer"
		;;
	esac
	return 1
}
if ! retry "$auth_timeout" "$RETRY_INTERVAL" admin_authorised; then
	[[ $waiting_for == authorisation ]] ||
		die "tenant $TENANT's API server is unreachable from this host after ${auth_timeout}s ($last_answer)." \
			"Its MetalLB address on the kind network must be reachable from here; rootless or remote Docker" \
			"and Docker Desktop put it out of reach (run make preflight)"
	die "timed out after ${auth_timeout}s waiting for tenant $TENANT to authorise admin.conf (kubectl auth can-i create secrets -n kube-system)"
fi

log "tenant $TENANT admin kubeconfig is authorised"
printf '%s\n' "$tenant_kubeconfig"
