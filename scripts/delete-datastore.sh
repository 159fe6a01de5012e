#!/usr/bin/env bash
# On destroy, deletes Kamaji's `default` DataStore while the Kamaji controller
# still runs: its finalizer is removed only by that controller, and uninstalling
# the Kamaji release first (controller and RBAC gone) would leave the DataStore
# stuck in Terminating and the uninstall waiting until it times out. By now every
# tenant control plane is gone, so nothing uses the DataStore any more.
#
# env:    KUBECONFIG_DATA  management cluster kubeconfig
#         DELETE_TIMEOUT   optional, seconds to wait for the deletion (default 180)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA
kubeconfig_file KUBECONFIG_DATA

if kube delete datastores.kamaji.clastix.io default --ignore-not-found \
	--timeout="${DELETE_TIMEOUT:-180}s" >&2; then
	log "DataStore default deleted"
else
	# A cluster already gone (or unreachable) has nothing left to clean up.
	warn "could not delete DataStore default; continuing so destroy is not blocked"
fi
