"""The checks, in the order they run: platform first, GPU workloads last."""

from validation.checks.audit import audit_trail
from validation.checks.base import Check
from validation.checks.datastore import datastore
from validation.checks.gpu_scheduling import fractional, quota, sharing
from validation.checks.hami import gpu_capacity, webhook
from validation.checks.konnectivity import konnectivity
from validation.checks.observability import observability
from validation.checks.platform import load_balancer, platform
from validation.checks.team_isolation import team_isolation
from validation.checks.tenancy import control_plane, isolation, nodes

CHECKS: tuple[Check, ...] = (
    platform,
    load_balancer,
    control_plane,
    isolation,
    audit_trail,
    datastore,
    nodes,
    konnectivity,
    team_isolation,
    webhook,
    gpu_capacity,
    fractional,
    sharing,
    quota,
    observability,
)
CHECKS_BY_NAME = {check.name: check for check in CHECKS}
