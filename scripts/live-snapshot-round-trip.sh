#!/usr/bin/env bash
# The live workflow's snapshot step (docs/operations.md, "Snapshot and restore a tenant"), run from the repository
# root on a lab that `make up` built: a tenant saved, changed and restored in place (then `make validate`), and
# the same snapshot restored into the tenant after the lab was rebuilt, where the kubeconfig and a service-account
# token from before the rebuild must read the objects again (the kubeconfig as it is: the lab pins the tenant's
# address), and `make rejoin` re-joins the workers and validates.
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
# A token signed by the snapshot's service-account key, read back with the restored key after the rebuild.
tenant_kubectl "$kubeconfig" create serviceaccount before-snapshot
tenant_kubectl "$kubeconfig" create rolebinding before-snapshot --clusterrole=view \
	--serviceaccount=default:before-snapshot
(umask 077 && tenant_kubectl "$kubeconfig" create token before-snapshot --duration=3h >"$SCRATCH/before.token")
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
make restore TENANT="$TENANT" SNAPSHOT="$snapshot" | tee "$SCRATCH/restore.out"
# The snapshot's CA is back, so the kubeconfig issued before the rebuild works again as it is, and so does the
# service-account token: the re-created tenant is at the address it had, which the lab pins.
server() { kubectl --kubeconfig "$1" config view --minify -o 'jsonpath={.clusters[0].cluster.server}'; }
before=$(server "$SCRATCH/before-rebuild.kubeconfig")
now=$(server "$kubeconfig")
[[ $now == "$before" ]] ||
	die "the re-created tenant $TENANT is at $now, not at $before as before the rebuild: its address was not pinned"
grep -qF "as at the snapshot: kubeconfigs from then work as they are" "$SCRATCH/restore.out" ||
	die "make restore did not say that tenant $TENANT is where the snapshot recorded it"
tenant_kubectl "$SCRATCH/before-rebuild.kubeconfig" get configmap before-snapshot
absent "$SCRATCH/before-rebuild.kubeconfig" after-snapshot
token_kubeconfig=$SCRATCH/token.kubeconfig
cp "$SCRATCH/before-rebuild.kubeconfig" "$token_kubeconfig"
# The kubeconfig's tokenFile field, so the token is in no command line.
kubectl --kubeconfig "$token_kubeconfig" config set users.before-token.tokenFile "$SCRATCH/before.token"
kubectl --kubeconfig "$token_kubeconfig" config set-context --current --user=before-token
tenant_kubectl "$token_kubeconfig" get configmap before-snapshot
# The workers joined the re-created CA: they join again, and the whole lab validates.
make rejoin TENANT="$TENANT"
tenant_kubectl "$kubeconfig" get configmap before-snapshot
