#!/usr/bin/env bash
# Fetches a tenant's admin kubeconfig from Kamaji and waits until it is
# authorised: Kamaji binds kubeadm:cluster-admins shortly after the tenant is
# Ready, so the first requests with admin.conf can be Forbidden. An API server
# that never answers is reported as unreachable, not as unauthorised.
#
# With API_ADDRESS, it first waits until MetalLB gave the tenant's Service that
# address and Kamaji issued admin.conf and super-admin.conf for it (the
# TenantControlPlane declares it): Kamaji writes kube-public/cluster-info, which
# workers join through, from super-admin.conf, and issues it after admin.conf.
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         TENANT           TenantControlPlane name
#         NAMESPACE        TenantControlPlane namespace
#         API_ADDRESS      optional, the IPv4 address the tenant's Service asks MetalLB for
#         SECRET_TIMEOUT   optional, seconds to wait for the Secret (and the address) (default 300)
#         ASK_AGAIN_EVERY  optional, seconds between nudges of MetalLB while the address does not come (default 30)
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

# MetalLB does not try a Service again when the address it asks for was held by another Service that has since
# moved to its own (go.universe.tf/metallb controller/main.go@v0.16.1, SetBalancer: SyncStateErrorNoRetry; every
# Service is reprocessed only when one is deleted, loses its address or allocation key, or the pools change);
# any change to the Service makes it try (its controller watches Services without a predicate).
ask_again_every=${ASK_AGAIN_EVERY:-30}
[[ $ask_again_every =~ ^[0-9]+$ ]] || die "ASK_AGAIN_EVERY must be a number of seconds, not '$ask_again_every'"
asked_at=$SECONDS
ask_metallb_again() {
	local failure
	((SECONDS - asked_at >= ask_again_every)) || return 0
	asked_at=$SECONDS
	failure=$(kube -n "$NAMESPACE" annotate service "$TENANT" --overwrite \
		"kamaji-hami-lab.io/address-asked-at=$(date -u +%Y-%m-%dT%H:%M:%SZ)" 2>&1 >/dev/null) ||
		warn "could not annotate Service $NAMESPACE/$TENANT to have MetalLB try $API_ADDRESS again: $failure"
}

tenant_kubeconfig=
waiting_on=secret
given=
issued=
admin_conf_file=
[[ -z ${API_ADDRESS:-} ]] || scratch_file admin_conf_file
ready_at_address() {
	waiting_on=secret
	read_admin_conf || return 1
	tenant_kubeconfig=$(base64 -d <<<"$admin_conf_base64") ||
		die "key admin.conf of Secret $NAMESPACE/$secret is not valid base64"
	[[ -n ${API_ADDRESS:-} ]] || return 0
	waiting_on=metallb
	given=$(kube -n "$NAMESPACE" get service "$TENANT" \
		-o 'jsonpath={.status.loadBalancer.ingress[*].ip}' 2>/dev/null) || given=
	# Each address in full: 172.30.255.2 is not 172.30.255.20.
	[[ " $given " == *" $API_ADDRESS "* ]] || {
		progress "waiting for MetalLB to give tenant $TENANT's Service $API_ADDRESS (it has ${given:-no address})"
		ask_metallb_again
		return 1
	}
	waiting_on=kamaji
	printf '%s' "$tenant_kubeconfig" >"$admin_conf_file"
	issued=$(KUBECONFIG=$admin_conf_file kubeconfig_endpoint 2>/dev/null) || issued=
	[[ ${issued%:*} == "$API_ADDRESS" ]] || {
		progress "waiting for Kamaji to issue tenant $TENANT's admin kubeconfig for $API_ADDRESS (it names ${issued:-no server})"
		return 1
	}
	# Kamaji's bootstrap-token step writes cluster-info with the server of super-admin.conf (clastix/kamaji
	# internal/utilities/tenant_client.go GetTenantKubeconfig, internal/kubeadm/bootstraptoken.go
	# @26.8.2-edge), a separate step after admin.conf (controllers/resources.go, getKubeconfigResources).
	# Only its server is read, in memory: it is a system:masters credential this script has no use for.
	waiting_on=super-admin
	issued=$(server_named_in "$(kube -n "$NAMESPACE" get secret "$secret" \
		-o 'jsonpath={.data.super-admin\.conf}' 2>/dev/null | base64 -d 2>/dev/null)")
	[[ ${issued%:*} == "$API_ADDRESS" ]] && return 0
	progress "waiting for Kamaji to issue tenant $TENANT's super-admin kubeconfig for $API_ADDRESS, from which it writes the cluster-info workers join through (it names ${issued:-no server})"
	return 1
}
if ! retry "$secret_timeout" "$RETRY_INTERVAL" ready_at_address; then
	case $waiting_on in
	secret) die "timed out after ${secret_timeout}s waiting for Secret $NAMESPACE/$secret with key admin.conf" ;;
	metallb)
		die "MetalLB did not give tenant $TENANT's Service $API_ADDRESS within ${secret_timeout}s (it has" \
			"${given:-no address}): another Service holds it, or it is not in the pool (kubectl -n $NAMESPACE" \
			"describe service $TENANT shows MetalLB's events). In a lab brought up before tenant addresses were" \
			"pinned, another tenant or Grafana may still hold it: docs/architecture.md, \"Addresses on the lab's network\""
		;;
	kamaji) die "Kamaji did not issue tenant $TENANT's admin kubeconfig for $API_ADDRESS within ${secret_timeout}s (it names ${issued:-no server})" ;;
	*)
		die "Kamaji did not issue tenant $TENANT's super-admin kubeconfig (key super-admin.conf of Secret" \
			"$NAMESPACE/$secret) for $API_ADDRESS within ${secret_timeout}s (it names ${issued:-no server});" \
			"Kamaji writes kube-public/cluster-info from it, so workers would be sent that address"
		;;
	esac
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
	*x509* | *certificate*)
		waiting_for=certificate
		progress "tenant $TENANT's API server presents a certificate admin.conf does not trust yet: $last_answer"
		;;
	*)
		waiting_for=reachability
		progress "tenant $TENANT's API server is not reachable yet: $last_answer"
		;;
	esac
	return 1
}
if ! retry "$auth_timeout" "$RETRY_INTERVAL" admin_authorised; then
	[[ $waiting_for != certificate ]] ||
		die "tenant $TENANT's API server still presents a certificate admin.conf does not trust after" \
			"${auth_timeout}s ($last_answer); Kamaji re-issues it for a new address or CA and restarts the API" \
			"server (kubectl -n $NAMESPACE get tenantcontrolplane $TENANT shows its status)"
	[[ $waiting_for == authorisation ]] ||
		die "tenant $TENANT's API server is unreachable from this host after ${auth_timeout}s ($last_answer)." \
			"Its MetalLB address on the lab's docker network must be reachable from here; rootless or remote Docker" \
			"and Docker Desktop put it out of reach (run make preflight)"
	die "timed out after ${auth_timeout}s waiting for tenant $TENANT to authorise admin.conf (kubectl auth can-i create secrets -n kube-system)"
fi

log "tenant $TENANT admin kubeconfig is authorised"
printf '%s\n' "$tenant_kubeconfig"
