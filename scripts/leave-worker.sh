#!/usr/bin/env bash
# Removes a worker's Node object from its tenant before the container is
# deleted. Best effort: when the tenant API is unreachable (e.g. its control
# plane is already gone) it warns and succeeds, so `pulumi destroy` never hangs.
#
# env:    KUBECONFIG_DATA  tenant admin kubeconfig
#         NODE             Kubernetes node name
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA NODE
kubeconfig_file KUBECONFIG_DATA

if KUBECTL_REQUEST_TIMEOUT=10s kube delete node "$NODE" --ignore-not-found --wait=false >&2; then
	log "node $NODE removed from its tenant"
else
	warn "could not delete node $NODE (tenant API unreachable or refused); continuing so destroy is not blocked"
fi
