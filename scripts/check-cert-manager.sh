#!/usr/bin/env bash
# Checks a cert-manager the management cluster already runs (certManager:
# provided): waits until its webhook admits a server-side dry run of a
# self-signed Issuer. That needs cert-manager's CRDs and a webhook that
# answers; it fails closed and has no side effects, so a dry run reaches it
# (cert-manager/cert-manager deploy/charts/cert-manager/templates/webhook-validating-webhook.yaml@v1.21.1:
# failurePolicy Fail, sideEffects None). Nothing is stored.
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         WAIT_TIMEOUT     optional, seconds (default 180)
# bound:  210 s (WAIT_TIMEOUT 180 + one last 20 s dry run)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA
timeout=${WAIT_TIMEOUT:-180}
kubeconfig_file KUBECONFIG_DATA

probe_issuer="apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: kamaji-hami-lab-probe
  namespace: default
spec:
  selfSigned: {}"

answer=
issuer_admitted() {
	answer=$(kube create --dry-run=server -f - <<<"$probe_issuer" 2>&1) && return 0
	answer=${answer##*$'\n'}
	progress "waiting for cert-manager to admit an Issuer ($answer)"
	return 1
}
retry "$timeout" "$RETRY_INTERVAL" issuer_admitted ||
	die "kamaji-hami-lab:certManager is provided, but after ${timeout}s cert-manager still does not admit an Issuer ($answer); install cert-manager with its CRDs, or set certManager to install"
log "cert-manager admits Issuers"
