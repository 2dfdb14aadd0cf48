"""Spend, derived from holds and the price captured when each began: GPU holds (allocations)
and storage holds (users' persistent homes).

GPU: cost = share of a GPU x hours held x price per GPU-hour. Storage: cost = GB x hours held /
730 x price per GB-month. In Decimal; sums are rounded to cents only at the end, so many short
holds add up to the same figure as one long one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import F, Q, QuerySet
from django.utils import timezone

from portal.accounts.models import Team, User
from portal.accounts.selectors import lead_team_ids
from portal.fleet.models import Allocation, GpuMinute, StorageHold

CENT = Decimal("0.01")
SECONDS_PER_HOUR = Decimal(3600)
HOURS_PER_MONTH = Decimal(730)  # a GB-month, as cloud storage is billed
STORAGE_KEY, STORAGE_LABEL = "storage", "Persistent storage (homes)"
GROUPS = ("user", "team", "gpu_type", "day")


def to_cents(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def hold_cost(
    *, price_per_hour: Decimal, numerator: int, denominator: int, start: datetime, end: datetime
) -> Decimal:
    """Unrounded cost of holding numerator/denominator of a GPU from start to end."""
    if end <= start:
        return Decimal(0)
    seconds = Decimal((end - start).total_seconds())
    return price_per_hour * Decimal(numerator) * seconds / (Decimal(denominator) * SECONDS_PER_HOUR)


def _held(
    hold: Allocation | StorageHold, now: datetime, start: datetime | None, end: datetime | None
) -> tuple[datetime, datetime]:
    """When a hold (GPU or storage) ran within the window [start, end) (or all of it)."""
    held_from = hold.started_at if start is None else max(hold.started_at, start)
    held_to = hold.ended_at or now
    return held_from, held_to if end is None else min(held_to, end)


def allocation_cost(
    allocation: Allocation, *, now: datetime, start: datetime | None = None, end: datetime | None = None
) -> Decimal:
    """Unrounded cost of one allocation, optionally clipped to the window [start, end)."""
    held_from, held_to = _held(allocation, now, start, end)
    return hold_cost(
        price_per_hour=allocation.price_per_hour,
        numerator=allocation.share_numerator,
        denominator=allocation.share_denominator,
        start=held_from,
        end=held_to,
    )


def storage_cost(
    hold: StorageHold, *, now: datetime, start: datetime | None = None, end: datetime | None = None
) -> Decimal:
    """Unrounded cost of one storage hold, clipped likewise: size_gb/730 of the GB-month price an hour."""
    held_from, held_to = _held(hold, now, start, end)
    return hold_cost(
        price_per_hour=hold.price_per_gb_month,
        numerator=hold.size_gb,
        denominator=int(HOURS_PER_MONTH),
        start=held_from,
        end=held_to,
    )


def storage_holds_visible_to(user: User) -> QuerySet[StorageHold]:
    """The same rule as GPU spend: own, the teams one leads, or everything for admins."""
    holds = StorageHold.objects.select_related("user", "team")
    if user.is_platform_admin:
        return holds
    return holds.filter(Q(user=user) | Q(team_id__in=lead_team_ids(user)))


def hourly_rate(allocations: Iterable[Allocation]) -> Decimal:
    """What the live allocations cost per hour together."""
    return sum(
        (
            a.price_per_hour * a.share_numerator / a.share_denominator
            for a in allocations
            if a.ended_at is None
        ),
        Decimal(0),
    )


def allocations_visible_to(user: User) -> QuerySet[Allocation]:
    """Researchers see their own spend, leads their teams', admins everything."""
    allocations = Allocation.objects.select_related("user", "team", "gpu_type", "mig_slice")
    if user.is_platform_admin:
        return allocations
    return allocations.filter(Q(user=user) | Q(team_id__in=lead_team_ids(user)))


@dataclass(frozen=True)
class SpendRow:
    key: str
    label: str
    cost: Decimal
    gpu_hours: Decimal
    idle_cost: Decimal = Decimal(0)  # the part of `cost` paid for GPU minutes the agents read idle


