"""Spend, derived from holds and the price captured when each began: GPU holds (allocations)
and storage holds (users' persistent homes).

GPU: cost = share of a GPU x hours held x price per GPU-hour. Storage: cost = GB x hours held /
730 x price per GB-month. In Decimal; sums are rounded to cents only at the end, so many short
holds add up to the same figure as one long one. `portal.spend.cost` is the one definition;
reports read roll-ups the workers keep and cost only the rest from the holds (see
`portal.spend.services` for how and why).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db.models import F, Q, QuerySet
from django.utils import timezone

from portal.accounts.models import Team, User
from portal.accounts.selectors import lead_team_ids
from portal.fleet.models import Allocation, GpuMinute, GpuType, StorageHold
from portal.spend.by_workload import workload_spend
from portal.spend.cost import (
    CENT,
    HOURS_PER_MONTH,
    SECONDS_PER_HOUR,
    allocation_cost,
    held_seconds,
    hold_cost,
    storage_cost,
    to_cents,
    units_to_cents,
    units_to_hours,
)
from portal.spend.holds import MINUTE, STORAGE, Amount, summing_settings
from portal.spend.totals import Scope, spend_by

__all__ = [
    "CENT",
    "GROUPS",
    "HOURS_PER_MONTH",
    "NO_PROJECT_KEY",
    "SECONDS_PER_HOUR",
    "Budget",
    "SpendRow",
    "allocation_cost",
    "hold_cost",
    "hourly_rate",
    "idle_gpu_hours_by_team",
    "month_elapsed",
    "month_start",
    "spend_grouped",
    "spend_teams",
    "storage_cost",
    "team_budgets",
    "team_month_spend",
    "team_month_spend_by",
    "teams_month_spend",
    "to_cents",
]

STORAGE_KEY, STORAGE_LABEL = STORAGE, "Persistent storage (homes)"
OTHERS_KEY, OTHERS_LABEL = "others", "Everything else"
NO_PROJECT_KEY = NO_PROJECT_LABEL = "(no project)"
GROUPS = ("user", "team", "gpu_type", "day", "workload", "project")
WORKLOAD_LIMIT = 100  # workloads named in the workload report; the rest share one row
# A month-to-date figure counts a hold ended in the future up to that end, as it always has.
FOREVER = datetime(9999, 1, 1, tzinfo=UTC)


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


def spend_scope(user: User, team: Team | None = None) -> Scope:
    """Whose spend `user` sees (own, the teams they lead, or all for admins), within `team` if given."""
    team_id = team.pk if team is not None else None
    if user.is_platform_admin:
        return Scope(team_id=team_id)
    return Scope(team_ids=frozenset(lead_team_ids(user)), user_id=user.pk, team_id=team_id)


@dataclass(frozen=True)
class SpendRow:
    key: str
    label: str
    cost: Decimal
    gpu_hours: Decimal
    idle_cost: Decimal = Decimal(0)  # the part of `cost` paid for GPU minutes the agents read idle

    @property
    def storage_only(self) -> bool:
        """The persistent storage row (by GPU type or workload): it holds no GPU, so pages show no
        GPU-hours for it rather than 0.00."""
        return self.key == STORAGE_KEY


def _row(key: str, label: str, amount: Amount) -> SpendRow:
    return SpendRow(
        key=key,
        label=label,
        cost=units_to_cents(amount.cost),
        gpu_hours=units_to_hours(amount.gpu_hours),
        idle_cost=units_to_cents(amount.idle_cost),
    )


def group_labels(group_by: str, ids: set) -> dict:
    """key and label of each id a report names (the daily series name their groups the same)."""
    if group_by == "team":
        return {
            pk: (slug, name)
            for pk, slug, name in Team.objects.filter(pk__in=ids).values_list("pk", "slug", "name")
        }
    if group_by == "user":
        users = (
            User.objects.all() if len(ids) > 200 else User.objects.filter(pk__in=ids)
        )  # no list of thousands
        users = users.values_list("pk", "username", "first_name", "last_name")
        return {pk: (username, f"{first} {last}".strip() or username) for pk, username, first, last in users}
    if group_by == "gpu_type":
        types = GpuType.objects.filter(pk__in=ids - {STORAGE})
        found = {pk: (slug, name) for pk, slug, name in types.values_list("pk", "slug", "name")}
        return {**found, STORAGE: (STORAGE_KEY, STORAGE_LABEL)}
    workloads = Allocation.workload.field.related_model.objects.filter(pk__in=ids)  # no import upwards
    rows = list(workloads.values_list("pk", "name", "kind", "number"))
    # A name used again (a sandbox requested anew under the name of an ended one) gets the number
    # its URL has, so that two rows or chart series never read the same.
    named = Counter((kind, name) for _, name, kind, _ in rows)
    return {
        pk: (f"{kind}-{number}", f"{kind} {name}" + (f" #{number}" if named[kind, name] > 1 else ""))
        for pk, name, kind, number in rows
    }  # the key: its kind and number, as its URL and the API name it


def spend_grouped(
    *,
    user: User,
    group_by: str,
    start: datetime,
    end: datetime,
    team: Team | None = None,
    now: datetime | None = None,
    limit: int = WORKLOAD_LIMIT,
) -> list[SpendRow]:
    """Spend within [start, end) grouped by user, team, GPU type, day, workload or project label, largest first
    (days in order); storage counts with its user, team and day, and as its own row among GPU
    types and workloads. By workload: the `limit` workloads that cost most, then storage, then
    one row for everything else (other workloads and holds of no workload), when it comes to a cent
    or a hundredth of a GPU-hour. By project: holds of no workload or of workloads without a
    label share the row NO_PROJECT_KEY, storage has its own. Keys with nothing held in the range
    have no row."""
    if group_by not in GROUPS:
        raise ValueError(group_by)
    with summing_settings():
        return _grouped(
            scope=spend_scope(user, team),
            group_by=group_by,
            start=start,
            end=end,
            now=now or timezone.now(),
            limit=limit,
        )


def _grouped(
    *, scope: Scope, group_by: str, start: datetime, end: datetime, now: datetime, limit: int
) -> list[SpendRow]:
    if group_by == "workload":
        top, others, storage = workload_spend(start=start, end=end, now=now, scope=scope, limit=limit)
        labels = group_labels("workload", {w for w, _ in top})
        rows = [_row(*labels.get(w, (str(w), f"workload #{w}")), amount) for w, amount in top]
        if storage:
            rows.append(_row(STORAGE_KEY, STORAGE_LABEL, storage))
        rest = _row(OTHERS_KEY, OTHERS_LABEL, others)
        if rest.cost or rest.gpu_hours or rest.idle_cost:  # a cent or a hundredth of a GPU-hour
            rows.append(rest)
        return rows
    if group_by == "project":
        found = spend_by(keys=("project",), start=start, end=end, now=now, scope=scope)
        names = {STORAGE: (STORAGE_KEY, STORAGE_LABEL), "": (NO_PROJECT_KEY, NO_PROJECT_LABEL)}
        rows = [_row(*names.get(project, (project, project)), amount) for (project,), amount in found.items()]
        return sorted(rows, key=lambda r: (-r.cost, r.key))
    if group_by == "day":
        found = spend_by(keys=(), start=start, end=end, now=now, scope=scope, by_day=True)
        rows = [_row(day.isoformat(), day.isoformat(), amount) for (day,), amount in found.items()]
        return sorted(rows, key=lambda r: r.key)
    keys = {"user": ("user",), "team": ("team",), "gpu_type": ("kind",)}[group_by]
    found = spend_by(keys=keys, start=start, end=end, now=now, scope=scope)
    labels = group_labels(group_by, {key for (key,) in found})
    rows = [_row(*labels[key], amount) for (key,), amount in found.items()]
    return sorted(rows, key=lambda r: (-r.cost, r.key))


def month_start(now: datetime) -> datetime:
    """The first of `now`'s month, 00:00 (UTC): where a month's spend and budget begin."""
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def month_elapsed(now: datetime) -> Decimal:
    """How much of `now`'s month has passed, 0 to 1."""
    start = month_start(now)
    end = (start + timedelta(days=32)).replace(day=1)
    return Decimal((now - start).total_seconds()) / Decimal((end - start).total_seconds())


