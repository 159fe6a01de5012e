#!/usr/bin/env bash
# Refuses a tenant Kubernetes version that Kamaji's admission webhook would refuse
# for the running control plane, before anything of the tenant changes: a lower
# minor (a downgrade) or more than one minor up (a skipped minor). Patch releases
# may move either way, as the webhook compares minors only (clastix/kamaji
# internal/webhook/handlers/tcp_version.go@ddbabd8, OnUpdate). Versions newer than
# Kamaji supports are refused earlier, by the config validation.
#
# Both the spec (what the webhook compares against) and the version Kamaji reports
# running count: the status lags the spec while an earlier upgrade is unfinished, and
# Kamaji's upgrade step compares against it (internal/resources/kubeadm_upgrade.go@ddbabd8).
# A tenant without a TenantControlPlane yet is new: any version will do.
#
# A sleeping tenant keeps its version: asleep, Kamaji records the spec's version as
# running without upgrading anything, and its upgrade plan skips the kubelet version
# checks (clastix/kamaji internal/upgrade/kube_version_getter.go@26.8.2-edge, the
# Sleeping branches of ClusterVersion and KubeletVersions; k8s_deployment_resource.go,
# UpdateTenantControlPlaneStatus). So a version change is refused while the tenant
# sleeps, is put to sleep, or wakes in the same run: wake it first, then upgrade. A new
# tenant cannot start asleep either: its workers join through its API server.
#
# Observability, turned on or off, installs or removes its metrics reader in every tenant and upgrades HAMi
# there, through the tenant's API server: with that at 0 replicas the up fails half done (issue 49). Whether the
# tenant is observed now is the reader's token Secret on the management cluster, made once the reader is in the
# tenant (components/observability.py, _tenant_reader; only its name is read), so a change of it is refused in
# the same cases as a version change.
#
# env:    KUBECONFIG_DATA     management cluster kubeconfig
#         TENANT              TenantControlPlane name
#         NAMESPACE           TenantControlPlane namespace
#         KUBERNETES_VERSION  the version the stack config asks for (vMAJOR.MINOR.PATCH)
#         SLEEPING            optional; "true": the stack config puts (or keeps) the tenant asleep
#         OBSERVABILITY       optional; "true" or "false", kamaji-hami-lab:observability as the config asks
#         MONITORING_NAMESPACE  with OBSERVABILITY: the namespace of that token Secret
#         READER_SECRET       with OBSERVABILITY: its name
# stdout: one line, e.g. "tenant-a: v1.35.2 -> v1.36.4"
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env KUBECONFIG_DATA TENANT NAMESPACE KUBERNETES_VERSION
kubeconfig_file KUBECONFIG_DATA
key="the kubernetesVersion of tenant $TENANT (kamaji-hami-lab:tenants[].kubernetesVersion, default kamaji-hami-lab:kubernetesVersion)"

