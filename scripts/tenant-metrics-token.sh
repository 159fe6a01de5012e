#!/usr/bin/env bash
# Reads the token and CA of a tenant ServiceAccount once the token controller has filled
# its token Secret: the metrics reader's, for Prometheus in the management cluster, and the
# team's, for its kubeconfig (components/team_access.py).
#
# env:    KUBECONFIG_DATA  tenant admin kubeconfig
#         NAMESPACE        namespace of the Secret in the tenant
#         SECRET           name of the kubernetes.io/service-account-token Secret
#         WAIT_TIMEOUT     optional, seconds to wait for the token (default 120)
# stdout: {"token": "<base64>", "ca.crt": "<base64>"} (secret)
# bound:  170 s (WAIT_TIMEOUT 120 + one last poll of two 20 s requests + slack)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA NAMESPACE SECRET
wait_timeout=${WAIT_TIMEOUT:-120}
kubeconfig_file KUBECONFIG_DATA

token=""
ca=""
read_token() {
	token=$(kube -n "$NAMESPACE" get secret "$SECRET" -o 'jsonpath={.data.token}' 2>/dev/null) || true
	ca=$(kube -n "$NAMESPACE" get secret "$SECRET" -o 'jsonpath={.data.ca\.crt}' 2>/dev/null) || true
	[[ -n $token && -n $ca ]] || {
		progress "waiting for the token controller to fill Secret $NAMESPACE/$SECRET"
		return 1
	}
}
retry "$wait_timeout" "$RETRY_INTERVAL" read_token ||
	die "timed out after ${wait_timeout}s waiting for a token and ca.crt in Secret $NAMESPACE/$SECRET"
log "read the token of Secret $NAMESPACE/$SECRET"
# Both are base64 (the Secret's data), so they need no JSON escaping.
printf '{"token": "%s", "ca.crt": "%s"}\n' "$token" "$ca"
