#!/usr/bin/env bash
# Checks that a machine can become a worker of its tenant, before kubeadm touches
# it, and reports every problem at once, each line naming the machine. One probe
# runs on the machine over ssh and prints what it finds as key=value lines; the
# judgement happens here.
#
# env:    NODE                machine name = Kubernetes node name
#         KUBERNETES_VERSION  the tenant's, e.g. v1.36.4: the kubeadm that joins must run its minor, the kubelet that
#                             minor or up to three older and never newer than kubeadm's (skew policies below); any patch
#         KUBECONFIG_DATA     the tenant's admin kubeconfig: read only for a kubeadm older than the tenant, to tell
#                             whether the machine is already joined to this tenant (then kubeadm runs no join)
#         ENDPOINT            the tenant API server as host:port, which the machine must reach
#         KONNECTIVITY_PORT   the tenant's Konnectivity server port on the same host, which the machine must reach too
#         REAL_GPUS           optional, true: the NVIDIA driver, container toolkit and default runtime must be set up (default false)
#         NODE_TRANSPORT      ssh, with the SSH_* variables (scripts/lib.sh)
#         BOOT_TIMEOUT        optional, seconds to wait for the machine to answer (default 90)
# bound:  200 s (BOOT_TIMEOUT 90 + one probe, cut off after 60 s on the machine, + ssh's 10 s connect + slack)
# stdout: one summary line, e.g. "gpu-1 can join v1.36.4 at 10.0.0.5:6443"
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env NODE KUBERNETES_VERSION ENDPOINT KONNECTIVITY_PORT
real_gpus=${REAL_GPUS:-false}
[[ $KUBERNETES_VERSION =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "KUBERNETES_VERSION must be vX.Y.Z, got '$KUBERNETES_VERSION'"
tenant_major=${BASH_REMATCH[1]} tenant_minor=${BASH_REMATCH[2]}
wanted_minor="$tenant_major.$tenant_minor"
wait_for_node "${BOOT_TIMEOUT:-90}"

# Runs on the machine (any POSIX sh; the endpoint probe needs bash). The CNI
# plugins are the ones flannel's chain calls (bridge via flannel, portmap) plus
# what kubelet and host-local IPAM need.
# shellcheck disable=SC2016 # expanded by the machine's shell
probe='
echo "kubeadm=$(kubeadm version -o short 2>/dev/null)"
echo "kubelet=$(kubelet --version 2>/dev/null)"
echo "kubectl=$(command -v kubectl)"
echo "containerd=$(systemctl is-active containerd 2>/dev/null)"
# "containerd <package> <version> <revision>" (containerd/containerd cmd/containerd/command/main.go @v2.2.7).
echo "containerd_version=$(containerd --version 2>/dev/null)"
# The CRI on the socket the join names, and the cgroup driver of the default runtime as the CRI plugin
# runs it: crictl info renders the CRI config of containerd under .config, whose containerd section holds
# defaultRuntimeName and runtimes.<name>.options (kubernetes-sigs/cri-tools cmd/crictl/info.go and
# util.go outputStatusData @v1.36.0; containerd internal/cri/config/config.go and server/status.go @v2.2.7).
# crictl runs templates with missingkey=error (cmd/crictl/templates.go @v1.36.0), so a runtime whose options
# lack SystemdCgroup would fail ".options.SystemdCgroup" as if no CRI answered. The fields the JSON of containerd
# always has are read by name; the options, free-form TOML, through index, which gives <no value> for a missing key.
template="{{with .config.containerd}}{{with index .runtimes .defaultRuntimeName}}{{with .options}}{{index . \"SystemdCgroup\"}}{{end}}{{end}}{{end}}"
if cri=$(crictl --runtime-endpoint "$5" info -o go-template --template "$template" 2>&1); then
	echo cri=answers
	echo "systemd_cgroup=$(printf "%s\n" "$cri" | tail -n 1)"
else
	echo "cri_error=$(printf "%s\n" "$cri" | tail -n 1)"
fi
# containerd 2.x migrates a disabled "cri" to its full ID io.containerd.grpc.v1.cri (cmd/containerd/server/config/config.go @v2.2.7).
echo "disabled_plugins=$(containerd config dump 2>/dev/null | sed -n "s/^disabled_plugins = //p" | head -n 1)"
for plugin in bridge host-local portmap loopback; do
	[ -x "/opt/cni/bin/$plugin" ] || echo "cni_missing=$plugin"
done
# What kubeadm join looks up in PATH, mandatory ones first (kubernetes/kubernetes
# cmd/kubeadm/app/preflight/checks_linux.go addExecChecks, as indexed for v1.36; conntrack only before v1.32).
for tool in ip iptables mount nsenter; do
	command -v "$tool" >/dev/null 2>&1 || echo "exec_missing=$tool"
done
for tool in ebtables ethtool socat tc touch; do
	command -v "$tool" >/dev/null 2>&1 || echo "exec_optional_missing=$tool"
done
# Port-10250: kubeadm join listens on it to see it is free (checks.go PortOpenCheck); a listening TCP socket
# shows as local port 280A in state 0A in /proc/net/tcp and tcp6.
grep -qsE "^ *[0-9]+: [0-9A-Fa-f]+:280A [0-9A-Fa-f]+:[0-9A-Fa-f]+ 0A " /proc/net/tcp /proc/net/tcp6 && echo port_10250=in-use
echo "kubelet_service=$(systemctl is-active kubelet 2>/dev/null)"
[ -f /sys/fs/cgroup/cgroup.controllers ] && echo cgroup=v2 || echo cgroup=v1
echo "swap_devices=$(tail -n +2 /proc/swaps | wc -l)"
echo "ip_forward=$(sysctl -n net.ipv4.ip_forward 2>/dev/null)"
echo "bridge_nf_call_iptables=$(sysctl -n net.bridge.bridge-nf-call-iptables 2>/dev/null)"
# A module built into the kernel is listed in modules.builtin and needs no loading (modules.builtin(5)).
if grep -qs "/br_netfilter\.ko$" "/lib/modules/$(uname -r)/modules.builtin"; then
	echo br_netfilter=builtin
elif [ -d /sys/module/br_netfilter ]; then
	echo br_netfilter=loaded
else
	echo br_netfilter=absent
fi
# What comes back after a reboot: every directory systemd reads (modules-load.d(5), sysctl.d(5); /lib where
# /usr is not merged). A sysctl.d key may be written with dots or slashes, and with a leading "-".
persisted() {
	for dir in /etc /run /usr/local/lib /usr/lib /lib; do
		grep -qsxE "$2" "$dir/$1"/*.conf && return 0
	done
	return 1
}
persisted modules-load.d "[[:space:]]*br[_-]netfilter[[:space:]]*" && echo br_netfilter_persisted=yes || echo br_netfilter_persisted=no
one="[[:space:]]*=[[:space:]]*1[[:space:]]*"
persisted sysctl.d "[[:space:]]*-?net[./]ipv4[./]ip_forward$one" && echo ip_forward_persisted=yes || echo ip_forward_persisted=no
persisted sysctl.d "[[:space:]]*-?net[./]bridge[./]bridge-nf-call-iptables$one" &&
	echo bridge_nf_call_iptables_persisted=yes || echo bridge_nf_call_iptables_persisted=no
if timeout 5 bash -c ": </dev/tcp/$1/$2" 2>/dev/null; then echo endpoint=reachable; else echo endpoint=unreachable; fi
if timeout 5 bash -c ": </dev/tcp/$1/$4" 2>/dev/null; then echo konnectivity=reachable; else echo konnectivity=unreachable; fi
if [ "$3" = true ]; then
	echo "gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU ")"
	echo "container_toolkit=$(nvidia-ctk --version 2>/dev/null | head -n 1)"
	# containerd 1.x quotes TOML strings with ", 2.x with \047.
	echo "default_runtime=$(containerd config dump 2>/dev/null | sed -n "s/^ *default_runtime_name = //p" | tr -d "\"\047" | head -n 1)"
fi'

# Cut off on the machine: a hung tool would keep the ssh session (and its keepalives) going.
facts=$(node_exec timeout 60 sh -c "$probe" probe "${ENDPOINT%:*}" "${ENDPOINT##*:}" "$real_gpus" "$KONNECTIVITY_PORT" \
	"$cri_socket") ||
	die "$NODE: the machine check could not run over ssh"

# fact KEY: the value of KEY= in the probe's answer (the first one).
fact() { sed -n "s/^$1=//p" <<<"$facts" | head -n 1; }

problems=()
# unmet WHAT FIX: a setting of the machine is not what the join needs. Every call
# names a fixed FIX, which docs/beyond-one-host.md lists (tests/test_machine_ssh.py checks).
unmet() { problems+=("$1; fix: $2"); }
# not_persisted WHAT FIX: a setting that is right now would be lost on a reboot: a warning, with a FIX
# docs/beyond-one-host.md lists as well.
not_persisted() {
	warn "$NODE: $1 now, but no modules-load.d or sysctl.d file under /etc, /run, /usr/local/lib, /usr/lib or /lib sets it, so a reboot loses it; fix: $2"
}

# read_release TOOL: sets TOOL_minor and TOOL_found from the v<tenant major> release TOOL reports; any other
# answer is a problem, and returns 1.
read_release() {
	local version found
	version=$(fact "$1")
	found=$(grep -oE 'v[0-9]+\.[0-9]+\.[0-9]+' <<<"$version" | head -n 1 || true)
	if [[ -z $version ]]; then
		problems+=("$1 is not installed (install $1 $KUBERNETES_VERSION)")
	elif [[ ! $found =~ ^v([0-9]+)\.([0-9]+)\. ]] || ((BASH_REMATCH[1] != tenant_major)); then
		problems+=("$1 is '$version', not a v$tenant_major release (install the v$wanted_minor release)")
	else
		printf -v "$1_minor" '%s' "${BASH_REMATCH[2]}"
		printf -v "$1_found" '%s' "$found"
		return 0
	fi
	return 1
}

# joined_to_this_tenant: the machine's kubelet is bound to this tenant's API server and CA, so
# join-worker.sh runs no kubeadm join on it (the same test as there).
# Called as a condition, where `set -e` is off: each failure exits explicitly.
joined_to_this_tenant() {
	local binding server ca_hash
	binding=$(node_binding) || exit 1
	[[ -n $binding ]] || return 1
	require_env KUBECONFIG_DATA
	kubeconfig_file KUBECONFIG_DATA
	server=$(kubeconfig_endpoint) || exit 1
	ca_hash=$(tenant_ca_hash) || exit 1
	[[ $binding == "$server $ca_hash" ]]
}

# Version skew (kubernetes/website content/en/docs/setup/production-environment/tools/kubeadm/create-cluster-kubeadm.md,
# "Version skew policy", and content/en/releases/version-skew-policy.md, as indexed): the kubeadm binary of a
# `kubeadm join` must match the minor that made or last upgraded the cluster, here the tenant's; a kubelet is
# kubeadm's minor or up to three older, and never newer than its API server. Only a machine already joined to
# this tenant may keep an older kubeadm for now: no join runs there, and `kubeadm upgrade node` takes one
# minor at a time (docs/beyond-one-host.md, Upgrading machines).
kubeadm_minor='' kubeadm_found='' kubelet_minor='' kubelet_found=''
if read_release kubeadm; then
	if ((kubeadm_minor > tenant_minor)); then
		problems+=("kubeadm is $kubeadm_found, newer than the tenant's API server $KUBERNETES_VERSION (install the v$wanted_minor release)")
	elif ((kubeadm_minor < tenant_minor)); then
		if joined_to_this_tenant; then
			warn "$NODE: kubeadm is $kubeadm_found, older than the tenant's $KUBERNETES_VERSION; the machine is already joined, so no kubeadm join runs on it; upgrade it to v$wanted_minor (docs/beyond-one-host.md, Upgrading machines)"
		else
			problems+=("kubeadm is $kubeadm_found, but the kubeadm that joins a machine must run the tenant's minor, v$wanted_minor (kubeadm's version skew policy; install the v$wanted_minor release)")
		fi
	fi
fi
if read_release kubelet; then
	if ((kubelet_minor > tenant_minor)); then
		problems+=("kubelet is $kubelet_found, newer than the tenant's API server $KUBERNETES_VERSION (install the v$wanted_minor release)")
	elif [[ -n $kubeadm_minor ]] && ((kubelet_minor > kubeadm_minor)); then
		problems+=("kubelet is $kubelet_found, newer than kubeadm $kubeadm_found (kubeadm's version skew policy: upgrade kubeadm first, to v$wanted_minor)")
	elif ((kubelet_minor < tenant_minor - 3)); then
		problems+=("kubelet is $kubelet_found, older than the v$tenant_major.$((tenant_minor - 3)) the tenant's $KUBERNETES_VERSION allows (install the v$wanted_minor release)")
	elif ((kubelet_minor < tenant_minor)); then
		warn "$NODE: kubelet is $kubelet_found, older than the tenant's $KUBERNETES_VERSION; the skew policy allows it, upgrade it to v$wanted_minor (docs/beyond-one-host.md, Upgrading machines)"
	fi
fi
[[ -n $(fact kubectl) ]] || problems+=("kubectl is not installed (the join reads the kubelet's binding with it)")
[[ $(fact containerd) == active ]] || problems+=("containerd is not running (systemctl is-active containerd: $(fact containerd))")
# The oldest containerd minor recommended per Kubernetes minor: the "Kubernetes Support" table of
# containerd/containerd RELEASES.md @v2.3.4 (1.36: 2.3.0+, 2.2.0+). Older ones may run, so only a warning.
declare -A oldest_containerd=([36]=2.2)
read -r _ _ containerd_version _ <<<"$(fact containerd_version)" || true
if [[ -n ${oldest_containerd[$tenant_minor]:-} && ${containerd_version#v} =~ ^([0-9]+)\.([0-9]+)\. ]]; then
	oldest=${oldest_containerd[$tenant_minor]}
	if ((BASH_REMATCH[1] < ${oldest%.*} || (BASH_REMATCH[1] == ${oldest%.*} && BASH_REMATCH[2] < ${oldest#*.}))); then
		warn "$NODE: containerd is $containerd_version, older than $oldest, the oldest containerd's RELEASES.md (Kubernetes Support) recommends for Kubernetes v$wanted_minor; upgrade containerd to $oldest or newer"
	fi
fi
# Docker's containerd.io package ships disabled_plugins = ["cri"]: kubeadm only warns, and the kubelet never starts.
if [[ $(fact disabled_plugins) == *cri* ]]; then
	unmet "containerd's cri plugin is disabled (disabled_plugins = $(fact disabled_plugins))" \
		"remove cri from disabled_plugins in /etc/containerd/config.toml, then systemctl restart containerd"
elif [[ $(fact cri) != answers ]]; then
	problems+=("no CRI answers on $cri_socket, the socket the join uses (crictl info: $(fact cri_error))")
# The lab's kubelets use the systemd cgroup driver (kubeadm's default); containerd's runc defaults to cgroupfs.
# A runtime whose options lack the key runs cgroupfs too (<no value>, or nothing without options).
elif [[ $(fact systemd_cgroup) != true ]]; then
	case $(fact systemd_cgroup) in
	false) driver="sets SystemdCgroup = false" ;;
	"" | "<no value>") driver="has no SystemdCgroup option, so the systemd cgroup driver is not set" ;;
	*) driver="has SystemdCgroup = '$(fact systemd_cgroup)'" ;;
	esac
	unmet "containerd's default runtime $driver, but the kubelet uses the systemd cgroup driver" \
		"set SystemdCgroup = true in the options of containerd's default runtime in /etc/containerd/config.toml, then systemctl restart containerd"
fi
# kubeadm join fails without these, and warns without the optional ones (FileExisting-<name>).
missing=$(sed -n 's/^exec_missing=//p' <<<"$facts" | paste -sd' ' -)
[[ -z $missing ]] || problems+=("kubeadm join needs $missing in root's PATH, and the machine has none (install iproute2, iptables, mount, util-linux as missing)")
missing=$(sed -n 's/^exec_optional_missing=//p' <<<"$facts" | paste -sd' ' -)
[[ -z $missing ]] || warn "$NODE: kubeadm join will warn that $missing are not in root's PATH; pods that need them (e.g. kubectl port-forward: socat) may fail"
# A kubelet service on the port is the join's business (join-worker.sh: this tenant's, this lab's to reset, or refused).
[[ $(fact port_10250) != in-use || $(fact kubelet_service) == active ]] ||
	problems+=("port 10250, the kubelet's, is in use, and not by a running kubelet service (kubeadm join's preflight refuses the machine; see: ss -ltnp sport = :10250)")
missing=$(sed -n 's/^cni_missing=//p' <<<"$facts" | paste -sd' ' -)
[[ -z $missing ]] || problems+=("CNI plugins missing from /opt/cni/bin: $missing (install the containernetworking plugins)")
[[ $(fact cgroup) == v2 ]] ||
	unmet "runs cgroup v1" "boot with systemd.unified_cgroup_hierarchy=1 on the kernel command line"
[[ $(fact swap_devices) == 0 ]] ||
	unmet "swap is on (the kubelet refuses to start)" "swapoff -a, and remove the swap entries from /etc/fstab"
# kubeadm join's preflight fails without IPv4 forwarding (FileContentCheck of
# /proc/sys/net/ipv4/ip_forward = 1: kubernetes/kubernetes cmd/kubeadm/app/preflight/checks.go JoinNodeChecks
# and checks_linux.go addIPv4Checks, master as indexed after v1.32; the v1.36 tag was too large to fetch).
[[ $(fact ip_forward) == 1 ]] ||
	unmet "net.ipv4.ip_forward is '$(fact ip_forward)', not 1 (kubeadm join's preflight refuses the machine)" \
		"echo net.ipv4.ip_forward=1 >/etc/sysctl.d/90-kubernetes-forward.conf && sysctl --system"
# kube-proxy's iptables rules and flannel's bridge see pod-to-pod traffic only through br_netfilter;
# one built into the kernel is always there.
[[ $(fact br_netfilter) == loaded || $(fact br_netfilter) == builtin ]] ||
	unmet "the br_netfilter kernel module is not loaded" "modprobe br_netfilter"
[[ $(fact bridge_nf_call_iptables) == 1 ]] ||
	unmet "net.bridge.bridge-nf-call-iptables is '$(fact bridge_nf_call_iptables)', not 1 (bridged pod traffic bypasses kube-proxy's rules)" \
		"echo net.bridge.bridge-nf-call-iptables=1 >/etc/sysctl.d/90-kubernetes-bridge.conf && sysctl --system"
# Set now but in none of the directories systemd reads at boot: the machine works until its next reboot.
[[ $(fact br_netfilter) != loaded || $(fact br_netfilter_persisted) == yes ]] ||
	not_persisted "br_netfilter is loaded" "echo br_netfilter >/etc/modules-load.d/br_netfilter.conf"
[[ $(fact ip_forward) != 1 || $(fact ip_forward_persisted) == yes ]] ||
	not_persisted "net.ipv4.ip_forward is 1" "echo net.ipv4.ip_forward=1 >/etc/sysctl.d/90-kubernetes-forward.conf && sysctl --system"
[[ $(fact bridge_nf_call_iptables) != 1 || $(fact bridge_nf_call_iptables_persisted) == yes ]] ||
	not_persisted "net.bridge.bridge-nf-call-iptables is 1" \
		"echo net.bridge.bridge-nf-call-iptables=1 >/etc/sysctl.d/90-kubernetes-bridge.conf && sysctl --system"
[[ $(fact endpoint) == reachable ]] || problems+=("cannot reach the tenant API server at $ENDPOINT")
[[ $(fact konnectivity) == reachable ]] ||
	problems+=("cannot reach the tenant's Konnectivity server at ${ENDPOINT%:*}:$KONNECTIVITY_PORT (kubectl logs and exec, and HAMi's webhook, go through it)")
if [[ $real_gpus == true ]]; then
	[[ $(fact gpus) =~ ^[1-9] ]] || problems+=("nvidia-smi lists no GPU (is the NVIDIA driver installed and loaded?)")
	[[ -n $(fact container_toolkit) ]] || problems+=("the NVIDIA container toolkit is not installed (nvidia-ctk not found)")
	# HAMi's NVIDIA path needs it (Project-HAMi/HAMi README.md@v2.10.0, Prerequisites).
	[[ $(fact default_runtime) == nvidia ]] ||
		problems+=("containerd's default runtime is '$(fact default_runtime)', not nvidia (nvidia-ctk runtime configure --runtime=containerd --set-as-default)")
fi

if ((${#problems[@]})); then
	for problem in "${problems[@]}"; do log "$NODE: $problem"; done
	die "$NODE cannot join its tenant: ${#problems[@]} problem(s) above"
fi
log "$NODE can join: kubeadm and kubelet within the tenant's skew of v$wanted_minor, containerd's CRI with the systemd cgroup driver, CNI plugins, cgroup v2, no swap, IPv4 forwarding, br_netfilter, $ENDPOINT and Konnectivity reachable"
printf '%s can join %s at %s\n' "$NODE" "$KUBERNETES_VERSION" "$ENDPOINT"
