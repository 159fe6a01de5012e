"""Check: a tenant's team, with its own credential, gets no way out to the host or to another tenant.

Run with the team kubeconfig (the `teamKubeconfigs` output), as a team member would act: pods that would reach
the node are refused at admission, and a pod of the tenant reaches its own API server but no other tenant's
workers and not the metadata address. docs/security.md says what each guard is.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass

from validation import manifests
from validation.answers import mapping, objects, text
from validation.checks.base import per_tenant
from validation.checks.konnectivity import POD_START_TIMEOUT
from validation.checks.tenancy import host_port
from validation.host import CommandResult
from validation.kube import Kubectl, name_of
from validation.lab import Lab
from validation.pods import wait_until_running
from validation.results import CheckFailed, CheckSkipped, CheckUnproven
from validation.stack_outputs import TEAM_KUBECONFIGS, Tenant

# The tenant key that opts out of Pod Security (docs/configuration.md): such a tenant's pods may reach its nodes.
OPTED_OUT = "privileged"
# What kubectl prints for an API server's 403 and 401 (kubernetes/kubectl pkg/cmd/util/helpers.go@v0.36.2,
# StandardErrorMessage: "Error from server (<reason>)"; a 401 reads "You must be logged in to the server").
FORBIDDEN = "(Forbidden)"
UNAUTHORIZED = ("(Unauthorized)", "must be logged in")
# Pod Security's refusal (kubernetes/pod-security-admission admission/admission.go@v0.36.2). A dry run is judged as a
# create: neither its ValidatePod nor the API server's plugin around it (kubernetes/kubernetes
# plugin/pkg/admission/security/podsecurity/admission.go, Validate) looks at dry run; only storing is skipped.
POD_SECURITY_REFUSAL = re.compile(r'violates PodSecurity "([^"]+)"')

KUBELET_PORT = 10250
# kube-proxy's health server listens on every address of the node (kubernetes/kubernetes
# pkg/proxy/apis/config/v1alpha1/defaults.go@v1.36.0: healthzBindAddress 0.0.0.0:10256).
KUBE_PROXY_HEALTH_PORT = 10256
# The cloud metadata address: it hands out a cloud host's credentials to whoever asks.
METADATA = ("169.254.169.254", 80)
# Seconds each connection attempt may take; the probes run side by side, so the exec lasts about this long.
CONNECT_SECONDS = 3
# busybox nc (networking/nc_bloaty.c@1_36_1, built by busybox's defconfig): -z connects and closes, -v -v says how
# each attempt ended: "<host> (<ip>) open", or the error: "Connection refused", a connect that -w cut short as
# ETIMEDOUT ("Connection timed out"), "No route to host". One line per target: "probe <host> <port> <status> <what>".
PROBE_SCRIPT = (
    "set -f; while [ $# -gt 1 ]; do "
    f'( what=$(nc -z -v -v -w {CONNECT_SECONDS} "$1" "$2" 2>&1 </dev/null); status=$?; '
    'echo "probe $1 $2 $status" $what ) & shift 2; done; wait'
)
_PROBE_LINE = re.compile(r"probe (\S+) ([0-9]{1,5}) ([0-9]{1,3})(?: (.*))?")

OPEN, REFUSED, TIMED_OUT, UNREACHABLE, UNCLEAR = "open", "refused", "timed out", "unreachable", "unclear"


@dataclass(frozen=True)
class Target:
    what: str  # for the report: "tenant-b's kubelet on kamaji-tenant-b-w1"
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def reach(status: int, printed: str) -> str:
    """How one nc attempt ended: OPEN, REFUSED, TIMED_OUT, UNREACHABLE, or UNCLEAR when its words are none of these."""
    words = printed.lower()
    if status == 0:
        return OPEN if words.endswith(" open") else UNCLEAR
    if "timed out" in words:
        return TIMED_OUT
    if "refused" in words:
        return REFUSED
    if "no route" in words or "unreachable" in words:
        return UNREACHABLE
    return UNCLEAR


def probe_outcomes(printed: str) -> dict[tuple[str, int], tuple[str, str]]:
    """(host, port) -> (how it ended, what nc said), from the probe script's output; other lines are ignored."""
    outcomes = {}
    for line in printed.splitlines():
        match = _PROBE_LINE.fullmatch(line.strip())
        if match:
            host, port, status, words = match[1], int(match[2]), int(match[3]), (match[4] or "").strip()
            outcomes[(host, port)] = (reach(status, words), words)
    return outcomes


