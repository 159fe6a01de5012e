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
	scratch_file path
	printf '%s' "${!1}" >"$path"
	export KUBECONFIG=$path
}

# scratch_file VAR: create a private file on the runtime tmpfs, removed on exit, and
# store its path in variable VAR. Without a per-user one, /dev/shm (a tmpfs as well:
# a key never reaches a disk); only a host with neither (macOS) uses $TMPDIR.
scratch_file() {
	local made dir=${XDG_RUNTIME_DIR:-}
	if [[ -z $dir ]]; then
		dir=/dev/shm
		[[ -d $dir && -w $dir ]] || dir=${TMPDIR:-/tmp}
	fi
	made=$(mktemp -p "$dir")
	remove_on_exit "$made"
	printf -v "$1" '%s' "$made"
}

# docker_network_exists NAME: status 0 when a docker network is named exactly NAME, 1 when none is, 2 (docker's
# complaint on stderr) when docker cannot list them. Not read from an inspect's error, whose wording depends on
# the client: 20.10's says "Error: No such network: NAME" (moby/moby client/errors.go@v20.10.24,
# wrapResponseError), newer ones pass on the daemon's "network NAME not found". The name filter is a regular
# expression matched anywhere in a name (moby/moby api/types/filters/parse.go@v28.5.2, Match; the same at
# v20.10.24), so the names it lets through are compared here in full.
docker_network_exists() {
	local names
	names=$(docker network ls --filter "name=^$1\$" --format '{{.Name}}') || return 2
	grep -Fxq -- "$1" <<<"$names"
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

# server_named_in KUBECONFIG_TEXT: host:port of the first server a kubeconfig's text names; empty when
# it names none. Reads text held in memory, so a credential needs no file: kubeconfigs written by
# client-go's clientcmd.Write (Kamaji's, and kube-public/cluster-info) put each field on its own line.
server_named_in() {
	local server
	server=$(sed -n 's/^ *server: *//p' <<<"$1" | head -n 1)
	server=${server#*://}
	printf '%s\n' "${server%%/*}"
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

# --- Reaching a worker node: `docker exec` into a kindest/node container (the
# default) or `ssh` to a machine, chosen by NODE_TRANSPORT. Over ssh:
#   SSH_ADDRESS, SSH_PORT (22), SSH_USER (root; another user needs passwordless sudo),
#   SSH_PRIVATE_KEY (key text, written only to a scratch file), SSH_HOST_KEY
#   ("<type> <base64>" the machine must present; required: a join sends a bootstrap token),
#   SSH_PROXY_JUMP (optional bastions, as ssh -J takes them; else a ProxyJump of the user's ssh_config applies).

_ssh_options=()
_ssh_setup() {
	require_env SSH_ADDRESS SSH_PRIVATE_KEY SSH_HOST_KEY NODE
	local key known_hosts
	scratch_file key
	printf '%s\n' "$SSH_PRIVATE_KEY" >"$key"
	scratch_file known_hosts
	# Checked against the configured key under the node's name, whatever the address and port.
	# ssh takes the first value it reads for an option and the command line comes first, so no
	# ssh_config can loosen what is set here (OpenSSH ssh_config(5)): trust is the pinned known_hosts
	# only (no global file, no KnownHostsCommand, no DNS, no learning new keys); no connection
	# shared with another ssh (a ControlMaster would skip the host key check); nothing forwarded to
	# a machine whose root could use it (an agent, ports).
	_ssh_options=(-i "$key" -o IdentitiesOnly=yes -o BatchMode=yes -o ConnectTimeout=10
		-o ServerAliveInterval=15 -o ServerAliveCountMax=4 -o LogLevel=ERROR
		-o UserKnownHostsFile="$known_hosts" -o GlobalKnownHostsFile=/dev/null -o HostKeyAlias="$NODE"
		-o StrictHostKeyChecking=yes -o KnownHostsCommand=none -o VerifyHostKeyDNS=no -o UpdateHostKeys=no
		-o ControlMaster=no -o ControlPath=none -o ForwardAgent=no -o ClearAllForwardings=yes
		-p "${SSH_PORT:-22}" -l "${SSH_USER:-root}")
	[[ -z ${SSH_PROXY_JUMP:-} ]] || _ssh_options+=(-J "$SSH_PROXY_JUMP")
	printf '%s %s\n' "$NODE" "$SSH_HOST_KEY" >"$known_hosts"
}

# _sh_quote ARG: ARG quoted for any POSIX shell (the remote login shell may be dash).
_sh_quote() { printf "'%s' " "${1//\'/\'\\\'\'}"; }

# node_exec [-i] CMD...: run CMD on the node as root; only with -i does it get stdin.
node_exec() {
	local stdin=false
	if [[ $1 == -i ]]; then
		stdin=true
		shift
	fi
	if [[ ${NODE_TRANSPORT:-docker} == docker ]]; then
		if $stdin; then docker exec -i "$NODE" "$@"; else docker exec "$NODE" "$@"; fi
		return
	fi
	local remote="" arg
	[[ ${SSH_USER:-root} == root ]] || remote="sudo -n "
	for arg in "$@"; do remote+=$(_sh_quote "$arg"); done
	# shellcheck disable=SC2029 # expanded here on purpose: every argument is quoted for the remote shell
	if $stdin; then
		ssh "${_ssh_options[@]}" "$SSH_ADDRESS" "$remote"
	else
		ssh -n "${_ssh_options[@]}" "$SSH_ADDRESS" "$remote"
	fi
}

# Set up when sourced, in the script's own shell: a scratch file made in a $(...)
# subshell would miss the exit hook that removes it.
case ${NODE_TRANSPORT:-docker} in
docker) ;;
ssh) _ssh_setup ;;
*) die "NODE_TRANSPORT must be docker or ssh, got '$NODE_TRANSPORT'" ;;
esac