def team_month_spend(*, team: Team, now: datetime | None = None) -> Decimal:
    """What the team has spent since the first of this month (UTC), GPU and storage, in cents:
    the month's rolled days and hours, and the holds for the rest (a handful of queries)."""
    now = now or timezone.now()
    with summing_settings():
        found = spend_by(
            keys=(), start=month_start(now), end=FOREVER, now=now, scope=Scope(team_id=team.pk), idle=False
        )
    return units_to_cents(found.get((), Amount()).cost)


def teams_month_spend(*, now: datetime | None = None) -> dict[int, Decimal]:
    """What every team has spent since the first of this month (UTC), GPU and storage, by team
    id (cents; teams without spend absent): `team_month_spend` for all teams at once."""
    now = now or timezone.now()
    with summing_settings():
        found = spend_by(
            keys=("team",), start=month_start(now), end=FOREVER, now=now, scope=Scope(), idle=False
        )
    return {team_id: units_to_cents(amount.cost) for (team_id,), amount in found.items()}


def team_month_spend_by(*, team: Team, key: str, now: datetime | None = None) -> dict:
    """What the team has spent since the first of this month (UTC) by user id or by project
    label (`key`: "user" or "project"; "" holds of no project), in cents, as `team_month_spend`
    counts it: from the roll-ups' user or project level (a handful of queries)."""
    now = now or timezone.now()
    with summing_settings():
        found = spend_by(
            keys=(key,),
            start=month_start(now),
            end=FOREVER,
            now=now,
            scope=Scope(team_id=team.pk),
            idle=False,
        )
    return {target: units_to_cents(amount.cost) for (target,), amount in found.items()}


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
    """This month's budget, used and left, per team."""
    if len(teams) > 1:
        used = teams_month_spend()
        return [Budget(team=t, budget=t.monthly_budget, used=used.get(t.pk, Decimal("0.00"))) for t in teams]
    return [Budget(team=team, budget=team.monthly_budget, used=team_month_spend(team=team)) for team in teams]


