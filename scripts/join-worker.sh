#!/usr/bin/env bash
# Joins a worker, a kindest/node container or a machine reached over SSH, to its
# Kamaji tenant with kubeadm. The tenant admin kubeconfig stays on this host: it
# mints a short-lived bootstrap token, and only that token (plus the public CA
# hash) reaches the worker, through stdin inside a kubeadm JoinConfiguration, so
# it appears in no command line (processes in a container are visible in the
# host's `ps`; on a machine, to its other users).
#
# A node already joined to this tenant (same CA and API endpoint) is left alone.
# Any other state (joined to a replaced control plane, or half-joined because an
# earlier run was killed) is reset (lib.sh reset_node) and joined again. That
# clean-up happens at the start of every run, not in an exit trap: a killed run
# never reaches its traps, and a killed `docker exec` (or ssh) does not stop
# kubeadm in the node (moby/moby#9098).
# A machine is reset only when it carries this lab's mark (lib.sh lab_marker),
# which the join writes before kubeadm runs: bound to a tenant of this lab, or
# half-joined by it. A machine with Kubernetes state and no such mark (another
# cluster's node: a reset would delete its containers and certificates) is refused,
# naming what was found, unless its config says adopt: true (ADOPT).
#
# env:    KUBECONFIG_DATA  tenant admin kubeconfig
#         NODE             worker container or machine name = Kubernetes node name
#         NODE_TRANSPORT   optional, docker (default) or ssh, with the SSH_* variables (scripts/lib.sh)
#         LAB_ID           with ssh: "<project>/<stack>/<managementClusterName>", the lab's mark on the machine
#         TENANT           with ssh: the tenant's name, also in that mark
#         ADOPT            optional, with ssh: true resets a machine with Kubernetes state that is not this lab's (default false)
#         NODE_LABELS      optional, labels the kubelet registers its Node with, e.g. gpu=on (kubelet --node-labels)
#         NODE_IP          optional, the address the kubelet advertises (kubelet --node-ip); default: the one of its default route
#         BOOT_TIMEOUT     optional, seconds to wait for systemd in a container, or for a machine to answer (default 90)
#         JOIN_ATTEMPTS    optional, kubeadm join attempts (default 3)
#         NODE_TIMEOUT     optional, seconds a joined node's restarted kubelet has to register its missing Node (default 120)
# bound:  1000 s (BOOT_TIMEOUT 90 + JOIN_ATTEMPTS 3 x kubeadm's 5 min discovery timeout, kubeadm v1beta4 defaults)
# stdout: one summary line, e.g. "tenant-a-w1 joined 172.18.255.200:6443"
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA NODE
join_attempts=${JOIN_ATTEMPTS:-3}
machine=false
if [[ ${NODE_TRANSPORT:-docker} == ssh ]]; then
	require_env LAB_ID TENANT
	machine=true
fi
# Budget: every attempt is cut off inside the node after attempt_seconds (kubeadm's
# own timeouts below end it sooner), plus up to 30 s for the reset (reset_seconds,
# cut off inside the node) and the pause.
# The token outlives all attempts; components/worker_node.py's create timeout
# (20 min) covers the boot wait plus that token lifetime.
attempt_seconds=240
reset_seconds=15
token_ttl_minutes=$(((join_attempts * (attempt_seconds + 30) + 59) / 60 + 1))

wait_for_node "${BOOT_TIMEOUT:-90}"

kubeconfig_file KUBECONFIG_DATA
endpoint=$(kubeconfig_endpoint)
ca_hash=$(tenant_ca_hash)

# mark_machine: write the lab's mark (lib.sh lab_marker) on the machine.
# shellcheck disable=SC2016 # expanded by the machine's shell
mark_machine() {
	node_exec sh -c 'mkdir -p "$(dirname "$1")" && printf "%s\n" "$2" >"$1"' mark "$lab_marker" \
		"$(printf 'lab=%s\ntenant=%s' "$LAB_ID" "$TENANT")" >&2
}

node_timeout=${NODE_TIMEOUT:-120}
node_registered() { [[ -n $(kube get node "$NODE" --ignore-not-found -o name) ]]; }

