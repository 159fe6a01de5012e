#!/usr/bin/env bash
# The live workflow's snapshot step (docs/operations.md, "Snapshot and restore a tenant"), run from the repository
# root on a lab that `make up` built: a tenant saved, changed and restored in place (then `make validate`), and
# the same snapshot restored into the tenant after the lab was rebuilt, where the kubeconfig and a service-account
# token from before the rebuild must read the objects again, and `make rejoin` re-joins the workers and validates.
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
make restore TENANT="$TENANT" SNAPSHOT="$snapshot"
# The snapshot's CA is back, so the kubeconfig issued before the rebuild works again, and so does the
# service-account token. MetalLB may have given the re-created tenant another address: the old kubeconfig is
# pointed at the new one, as docs/operations.md tells a user to.
server() { kubectl --kubeconfig "$1" config view --minify -o 'jsonpath={.clusters[0].cluster.server}'; }
kubectl --kubeconfig "$SCRATCH/before-rebuild.kubeconfig" config set-cluster \
	"$(kubectl --kubeconfig "$SCRATCH/before-rebuild.kubeconfig" config view --minify -o 'jsonpath={.clusters[0].name}')" \
	--server="$(server "$kubeconfig")"
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
