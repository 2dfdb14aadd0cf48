"""Spend day by day (UTC) within a range, split by user, GPU type or workload: what the spend page's
charts draw and its tables list. The sums are the reports' own (`portal.spend.totals`, exact
units: roll-ups where fresh, the holds elsewhere), rounded to cents only when shown, so a day's
cost is the one the report by day gives, and a group's the one the report by that group gives."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.utils import timezone

from portal.accounts.models import Team, User
from portal.accounts.selectors import is_lead
from portal.spend.budgets import Forecast, budget_forecast, month_bounds, thresholds_of
from portal.spend.cost import EXACT, ZERO, units_to_cents, units_to_hours
from portal.spend.holds import STORAGE, Amount, summing_settings
from portal.spend.selectors import group_labels, month_start, spend_scope
from portal.spend.totals import spend_by

SPLITS = ("user", "gpu_type", "workload")
SPLIT_LABELS = {"user": "User", "gpu_type": "GPU type", "workload": "Workload"}
TOP = 6  # groups named in a chart; the rest share one, "others"
TOP_MAX = 20
MAX_DAYS = 366
OTHERS_KEY, OTHERS_LABEL = "others", "Everything else"
STORAGE_KEY, STORAGE_LABEL = STORAGE, "Persistent storage (homes)"
_KEYS = {"user": ("user",), "gpu_type": ("kind",), "workload": ("kind", "workload")}


@dataclass(frozen=True)
class DailyGroup:
    key: str
    label: str
    cost: Decimal  # over the whole range, to the cent
    gpu_hours: Decimal


@dataclass(frozen=True)
class SpendDay:
    day: date
    cost: Decimal  # the day's, to the cent
    gpu_hours: Decimal
    cumulative: Decimal  # from the range's start to the day's end, to the cent (not a sum of rounded days)
    by_group: tuple[Decimal, ...]  # the day's cost of each group, in the order of `DailySpend.groups`


@dataclass(frozen=True)
class MonthBudget:
    team: Team
    month: date  # its first day
    budget: Decimal
    thresholds: list[int]
    forecast: Forecast | None  # the month under way only


@dataclass(frozen=True)
class DailySpend:
    split: str
    start: datetime
    end: datetime
    team: Team | None
    groups: list[DailyGroup]
    days: list[SpendDay]
    total: Decimal
    gpu_hours: Decimal
    budget: MonthBudget | None

    def rows(self) -> list[tuple[SpendDay, list[tuple[DailyGroup, Decimal]]]]:
        """Each day with its groups' costs beside them, for a table."""
        return [(day, list(zip(self.groups, day.by_group, strict=True))) for day in self.days]

    def budget_left(self) -> list[tuple[SpendDay, Decimal | None]]:
        """Each day with what the month's budget has left at its end (None: no budget shown)."""
        budget = self.budget.budget if self.budget else None
        return [(day, None if budget is None else budget - day.cumulative) for day in self.days]


def _group_of(split: str, key: tuple) -> object:
    """The group a (key..., day) sum belongs to: a user id, a GPU type id, a workload id or storage."""
    if split == "workload":
        kind, workload_id = key[0], key[1]
        return STORAGE if kind == STORAGE else workload_id  # None: a hold of no workload, among others
    return key[0]


def _labels(split: str, ids: set) -> dict[object, tuple[str, str]]:
    """(key, label) of each group, as the report by the same group names them."""
    ids = ids - {STORAGE, None}
    return {STORAGE: (STORAGE_KEY, STORAGE_LABEL), **(group_labels(split, ids) if ids else {})}


def _sum(amounts: list[Amount]) -> Amount:
    total = Amount()
    for amount in amounts:
        total.add(amount)
    return total


def sees_whole_team(user: User, team: Team) -> bool:
    return user.is_platform_admin or is_lead(user=user, team=team)


def month_budget(
    *, user: User, team: Team | None, start: datetime, end: datetime, now: datetime
) -> MonthBudget | None:
    """The team's budget for the range when the range is one month of it (from the 1st, 00:00 UTC,
    to no later than the next 1st) and the user sees the whole team's spend (a lead, an admin); its
    forecast when that month is under way."""
    if team is None or start != month_start(start) or not sees_whole_team(user, team):
        return None
    first, following = month_bounds(start)
    if end > following:
        return None
    forecast = budget_forecast(team=team, now=now) if first <= now < following else None
    return MonthBudget(
        team=team,
        month=first.date(),
        budget=team.monthly_budget,
        thresholds=thresholds_of(team),
        forecast=forecast,
    )


def spend_daily(
    *,
    user: User,
    split: str,
    start: datetime,
    end: datetime,
    team: Team | None = None,
    top: int = TOP,
    now: datetime | None = None,
) -> DailySpend:
    """Spend of each UTC day of [start, end) that `user` may see (own, the teams they lead, or all
    for admins; within `team` if given), split into the `top` groups that cost most over the
    range and one for the rest (`others`); with GPU-hours and the running total per day."""
    if split not in SPLITS:
        raise ValueError(split)
    now = now or timezone.now()
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    with summing_settings():
        found = spend_by(
            keys=_KEYS[split],
            start=start,
            end=end,
            now=now,
            scope=spend_scope(user, team),
            by_day=True,
            idle=False,
        )
    by_group: dict[object, dict[date, Amount]] = {}
    for key, amount in found.items():
        by_group.setdefault(_group_of(split, key), {}).setdefault(key[-1], Amount()).add(amount)
    totals = {group: _sum(list(days.values())) for group, days in by_group.items()}
    labels = _labels(split, set(by_group))
    named = sorted(
        (group for group in by_group if group in labels),
        key=lambda group: (-totals[group].cost, labels[group][0]),
    )
    rest = [group for group in by_group if group not in labels]
    if len(named) > top:
        named, rest = named[:top], named[top:] + rest
    groups = [
        DailyGroup(
            key=labels[g][0],
            label=labels[g][1],
            cost=units_to_cents(totals[g].cost),
            gpu_hours=units_to_hours(totals[g].gpu_hours),
        )
        for g in named
    ]
    others = _sum([totals[g] for g in rest])
    if rest:
        groups.append(
            DailyGroup(
                key=OTHERS_KEY,
                label=OTHERS_LABEL,
                cost=units_to_cents(others.cost),
                gpu_hours=units_to_hours(others.gpu_hours),
            )
        )
    days, running, hours = [], ZERO, ZERO
    last = (end - timedelta(microseconds=1)).date()
    day = start.date()
    while day <= last:
        costs = [by_group[g].get(day, Amount()).cost for g in named]
        if rest:
            costs.append(_sum([by_group[g].get(day, Amount()) for g in rest]).cost)
        spent = _sum([days_of.get(day, Amount()) for days_of in by_group.values()])
        running = EXACT.add(running, spent.cost)
        hours = EXACT.add(hours, spent.gpu_hours)
        days.append(
            SpendDay(
                day=day,
                cost=units_to_cents(spent.cost),
                gpu_hours=units_to_hours(spent.gpu_hours),
                cumulative=units_to_cents(running),
                by_group=tuple(units_to_cents(cost) for cost in costs),
            )
        )
        day += timedelta(days=1)
    return DailySpend(
        split=split,
        start=start,
        end=end,
        team=team,
        groups=groups,
        days=days,
        total=units_to_cents(running),
        gpu_hours=units_to_hours(hours),
        budget=month_budget(user=user, team=team, start=start, end=end, now=now),
    )
