#!/usr/bin/env bash
# Undoes register-gpus.sh on a machine that leaves the lab: stops the timer that
# re-advertises its mock GPUs and removes the files it installed, so the machine
# does not keep patching a node object in a tenant it no longer belongs to. (A
# container worker needs none of this: it is deleted.) Like leave-worker.sh, it
# leaves a machine alone that is bound to another tenant by now: moved there (under
# another name), that tenant's register-gpus.sh may already have installed its own.
# Best effort: an unreachable machine is a warning, so `pulumi destroy` never hangs.
#
# env:    KUBECONFIG_DATA  tenant admin kubeconfig (read here only for its API server and CA)
#         NODE             machine name = Kubernetes node name
#         NODE_TRANSPORT   ssh, with the SSH_* variables (scripts/lib.sh)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA NODE
# The names register-gpus.sh installs under.
unit=hami-mock-gpu-register
files=(/etc/hami-mock-gpu "/usr/local/bin/$unit" "/etc/systemd/system/$unit.service" "/etc/systemd/system/$unit.timer")

# shellcheck disable=SC2016 # expanded by the machine's shell
in_machine_unregister='
unit=$1
shift
systemctl disable --now "$unit.timer" 2>/dev/null
rm -rf "$@"
systemctl daemon-reload'

binding=$(node_binding)
if [[ -n $binding ]]; then
	kubeconfig_file KUBECONFIG_DATA
	if [[ $binding != "$(kubeconfig_endpoint) $(tenant_ca_hash)" ]]; then
		log "$NODE is bound to another tenant by now ($binding); leaving its GPU registration alone"
		exit 0
	fi
fi

if node_exec sh -c "$in_machine_unregister" unregister "$unit" "${files[@]}" >&2; then
	log "$NODE no longer advertises mock GPUs"
else
	warn "could not remove the mock GPU registration from $NODE; disable $unit.timer there by hand"
fi
