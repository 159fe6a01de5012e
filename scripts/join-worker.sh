#!/usr/bin/env bash
# Joins a worker, a kindest/node container or a machine reached over SSH, to its
# Kamaji tenant with kubeadm. The tenant admin kubeconfig stays on this host: it
# mints a short-lived bootstrap token per attempt, deleted as soon as that attempt
# ends, and only that token (plus the public CA hash) reaches the worker, through stdin inside a kubeadm JoinConfiguration, so
# it appears in no command line (processes in a container are visible in the
# host's `ps`; on a machine, to its other users).
#
# A node already joined to this tenant (same CA and API endpoint) is left alone.
# Any other state (joined to a replaced control plane, or half-joined because an
# earlier run was killed) is reset (lib.sh reset_node) and joined again. That
# clean-up happens at the start of every run, not in an exit trap: a killed run
# never reaches its traps, and a killed `docker exec` (or ssh) does not stop
# kubeadm in the node (moby/moby#9098).
# A machine is reset only when it carries this lab's mark (lib.sh lab_marker), which
# the join writes before kubeadm runs: this stack's random identity (LAB_IDENTITY) and
# the binding it joined (API endpoint and CA hash). Its kubelet must still be bound to
# that binding, to this tenant, or to nothing: a machine reset by hand and joined to
# another cluster keeps the mark but is no longer the lab's. A machine with no
# Kubernetes state and no mark is joined with no reset at all. Kubernetes state
# without this lab's mark (another cluster's node: a reset would delete its
# containers and certificates) is refused, naming what was found, unless its config
# says adopt: true (ADOPT). The mark is checked again right before every reset; the decision is
# scripts/reset_policy.py's.
#
# env:    KUBECONFIG_DATA  tenant admin kubeconfig
#         NODE             worker container or machine name = Kubernetes node name
#         NODE_TRANSPORT   optional, docker (default) or ssh, with the SSH_* variables (scripts/lib.sh)
#         LAB_ID           with ssh: "<project>/<stack>/<managementClusterName>", the lab's name in its mark
#         LAB_IDENTITY     with ssh: the stack's random identity (scripts/lab-identity.sh), what the mark proves
#         TENANT           with ssh: the tenant's name, also in that mark
#         ADOPT            optional, with ssh: true resets a machine with Kubernetes state that is not this lab's,
#                          and re-marks one with an older mark (default false)
#         NODE_LABELS      optional, labels the kubelet registers its Node with, e.g. gpu=on (kubelet --node-labels)
#         NODE_IP          optional, the address the kubelet advertises (kubelet --node-ip); default: the one of its default route
#         FLANNEL_INTERFACE optional, with ssh: the interface (name or IPv4 address) this machine's flanneld carries
#                          pod traffic on, with FLANNEL_NAMESPACE (flannel's); default: its default route's
#         BOOT_TIMEOUT     optional, seconds to wait for systemd in a container, or for a machine to answer (default 90)
#         CRI_TIMEOUT      optional, in a container, seconds containerd's CRI has to answer (default 20)
#         JOIN_ATTEMPTS    optional, kubeadm join attempts (default 3)
#         NODE_TIMEOUT     optional, seconds a joined node's restarted kubelet has to register its missing Node (default 120)
#         CLUSTER_INFO_TIMEOUT optional, seconds Kamaji has to write a stale cluster-info again (default 60)
# bound:  1600 s (BOOT_TIMEOUT 90 + in a container CRI_TIMEOUT 20 + a 70 s reset + JOIN_ATTEMPTS 3 x (a 250 s attempt + a 70 s reset) + ssh calls;
#         with FLANNEL_INTERFACE, NODE_TIMEOUT 120 for its Node and three 20 s API calls; CLUSTER_INFO_TIMEOUT 60
#         for a stale cluster-info and two 20 s API calls)
# stdout: one summary line, e.g. "tenant-a-w1 joined 172.18.255.200:6443"
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA NODE
join_attempts=${JOIN_ATTEMPTS:-3}
machine=false
if [[ ${NODE_TRANSPORT:-docker} == ssh ]]; then
	require_env LAB_ID LAB_IDENTITY TENANT
	machine=true
