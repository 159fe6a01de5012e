#!/usr/bin/env bash
# Joins a kindest/node worker container to its Kamaji tenant with kubeadm.
# The tenant admin kubeconfig stays on the host: it mints a short-lived
# bootstrap token, and only that token (plus the public CA hash) enters the
# worker, through stdin inside a kubeadm JoinConfiguration, so it appears in no
# command line (processes in the container are visible in the host's `ps`).
#
# env:    KUBECONFIG_DATA  tenant admin kubeconfig
#         NODE             worker container name = hostname = Kubernetes node name
#         BOOT_TIMEOUT     optional, seconds to wait for systemd in the container (default 90)
#         JOIN_ATTEMPTS    optional, kubeadm join attempts (default 3)
# bound:  1000 s (BOOT_TIMEOUT 90 + JOIN_ATTEMPTS 3 x kubeadm's 5 min discovery timeout, kubeadm v1beta4 defaults)
# stdout: one summary line, e.g. "tenant-a-w1 joined 172.18.255.200:6443"
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA NODE
join_attempts=${JOIN_ATTEMPTS:-3}
token_ttl_minutes=15

wait_for_systemd "$NODE" "${BOOT_TIMEOUT:-90}"

# A second kubeadm join over a joined node fails preflight (kubelet.conf, port 10250).
if docker exec "$NODE" test -e /etc/kubernetes/kubelet.conf; then
	log "$NODE already joined (/etc/kubernetes/kubelet.conf exists); nothing to do"
	printf '%s already joined\n' "$NODE"
	exit 0
fi

# kube-proxy and the CNI need bridged traffic to pass iptables; the module
# lives in the host kernel, so a failure here is only worth a warning.
docker exec "$NODE" modprobe br_netfilter >&2 ||
	warn "modprobe br_netfilter failed in $NODE; make sure the host has it loaded"

kubeconfig_file KUBECONFIG_DATA
endpoint=$(kubeconfig_endpoint)

# kubeadm pins discovery to the SHA-256 of the CA's DER-encoded public key (SPKI).
ca_data=$(kube config view --raw --minify -o 'jsonpath={.clusters[0].cluster.certificate-authority-data}')
[[ -n $ca_data ]] || die "the tenant kubeconfig has no certificate-authority-data"
ca_hash=sha256:$(base64 -d <<<"$ca_data" | openssl x509 -pubkey -noout |
	openssl pkey -pubin -outform der | openssl dgst -sha256 -r | cut -d' ' -f1)

# Bootstrap tokens are [a-z0-9]{6}.[a-z0-9]{16}; hex digits are a valid subset.
random_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }
token_id=$(random_hex 3)
token_secret=$(random_hex 8)
token_name=bootstrap-token-$token_id
expiration=$(date -u -d "+$token_ttl_minutes minutes" +%Y-%m-%dT%H:%M:%SZ)

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
  criSocket: unix:///run/containerd/containerd.sock
  ignorePreflightErrors: [SystemVerification, Swap]
CONFIG
)

# Runs inside the node: keep the config on tmpfs (/run) only while kubeadm needs it.
# shellcheck disable=SC2016 # expanded by the node's shell
in_node_join='
set -eu
config=/run/kamaji-hami-lab-join.yaml
trap "rm -f $config" EXIT
umask 077
cat >"$config"
kubeadm join --config "$config"'

# Kamaji finishes the tenant's bootstrap RBAC (cluster-info, kubelet-config
# access) after the control plane is Ready, so the first attempts may be refused.
# Every failure is reset, also the last, so that a later re-run never takes a
# half-joined node (kubelet.conf already written) for a joined one.
attempt=1
until docker exec -i "$NODE" bash -c "$in_node_join" <<<"$join_configuration" >&2; do
	warn "kubeadm join of $NODE failed (attempt $attempt/$join_attempts); resetting the node"
	docker exec "$NODE" kubeadm reset --force >&2 || warn "kubeadm reset in $NODE failed"
	((attempt < join_attempts)) ||
		die "kubeadm join of $NODE to $endpoint failed $join_attempts times (see the kubeadm output above)"
	sleep "$RETRY_INTERVAL"
	attempt=$((attempt + 1))
done

log "$NODE joined the tenant at $endpoint"
printf '%s joined %s\n' "$NODE" "$endpoint"
