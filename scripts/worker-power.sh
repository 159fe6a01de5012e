#!/usr/bin/env bash
# Puts one worker of a sleeping tenant to sleep, or wakes it; nothing is removed.
# A container worker is stopped (`docker stop`: systemd in kindest/node shuts down
# on the image's stop signal) and started again; its /var volume keeps the kubelet's
# credentials, images and pods. A machine is not ours to power off: its kubelet is
# stopped, which leaves the machine, its containers and its join as they are.
# Both directions are idempotent: a worker already in the asked state is left alone.
#
# env:    NODE            container name (docker) or node name (ssh)
#         STATE           asleep or awake
#         NODE_TRANSPORT  docker (default) or ssh, with scripts/lib.sh's SSH_* variables
#         WAKE_TIMEOUT    optional, seconds for a woken container's systemd (default 180)
# bound:  260 s (a start and WAKE_TIMEOUT 180 for systemd, or `docker stop --time 60` and its kill, or ssh's
#         10 s connect and systemctl, which systemd's default 90 s stop timeout bounds; + slack)
# stdout: one line, e.g. "lab-a-w1: asleep"
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env NODE STATE
[[ $STATE == asleep || $STATE == awake ]] || die "STATE must be asleep or awake, got '$STATE'"
transport=${NODE_TRANSPORT:-docker}

container_running() {
	local running
	running=$(docker inspect --format '{{.State.Running}}' "$NODE") ||
		die "container $NODE not found; run pulumi up with the tenant awake to create it again"
	[[ $running == true ]]
}

if [[ $transport == docker ]]; then
	if [[ $STATE == asleep ]]; then
		if container_running; then
			log "stopping container $NODE"
			docker stop --time 60 "$NODE" >/dev/null || die "cannot stop container $NODE"
		fi
	elif ! container_running; then
		log "starting container $NODE"
		docker start "$NODE" >/dev/null || die "cannot start container $NODE"
		# Its kubelet starts with systemd; the tenant's wait for GPUs then proves the node is back.
		wait_for_systemd "$NODE" "${WAKE_TIMEOUT:-180}"
	fi
else
	action=stop
	[[ $STATE == awake ]] && action=start
	log "machine $NODE: systemctl $action kubelet"
	node_exec systemctl "$action" kubelet || die "machine $NODE: cannot $action its kubelet"
fi

printf '%s: %s\n' "$NODE" "$STATE"
