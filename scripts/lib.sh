# shellcheck shell=bash
# Shared helpers for scripts/*.sh; sourced, never run on its own.
# Sourcing it (after `set -euo pipefail`) gives: private file permissions,
# logging to stderr, bounded retries, exit hooks + scratch files removed on
# exit, kubeconfig handling.

# Without this, `x=$(f)` would keep running f after a failing command inside it.
shopt -s inherit_errexit
# Everything these scripts write locally is a credential (kubeconfigs, join tokens).
umask 077

# Seconds between polls of every bounded wait; tests set 0.
: "${RETRY_INTERVAL:=3}"

log() { printf '[%s] %s\n' "${0##*/}" "$*" >&2; }
warn() { log "WARNING: $*"; }
die() {
	log "ERROR: $*"
	exit 1
}

# require_env NAME...: fail unless every named variable is set and non-empty.
require_env() {
	local name
	for name in "$@"; do
		[[ -n ${!name:-} ]] || die "environment variable $name is required"
	done
}

# retry TIMEOUT INTERVAL CMD...: run CMD until it succeeds; return 1 once TIMEOUT
# seconds have passed (CMD always runs at least once). CMD runs as a condition,
# where `set -e` is off, so check functions must return non-zero explicitly.
retry() {
	local timeout=$1 interval=$2
	shift 2
	local deadline=$((SECONDS + timeout))
	until "$@"; do
		((SECONDS < deadline)) || return 1
		sleep "$interval"
	done
}

# progress MSG: log MSG only when it differs from the previous one, so that
# polling loops report state changes instead of one line per poll.
_last_progress=
progress() {
	[[ $* == "$_last_progress" ]] && return 0
	_last_progress=$*
	log "$*"
}

_exit_hooks=()
_scratch_files=()
# at_exit FUNCTION: call FUNCTION when the script exits, also on failure;
# the latest registered runs first; files from remove_on_exit go after all hooks.
at_exit() { _exit_hooks=("$1" "${_exit_hooks[@]}"); }
_on_exit() {
	local hook
	for hook in "${_exit_hooks[@]}"; do
		"$hook" || warn "exit hook $hook failed"
	done
	rm -f -- "${_scratch_files[@]}"
}
trap _on_exit EXIT
# Turn Pulumi's cancellation signals into a normal exit so the hooks still run.
trap 'exit 130' INT
trap 'exit 143' TERM

# remove_on_exit PATH: delete file PATH when the script exits.
remove_on_exit() { _scratch_files+=("$1"); }

# kubeconfig_file VAR: write the kubeconfig held in variable VAR to a scratch
# file and export KUBECONFIG pointing at it (never the user's ~/.kube/config).
# The file goes to the per-user runtime tmpfs when there is one, so even a
# killed script (Pulumi kills on timeout) leaves no credential on disk.
kubeconfig_file() {
	local path
	path=$(mktemp -p "${XDG_RUNTIME_DIR:-${TMPDIR:-/tmp}}")
	remove_on_exit "$path"
	printf '%s' "${!1}" >"$path"
	export KUBECONFIG=$path
}

# kube ARGS...: kubectl with a per-request timeout, so a hung API server cannot
# stretch a bounded wait.
kube() { kubectl --request-timeout="${KUBECTL_REQUEST_TIMEOUT:-20s}" "$@"; }

# kubeconfig_endpoint: host:port of the API server in the current KUBECONFIG.
kubeconfig_endpoint() {
	local server
	server=$(kube config view --raw --minify -o 'jsonpath={.clusters[0].cluster.server}')
	server=${server#*://}
	server=${server%%/*}
	[[ -n $server ]] || die "the kubeconfig names no API server"
	[[ $server == *:* ]] || server+=:443
	printf '%s\n' "$server"
}

_systemd_reached_multi_user() {
	local container=$1 started_at=$2 logs
	logs=$(docker logs --since "$started_at" "$container" 2>&1) || return 1
	grep -Eq 'Reached target .*Multi-User System|detected cgroup v1' <<<"$logs"
}

# wait_for_systemd CONTAINER TIMEOUT: wait until systemd in kind node CONTAINER
# has reached multi-user in its current boot. Like kind, never `docker exec`
# before that: an exec while PID 1 is still in the root cgroup breaks the
# node's cgroup v2 setup (kubernetes-sigs/kind#2409).
wait_for_systemd() {
	local container=$1 timeout=$2 started_at
	started_at=$(docker inspect --format '{{.State.StartedAt}}' "$container") ||
		die "container $container not found"
	retry "$timeout" "$RETRY_INTERVAL" _systemd_reached_multi_user "$container" "$started_at" ||
		die "container $container: systemd did not reach the multi-user target within ${timeout}s (see: docker logs $container)"
}