# minor VERSION: the minor of vMAJOR.MINOR.PATCH (a major other than 1 is not a Kubernetes release).
minor() {
	[[ $1 =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || die "tenant $TENANT: cannot read the Kubernetes version '$1'"
	printf '%s\n' "${BASH_REMATCH[1]}"
}

# "<spec version> <running version>", then on a line of its own the replica count a restore holding the tenant
# keeps (snapshot/live.py HOLD_ANNOTATION); nothing at all when the tenant has no control plane yet.
versions=$(kube -n "$NAMESPACE" get tenantcontrolplanes.kamaji.clastix.io "$TENANT" --ignore-not-found \
	-o 'jsonpath={.spec.kubernetes.version} {.status.kubernetesResources.version.version}{"\n"}{.metadata.annotations.kamaji-hami-lab/held-replicas}') ||
	die "tenant $TENANT: cannot read its TenantControlPlane from the management cluster"
read -r spec_version running_version <<<"${versions%%$'\n'*}" || true
held=""
[[ $versions != *$'\n'* ]] || held=${versions#*$'\n'}
# The apply forces the stack's replicas (pulumi.com/patchForce), which would start API servers on a prefix
# the restore has emptied or half written.
[[ -z $held ]] ||
	die "tenant $TENANT is held asleep by a restore that did not finish (annotation kamaji-hami-lab/held-replicas" \
		"on its TenantControlPlane): its etcd prefix may be empty or half written. Finish the restore first:" \
		"make restore TENANT=$TENANT SNAPSHOT=<the snapshot it was restoring>"
if [[ -z ${spec_version:-} && ${SLEEPING:-false} == true ]]; then
	# Its workers join, and HAMi and kube-proxy are installed, through its API server.
	die "tenant $TENANT does not exist yet and cannot be created asleep: create it awake, then set" \
		"kamaji-hami-lab:tenants[].sleeping of tenant $TENANT to true"
fi
if [[ -z ${spec_version:-} ]]; then
	log "tenant $TENANT has no control plane yet; it is created at $KUBERNETES_VERSION"
	printf '%s: new at %s\n' "$TENANT" "$KUBERNETES_VERSION"
	exit 0
fi

sleep_key="kamaji-hami-lab:tenants[].sleeping of tenant $TENANT"
# sleep_state: Kamaji's state of the tenant's control plane (Sleeping while it sleeps); dies when unreadable, so
# call it as state=$(sleep_state), which set -e stops on.
sleep_state() {
	kube -n "$NAMESPACE" get tenantcontrolplanes.kamaji.clastix.io "$TENANT" \
		-o 'jsonpath={.status.kubernetesResources.version.status}' ||
		die "tenant $TENANT: cannot read the state of its TenantControlPlane from the management cluster"
}

if [[ -n ${OBSERVABILITY:-} ]]; then
	require_env MONITORING_NAMESPACE READER_SECRET
	observed=$(kube -n "$MONITORING_NAMESPACE" get secret "$READER_SECRET" --ignore-not-found -o name) ||
		die "tenant $TENANT: cannot read from the management cluster whether observability reads it" \
			"(secret $READER_SECRET in namespace $MONITORING_NAMESPACE)"
	was=false
	[[ -z $observed ]] || was=true
	if [[ $OBSERVABILITY != "$was" ]]; then
		turn=$([[ $OBSERVABILITY == true ]] && echo on || echo off)
		why="turning observability $turn installs or removes its metrics reader in tenant $TENANT and upgrades HAMi"
		why+=" there, which its stopped API server cannot answer"
		[[ ${SLEEPING:-false} != true ]] ||
			die "tenant $TENANT is to sleep while $why. Turn observability $turn with tenant $TENANT awake," \
				"then put it to sleep; or set kamaji-hami-lab:observability back to $was"
		state=$(sleep_state)
		[[ $state != Sleeping ]] ||
			die "tenant $TENANT is asleep, and $why. Wake tenant $TENANT first ($sleep_key: false) with" \
				"kamaji-hami-lab:observability unchanged, then turn it $turn; or set it back to $was"
	fi
fi

if [[ $KUBERNETES_VERSION != "$spec_version" ]]; then
	[[ ${SLEEPING:-false} != true ]] ||
		die "tenant $TENANT runs $spec_version and is to sleep; Kamaji does not upgrade a sleeping control plane." \
			"Keep its kubernetesVersion at $spec_version, or wake it first ($sleep_key: false), then upgrade"
	state=$(sleep_state)
	[[ $state != Sleeping ]] ||
		die "tenant $TENANT is asleep at $spec_version; Kamaji does not upgrade a sleeping control plane." \
			"Wake it first with its kubernetesVersion unchanged ($sleep_key: false), then upgrade"
fi

wanted=$(minor "$KUBERNETES_VERSION")
for current in "$spec_version" ${running_version:+"$running_version"}; do
	have=$(minor "$current")
	((wanted >= have)) ||
		die "tenant $TENANT runs $current; $KUBERNETES_VERSION would be a downgrade, which Kamaji refuses." \
			"Set $key back to v1.$have.x or later"
	((wanted - have <= 1)) ||
		die "tenant $TENANT runs $current; $KUBERNETES_VERSION would skip a minor, which Kamaji refuses." \
			"Upgrade one minor per pulumi up: set $key to a v1.$((have + 1)) release first"
done

log "tenant $TENANT: ${running_version:-$spec_version} -> $KUBERNETES_VERSION is allowed"
printf '%s: %s -> %s\n' "$TENANT" "${running_version:-$spec_version}" "$KUBERNETES_VERSION"
