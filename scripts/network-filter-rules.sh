#!/usr/bin/env bash
# Installs or removes the lab's filter on its docker network: what a container worker may reach.
# network-filter.sh runs it on the Docker host, as root in a short-lived `--net=host` container of the
# node image (which ships iptables); tests/test_network_filter_netns.py runs it in a private network
# namespace. Self-contained: it reaches the container on stdin, without lib.sh.
#
# A worker of tenant T may reach T's other workers (and the pods behind them), T's API address on
# API_PORTS, and anything off the lab's network (the outside world, DNS servers); on the host, only
# DNS. Every other address of the network (other tenants' workers, the kind node, every MetalLB
# address but T's API ports, Grafana), 169.254.0.0/16 and ports other containers publish on the host
# are dropped. Replies to connections made
# the other way (the kind node, the host) pass. Allowed traffic is not accepted here but handed back
# to Docker's own rules: the filter only ever drops.
#
# The rules live in two chains named from the lab's identity, jumped to from DOCKER-USER (Docker's
# iptables backend) or FORWARD (its nftables backend, which has no DOCKER-USER), and from INPUT,
# each jump with the identity in a comment. Nothing else is touched: a second lab's chains and
# Docker's own stay as they are.
#
# env:    FILTER_ACTION     install | remove
#         LAB_IDENTITY      the lab's identity, 32 hex digits (scripts/lab-identity.sh)
#         FIREWALL_BACKEND  Docker's firewall backend as `docker info` names it; empty before Docker 29 (iptables)
#         install only:
#         BRIDGE            the network's bridge interface on the host
#         SUBNET            the network's IPv4 subnet
#         API_PORTS         comma-separated ports of a tenant's API address a worker may reach
#         TENANTS           a line per tenant: <name> <API address> <pod CIDR> <worker address>...
# stdout: nothing
set -euo pipefail

log() { printf '[network-filter] %s\n' "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

ipv4='([0-9]{1,3}\.){3}[0-9]{1,3}'
[[ ${LAB_IDENTITY:-} =~ ^[0-9a-f]{32}$ ]] || die "LAB_IDENTITY must be 32 hex digits, not '${LAB_IDENTITY:-}'"
# iptables takes chain names of up to 28 characters: 16 hex digits of the identity are enough to tell labs apart.
forward_chain="KHL-${LAB_IDENTITY:0:16}-FWD"
input_chain="KHL-${LAB_IDENTITY:0:16}-IN"
comment="kamaji-hami-lab $LAB_IDENTITY: container workers' filter"

# has_chain TOOL CHAIN: the chain exists in TOOL's filter table.
has_chain() { "$1" -w 5 -t filter -S "$2" >/dev/null 2>&1; }

# our_jumps TOOL: `-D ...` lines (iptables-restore input) for every jump to the lab's chains.
our_jumps() {
	local parent
	for parent in DOCKER-USER FORWARD INPUT; do
		has_chain "$1" "$parent" || continue
		"$1" -w 5 -t filter -S "$parent" | grep -E -- " -j ($forward_chain|$input_chain)\$" | sed 's/^-A /-D /' || true
	done
}

remove() {
	local tool jumps chains
	for tool in iptables-nft iptables-legacy; do
		command -v "$tool" >/dev/null 2>&1 || continue
		jumps=$(our_jumps "$tool") chains=''
		has_chain "$tool" "$forward_chain" && chains+="-F $forward_chain"$'\n'"-X $forward_chain"$'\n'
		has_chain "$tool" "$input_chain" && chains+="-F $input_chain"$'\n'"-X $input_chain"$'\n'
		[[ -n $jumps$chains ]] || continue
		printf '*filter\n%s\n%sCOMMIT\n' "$jumps" "$chains" | sed '/^$/d' | "$tool-restore" -w 5 --noflush ||
			die "cannot remove the lab's filter from $tool"
		log "removed the lab's filter ($forward_chain, $input_chain) from $tool"
	done
}

# rule_count TOOL: how many rules TOOL's tables hold (as kind's entrypoint weighs legacy against nft).
rule_count() { { "$1-save" || true; } 2>/dev/null | grep -c '^-' || true; }

# Where Docker's rules are, so the jumps sit beside them: DOCKER-USER in whichever iptables backend
# holds it. Both are called by name: the node image's plain `iptables` is the backend its entrypoint
# picks at boot (kubernetes-sigs/kind images/base/files/usr/local/bin/entrypoint@v0.33.0-alpha,
# select_iptables), which `--entrypoint bash` never runs. Docker's nftables backend has no DOCKER-USER
# (moby/moby daemon/libnetwork/firewall_linux.go@docker-v29.7.2, setupUserChains): the jumps then go into
# iptables-nft's FORWARD, a base chain of its own on the same netfilter hook, where a drop is final whatever
# Docker's chains accept.
choose_tool() {
	if [[ $FIREWALL_BACKEND == nftables* ]]; then
		command -v iptables-nft >/dev/null 2>&1 || die "Docker uses its nftables firewall backend, and this image has no iptables-nft"
		tool=iptables-nft parent=FORWARD
		return
	fi
	local found=() candidate
	for candidate in iptables-nft iptables-legacy; do
		command -v "$candidate" >/dev/null 2>&1 && has_chain "$candidate" DOCKER-USER && found+=("$candidate")
	done
	case ${#found[@]} in
	0) die "found no DOCKER-USER chain in iptables-nft or iptables-legacy, where Docker's iptables backend keeps it: is dockerd running with --iptables=false? The lab's filter needs Docker's iptables rules" ;;
	1) tool=${found[0]} ;;
	# Both: the one holding more rules, as that entrypoint picks.
	*) if (($(rule_count iptables-legacy) >= $(rule_count iptables-nft))); then tool=iptables-legacy; else tool=iptables-nft; fi ;;
	esac
	parent=DOCKER-USER
}

