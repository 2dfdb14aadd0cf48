"""A team's policy applied to one request: size in GPU equivalents, lifetime, and the verdict.

Quota is counted in GPU equivalents: a whole GPU is 1, a MIG slice its compute slices / 7 (or
memory slots / 8 when PORTAL_MIG_SHARE_RULE=memory). Billing uses the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from fractions import Fraction

from portal.accounts.models import Team
from portal.fleet.geometry import ProfileShape
from portal.fleet.selectors import slice_share
from portal.workloads.models import LIVE_STATES, Workload, WorkloadState

QUOTA_STATES = [s for s in LIVE_STATES if s != WorkloadState.TERMINATING]


def fraction_to_decimal(value: Fraction, places: str = "0.001") -> Decimal:
    return (Decimal(value.numerator) / Decimal(value.denominator)).quantize(Decimal(places))


def request_share(*, count: int, shape: ProfileShape | None, replicas: int = 1) -> Fraction:
    """GPU equivalents a request stands for (all replicas together)."""
    if shape is not None:
        numerator, denominator = slice_share(shape)
        return Fraction(numerator, denominator) * replicas
    return Fraction(count) * replicas


def workload_share(sandbox: Workload) -> Fraction:
    shape = sandbox.gpu_type.model.profile(sandbox.mig_profile) if sandbox.mig_profile else None
    return request_share(count=sandbox.gpu_count, shape=shape, replicas=sandbox.replicas)


def team_committed(team: Team) -> Fraction:
    """GPU equivalents the team's live sandboxes and deployments hold or wait for (ending ones
    excluded)."""
    live = Workload.objects.filter(team=team, state__in=QUOTA_STATES).select_related("gpu_type")
    return sum((workload_share(s) for s in live), Fraction(0))


def hours_between(start: datetime, end: datetime) -> Decimal:
    return Decimal((end - start).total_seconds()) / Decimal(3600)


@dataclass(frozen=True)
class Verdict:
    auto_approved: bool
    why_needed: str  # empty when auto-approved


def verdict(
    *,
    team: Team,
    count: int,
    is_slice: bool,
    lifetime_hours: Decimal,
    hourly_cost: Decimal,
    budget_left: Decimal,
    replicas: int = 1,
) -> Verdict:
    """Approved at once within the team's auto-approval lines; otherwise a lead decides.
    `count` is whole GPUs per replica; `hourly_cost` is for all replicas."""
    reasons = []
    if not is_slice and count * replicas > team.auto_approve_max_gpus:
        reasons.append(f"more than {team.auto_approve_max_gpus} whole GPU(s)")
    if is_slice and replicas > 1:
        reasons.append("more than one MIG slice")
    if lifetime_hours > team.auto_approve_max_hours:
        reasons.append(f"longer than {team.auto_approve_max_hours.normalize():f} hours")
    if hourly_cost * lifetime_hours > budget_left:
        reasons.append("over what is left of the team's monthly budget")
    if reasons:
        return Verdict(False, "Needs a lead's approval: " + " and ".join(reasons) + ".")
    return Verdict(True, "")