_node_answers() { node_exec true 2>/dev/null; }

# wait_for_node TIMEOUT: wait until the node can run commands: systemd up in a
# container, or the machine answering over ssh.
wait_for_node() {
	if [[ ${NODE_TRANSPORT:-docker} == docker ]]; then
		wait_for_systemd "$NODE" "$1"
		return
	fi
	retry "$1" "$RETRY_INTERVAL" _node_answers ||
		die "machine $NODE ($SSH_ADDRESS port ${SSH_PORT:-22}, user ${SSH_USER:-root}) did not answer over ssh within ${1}s: $(node_exec true 2>&1 | tail -n 1)"
}

# The CRI socket every worker's kubelet uses: containerd's default address.
cri_socket=unix:///run/containerd/containerd.sock

# --- Resetting a worker: one helper for join-worker.sh (before a join attempt) and
# leave-worker.sh (a machine that leaves). It removes exactly what the lab's join and the pods
# it brought made, and nothing else on the node:
# - kubeadm reset: it stops the kubelet, removes the Kubernetes containers, /var/lib/kubelet,
#   /etc/kubernetes/{manifests,pki} and its kubeconfigs, but leaves the CNI and iptables alone
#   (kubernetes/kubernetes cmd/kubeadm/app/cmd/phases/reset/cleanupnode.go, runCleanupNode and
#   resetConfigDir, as indexed);
# - the pod network's own files: on a machine flannel's CNI config (10-flannel.conflist, chart
#   flannel-io/flannel chart/kube-flannel/templates/daemonset.yaml@v0.28.9), its subnet file
#   (/run/flannel), its CNI plugin's state (/var/lib/cni/flannel, flannel-io/cni-plugin flannel.go
#   defaultDataDir, as indexed) and the IPAM leases of its network "cbr0" (host-local's
#   /var/lib/cni/networks/<name>); in a container kindnet's config and IPAM state
#   (kubernetes-sigs/kind images/kindnetd/cmd/kindnetd/cni.go@v0.32.0);
# - flannel's links cni0 and flannel.1; a node that comes back with another pod /24 would
#   otherwise fail with "cni0 already has an IP address different from ..." (flannel-io/flannel#820);
# - in iptables and ip6tables (legacy and nft alike), exactly the KUBE-* and FLANNEL-* chains
#   (kube-proxy, the kubelet, flannel) and, in a container, kindnet's KIND-MASQ-AGENT: kindnetd
#   only appends to it (images/kindnetd/cmd/kindnetd/masq.go@v0.32.0), so a stale rule for an
#   old pod CIDR would run first after a re-join. Each rule that jumps to one of them goes,
#   deleted by its own spec: no table is saved and restored, so a rule other software adds
#   meanwhile stays.

# Where a join keeps its config (with the token) while kubeadm runs; tmpfs.
join_config_path=/run/kamaji-hami-lab-join.yaml
# The lab's mark on a machine, written before kubeadm join and removed by the last step of a reset
# (join-worker.sh mark_machine has its lines).
lab_marker=/etc/kamaji-hami-lab/worker

# Runs on the node: $1 seconds for kubeadm reset, $2 CRI socket, $3 join config, $4 lab marker,
# $5 the pod network the lab put there: flannel (a machine) or kindnet (a container).
# --cri-socket: with several runtimes on the host, kubeadm reset would otherwise refuse to pick one.
# A rule's jump target is read with its quoted strings (comments) taken out, so a comment that
# mentions KUBE- is no jump. Each table's changes go to iptables-restore --noflush as -D (each rule
# by its spec, as iptables -S printed it), -F and -X lines: the rest of the table is never rewritten.
# shellcheck disable=SC2016 # expanded by the node's shell
_in_node_reset='
pkill -x kubeadm
rm -f "$3"
timeout --kill-after=10s "$1" kubeadm reset --force --cri-socket "$2" || exit 1
failed=0 network=$5
is_lab_chain() {
	case $1 in
	KUBE-* | FLANNEL-*) return 0 ;;
	KIND-MASQ-AGENT) [ "$network" = kindnet ] ;;
	*) return 1 ;;
	esac
}
if [ "$network" = kindnet ]; then
	rm -rf /etc/cni/net.d/10-kindnet.conflist /run/cni-ipam-state || failed=1