# Same-bridge traffic (worker to worker, worker to kind node) meets iptables only with br_netfilter's
# bridge-nf-call-iptables on in the host's network namespace. Docker turns it on only for a network
# without inter-container communication or without the userland proxy (moby/moby
# libnetwork/drivers/bridge/bridge_linux.go@v28.5.2, enableBrNfCallIptables; the same at docker-v29.7.2),
# neither of which is the lab's; the workers load the module (join-worker.sh), which turns it on.
check_bridge_filtering() {
	local setting=/proc/sys/net/bridge/bridge-nf-call-iptables
	[[ -e $setting ]] || modprobe br_netfilter 2>/dev/null || true
	[[ -e $setting ]] || die "the br_netfilter kernel module is not loaded, so traffic between containers on the lab's network bypasses iptables and the filter could not hold; run: sudo modprobe br_netfilter (and add br_netfilter to /etc/modules-load.d/ to keep it)"
	[[ $(<"$setting") == 1 ]] || die "net.bridge.bridge-nf-call-iptables is $(<"$setting") on this host, so traffic between containers on the lab's network bypasses iptables and the filter could not hold; run: sudo sysctl -w net.bridge.bridge-nf-call-iptables=1 (and keep it in /etc/sysctl.d/)"
}

# rules: the two chains' rules, iptables-restore input.
rules() {
	local name api pods workers worker other seen_pods=' '
	printf -- '-A %s ! -i %s -j RETURN\n' "$forward_chain" "$BRIDGE"
	printf -- '-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN\n' "$forward_chain"
	printf -- '-A %s ! -i %s -j RETURN\n' "$input_chain" "$BRIDGE"
	printf -- '-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN\n' "$input_chain"
	while read -r name api pods workers; do
		[[ -n $name ]] || continue
		# Pod to pod across a tenant's workers keeps the pods' addresses (kindnet masquerades only what leaves
		# the pod network). Tenants may share a pod CIDR: a node's routes lead only to its own tenant's
		# workers, and changing them takes root on the node, which Pod Security keeps from a tenant's pods.
		# A pod's address towards the rest of the network, which kindnet always masquerades, is dropped.
		if [[ $seen_pods != *" $pods "* ]]; then
			seen_pods+="$pods "
			printf -- '-A %s -s %s -m conntrack --ctstate DNAT -j DROP\n' "$forward_chain" "$pods"
			printf -- '-A %s -s %s -d %s -j RETURN\n' "$forward_chain" "$pods" "$pods"
			printf -- '-A %s -s %s -d %s -j DROP\n' "$forward_chain" "$pods" "$SUBNET"
			printf -- '-A %s -s %s -d 169.254.0.0/16 -j DROP\n' "$forward_chain" "$pods"
		fi
		for worker in $workers; do
			# A port another container publishes on the host is a DNAT there, to an address off the lab's
			# network that would pass below as the outside world: nothing of the lab's is reached that way.
			printf -- '-A %s -s %s -m conntrack --ctstate DNAT -j DROP\n' "$forward_chain" "$worker"
			for other in $workers; do
				[[ $other == "$worker" ]] || printf -- '-A %s -s %s -d %s -j RETURN\n' "$forward_chain" "$worker" "$other"
			done
			printf -- '-A %s -s %s -d %s -j RETURN\n' "$forward_chain" "$worker" "$pods"
			printf -- '-A %s -s %s -d %s -p tcp -m multiport --dports %s -j RETURN\n' \
				"$forward_chain" "$worker" "$api" "$API_PORTS"
			printf -- '-A %s -s %s -d %s -j DROP\n' "$forward_chain" "$worker" "$SUBNET"
			printf -- '-A %s -s %s -d 169.254.0.0/16 -j DROP\n' "$forward_chain" "$worker"
			# The host itself (the network's gateway and every other address of it): DNS only, in case a
			# resolver of the host's listens there.
			printf -- '-A %s -s %s -p udp --dport 53 -j RETURN\n' "$input_chain" "$worker"
			printf -- '-A %s -s %s -p tcp --dport 53 -j RETURN\n' "$input_chain" "$worker"
			printf -- '-A %s -s %s -j DROP\n' "$input_chain" "$worker"
		done
	done <<<"$TENANTS"
}

