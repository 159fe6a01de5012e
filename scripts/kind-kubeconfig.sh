#!/usr/bin/env bash
# Prints the host-side kubeconfig of the kind management cluster. A step of its
# own, keyed by the cluster name only, so that a new node image (which re-runs
# kind-up.sh) does not make the kubeconfig unknown in a preview.
#
# env:    CLUSTER_NAME  kind cluster name
# stdout: the cluster's kubeconfig (`kind get kubeconfig`)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env CLUSTER_NAME

kind get kubeconfig --name "$CLUSTER_NAME" ||
	die "cannot read the kubeconfig of kind cluster $CLUSTER_NAME; is it running? (kind get clusters)"
