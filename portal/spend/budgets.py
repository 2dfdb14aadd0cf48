"""Budgets people can trust: where a team (or one of its users or project labels, see
`portal.spend.target_budgets`) stands this month, where it will end at this pace, and the day its
budget runs out.

The forecast is the money already spent this month plus what the team's live holds will cost
until the month ends, each only until its workload's expiry (what is scheduled to run), and its
storage for the rest of the month. Nothing is assumed about work not yet asked for. Money stays
Decimal; the same cost definition as everywhere (price x share x hours)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Q
from django.utils import timezone

from portal.accounts.models import Team, User
from portal.accounts.selectors import is_lead
from portal.audit.services import audit_record
from portal.core.errors import NotAllowed, NotFound, ValidationFailed
from portal.fleet.models import Allocation, StorageHold
from portal.spend.models import Budget
from portal.spend.selectors import (
    HOURS_PER_MONTH,
    SECONDS_PER_HOUR,
    team_month_spend,
    team_month_spend_by,
    to_cents,
)

DEFAULT_THRESHOLDS = (50, 80, 100)
ZERO_CENTS = Decimal("0.00")


def month_bounds(now: datetime) -> tuple[datetime, datetime]:
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return start, (start + timedelta(days=32)).replace(day=1)


def thresholds_of(team: Team) -> list[int]:
    return sorted(set(team.budget_thresholds or DEFAULT_THRESHOLDS))


def whole_percent(amount: Decimal, budget: Decimal) -> int:
    """`amount` as a whole percentage of `budget`, rounded down (100 for no budget at all)."""
    return 100 if budget <= 0 else int(amount * 100 / budget)


def percent_label(amount: Decimal, budget: Decimal) -> str:
    """`whole_percent` for people to read: "under 1" for a spend that is not nothing but rounds
    down to 0 (the API's whole percentages say 0)."""
    percent = whole_percent(amount, budget)
    return "under 1" if percent == 0 and amount > 0 else str(percent)


@dataclass(frozen=True)
class Forecast:
    """Where a budget stands this month: the team's own, or one of a user or a project label within
    the team (`kind`, `target`: the username or label), which use the team's thresholds and policy."""

    team: Team
    budget: Decimal
    spent: Decimal  # this month so far, cents
    hourly: Decimal  # what the live holds cost an hour now
    month_end: Decimal  # spent + what the live holds and storage will cost until the month ends, cents
    runs_out_at: datetime | None  # when spend reaches the budget at this pace (None: not this month)
    kind: str = "team"
    target: str = ""

    @property
    def left(self) -> Decimal:
        return self.budget - self.spent

    @property
    def left_shown(self) -> Decimal:
        """What is left, or by how much spend went over (`left` without its sign)."""
        return abs(self.left)

    @property
    def used_percent(self) -> int:
        return whole_percent(self.spent, self.budget)

    @property
    def forecast_percent(self) -> int:
        return whole_percent(self.month_end, self.budget)

    @property
    def used_label(self) -> str:
        return percent_label(self.spent, self.budget)

    @property
    def forecast_label(self) -> str:
        return percent_label(self.month_end, self.budget)

    @property
    def thresholds(self) -> list[int]:
        return thresholds_of(self.team)

    @property
    def over(self) -> bool:
        return self.budget > 0 and self.spent >= self.budget


def _forecast(
    *, team: Team, budget: Decimal, spent: Decimal, holds: Q, storage: Q | None, now: datetime, **target: str
) -> Forecast:
    """A budget's month so far and to come, for the live GPU holds `holds` selects (and storage
    holds `storage` selects, if any): two queries."""
    _, end = month_bounds(now)
    # (cost an hour, until when) for each live GPU hold, stopping at its workload's expiry
    streams: list[tuple[Decimal, datetime]] = []
    for price, numerator, denominator, expires, ttl_hours in Allocation.objects.filter(
        holds, team=team, ended_at__isnull=True
    ).values_list(
        "price_per_hour",
        "share_numerator",
        "share_denominator",
        "workload__expires_at",
        "workload__ttl_hours",
    ):
        if expires is None and ttl_hours is not None:  # placed, not running yet: its lifetime is to come
            expires = now + timedelta(seconds=float(ttl_hours * 3600))
        until = min(expires or end, end)
        if until > now:
            streams.append((price * numerator / denominator, until))
    if storage is not None:
        for price, size in StorageHold.objects.filter(storage, team=team, ended_at__isnull=True).values_list(
            "price_per_gb_month", "size_gb"
        ):
            streams.append((price * size / HOURS_PER_MONTH, end))
    hourly = sum((rate for rate, _ in streams), Decimal(0))
    to_come = sum(
        (rate * Decimal((until - now).total_seconds()) / SECONDS_PER_HOUR for rate, until in streams),
        Decimal(0),
    )
    return Forecast(
        team=team,
        budget=budget,
        spent=spent,
        hourly=hourly,
        month_end=to_cents(spent + to_come),
        runs_out_at=_runs_out(budget - spent, streams, now),
        **target,
    )


def budget_forecast(*, team: Team, now: datetime | None = None, spent: Decimal | None = None) -> Forecast:
    """The team's month so far and to come: two queries besides the month's spend."""
    now = now or timezone.now()
    spent = team_month_spend(team=team, now=now) if spent is None else spent
    return _forecast(team=team, budget=team.monthly_budget, spent=spent, holds=Q(), storage=Q(), now=now)


def target_forecasts(
    *, team: Team, budgets: list[Budget], now: datetime | None = None
) -> list[tuple[Budget, Forecast]]:
    """Each user or project budget of the team (`budgets`), where it stands and will end this
    month: the month's spend by user and by project once each, then two queries a budget. A
    user's budget counts their GPU work and storage in the team; a project's its workloads' GPU
    work (storage belongs to no project)."""
    now = now or timezone.now()
    spent = {
        kind: team_month_spend_by(team=team, key=kind, now=now)
        if any(b.kind == kind for b in budgets)
        else {}
        for kind in Budget.Kind.values
    }
    found = []
    for budget in budgets:
        if budget.kind == Budget.Kind.USER:
            holds, storage = Q(user_id=budget.user_id), Q(user_id=budget.user_id)
            used = spent["user"].get(budget.user_id, ZERO_CENTS)
        else:
            holds, storage = Q(workload__project=budget.project), None
            used = spent["project"].get(budget.project, ZERO_CENTS)
        forecast = _forecast(team=team, budget=budget.monthly_amount, spent=used, holds=holds, storage=storage,
                             now=now, kind=budget.kind, target=budget.target)  # fmt: skip
        found.append((budget, forecast))
    return found


def _runs_out(left: Decimal, streams: list[tuple[Decimal, datetime]], now: datetime) -> datetime | None:
    """When the money left is used up by the streams (each flowing until its end)."""
    if left <= 0:
        return now
    moment, rate = now, sum((r for r, _ in streams), Decimal(0))
    for stop in sorted({until for _, until in streams}):
        if rate <= 0:
            return None
        hours = Decimal((stop - moment).total_seconds()) / SECONDS_PER_HOUR
        if rate * hours >= left:
            return moment + timedelta(seconds=float(left / rate * SECONDS_PER_HOUR))
        left -= rate * hours
        moment = stop
        rate -= sum((r for r, until in streams if until == stop), Decimal(0))
    return None


def budget_forecasts(teams: list[Team], *, now: datetime | None = None) -> list[Forecast]:
    return [budget_forecast(team=team, now=now) for team in teams]


def budget_alerts_due(forecast: Forecast, sent: set[int]) -> list[int]:
    """The thresholds the budget has passed this month and not yet been told of, lowest first."""
    if forecast.budget <= 0:
        return []
    return [
        t
        for t in thresholds_of(forecast.team)
        if forecast.spent * 100 >= forecast.budget * t and t not in sent
    ]


def team_budget_get(*, user: User, slug: str) -> Team:
    """A team whose budget the user may see: a member's, or any for admins (else not found)."""
    team = Team.objects.filter(slug=slug).first()
    if team is None or not (user.is_platform_admin or team.memberships.filter(user=user).exists()):
        raise NotFound(f"No team {slug!r} that you belong to.")
    return team


def team_budget_set(
    *, user: User, slug: str, thresholds: list[int] | None = None, policy: str | None = None,
    stop_grace_hours: int | None = None,
) -> Team:  # fmt: skip
    """A lead (or an admin) sets when the team's leads are told and what happens at 100 %."""
    team = team_budget_get(user=user, slug=slug)
    if not (user.is_platform_admin or is_lead(user=user, team=team)):
        raise NotAllowed("Only a lead of the team or an admin may change its budget alerts and policy.")
    changes: dict = {}
    if thresholds is not None:
        if not Team.thresholds_fit(thresholds):
            message = "Up to 10 whole percentages from 1 to 200."
            raise ValidationFailed(f"thresholds: {message}", fields={"thresholds": [message]})
        changes["budget_thresholds"] = sorted(set(thresholds))
    if policy is not None:
        if policy not in Team.BudgetPolicy.values:
            message = f"One of {', '.join(Team.BudgetPolicy.values)}."
            raise ValidationFailed(f"policy: {message}", fields={"policy": [message]})
        changes["budget_policy"] = policy
    if stop_grace_hours is not None:
        if (
            not isinstance(stop_grace_hours, int)
            or isinstance(stop_grace_hours, bool)
            or not 1 <= stop_grace_hours <= Team.STOP_GRACE_MAX_HOURS
        ):
            message = f"Whole hours from 1 to {Team.STOP_GRACE_MAX_HOURS}."
            raise ValidationFailed(f"stop_grace_hours: {message}", fields={"stop_grace_hours": [message]})
        changes["budget_stop_grace_hours"] = stop_grace_hours
    if changes:
        Team.objects.filter(pk=team.pk).update(**changes)
        audit_record(actor=user, action="team.budget_policy", obj=team, team=team,
                     detail=", ".join(f"{k.removeprefix('budget_')}={v}" for k, v in changes.items()))  # fmt: skip
        team.refresh_from_db()
    return team