check_inputs() {
	local name api pods workers worker
	[[ ${BRIDGE:-} =~ ^[A-Za-z0-9_.-]{1,15}$ ]] || die "BRIDGE must name a network interface, not '${BRIDGE:-}'"
	[[ ${SUBNET:-} =~ ^$ipv4/[0-9]{1,2}$ ]] || die "SUBNET must be an IPv4 CIDR, not '${SUBNET:-}'"
	[[ ${API_PORTS:-} =~ ^[0-9]{1,5}(,[0-9]{1,5})*$ ]] || die "API_PORTS must be ports separated by commas, not '${API_PORTS:-}'"
	[[ -n ${TENANTS:-} ]] || die "TENANTS names no tenant"
	while read -r name api pods workers; do
		[[ -n $name ]] || continue
		[[ $api =~ ^$ipv4$ ]] || die "tenant $name: its API address must be an IPv4 address, not '$api'"
		[[ $pods =~ ^$ipv4/[0-9]{1,2}$ ]] || die "tenant $name: its pod CIDR must be an IPv4 CIDR, not '$pods'"
		[[ -n $workers ]] || die "tenant $name has no worker address"
		for worker in $workers; do
			[[ $worker =~ ^$ipv4$ ]] || die "tenant $name: a worker address must be an IPv4 address, not '$worker'"
		done
	done <<<"$TENANTS"
}

install() {
	check_inputs
	check_bridge_filtering
	local tool parent jumps=''
	choose_tool
	"$tool" -w 5 -t filter -C "$parent" -m comment --comment "$comment" -j "$forward_chain" 2>/dev/null ||
		jumps+="-I $parent 1 -m comment --comment \"$comment\" -j $forward_chain"$'\n'
	"$tool" -w 5 -t filter -C INPUT -m comment --comment "$comment" -j "$input_chain" 2>/dev/null ||
		jumps+="-I INPUT 1 -m comment --comment \"$comment\" -j $input_chain"$'\n'
	# One transaction: declaring a chain that exists flushes it, so a second run leaves the same rules.
	{
		printf '*filter\n:%s - [0:0]\n:%s - [0:0]\n' "$forward_chain" "$input_chain"
		rules
		printf '%sCOMMIT\n' "$jumps"
	} | "$tool-restore" -w 5 --noflush || die "$tool-restore refused the lab's filter"
	log "the lab's filter is in place ($tool: $parent -> $forward_chain, INPUT -> $input_chain)"
}

case ${FILTER_ACTION:-} in
install) install ;;
remove) remove ;;
*) die "FILTER_ACTION must be install or remove, not '${FILTER_ACTION:-}'" ;;
esac
