"""A team's policy, in one place: quota left, budget left, and the verdict on a request, a scale
and an extension. The estimates, the requests and the leads' approvals all call these, so what an
estimate promises is what the request gets.

Quota is counted in GPU equivalents: a whole GPU is 1, a MIG slice its compute slices / 7 (or
memory slots / 8 when PORTAL_MIG_SHARE_RULE=memory). Billing uses the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_DOWN, ROUND_UP, Decimal
from fractions import Fraction

from portal.accounts.models import Team
from portal.core.errors import DomainError, QuotaExceeded, ValidationFailed
from portal.core.text import counted
from portal.fleet.geometry import ProfileShape
from portal.fleet.selectors import price_per_hour, slice_share
from portal.spend.selectors import hourly_rate, team_month_spend
from portal.spend.target_budgets import budgets_exceeded
from portal.workloads.models import LIVE_STATES, NEEDS_A_LEAD, Workload, WorkloadState

QUOTA_STATES = [s for s in LIVE_STATES if s != WorkloadState.TERMINATING]


def fraction_to_decimal(value: Fraction, places: str = "0.001") -> Decimal:
    return (Decimal(value.numerator) / Decimal(value.denominator)).quantize(Decimal(places))


def equivalents_text(value: Decimal, rounding: str) -> str:
    """GPU equivalents as people read them: at most two decimals ("7.71", "16"). What is left is
    rounded down and what is needed up, so a refusal never reads as if the request would fit."""
    return f"{value.quantize(Decimal('0.01'), rounding=rounding).normalize():f}"


def request_share(*, count: int, shape: ProfileShape | None, replicas: int = 1) -> Fraction:
    """GPU equivalents a request stands for (all replicas together)."""
    if shape is not None:
        numerator, denominator = slice_share(shape)
        return Fraction(numerator, denominator) * replicas
    return Fraction(count) * replicas


def workload_share(workload: Workload) -> Fraction:
    return replica_share(workload) * workload.replicas


def replica_share(workload: Workload) -> Fraction:
    """GPU equivalents one replica of the workload stands for (a deployment scaled to zero too)."""
    shape = workload.gpu_type.model.profile(workload.mig_profile) if workload.mig_profile else None
    return request_share(count=workload.gpu_count, shape=shape)


def team_committed(team: Team) -> Fraction:
    """GPU equivalents the team's live sandboxes and deployments hold or wait for (ending ones
    excluded)."""
    live = Workload.objects.filter(team=team, state__in=QUOTA_STATES).select_related("gpu_type")
    return sum((workload_share(s) for s in live), Fraction(0))


def hours_between(start: datetime, end: datetime) -> Decimal:
    return Decimal((end - start).total_seconds()) / Decimal(3600)


def quota_left(*, team: Team) -> Decimal:
    """GPU equivalents the team may still ask for (one query). Lock the team row first when the
    answer decides a write."""
    return team.quota_gpus - fraction_to_decimal(team_committed(team))


def budget_left(*, team: Team, now: datetime) -> Decimal:
    """What is left of the team's monthly budget at `now`, in cents."""
    return team.monthly_budget - team_month_spend(team=team, now=now)


def share_hourly_cost(*, price_per_gpu_hour: Decimal, share: Fraction) -> Decimal:
    """What `share` GPU equivalents cost an hour, unrounded (totals round to cents)."""
    return price_per_gpu_hour * Decimal(share.numerator) / Decimal(share.denominator)


def workload_price_per_hour(*, workload: Workload, price_per_gpu_hour: Decimal) -> Decimal:
    """What a placed or waiting workload costs an hour at this price (its share to 6 places)."""
    return price_per_gpu_hour * fraction_to_decimal(workload_share(workload), "0.000001")


def within_max_lifetime(*, team: Team, lifetime_hours: Decimal) -> bool:
    return lifetime_hours <= team.max_lifetime_hours


