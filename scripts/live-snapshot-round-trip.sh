#!/usr/bin/env bash
# The live workflow's snapshot step (docs/operations.md, "Snapshot and restore a tenant"), run from the repository
# root on a lab that `make up` built: a tenant saved, changed and restored in place (then `make validate`), and
# the same snapshot restored into the tenant after the lab was rebuilt, where the kubeconfig from before the
# rebuild must read the objects again.
#
# env:    TENANT   the tenant to save and restore
#         SCRATCH  a private directory for the kubeconfig from before the rebuild
# stdout: what make and kubectl print
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env TENANT SCRATCH
kubeconfig=kubeconfigs/$TENANT.kubeconfig

tenant_kubectl() { kubectl --kubeconfig "$1" -n default "${@:2}"; }
absent() {
	if tenant_kubectl "$1" get configmap "$2" >/dev/null 2>&1; then
		die "configmap $2 is still there after the restore"
	fi
}

tenant_kubectl "$kubeconfig" create configmap before-snapshot --from-literal=made=before
make snapshot TENANT="$TENANT"
taken=(snapshots/"$TENANT"-*.tar.gz) # named by UTC time, so the newest sorts last
snapshot=${taken[-1]}
tenant_kubectl "$kubeconfig" create configmap after-snapshot --from-literal=made=after

log "restoring $snapshot into the same lab"
make restore TENANT="$TENANT" SNAPSHOT="$snapshot"
tenant_kubectl "$kubeconfig" get configmap before-snapshot
absent "$kubeconfig" after-snapshot
make validate

log "rebuilding the lab, then restoring $snapshot into the re-created tenant"
cp "$kubeconfig" "$SCRATCH/before-rebuild.kubeconfig"
make down
make up
make restore TENANT="$TENANT" SNAPSHOT="$snapshot"
# The snapshot's CA is back, so the kubeconfig issued before the rebuild works again.
tenant_kubectl "$SCRATCH/before-rebuild.kubeconfig" get configmap before-snapshot
absent "$SCRATCH/before-rebuild.kubeconfig" after-snapshot
