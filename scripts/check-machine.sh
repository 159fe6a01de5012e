#!/usr/bin/env bash
# Checks that a machine can become a worker of its tenant, before kubeadm touches
# it, and reports every problem at once, each line naming the machine. One probe
# runs on the machine over ssh and prints what it finds as key=value lines; the
# judgement happens here.
#
# env:    NODE                machine name = Kubernetes node name
#         KUBERNETES_VERSION  the tenant's, e.g. v1.36.4: kubeadm may run its minor or one older, the kubelet up to
#                             three older (Kubernetes' version skew policy); never a newer minor, any patch
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
# The CRI on the socket the join names, and the cgroup driver of the default runtime as the CRI plugin
# runs it: crictl info renders the CRI config of containerd under .config, whose containerd section holds
# defaultRuntimeName and runtimes.<name>.options (kubernetes-sigs/cri-tools cmd/crictl/info.go and
# util.go outputStatusData @v1.36.0; containerd internal/cri/config/config.go and server/status.go @v2.2.7).
template="{{with .config.containerd}}{{with index .runtimes .defaultRuntimeName}}{{.options.SystemdCgroup}}{{end}}{{end}}"
if cri=$(crictl --runtime-endpoint "$5" info -o go-template --template "$template" 2>/dev/null); then
	echo cri=answers
	echo "systemd_cgroup=$(printf "%s\n" "$cri" | tail -n 1)"
else
	echo "cri_error=$(crictl --runtime-endpoint "$5" info 2>&1 >/dev/null | tail -n 1)"
fi
# containerd 2.x migrates a disabled "cri" to its full ID io.containerd.grpc.v1.cri (cmd/containerd/server/config/config.go @v2.2.7).
echo "disabled_plugins=$(containerd config dump 2>/dev/null | sed -n "s/^disabled_plugins = //p" | head -n 1)"
for plugin in bridge host-local portmap loopback; do
	[ -x "/opt/cni/bin/$plugin" ] || echo "cni_missing=$plugin"
done
[ -f /sys/fs/cgroup/cgroup.controllers ] && echo cgroup=v2 || echo cgroup=v1
echo "swap_devices=$(tail -n +2 /proc/swaps | wc -l)"
echo "ip_forward=$(sysctl -n net.ipv4.ip_forward 2>/dev/null)"
echo "bridge_nf_call_iptables=$(sysctl -n net.bridge.bridge-nf-call-iptables 2>/dev/null)"
[ -d /sys/module/br_netfilter ] && echo br_netfilter=loaded || echo br_netfilter=absent
grep -qsx "br_netfilter" /etc/modules-load.d/*.conf && echo br_netfilter_persisted=yes || echo br_netfilter_persisted=no
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

# How many minors older than the tenant each may be: kubeadm compares major.minor only, and upgrades a
# node one minor at a time; a kubelet may be up to three minors older than its API server (Kubernetes'
# version skew policy). So the control plane may go first, and its machines follow (docs/beyond-one-host.md).
for tool_behind in kubeadm:1 kubelet:3; do
	tool=${tool_behind%:*} behind=${tool_behind#*:}
	version=$(fact "$tool")
	found=$(grep -oE 'v[0-9]+\.[0-9]+\.[0-9]+' <<<"$version" | head -n 1 || true)
	oldest="$tenant_major.$((tenant_minor - behind))"
	if [[ -z $version ]]; then
		problems+=("$tool is not installed (install $tool $KUBERNETES_VERSION)")
	elif [[ ! $found =~ ^v([0-9]+)\.([0-9]+)\. ]] || ((BASH_REMATCH[1] != tenant_major)); then
		problems+=("$tool is '$version', not a v$tenant_major release (install the v$wanted_minor release)")
	elif ((BASH_REMATCH[2] > tenant_minor)); then
		problems+=("$tool is $found, newer than the tenant's API server $KUBERNETES_VERSION (install the v$wanted_minor release)")
	elif ((BASH_REMATCH[2] < tenant_minor - behind)); then
		problems+=("$tool is $found, older than the v$oldest the tenant's $KUBERNETES_VERSION allows (install the v$wanted_minor release)")
	elif ((BASH_REMATCH[2] < tenant_minor)); then
		warn "$NODE: $tool is $found, older than the tenant's $KUBERNETES_VERSION; the skew policy allows it, upgrade it to v$wanted_minor (docs/beyond-one-host.md, Upgrading machines)"
	fi
done
[[ -n $(fact kubectl) ]] || problems+=("kubectl is not installed (the join reads the kubelet's binding with it)")
[[ $(fact containerd) == active ]] || problems+=("containerd is not running (systemctl is-active containerd: $(fact containerd))")
# Docker's containerd.io package ships disabled_plugins = ["cri"]: kubeadm only warns, and the kubelet never starts.
if [[ $(fact disabled_plugins) == *cri* ]]; then
	unmet "containerd's cri plugin is disabled (disabled_plugins = $(fact disabled_plugins))" \
		"remove cri from disabled_plugins in /etc/containerd/config.toml, then systemctl restart containerd"
elif [[ $(fact cri) != answers ]]; then
	problems+=("no CRI answers on $cri_socket, the socket the join uses (crictl info: $(fact cri_error))")
# The lab's kubelets use the systemd cgroup driver (kubeadm's default); containerd's runc defaults to cgroupfs.
elif [[ $(fact systemd_cgroup) != true ]]; then
	unmet "containerd's default runtime does not set SystemdCgroup = true (it has '$(fact systemd_cgroup)'), but the kubelet uses the systemd cgroup driver" \
		"set SystemdCgroup = true in the options of containerd's default runtime in /etc/containerd/config.toml, then systemctl restart containerd"
fi
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
# kube-proxy's iptables rules and flannel's bridge see pod-to-pod traffic only through br_netfilter.
[[ $(fact br_netfilter) == loaded ]] ||
	unmet "the br_netfilter kernel module is not loaded" "modprobe br_netfilter"
[[ $(fact br_netfilter_persisted) == yes ]] ||
	unmet "br_netfilter is not listed in /etc/modules-load.d (it is gone after a reboot)" \
		"echo br_netfilter >/etc/modules-load.d/br_netfilter.conf"
[[ $(fact bridge_nf_call_iptables) == 1 ]] ||
	unmet "net.bridge.bridge-nf-call-iptables is '$(fact bridge_nf_call_iptables)', not 1 (bridged pod traffic bypasses kube-proxy's rules)" \
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