@dataclass(frozen=True)
class Verdict:
    """Policy's answer: refused outright (`refusal`, e.g. over quota), approved at once, or for a
    lead to decide and why. `quota_left` is known for requests and scales."""

    auto_approved: bool
    why_needed: str  # empty when auto-approved
    refusal: DomainError | None = None
    quota_left: Decimal | None = None

    @property
    def fits_quota(self) -> bool:
        return not isinstance(self.refusal, QuotaExceeded)

    def enforce(self) -> Verdict:
        """Raise the refusal, if any; else return the verdict for the approval decision."""
        if self.refusal is not None:
            raise self.refusal
        return self


@dataclass(frozen=True)
class PolicyEstimate:
    """What a request would cost and what the policy says of it; each kind's estimate adds its own."""

    hourly_cost: Decimal
    total_cost: Decimal
    gpu_equivalents: Decimal
    quota_left: Decimal
    fits_quota: bool
    auto_approved: bool
    why_needed: str


def _needs_lead(reasons: list[str]) -> tuple[bool, str]:
    if reasons:
        return False, NEEDS_A_LEAD + " and ".join(reasons) + "."
    return True, ""


def _request_reasons(
    *,
    team: Team,
    count: int,
    is_slice: bool,
    replicas: int,
    lifetime_hours: Decimal,
    hourly_cost: Decimal,
    now: datetime,
    user_id: int | None = None,
    project: str = "",
) -> list[str]:
    """Which of the team's auto-approval lines a request (all replicas) passes; `user_id` and
    `project`: whose budgets in the team it counts against besides the team's."""
    reasons = []
    if not is_slice and count * replicas > team.auto_approve_max_gpus:
        reasons.append(f"more than {counted(team.auto_approve_max_gpus, 'whole GPU')}")
    if is_slice and replicas > 1:
        reasons.append("more than one MIG slice")
    if lifetime_hours > team.auto_approve_max_hours:
        reasons.append(f"longer than {team.auto_approve_max_hours.normalize():f} hours")
    over = _over_budget(
        team=team, cost=hourly_cost * lifetime_hours, now=now, user_id=user_id, project=project
    )
    if over:
        reasons.append(over)
    return reasons


def _over_budget(
    *, team: Team, cost: Decimal, now: datetime, user_id: int | None = None, project: str = ""
) -> str:
    """Why a cost needs a lead under the team's budget policy ("" when it does not): over what is
    left of the team's budget, or of the user's or the project's in the team, with the overage,
    unless the team only warns."""
    if team.budget_policy == Team.BudgetPolicy.WARN:
        return ""
    reasons = []
    left = budget_left(team=team, now=now)
    if cost > left:
        overage = cost - max(left, Decimal(0))
        reasons.append(
            f"over what is left of the team's monthly budget (${max(left, Decimal(0)):,.2f} left; "
            f"this costs up to ${cost:,.2f}, ${overage:,.2f} over)"
        )
    reasons += budgets_exceeded(team=team, user_id=user_id, project=project, cost=cost, now=now)
    return " and ".join(reasons)


def request_verdict(
    *,
    team: Team,
    count: int,
    is_slice: bool,
    share: Fraction,
    lifetime_hours: Decimal,
    hourly_cost: Decimal,
    now: datetime,
    replicas: int = 1,
    user_id: int | None = None,
    project: str = "",
) -> Verdict:
    """A new request: refused beyond the quota left, approved at once within the team's
    auto-approval lines, else a lead decides. `count` is whole GPUs per replica; `share` and
    `hourly_cost` are for all replicas."""
    left = quota_left(team=team)
    wanted = fraction_to_decimal(share)
    refusal = None
    if wanted > left:
        refusal = QuotaExceeded(
            f"Team {team.name} has {equivalents_text(left, ROUND_DOWN)} of "
            f"{equivalents_text(team.quota_gpus, ROUND_DOWN)} GPU equivalents left; this request needs "
            f"{equivalents_text(wanted, ROUND_UP)}. Ask for fewer GPUs or a smaller slice, or end some of "
            "the team's running work first.",
            fields={"quota_left": str(left), "requested": str(wanted)},
        )
    reasons = _request_reasons(
        team=team,
        count=count,
        is_slice=is_slice,
        replicas=replicas,
        lifetime_hours=lifetime_hours,
        hourly_cost=hourly_cost,
        now=now,
        user_id=user_id,
        project=project,
    )
    auto_approved, why_needed = _needs_lead(reasons)
    return Verdict(auto_approved, why_needed, refusal=refusal, quota_left=left)


