#!/usr/bin/env bash
# Creates the kind management cluster, or adopts it when this lab created it
# before (a re-run after a failed `pulumi up`). A same-named cluster that
# someone else created is refused: `pulumi destroy` would delete it.
#
# env:    CLUSTER_NAME  kind cluster name
#         NODE_IMAGE    kindest/node image for a new cluster (ignored when adopting)
#         LAB_OWNER     ownership mark (project.stack) put on the cluster's node as a label
# bound:  600 s (kind create --wait 120s, after pulling the node image, which no flag bounds)
# stdout: nothing (kind-kubeconfig.sh reads the kubeconfig)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env CLUSTER_NAME NODE_IMAGE LAB_OWNER
# kind would put its nodes on this network instead of `kind`; the workers, the
# subnet and the MetalLB pool are all on `kind`, so kind must be too.
unset KIND_EXPERIMENTAL_DOCKER_NETWORK
owner_label=kamaji-hami-lab.io/owner

clusters=$(kind get clusters)
if grep -Fxq -- "$CLUSTER_NAME" <<<"$clusters"; then
	# shellcheck disable=SC2034 # read by kubeconfig_file through its name
	existing_kubeconfig=$(kind get kubeconfig --name "$CLUSTER_NAME")
	kubeconfig_file existing_kubeconfig
	owner=$(kube get nodes -o "jsonpath={.items[0].metadata.labels.${owner_label//./\\.}}") ||
		die "kind cluster $CLUSTER_NAME exists but its API server does not answer; start its container or delete it (kind delete cluster --name $CLUSTER_NAME)"
	[[ $owner == "$LAB_OWNER" ]] ||
		die "a kind cluster named $CLUSTER_NAME already exists and was not created by this lab ($LAB_OWNER); delete it (kind delete cluster --name $CLUSTER_NAME) or choose another kamaji-hami-lab:managementClusterName"
	log "kind cluster $CLUSTER_NAME already exists and belongs to $LAB_OWNER; adopting it (NODE_IMAGE is not applied)"
else
	cluster_config=$(mktemp)
	remove_on_exit "$cluster_config"
	cat >"$cluster_config" <<CONFIG
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
    labels:
      $owner_label: "$LAB_OWNER"
CONFIG
	# kind would otherwise merge the new context into ~/.kube/config. It holds the admin credentials, so it
	# goes to the runtime tmpfs like every other kubeconfig of the scripts: a killed run leaves it on no disk.
	scratch_file throwaway_kubeconfig
	log "creating kind cluster $CLUSTER_NAME from $NODE_IMAGE"
	# shellcheck disable=SC2154 # throwaway_kubeconfig is set by scratch_file through its name
	kind create cluster --name "$CLUSTER_NAME" --image "$NODE_IMAGE" --wait 120s \
		--kubeconfig "$throwaway_kubeconfig" --config "$cluster_config" >&2
fi