else
	rm -rf /etc/cni/net.d/10-flannel.conflist /run/flannel /var/lib/cni/flannel /var/lib/cni/networks/cbr0 || failed=1
	for link in cni0 flannel.1; do
		if ip link show "$link" >/dev/null 2>&1; then ip link delete "$link" || failed=1; fi
	done
fi
tools=""
for tool in iptables-legacy iptables-nft ip6tables-legacy ip6tables-nft; do
	command -v "$tool" >/dev/null 2>&1 && tools="$tools $tool"
done
[ -n "$tools" ] || tools="iptables ip6tables"
for tool in $tools; do
	for table in filter nat mangle raw security; do
		rules=$("$tool" -w 5 -t "$table" -S 2>/dev/null) || continue
		jumps="" chains=""
		while IFS= read -r rule; do
			case $rule in
			"-N "*) is_lab_chain "${rule#-N }" && chains="$chains ${rule#-N }" ;;
			"-A "*)
				chain=${rule#-A }
				is_lab_chain "${chain%% *}" && continue
				target=$(printf "%s\n" "$rule" | sed -E "s/\"([^\"\\\\]|\\\\.)*\"//g" | sed -nE "s/.* -[jg] ([^ ]+)( .*)?$/\1/p")
				is_lab_chain "$target" && jumps="$jumps-D $chain
"
				;;
			esac
		done <<RULES
$rules
RULES
		[ -n "$jumps$chains" ] || continue
		flushes="" deletes=""
		for chain in $chains; do
			flushes="$flushes-F $chain
"
			deletes="$deletes-X $chain
"
		done
		printf "*%s\n%s%s%sCOMMIT\n" "$table" "$jumps" "$flushes" "$deletes" | "$tool-restore" -w 5 --noflush || failed=1
	done
done
[ "$failed" = 0 ] || exit 1
rm -f "$4"
exit 0'

# reset_node TIMEOUT: undo whatever a join (finished, killed or failed) left on the node; the
# lab's mark goes last, so a reset cut short still leaves a machine this lab may reset again,
# and a reset that could not remove everything fails.
reset_node() {
	local network=kindnet
	[[ ${NODE_TRANSPORT:-docker} == docker ]] || network=flannel
	node_exec sh -c "$_in_node_reset" reset "$1" "$cri_socket" "$join_config_path" "$lab_marker" "$network" >&2
}

# spki_sha256: the SHA-256 of a PEM certificate's public key (SPKI) on stdin,
# which is how kubeadm pins discovery to a CA.
spki_sha256() {
	openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -r | cut -d' ' -f1
}

# tenant_ca_hash: "sha256:<hex>" of the CA in the current KUBECONFIG; a CA openssl cannot read
# is an error (the hash of no input would pin nothing a kubelet could ever be bound to).
tenant_ca_hash() {
	local ca_data hash
	ca_data=$(kube config view --raw --minify -o 'jsonpath={.clusters[0].cluster.certificate-authority-data}')
	[[ -n $ca_data ]] || die "the tenant kubeconfig has no certificate-authority-data"
	hash=$(base64 -d <<<"$ca_data" 2>/dev/null | spki_sha256 2>/dev/null) && [[ $hash =~ ^[0-9a-f]{64}$ ]] ||
		die "the tenant kubeconfig's certificate-authority-data is not a PEM certificate openssl can read"
	printf 'sha256:%s\n' "$hash"
}

# node_binding: "<host:port> sha256:<hex>" of the API server and CA the node's
# kubelet is bound to, from its kubelet.conf (which holds no key: the client
# certificate is a file reference); nothing when it has not joined anything.
node_binding() {
	local binding server ca_data
	binding=$(node_exec kubectl --kubeconfig=/etc/kubernetes/kubelet.conf config view --raw \
		-o 'jsonpath={.clusters[0].cluster.server} {.clusters[0].cluster.certificate-authority-data}' 2>/dev/null) ||
		return 0
	read -r server ca_data <<<"$binding" || true
	[[ -n ${ca_data:-} ]] || return 0
	server=${server#*://}
	printf '%s %s\n' "${server%%/*}" "sha256:$(base64 -d <<<"$ca_data" | spki_sha256 || echo unreadable)"
}
