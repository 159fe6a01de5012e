#!/usr/bin/env bash
# Installs kindnet, the CNI that ships inside kindest/node, into a tenant: reads
# the manifest template from the node image and fills it in the way kind does
# for its own clusters (kind: pkg/cluster/internal/create/actions/installcni).
#
# env:    KUBECONFIG_DATA         tenant admin kubeconfig
#         POD_CIDR                tenant pod CIDR (TenantControlPlane networkProfile.podCidr)
#         NODE_IMAGE              kindest/node image of the tenant's workers
#         CONTROL_PLANE_ENDPOINT  optional host:port kindnet uses to reach the API server
#                                 (default: the server in KUBECONFIG_DATA)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA POD_CIDR NODE_IMAGE
kubeconfig_file KUBECONFIG_DATA
control_plane_endpoint=${CONTROL_PLANE_ENDPOINT:-$(kubeconfig_endpoint)}

manifest_path=/kind/manifests/default-cni.yaml
pod_subnet_placeholder='{{ .PodSubnet }}'

manifest=$(docker run --rm --network none --entrypoint cat "$NODE_IMAGE" "$manifest_path") ||
	die "cannot read $manifest_path from $NODE_IMAGE"
[[ $manifest == *"$pod_subnet_placeholder"* ]] ||
	die "$manifest_path in $NODE_IMAGE has no $pod_subnet_placeholder placeholder; its format changed"
manifest=${manifest//"$pod_subnet_placeholder"/"$POD_CIDR"}
[[ $manifest != *'{{'* ]] ||
	die "$manifest_path in $NODE_IMAGE has template fields other than PodSubnet; its format changed"

# kind appends CONTROL_PLANE_ENDPOINT to the kindnet container's env so kindnet
# reaches the API server directly instead of through the kubernetes Service,
# which only works once kube-proxy runs. Same here, right after POD_SUBNET.
add_control_plane_endpoint() {
	awk -v endpoint="$control_plane_endpoint" '
		{ print }
		expecting_value && /^[[:space:]]*value:/ {
			print indent "- name: CONTROL_PLANE_ENDPOINT"
			print indent "  value: \"" endpoint "\""
			added++
			expecting_value = 0
		}
		/^[[:space:]]*- name: POD_SUBNET[[:space:]]*$/ {
			indent = substr($0, 1, index($0, "-") - 1)
			expecting_value = 1
		}
		END { exit added == 1 ? 0 : 1 }'
}
manifest=$(add_control_plane_endpoint <<<"$manifest") ||
	die "cannot find the POD_SUBNET env entry in $manifest_path of $NODE_IMAGE to add CONTROL_PLANE_ENDPOINT"

log "applying kindnet (pod CIDR $POD_CIDR, API server $control_plane_endpoint)"
kube apply --server-side --field-manager=kamaji-hami-lab -f - <<<"$manifest" >&2