def admission_verdict(access: str, result: CommandResult) -> tuple[str, str]:
    """("refused" | "admitted" | "unauthorized" | "error", what to say) for a dry-run create of a host-access pod."""
    if result.ok:
        return "admitted", f"a {access} pod was admitted"
    if any(words in result.stderr for words in UNAUTHORIZED):
        return "unauthorized", result.error
    if FORBIDDEN in result.stderr:
        level = POD_SECURITY_REFUSAL.search(result.stderr)
        by = f'Pod Security "{level[1]}"' if level else "an admission check"
        return "refused", f"{access} refused (403, {by})"
    return "error", result.error


def team_credential(lab: Lab, tenant: Tenant) -> Kubectl:
    team = lab.team_kubectl(tenant)
    if lab.outputs.team_kubeconfigs is None:
        raise CheckSkipped(
            f"the stack outputs have no {TEAM_KUBECONFIGS} (a lab made before the team credential): "
            "run `make up` to issue it, then validate again"
        )
    if team is None:
        raise CheckUnproven(f"{TEAM_KUBECONFIGS} holds no kubeconfig for {tenant.name}: run `make kubeconfigs`")
    return team


def revoked(team: Kubectl, said: str) -> CheckUnproven:
    return CheckUnproven(
        f"the API server refused the team credential (401: revoked with `make revoke-team`?), so nothing could be "
        f"tried as the team: {said}; `make kubeconfigs` issues a new one ({team.hint})"
    )


def refuse_host_access(team: Kubectl, namespace: str) -> str:
    """Dry-run, as the team, an ordinary pod (it must be admitted) and each host-access pod (each must get a 403)."""

    def dry_run(manifest: dict) -> CommandResult:
        return team.run("create", "-f", "-", "-n", namespace, "--dry-run=server", "-o", "json",
                        stdin=json.dumps(manifest))

    control = dry_run(manifests.sleeper_pod("ordinary-probe"))
    if not control.ok:
        if any(words in control.stderr for words in UNAUTHORIZED):
            raise revoked(team, control.error)
        # The team must run its workloads; a 403 here would also make the refusals below prove nothing.
        raise CheckFailed(f"the team credential may not create an ordinary pod in {namespace}: {control.error}")
    refused, problems = [], []
    for access in manifests.HOST_ACCESS:
        happened, what = admission_verdict(access, dry_run(manifests.host_access_pod(f"{access}-probe", access)))
        if happened == "unauthorized":
            raise revoked(team, what)
        if happened == "error":
            raise CheckUnproven(f"the dry run of a {access} pod ended without an admission verdict: {what}")
        (refused if happened == "refused" else problems).append(what)
    if problems:
        raise CheckFailed(f"{'; '.join(problems)} with the team credential ({team.hint}): the team can reach the host")
    return "; ".join(refused)


def other_tenants_targets(lab: Lab, tenant: Tenant) -> tuple[list[Target], list[str]]:
    """Each awake other tenant's workers (kubelet, kube-proxy's health port), and what was left out and why."""
    targets, left_out = [], []
    for other in lab.tenants:
        if other is tenant:
            continue
        if other.sleeping:
            left_out.append(f"{other.name} sleeps (its workers are stopped: a timeout there would prove nothing)")
            continue
        try:
            nodes = lab.kubectl(other).items("nodes")
        except (CheckFailed, CheckSkipped) as unreadable:
            raise CheckUnproven(f"{other.name}'s worker addresses could not be read: {unreadable}") from None
        for node in nodes:
            name = name_of(node)
            for address in internal_addresses(node):
                targets.append(Target(f"{other.name}'s kubelet on {name}", address, KUBELET_PORT))
                targets.append(Target(f"{other.name}'s kube-proxy on {name}", address, KUBE_PROXY_HEALTH_PORT))
    return targets, left_out


def internal_addresses(node: dict) -> list[str]:
    """The node's InternalIP addresses: a container worker's address on the lab's Docker network."""
    where = f"node {name_of(node)}"
    entries = objects(mapping(node, "status", where), "addresses", where)
    return [text(entry, "address", where) for entry in entries if entry.get("type") == "InternalIP"]