node_binding=$(node_binding)
if [[ -n $node_binding ]]; then
	if [[ $node_binding == "$endpoint $ca_hash" ]]; then
		# A machine joined before the lab marked its machines gets the mark now.
		if $machine; then
			mark_machine || warn "could not mark $NODE as this lab's"
		fi
		# Its Node may be gone (deleted by hand, or by a leave that could not reach the
		# node); the kubelet registers it again only when it starts.
		if [[ -z $(kube get node "$NODE" --ignore-not-found -o name) ]]; then
			log "$NODE is joined to this tenant but has no Node; restarting its kubelet so it registers"
			node_exec systemctl restart kubelet >&2
			retry "$node_timeout" "$RETRY_INTERVAL" node_registered ||
				die "$NODE: its kubelet did not register a Node within ${node_timeout}s of a restart (see: journalctl -u kubelet on $NODE)"
		fi
		log "$NODE already joined this tenant ($endpoint, CA $ca_hash); nothing to do"
		printf '%s already joined %s\n' "$NODE" "$endpoint"
		exit 0
	fi
	log "$NODE is bound to ${node_binding% *} (CA ${node_binding#* }), not to this tenant ($endpoint, CA $ca_hash)"
fi

# Runs on the machine: the lab that marked it ($1), and which Kubernetes state it holds.
# shellcheck disable=SC2016 # expanded by the machine's shell
in_machine_state='
[ -f "$1" ] && sed -n "s/^lab=/marker=/p; s/^tenant=/marker_tenant=/p" "$1"
for path in /etc/kubernetes/kubelet.conf /etc/kubernetes/bootstrap-kubelet.conf /etc/kubernetes/admin.conf \
	/etc/kubernetes/pki/ca.crt /etc/kubernetes/manifests/kube-apiserver.yaml /var/lib/kubelet/config.yaml /var/lib/etcd/member; do
	[ -e "$path" ] && echo "found=$path"
done
exit 0'

# A machine may be reset when it holds no Kubernetes state, carries this lab's mark, or is adopted.
may_reset_machine() {
	local state found marker
	state=$(node_exec sh -c "$in_machine_state" state "$lab_marker") || die "$NODE: could not read its state over ssh"
	found=$(sed -n 's/^found=//p' <<<"$state" | paste -sd' ' -)
	marker=$(sed -n 's/^marker=//p' <<<"$state")
	if [[ -z $found ]]; then
		return 0
	elif [[ $marker == "$LAB_ID" ]]; then
		log "$NODE carries this lab's mark (tenant $(sed -n 's/^marker_tenant=//p' <<<"$state")); resetting it"
	elif [[ ${ADOPT:-false} == true ]]; then
		warn "$NODE holds Kubernetes state ($found) that is not this lab's (mark: ${marker:-none}); adopt: true, so resetting it"
	else
		die "$NODE holds Kubernetes state that is not this lab's, and a reset would delete it: found $found; bound to ${node_binding:-no API server}; lab mark: ${marker:-none} (this lab is $LAB_ID). Check the machine's address; if it may be wiped, set adopt: true on it"
	fi
}
if $machine; then
	may_reset_machine
fi

# Whatever a killed earlier run left behind: a kubeadm still running in the
# node, its join config with a token, a half-written /etc/kubernetes, the CNI.
reset_or_warn() { reset_node "$reset_seconds" || warn "resetting $NODE failed"; }
reset_or_warn

# kube-proxy and the CNI need bridged traffic to pass iptables; the module
# lives in the host kernel, so a failure here is only worth a warning.
node_exec modprobe br_netfilter >&2 ||
	warn "modprobe br_netfilter failed in $NODE; make sure the host has it loaded"

# Bootstrap tokens are [a-z0-9]{6}.[a-z0-9]{16}; hex digits are a valid subset.
random_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }
token_id=$(random_hex 3)
token_secret=$(random_hex 8)
token_name=bootstrap-token-$token_id
expiration=$(date -u -d "+$token_ttl_minutes minutes" +%Y-%m-%dT%H:%M:%SZ)

# Tidiness only: if this run is killed the token still expires on its own.
delete_bootstrap_token() {
	kube -n kube-system delete secret "$token_name" --ignore-not-found >&2 ||
		warn "could not delete Secret kube-system/$token_name; it expires at $expiration"
}
at_exit delete_bootstrap_token