def _idle_seconds(holds: list[Allocation], *, start: datetime, end: datetime) -> dict[int, Decimal]:
    """Per GPU hold, the seconds of [start, end) it held within minutes the node agents read its
    device idle: a utilization under its team's idle threshold (minutes without a figure are not
    counted); each minute counts the part of it the hold held. One query for all the holds."""
    if not holds:
        return {}
    thresholds = {h.team_id: h.team.idle_threshold_percent for h in holds}
    rows = GpuMinute.objects.filter(
        gpu_id__in={h.gpu_id for h in holds},
        minute__gt=start - MINUTE,
        minute__lt=end,
        utilization_samples__gt=0,
        utilization_sum__lt=F("utilization_samples") * max(thresholds.values()),
    ).values_list("gpu_id", "mig_start", "minute", "utilization_sum", "utilization_samples")
    by_device: dict[tuple[int, int | None], list[tuple[datetime, float]]] = defaultdict(list)
    for gpu_id, mig_start, minute, total, samples in rows:
        by_device[(gpu_id, mig_start)].append((minute, total / samples))
    found: dict[int, Decimal] = {}
    for hold in holds:
        device = (hold.gpu_id, hold.mig_slice.start if hold.mig_slice_id and hold.mig_slice else None)
        low, high = max(hold.started_at, start), min(hold.ended_at or end, end)
        found[hold.pk] = sum(
            (
                held_seconds(min(minute + MINUTE, high) - max(minute, low))
                for minute, utilization in by_device.get(device, ())
                if low - MINUTE < minute < high and utilization < thresholds[hold.team_id]
            ),
            Decimal(0),
        )
    return found


def idle_gpu_hours_by_team(*, start: datetime, end: datetime) -> dict[str, Decimal]:
    """GPU-hours held within [start, end) in minutes the node agents read idle (under the
    holder's team's threshold, as spend's idle cost counts them), by team slug: a slice counts its
    share of a GPU. Two queries, whatever the number of holds."""
    holds = list(
        Allocation.objects.filter(started_at__lt=end)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
        .select_related("team", "mig_slice")
    )
    idle = _idle_seconds(holds, start=start, end=end)
    hours: dict[str, Decimal] = defaultdict(Decimal)
    for hold in holds:
        seconds = idle.get(hold.pk)
        if seconds:
            hours[hold.team.slug] += (
                seconds * hold.share_numerator / (hold.share_denominator * SECONDS_PER_HOUR)
            )
    return dict(hours)