def probe_from_a_pod(lab: Lab, team: Kubectl, namespace: str, targets: list[Target]) -> dict[Target, tuple[str, str]]:
    """Run the probe script in a pod the team creates, one nc per target side by side; each target's outcome."""
    for target in targets:
        usable_host(target)
    team.checked(team.create(manifests.sleeper_pod("probe"), "-n", namespace))
    running = wait_until_running(lab.clock, team, namespace, "probe", POD_START_TIMEOUT)
    arguments = [word for target in targets for word in (target.host, str(target.port))]
    result = team.run("exec", "-n", namespace, "probe", "--", "sh", "-c", PROBE_SCRIPT, "sh", *arguments)
    if not result.ok:
        raise CheckUnproven(f"the probes could not run in pod probe on {running['spec'].get('nodeName', '?')}: "
                            f"{result.error}")
    outcomes = probe_outcomes(result.stdout)
    missing = [target.address for target in targets if (target.host, target.port) not in outcomes]
    if missing:
        raise CheckUnproven(f"the probe pod printed no outcome for {', '.join(missing)}")
    return {target: outcomes[(target.host, target.port)] for target in targets}


def usable_host(target: Target) -> None:
    """Hosts come from API answers and the outputs: an IP address or a DNS name, nothing a shell could misread."""
    try:
        ipaddress.ip_address(target.host)
    except ValueError:
        if not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9.]{0,251}[A-Za-z0-9])?", target.host):
            raise CheckUnproven(f"{target.what} has an unusable address {target.host!r}") from None


def network_verdict(own: Target, outcomes: dict[Target, tuple[str, str]]) -> str:
    """Evidence when the own API server answered and every other target stayed silent; raises otherwise."""
    own_reach, own_words = outcomes[own]
    if own_reach != OPEN:
        raise CheckUnproven(
            f"the probe pod could not reach its own API server at {own.address} "
            f"({own_reach}: {own_words or 'nothing'}), so the silence of the other targets proves nothing"
        )
    reached, unclear, silent = [], [], []
    for target, (how, words) in outcomes.items():
        if target == own:
            continue
        if how in (OPEN, REFUSED):
            # Refused too: the packet got to that host, and its kernel answered.
            reached.append(f"{target.what} at {target.address} answered ({how})")
        elif how == UNCLEAR:
            unclear.append(f"{target.address}: {words or 'nothing printed'}")
        else:
            silent.append(f"{target.what} {target.address} {how}")
    if reached:
        raise CheckFailed(f"from a pod of the tenant, {'; '.join(reached)}")
    if unclear:
        raise CheckUnproven(f"nc's words for {'; '.join(unclear)} are neither an answer nor a timeout")
    return f"own API server {own.address} answers; " + ", ".join(silent)


@per_tenant(
    "team-isolation",
    "as the team: host-access pods refused (403); a pod reaches its API server, not other tenants or metadata",
)
def team_isolation(lab: Lab, tenant: Tenant) -> str:
    team = team_credential(lab, tenant)
    host, port = host_port(tenant.endpoint)
    own = Target(f"{tenant.name}'s API server", host, port or 443)
    others, left_out = other_tenants_targets(lab, tenant)
    targets = [own, *others, Target("the metadata address", *METADATA)]
    with lab.scratch_namespace(lab.kubectl(tenant), "team-isolation") as namespace:
        admission = (
            f"{tenant.name} opted out of Pod Security (podSecurity: {OPTED_OUT}): not tried"
            if tenant.pod_security == OPTED_OUT
            else refuse_host_access(team, namespace)
        )
        network = network_verdict(own, probe_from_a_pod(lab, team, namespace, targets))
    if not others:
        left_out.append("no other tenant's workers were probed, so isolation between tenants is not proven here")
    evidence = "; ".join([admission, network, *left_out])
    if tenant.pod_security == OPTED_OUT:
        # Its own pods may take the node, and through a container worker the host: the network proof cannot hold.
        raise CheckSkipped(
            f"{tenant.name} opted out of Pod Security, so a pod of it can leave its container; {evidence}"
        )
    return f"as {team.cluster}: {evidence}"
