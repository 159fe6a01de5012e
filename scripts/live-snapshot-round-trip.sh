#!/usr/bin/env bash
# The live workflow's snapshot step (docs/operations.md, "Snapshot and restore a tenant"), run from the repository
# root on a lab that `make up` built: a tenant saved, changed and restored in place (then `make validate`), and
# the same snapshot restored into the tenant after the lab was rebuilt, where the kubeconfig from before the
# rebuild must read the objects again.
#
# args:   TENANT (default tenant-a)
# env:    SCRATCH  a private directory for the old kubeconfig (default: a fresh mktemp -d)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

tenant=${1:-tenant-a}
kubeconfig=kubeconfigs/$tenant.kubeconfig
scratch=${SCRATCH:-$(mktemp -d)}

tenant_kubectl() { kubectl --kubeconfig "$1" -n default "${@:2}"; }
absent() {
	if tenant_kubectl "$1" get configmap "$2" >/dev/null 2>&1; then
		die "configmap $2 is still there after the restore"
	fi
}

tenant_kubectl "$kubeconfig" create configmap before-snapshot --from-literal=made=before
make snapshot TENANT="$tenant"
taken=(snapshots/"$tenant"-*.tar.gz) # named by UTC time, so the newest sorts last
snapshot=${taken[-1]}
tenant_kubectl "$kubeconfig" create configmap after-snapshot --from-literal=made=after

log "restoring $snapshot into the same lab"
make restore TENANT="$tenant" SNAPSHOT="$snapshot"
tenant_kubectl "$kubeconfig" get configmap before-snapshot
absent "$kubeconfig" after-snapshot
make validate

log "rebuilding the lab, then restoring $snapshot into the re-created tenant"
cp "$kubeconfig" "$scratch/before-rebuild.kubeconfig"
make down
make up
make restore TENANT="$tenant" SNAPSHOT="$snapshot"
# The snapshot's CA is back, so the kubeconfig issued before the rebuild works again.
tenant_kubectl "$scratch/before-rebuild.kubeconfig" get configmap before-snapshot
absent "$scratch/before-rebuild.kubeconfig" after-snapshot