log "creating bootstrap token $token_id for $NODE (expires $expiration)"
kube create -f - >&2 <<MANIFEST
apiVersion: v1
kind: Secret
type: bootstrap.kubernetes.io/token
metadata:
  name: $token_name
  namespace: kube-system
stringData:
  description: "kamaji-hami-lab: join of $NODE"
  token-id: "$token_id"
  token-secret: "$token_secret"
  expiration: "$expiration"
  usage-bootstrap-authentication: "true"
  usage-bootstrap-signing: "true"
  auth-extra-groups: system:bootstrappers:kubeadm:default-node-token
MANIFEST

# SystemVerification fails in a container (no kernel config to read); swap is
# the host's business. The mandatory FileExisting-* binaries are in kindest/node.
# A machine skips the same two: check-machine.sh has already refused swap and
# cgroup v1 there, with a message naming the machine.
# kubeadm's own timeouts (kubeadm.k8s.io/v1beta4 JoinConfiguration.timeouts) end
# a stuck step well inside attempt_seconds, with kubeadm's message.
# Field names: kubernetes/website content/en/docs/reference/config-api/kubeadm-config.v1beta4.md (Timeouts).
# kubeletExtraArgs is a list of {name, value} in v1beta4 (kubernetes/kubernetes
# cmd/kubeadm/app/apis/kubeadm/v1beta4/doc.go). A label the kubelet sets itself
# survives a re-join, which deletes and re-creates the Node; an unprefixed label is
# one a kubelet may set on itself (cmd/kubelet/app/options/options.go refuses only
# unknown kubernetes.io/k8s.io ones; staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go).
kubelet_args=""
for arg in "node-labels=${NODE_LABELS:-}" "node-ip=${NODE_IP:-}"; do
	[[ -n ${arg#*=} ]] && kubelet_args+=$'\n'"    - name: ${arg%%=*}"$'\n'"      value: \"${arg#*=}\""
done
[[ -z $kubelet_args ]] || kubelet_args=$'\n'"  kubeletExtraArgs:$kubelet_args"

join_configuration=$(
	cat <<CONFIG
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: "$endpoint"
    token: "$token_id.$token_secret"
    caCertHashes: ["$ca_hash"]
nodeRegistration:
  name: "$NODE"
  criSocket: "$cri_socket"
  ignorePreflightErrors: [SystemVerification, Swap]$kubelet_args
timeouts:
  discovery: 1m
  tlsBootstrap: 1m
  kubeletHealthCheck: 1m
  kubernetesAPICall: 30s
CONFIG
)

# Runs inside the node, bounded there (a killed docker exec or ssh would not stop it).
# The config sits on tmpfs (/run) only while kubeadm runs; reset_node removes a
# copy a killed run left.
# shellcheck disable=SC2016 # expanded by the node's shell
in_node_join='
set -eu
umask 077
cat >"$1"
status=0
timeout --kill-after=10s "$2" kubeadm join --config "$1" || status=$?
rm -f "$1"
exit "$status"'

# Kamaji finishes the tenant's bootstrap RBAC (cluster-info, kubelet-config
# access) after the control plane is Ready, so the first attempts may be refused.
# Every failure is reset, so no attempt starts on a half-joined node.
# A machine is marked before every attempt (a reset removes the mark): killed
# halfway, it is still recognised as this lab's.
join_attempt() {
	if $machine; then
		mark_machine || return 1
	fi
	node_exec -i sh -c "$in_node_join" join "$join_config_path" "$attempt_seconds" <<<"$join_configuration" >&2
}
attempt=1
until join_attempt; do
	warn "kubeadm join of $NODE failed (attempt $attempt/$join_attempts); resetting the node"
	reset_or_warn
	((attempt < join_attempts)) ||
		die "kubeadm join of $NODE to $endpoint failed $join_attempts times (see the kubeadm output above)"
	sleep "$RETRY_INTERVAL"
	attempt=$((attempt + 1))
done

log "$NODE joined the tenant at $endpoint"
printf '%s joined %s\n' "$NODE" "$endpoint"