def _days(start: datetime, end: datetime) -> Iterable[tuple[date, datetime, datetime]]:
    day = start.date()
    while True:
        day_start = datetime.combine(day, time.min, tzinfo=start.tzinfo)
        day_end = day_start + timedelta(days=1)
        if day_start >= end:
            return
        yield day, max(day_start, start), min(day_end, end)
        day += timedelta(days=1)


def _idle_minutes(holds: list[Allocation], *, start: datetime, end: datetime) -> dict[int, list[datetime]]:
    """Per GPU hold, the minutes of [start, end) the node agents read its device idle: a
    utilization under its team's idle threshold (minutes without a figure are not counted).
    One query for all the holds."""
    if not holds:
        return {}
    thresholds = {h.team_id: h.team.idle_threshold_percent for h in holds}
    rows = GpuMinute.objects.filter(
        gpu_id__in={h.gpu_id for h in holds},
        minute__gte=start,
        minute__lt=end,
        utilization_samples__gt=0,
        utilization_sum__lt=F("utilization_samples") * max(thresholds.values()),
    ).values_list("gpu_id", "mig_start", "minute", "utilization_sum", "utilization_samples")
    by_device: dict[tuple[int, int | None], list[tuple[datetime, float]]] = defaultdict(list)
    for gpu_id, mig_start, minute, total, samples in rows:
        by_device[(gpu_id, mig_start)].append((minute, total / samples))
    found: dict[int, list[datetime]] = {}
    for hold in holds:
        device = (hold.gpu_id, hold.mig_slice.start if hold.mig_slice_id and hold.mig_slice else None)
        held_to = hold.ended_at or end
        found[hold.pk] = [
            minute
            for minute, utilization in by_device.get(device, ())
            if hold.started_at <= minute < held_to and utilization < thresholds[hold.team_id]
        ]
    return found


def _holds_in(
    *, user: User, team: Team | None, start: datetime, end: datetime
) -> Iterable[tuple[Allocation | StorageHold, tuple[str, str]]]:
    """Every GPU and storage hold the user may see that ran within [start, end), with the key
    and label of its kind (its GPU type, or storage)."""
    for holds in (allocations_visible_to(user), storage_holds_visible_to(user)):
        holds = holds.filter(started_at__lt=end).filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
        if team is not None:
            holds = holds.filter(team=team)
        for hold in holds:
            if isinstance(hold, Allocation):
                yield hold, (hold.gpu_type.slug, hold.gpu_type.name)
            else:
                yield hold, (STORAGE_KEY, STORAGE_LABEL)


def spend_grouped(
    *,
    user: User,
    group_by: str,
    start: datetime,
    end: datetime,
    team: Team | None = None,
    now: datetime | None = None,
) -> list[SpendRow]:
    """Spend within [start, end) grouped by user, team, GPU type or day, largest first (days in
    order); storage counts with its user, team and day, and as its own row among GPU types."""
    if group_by not in GROUPS:
        raise ValueError(group_by)
    now = now or timezone.now()
    cost: dict[str, Decimal] = defaultdict(Decimal)
    hours: dict[str, Decimal] = defaultdict(Decimal)
    idle: dict[str, Decimal] = defaultdict(Decimal)
    labels: dict[str, str] = {}
    holds = list(_holds_in(user=user, team=team, start=start, end=end))
    idle_minutes = _idle_minutes([h for h, _ in holds if isinstance(h, Allocation)], start=start, end=end)
    for hold, kind in holds:
        if group_by == "day":
            days = _days(*_held(hold, now, start, end))
            windows = [
                (day.isoformat(), day.isoformat(), day_start, day_end) for day, day_start, day_end in days
            ]
        elif group_by == "user":
            windows = [(hold.user.username, hold.user.get_full_name() or hold.user.username, start, end)]
        elif group_by == "team":
            windows = [(hold.team.slug, hold.team.name, start, end)]
        else:
            windows = [(*kind, start, end)]
        for key, label, window_start, window_end in windows:
            labels[key] = label
            if isinstance(hold, Allocation):
                cost[key] += allocation_cost(hold, now=now, start=window_start, end=window_end)
                hours[key] += _gpu_hours(hold, window_start, window_end, now)
                minutes = sum(1 for m in idle_minutes.get(hold.pk, ()) if window_start <= m < window_end)
                idle[key] += (
                    hold.price_per_hour * hold.share_numerator * minutes / (hold.share_denominator * 60)
                )
            else:
                cost[key] += storage_cost(hold, now=now, start=window_start, end=window_end)
    rows = [
        SpendRow(
            key=key,
            label=labels[key],
            cost=to_cents(cost[key]),
            gpu_hours=hours[key].quantize(CENT),
            idle_cost=to_cents(idle[key]),
        )
        for key in cost
    ]
    if group_by == "day":
        return sorted(rows, key=lambda r: r.key)
    return sorted(rows, key=lambda r: (-r.cost, r.key))