def scale_verdict(*, workload: Workload, team: Team, replicas: int, now: datetime) -> Verdict:
    """Scaling a deployment up to `replicas`: the added replicas must fit the quota left, and the
    whole deployment is judged like a new request of that many replicas."""
    added = replicas - workload.replicas
    extra = replica_share(workload) * added
    left = quota_left(team=team)
    refusal = None
    if fraction_to_decimal(extra) > left:
        refusal = QuotaExceeded(
            f"Team {team.name} has {equivalents_text(left, ROUND_DOWN)} GPU equivalents left; "
            f"{counted(added, 'more replica')} {'needs' if added == 1 else 'need'} "
            f"{equivalents_text(fraction_to_decimal(extra), ROUND_UP)}. Scale to fewer replicas, or end "
            "some of the team's running work first.",
            fields={"quota_left": str(left), "requested": str(fraction_to_decimal(extra))},
        )
    live = [a for a in workload.allocations.all() if a.ended_at is None]
    if live and workload.replicas:
        per_replica = hourly_rate(live) / workload.replicas  # at the prices its replicas hold
    else:  # scaled to zero: at today's price
        share = replica_share(workload)
        per_replica = price_per_hour(gpu_type=workload.gpu_type, at=now) * share.numerator / share.denominator
    reasons = _request_reasons(
        team=team,
        count=workload.gpu_count,
        is_slice=bool(workload.mig_profile),
        replicas=replicas,
        lifetime_hours=workload.lifetime_hours,
        hourly_cost=per_replica * replicas,
        now=now,
        user_id=workload.owner_id,
        project=workload.project,
    )
    auto_approved, why_needed = _needs_lead(reasons)
    return Verdict(auto_approved, why_needed, refusal=refusal, quota_left=left)


def extended_expiry(*, workload: Workload, hours: Decimal) -> datetime | None:
    """Its expiry moved by `hours`; None while it has none (it has not started running)."""
    if workload.expires_at is None:
        return None
    return workload.expires_at + timedelta(seconds=float(hours * 3600))


def extended_lifetime(*, workload: Workload, hours: Decimal) -> Decimal:
    """The whole lifetime, in hours from its start, the workload would have if extended by `hours`."""
    return workload.lifetime_hours + hours


def extension_verdict(*, workload: Workload, hours: Decimal, now: datetime) -> Verdict:
    """Extending by `hours`: refused past the team's maximum lifetime, immediate while the whole
    lifetime stays within the auto-approval line and the added hours within the budget left."""
    team = workload.team
    lifetime = extended_lifetime(workload=workload, hours=hours)
    if not within_max_lifetime(team=team, lifetime_hours=lifetime):
        refusal = ValidationFailed(
            f"That would make the {workload.kind} live {lifetime.quantize(Decimal('0.1'))} hours; "
            f"team {team.name} allows at most {team.max_lifetime_hours.normalize():f} hours.",
            fields={"hours": ["Beyond the team's maximum lifetime."]},
        )
        return Verdict(False, "", refusal=refusal)
    reasons = []
    if lifetime > team.auto_approve_max_hours:
        reasons.append(
            f"the {workload.kind} would live longer than {team.auto_approve_max_hours.normalize():f} hours"
        )
    price = price_per_hour(gpu_type=workload.gpu_type, at=now)
    hourly = workload_price_per_hour(workload=workload, price_per_gpu_hour=price)
    over = _over_budget(
        team=team, cost=hourly * hours, now=now, user_id=workload.owner_id, project=workload.project
    )
    if over:
        reasons.append(f"the added hours are {over}")
    auto_approved, why_needed = _needs_lead(reasons)
    return Verdict(auto_approved, why_needed)