fi
# Budget: every attempt is cut off inside the node after attempt_seconds (kubeadm's
# own timeouts below end it sooner), plus the reset after it (reset_seconds, cut off
# inside the node; the same budget leave-worker.sh gives it) and the pause.
# Each attempt has a token of its own that outlives that attempt only: whoever reads it (the team
# credential reads kube-system's Secrets, docs/security.md) could join a machine of its own as a node,
# whose client certificate Kamaji approves (clastix/kamaji internal/kubeadm/bootstraptoken.go
# @26.8.2-edge: AutoApproveNodeBootstrapTokens). The attempt deletes it when it ends; the expiry
# bounds it if this run is killed first.
attempt_seconds=240
reset_seconds=60
token_ttl_minutes=$(((attempt_seconds + 10 + 59) / 60 + 1))

wait_for_node "${BOOT_TIMEOUT:-90}"

kubeconfig_file KUBECONFIG_DATA
endpoint=$(kubeconfig_endpoint)
ca_hash=$(tenant_ca_hash)

# A container worker's containerd must give privileged pods none of its devices, which are the host's:
# every runtime of its CRI runs with privileged_without_host_devices (set by the script the container
# starts with, components/worker_node.py). Proven on the running containerd, through the CRI, before
# the node is joined or left as it is: crictl info renders the CRI config under .config, each runtime
# with the key (containerd internal/cri/config/config.go@v2.3.4 and pkg/cri/config/config.go@v1.7.29,
# Runtime; internal/cri/server/status.go@v2.3.4). A machine's containerd is its owner's (docs/beyond-one-host.md).
if ! $machine; then
	# shellcheck disable=SC2016 # Go template variables
	runtimes_template='{{range $name, $runtime := .config.containerd.runtimes}}{{$name}}={{$runtime.privileged_without_host_devices}} {{end}}'
	listed=
	read_runtimes() { listed=$(node_exec crictl --runtime-endpoint "$cri_socket" info -o go-template --template "$runtimes_template"); }
	retry "${CRI_TIMEOUT:-20}" "$RETRY_INTERVAL" read_runtimes ||
		die "$NODE: its containerd did not answer crictl info within ${CRI_TIMEOUT:-20}s, so nothing proves that privileged pods there get no host devices (see: journalctl -u containerd on $NODE)"
	read -r -a runtimes <<<"$listed"
	with_host_devices=()
	for runtime in "${runtimes[@]}"; do
		[[ ${runtime#*=} == true ]] || with_host_devices+=("${runtime%%=*}")
	done
	((${#runtimes[@]} > 0)) ||
		die "$NODE: containerd's CRI lists no runtime, so nothing proves that privileged pods there get no host devices; the join stops here"
	((${#with_host_devices[@]} == 0)) ||
		die "$NODE: containerd gives privileged pods the host's devices through runtime(s) ${with_host_devices[*]} (privileged_without_host_devices is not true); the join stops here (see: journalctl -u containerd and /etc/containerd/config.toml on $NODE)"
fi

# The address by which this machine's flanneld finds FLANNEL_INTERFACE: the address itself, or the
# first global IPv4 address of the interface so named. Read before anything on the machine changes,
# so an interface it lacks stops the join with the machine's own addresses in the message. The name
# is looked up on this machine only; the tenant's flannel gets no interface (components/flannel.py).
flannel_address=
if [[ -n ${FLANNEL_INTERFACE:-} ]]; then
	require_env FLANNEL_NAMESPACE
	addresses=$(node_exec ip -4 -o addr show) || die "$NODE: could not list its IPv4 addresses (ip -4 -o addr show)"
	# Lines: "<index>: <name> inet <address>/<prefix> [brd <address>] scope <scope> <name>\ ...".
	# shellcheck disable=SC2016 # awk's own variables
	by_address='$3 == "inet" { split($4, a, "/"); s = ""; for (i = 5; i < NF; i++) if ($i == "scope") s = $(i + 1)
		print $2, a[1], s }'
	addresses=$(awk "$by_address" <<<"$addresses")
	if [[ $FLANNEL_INTERFACE =~ ^[0-9]+(\.[0-9]+){3}$ ]]; then
		flannel_address=$(awk -v want="$FLANNEL_INTERFACE" '$2 == want { print $2; exit }' <<<"$addresses")
		what="an interface with the address $FLANNEL_INTERFACE (its flannelInterface, or its nodeIp)"
	else
		flannel_address=$(awk -v want="$FLANNEL_INTERFACE" '$1 == want && $3 == "global" { print $2; exit }' <<<"$addresses")
		what="an interface $FLANNEL_INTERFACE (its flannelInterface) with a global IPv4 address"
	fi
	[[ -n $flannel_address ]] ||
		die "$NODE has no $what, so flannel could not carry its pods' traffic; its IPv4 addresses: $(awk '{ print $1, $2 }' <<<"$addresses" | paste -sd',' - | sed 's/,/, /g')"
fi

# mark_machine: write the lab's mark (lib.sh lab_marker) on the machine: this lab and stack,
# the tenant, and the binding this join makes.
# shellcheck disable=SC2016 # expanded by the machine's shell
mark_machine() {
	node_exec sh -c 'mkdir -p "$(dirname "$1")" && printf "%s\n" "$2" >"$1"' mark "$lab_marker" \
		"$(printf 'lab=%s\nid=%s\ntenant=%s\nbinding=%s %s' "$LAB_ID" "$LAB_IDENTITY" "$TENANT" "$endpoint" "$ca_hash")" >&2
}

node_timeout=${NODE_TIMEOUT:-120}
node_registered() { [[ -n $(kube get node "$NODE" --ignore-not-found -o name) ]]; }

# point_flannel: with FLANNEL_INTERFACE, give this node's flanneld its address as a Node annotation. flanneld
# reads it only when it starts and then takes the interface holding it (flannel-io/flannel main.go and
# pkg/subnet/kube/kube.go GetStoredPublicIP@v0.28.9; key from pkg/subnet/kube/annotations.go@v0.28.9), so
# a flannel pod already on the node (the DaemonSet's pods carry app=flannel, chart/kube-flannel/templates/
# daemonset.yaml@v0.28.9) is deleted and its DaemonSet starts one that reads it. The address a running
# flanneld advertises (public-ip, written in AcquireLease, kube.go@v0.28.9) tells whether it already uses it.
node_address_key=flannel.alpha.coreos.com/node-public-ip
point_flannel() {
	[[ -n $flannel_address ]] || return 0
	retry "$node_timeout" "$RETRY_INTERVAL" node_registered ||
		die "$NODE: its Node did not appear within ${node_timeout}s of the join, so its pod network address could not be set (see: journalctl -u kubelet on $NODE)"
	local seen
	seen=$(kube get node "$NODE" -o 'jsonpath={.metadata.annotations.flannel\.alpha\.coreos\.com/node-public-ip} {.metadata.annotations.flannel\.alpha\.coreos\.com/public-ip}') ||
		die "$NODE: could not read its Node's annotations"
	if [[ $seen == "$flannel_address $flannel_address" ]]; then
		log "$NODE: flannel already carries its pods' traffic on $flannel_address"
		return 0
	fi
	kube annotate node "$NODE" --overwrite "$node_address_key=$flannel_address" >&2 ||
		die "$NODE: could not annotate its Node with $node_address_key=$flannel_address; flannel would pick its default route's interface"
	kube -n "$FLANNEL_NAMESPACE" delete pod -l app=flannel --field-selector "spec.nodeName=$NODE" \
		--ignore-not-found --wait=false >&2 ||
		die "$NODE: could not restart its flannel pod, which may use another interface; delete it: kubectl -n $FLANNEL_NAMESPACE delete pod -l app=flannel --field-selector spec.nodeName=$NODE"
	log "$NODE: flannel carries its pods' traffic on the interface holding $flannel_address"
}

node_binding=$(node_binding)
if [[ -n $node_binding ]]; then
	if [[ $node_binding == "$endpoint $ca_hash" ]]; then
		# Bound to this tenant's CA, which only this lab has: its mark is brought up to date.
		if $machine; then
			mark_machine || warn "could not mark $NODE as this lab's"
		fi
		# Its Node may be gone (deleted by hand, or by a leave that could not reach the
		# node); the kubelet registers it again only when it starts. Only an answer that
		# it is gone counts: an unreachable API server says nothing about the Node.
		node_found=$(kube get node "$NODE" --ignore-not-found -o name) ||
			die "$NODE is joined to this tenant, but the tenant API at $endpoint did not say whether its Node exists; its kubelet is left as it is"
		if [[ -z $node_found ]]; then
			log "$NODE is joined to this tenant but has no Node; restarting its kubelet so it registers"
			node_exec systemctl restart kubelet >&2
			retry "$node_timeout" "$RETRY_INTERVAL" node_registered ||
				die "$NODE: its kubelet did not register a Node within ${node_timeout}s of a restart (see: journalctl -u kubelet on $NODE)"
		fi
		point_flannel
		log "$NODE already joined this tenant ($endpoint, CA $ca_hash); nothing to do"
		printf '%s already joined %s\n' "$NODE" "$endpoint"
		exit 0
	fi
	log "$NODE is bound to ${node_binding% *} (CA ${node_binding#* }), not to this tenant ($endpoint, CA $ca_hash)"
fi

# Runs on the machine: the lab's mark ($1), if any, and every sign of Kubernetes on it, whoever put it
# there ($2: the CRI socket). A kubelet service that is enabled but not running is no sign: installing
# kubelet per kubeadm's guide enables it, and it restarts until kubeadm writes its config (kubernetes/website
# content/en/docs/setup/production-environment/tools/kubeadm/install-kubeadm.md).
# shellcheck disable=SC2016 # expanded by the machine's shell
in_machine_state='
if [ -f "$1" ]; then
	echo mark=present
	sed -n "s/^lab=/mark_lab=/p; s/^id=/mark_id=/p; s/^tenant=/mark_tenant=/p; s/^binding=/mark_binding=/p" "$1"
fi
for path in /etc/kubernetes/kubelet.conf /etc/kubernetes/bootstrap-kubelet.conf /etc/kubernetes/admin.conf \
	/etc/kubernetes/pki/ca.crt /etc/kubernetes/manifests/kube-apiserver.yaml /var/lib/etcd/member; do
	[ -e "$path" ] && echo "found=$path"
done
[ -n "$(ls -A /var/lib/kubelet 2>/dev/null)" ] && echo "found=/var/lib/kubelet (not empty)"
[ "$(systemctl is-active kubelet 2>/dev/null)" = active ] && echo "found=a running kubelet service"
pods=$(timeout 10 crictl --runtime-endpoint "$2" pods -q 2>/dev/null | grep -c .)
[ "${pods:-0}" -gt 0 ] && echo "found=$pods pod sandbox(es) in the CRI"
for link in cni0 flannel.1; do
	ip link show "$link" >/dev/null 2>&1 && echo "found=the $link link"
done
exit 0'

# machine_is_ours: whether this lab may reset the machine; refuses (exits) when the machine holds
# Kubernetes state that is not provably this lab's. Reads the machine afresh on every call; what that
# state allows is scripts/reset_policy.py's decision, made on this host.
reset_policy=$(dirname "${BASH_SOURCE[0]}")/reset_policy.py
machine_is_ours() {
	local state bound_now decision
	state=$(node_exec sh -c "$in_machine_state" state "$lab_marker" "$cri_socket") ||
		die "$NODE: could not read its state over ssh"
	bound_now=$(node_binding)
	decision=$(python3 "$reset_policy" --node "$NODE" --lab-id "$LAB_ID" --identity "$LAB_IDENTITY" \
		--binding "$endpoint $ca_hash" --bound-now "$bound_now" --adopt "${ADOPT:-false}" <<<"$state") ||
		die "$NODE: could not decide whether it may be reset ($reset_policy failed, see above)"
	case ${decision%% *} in
	join)
		log "${decision#* }"
		return 1
		;;
	reset) log "${decision#* }" ;;
	adopt) warn "${decision#* }" ;;
	*) die "${decision#* }" ;; # refuse
	esac
}

# reset_if_ours: reset the node, a machine only once it is proven this lab's (or adopted), checked
# right before. A failed or killed reset keeps the mark; the join then fails, and the next run may
# reset the machine again.
reset_if_ours() {
	if $machine && ! machine_is_ours; then
		return 0
	fi
	reset_node "$reset_seconds" || die "resetting $NODE failed (see above); it keeps the lab's mark, so the next run can reset it again"
}
reset_if_ours

# kube-proxy and the CNI need bridged traffic to pass iptables; the module
# lives in the host kernel, so a failure here is only worth a warning.
node_exec modprobe br_netfilter >&2 ||
	warn "modprobe br_netfilter failed in $NODE; make sure the host has it loaded"

# Bootstrap tokens are [a-z0-9]{6}.[a-z0-9]{16}; hex digits are a valid subset.
random_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }
token_name=
expiration=
join_token=

# delete_bootstrap_token: ends the current attempt's token at once (the exit hook too: a run killed
# between create and delete leaves it only until it expires).
delete_bootstrap_token() {
	[[ -n $token_name ]] || return 0
	kube -n kube-system delete secret "$token_name" --ignore-not-found >&2 ||
		warn "could not delete Secret kube-system/$token_name; it expires at $expiration"
	token_name=
}
at_exit delete_bootstrap_token

# create_bootstrap_token: a new token for one attempt, in join_token.
create_bootstrap_token() {
	local token_id token_secret
	token_id=$(random_hex 3)
	token_secret=$(random_hex 8)
	token_name=bootstrap-token-$token_id
	expiration=$(date -u -d "+$token_ttl_minutes minutes" +%Y-%m-%dT%H:%M:%SZ)
	join_token=$token_id.$token_secret
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
}

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

# join_configuration: the JoinConfiguration of one attempt, with its token.
join_configuration() {
	cat <<CONFIG
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: "$endpoint"
    token: "$join_token"
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
}

# kubeadm join gives the kubelet the API server that kube-public/cluster-info names, not the endpoint it
# discovered through (kubernetes cmd/kubeadm/app/discovery/discovery.go, For, as indexed for v1.36). Kamaji
# rewrites cluster-info only when its content no longer matches what Kamaji last wrote, not when the tenant's
# address moves, and re-creates it when it is gone (clastix/kamaji internal/resources/kubeadm_utils.go,
# KubeadmBootstrap; controllers/soot/controllers/kubeadm_phase.go @26.8.2-edge). It writes the server of the
# tenant's super-admin.conf, not of admin.conf (internal/utilities/tenant_client.go GetTenantKubeconfig,
# internal/kubeadm/bootstraptoken.go @26.8.2-edge), and issues the two in separate steps (controllers/
# resources.go, getKubeconfigResources): re-created while super-admin.conf still names the old address, it
# names that again, and stays so. So one that names another address is deleted, again each time Kamaji
# writes it back; a missing one is Kamaji's to create (the attempts below wait for it).
cluster_info_endpoint() {
	server_named_in "$(kube -n kube-public get configmap cluster-info -o 'jsonpath={.data.kubeconfig}' 2>/dev/null)"
}
named=
deletions=0
# cluster_info_current: whether cluster-info names this endpoint, or is missing and was never deleted here;
# deletes one that names another address.
cluster_info_current() {
	named=$(cluster_info_endpoint)
	[[ $named == "$endpoint" ]] && return 0
	if [[ -z $named ]]; then
		((deletions > 0)) || return 0
		progress "waiting for Kamaji to write kube-public/cluster-info for $endpoint (it names nothing yet)"
		return 1
	fi
	if ((deletions == 0)); then
		log "kube-public/cluster-info names $named, not $endpoint; deleting it for Kamaji to write it again"
	else
		progress "Kamaji wrote kube-public/cluster-info for $named again (from a super-admin.conf not yet issued for $endpoint); deleting it again"
	fi
	kube -n kube-public delete configmap cluster-info --ignore-not-found >&2 ||
		die "could not delete kube-public/cluster-info, which names $named instead of $endpoint"
	deletions=$((deletions + 1))
	return 1
}
retry "${CLUSTER_INFO_TIMEOUT:-60}" "$RETRY_INTERVAL" cluster_info_current ||
	die "Kamaji did not write kube-public/cluster-info for $endpoint within ${CLUSTER_INFO_TIMEOUT:-60}s" \
		"(it names ${named:-nothing}); a worker joining now would be sent another address"

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
	create_bootstrap_token || {
		warn "could not create a bootstrap token for $NODE"
		delete_bootstrap_token
		return 1
	}
	local status=0
	node_exec -i sh -c "$in_node_join" join "$join_config_path" "$attempt_seconds" <<<"$(join_configuration)" >&2 ||
		status=$?
	delete_bootstrap_token
	return "$status"
}
attempt=1
until join_attempt; do
	warn "kubeadm join of $NODE failed (attempt $attempt/$join_attempts); resetting the node"
	reset_if_ours
	((attempt < join_attempts)) ||
		die "kubeadm join of $NODE to $endpoint failed $join_attempts times (see the kubeadm output above)"
	sleep "$RETRY_INTERVAL"
	attempt=$((attempt + 1))
done

point_flannel
log "$NODE joined the tenant at $endpoint"
printf '%s joined %s\n' "$NODE" "$endpoint"