def _gpu_hours(allocation: Allocation, start: datetime, end: datetime, now: datetime) -> Decimal:
    held_from = max(allocation.started_at, start)
    held_to = min(allocation.ended_at or now, end)
    if held_to <= held_from:
        return Decimal(0)
    seconds = Decimal((held_to - held_from).total_seconds())
    return seconds * allocation.share_numerator / (allocation.share_denominator * SECONDS_PER_HOUR)


def team_month_spend(*, team: Team, now: datetime | None = None) -> Decimal:
    """What the team has spent since the first of this month (UTC), in cents."""
    now = now or timezone.now()
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    total = Decimal(0)
    for allocation in Allocation.objects.filter(team=team).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=month_start)
    ):
        total += allocation_cost(allocation, now=now, start=month_start)
    for hold in StorageHold.objects.filter(team=team).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=month_start)
    ):
        total += storage_cost(hold, now=now, start=month_start)
    return to_cents(total)


def spend_teams(user: User) -> list[Team]:
    """Teams whose spend the user sees as a whole: all for admins, the ones they lead otherwise."""
    teams = Team.objects.order_by("slug")
    if user.is_platform_admin:
        return list(teams)
    return list(teams.filter(pk__in=lead_team_ids(user)))


@dataclass(frozen=True)
class Budget:
    team: Team
    budget: Decimal
    used: Decimal

    @property
    def left(self) -> Decimal:
        return self.budget - self.used

    @property
    def used_percent(self) -> int:
        if self.budget <= 0:
            return 100
        return min(100, int(self.used * 100 / self.budget))


def team_budgets(teams: list[Team]) -> list[Budget]:
    """This month's budget, used and left, per team (one query per team)."""
    return [Budget(team=team, budget=team.monthly_budget, used=team_month_spend(team=team)) for team in teams]


def month_start(now: datetime) -> datetime:
    """The first of `now`'s month, 00:00 (UTC): where a month's spend and budget begin."""
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def month_elapsed(now: datetime) -> Decimal:
    """How much of `now`'s month has passed, 0 to 1."""
    start = month_start(now)
    end = (start + timedelta(days=32)).replace(day=1)
    return Decimal((now - start).total_seconds()) / Decimal((end - start).total_seconds())


def teams_month_spend(*, now: datetime | None = None) -> dict[int, Decimal]:
    """What every team has spent since the first of this month (UTC), GPU and storage, by team
    id (cents; teams without spend absent): `team_month_spend` for all teams in two queries."""
    now = now or timezone.now()
    start = month_start(now)
    total: dict[int, Decimal] = defaultdict(Decimal)
    for allocation in Allocation.objects.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start)):
        total[allocation.team_id] += allocation_cost(allocation, now=now, start=start)
    for hold in StorageHold.objects.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start)):
        total[hold.team_id] += storage_cost(hold, now=now, start=start)
    return {team_id: to_cents(amount) for team_id, amount in total.items()}


def idle_gpu_hours_by_team(*, start: datetime, end: datetime) -> dict[str, Decimal]:
    """GPU-hours held within [start, end) in minutes the node agents read idle (under the
    holder's team's threshold, as spend's idle cost counts them), by team slug: a slice counts its
    share of a GPU. Two queries, whatever the number of holds."""
    holds = list(
        Allocation.objects.filter(started_at__lt=end)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
        .select_related("team", "mig_slice")
    )
    idle = _idle_minutes(holds, start=start, end=end)
    hours: dict[str, Decimal] = defaultdict(Decimal)
    for hold in holds:
        minutes = len(idle.get(hold.pk, ()))
        if minutes:
            hours[hold.team.slug] += Decimal(minutes * hold.share_numerator) / (hold.share_denominator * 60)
    return dict(hours)
