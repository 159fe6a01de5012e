#!/usr/bin/env bash
# Restarts one worker's kubelet after its tenant moved to another DataStore, the step Kamaji's guide asks after
# every move (clastix/kamaji docs/content/guides/datastore-migration.md@26.8.2-edge, "Post migration"): its
# watches and caches hold resourceVersions of the DataStore the tenant left, which mean nothing on the new one
# (docs/architecture.md, "Moving a datastore, step by step"). Only the kubelet restarts: the worker, its join and
# its pods' containers stay. A container worker's kubelet is restarted with `docker exec`, a machine's over ssh.
#
# env:    NODE            container name (docker) or node name (ssh)
#         DATASTORE       the DataStore the tenant now runs on, for the messages
#         NODE_TRANSPORT  docker (default) or ssh, with scripts/lib.sh's SSH_* variables
#         ACTIVE_TIMEOUT  optional, seconds for the restarted kubelet to be active (default 60)
# bound:  300 s (ssh's 10 s connect, `systemctl restart` within systemd's default 90 s stop and 90 s start
#         timeouts, ACTIVE_TIMEOUT 60 and one last check over ssh; + slack)
# stdout: one line, e.g. "lab-a-w1: kubelet restarted"
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env NODE DATASTORE
transport=${NODE_TRANSPORT:-docker}
by_hand="restart it by hand ($([[ $transport == docker ]] && echo "docker exec $NODE " || echo "on $NODE: ")systemctl restart kubelet) or run make up again"

if [[ $transport == docker ]]; then
	running=$(docker inspect --format '{{.State.Running}}' "$NODE") ||
		die "container $NODE not found; run make up to create it again (a new container's kubelet starts on DataStore $DATASTORE)"
	# A stopped worker's kubelet is not running: it starts afresh, on the new DataStore, when the container does.
	[[ $running == true ]] ||
		die "container $NODE is stopped, so its kubelet cannot be restarted after the move to DataStore $DATASTORE; start it (docker start $NODE) and run make up again"
fi

log "worker $NODE: restarting its kubelet after the move to DataStore $DATASTORE"
node_exec systemctl restart kubelet ||
	die "worker $NODE: cannot restart its kubelet after the move to DataStore $DATASTORE; $by_hand"

kubelet_active() { node_exec systemctl is-active --quiet kubelet; }
timeout=${ACTIVE_TIMEOUT:-60}
retry "$timeout" "$RETRY_INTERVAL" kubelet_active ||
	die "worker $NODE: its kubelet is not active ${timeout}s after its restart (see: journalctl -u kubelet on $NODE); $by_hand"

printf '%s: kubelet restarted\n' "$NODE"
