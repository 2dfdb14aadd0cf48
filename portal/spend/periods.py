"""Periods of closed time and which of them a report may read from roll-ups.

Periods: UTC days (today's rolled only so far, up to its `until`), and blocks of 2, 4, ... 256 days
aligned on multiples of their length since 1970-01-01, summed from their halves. Any run of N
whole days is covered by at most about 2 log2(N) of them, so a year by user reads some 16 rows a
user and 30 days some 8, whatever the number of holds. Recent days (PORTAL_SPEND_HOUR_DAYS) are
rolled by the hour as well, and their hours summed into blocks of 2, 4 and 8 hours aligned in the
day: a range that starts or ends within such a day reads at most about five of those periods (12
hours: 8 + 4), not one per hour. Older days keep their blocks of 8 hours alone (for
PORTAL_SPEND_8H_DAYS), so an edge there is at most 4 hours of holds (a block less its part
outside the range, or that part costed directly).

A report over [start, end) is split into fresh periods and live stretches (the rest: partial-hour
or partial-day edges, the minutes since today's roll-up, stale periods), which are costed from the
holds. A stretch is costed either directly or as its hour or day less the part outside the range,
whichever leaves less time to cost from the holds: at most half an hour at each edge where hours
are rolled, 4 hours where blocks of 8 hours are, else at most half a day. Before
trusting a period a report also looks for changes to the holds that the workers have not seen yet
(`changes`), so a hold ended in the past is reflected at once, not at the next roll-up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from django.db import connection
from django.db.models import Q
from django.utils.dateparse import parse_datetime

from portal.spend.models import Span, SpendWatermark

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
EPOCH = date(1970, 1, 1)
BLOCKS = [(Span(f"{2**k}d"), 2**k) for k in range(8, 0, -1)]  # largest first
SPAN_DAYS = {Span.DAY: 1, **dict(BLOCKS)}
HOUR_BLOCKS = [(Span.HOURS_8, 8), (Span.HOURS_4, 4), (Span.HOURS_2, 2)]  # largest first
SPAN_HOURS = {Span.HOUR: 1, **dict(HOUR_BLOCKS)}
# Periods within a day, kept for recent days (blocks of 8 hours for longer), stale and rolled with
# their day.
HOUR_SPANS = tuple(SPAN_HOURS)
Interval = tuple[datetime, datetime]


def utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


def midnight(moment: datetime) -> datetime:
    return utc(moment).replace(hour=0, minute=0, second=0, microsecond=0)


def floor(moment: datetime, span: str) -> datetime:
    """The start of the hour, day or block (UTC) that `moment` falls in."""
    if span in SPAN_HOURS:
        hour = utc(moment).replace(minute=0, second=0, microsecond=0)
        return hour - HOUR * (hour.hour % SPAN_HOURS[span])
    day = midnight(moment)
    length = SPAN_DAYS[span]
    return day - DAY * ((day.date() - EPOCH).days % length)


def period_end(start: datetime, span: str) -> datetime:
    if span in SPAN_HOURS:
        return start + HOUR * SPAN_HOURS[span]
    return start + DAY * SPAN_DAYS[span]


def halves(start: datetime, span: str) -> list[tuple[str, datetime]]:
    """The two periods a block is summed from (two days or hours, or two blocks of half its length)."""
    if span in SPAN_HOURS:
        length = SPAN_HOURS[span] // 2
        child = Span.HOUR if length == 1 else Span(f"{length}h")
        return [(child, start), (child, start + HOUR * length)]
    length = SPAN_DAYS[span] // 2
    child = Span.DAY if length == 1 else Span(f"{length}d")
    return [(child, start), (child, start + DAY * length)]


def affected_days(stretches: Iterable[Interval], rolled: dict[datetime, datetime]) -> set[datetime]:
    """The rolled days (start -> until) that any of the stretches overlaps."""
    days = set()
    for low, high in stretches:
        day = midnight(low)
        while day < high:
            until = rolled.get(day)
            if until is not None and low < until:
                days.add(day)
            day += DAY
    return days


def periods_of_days_q(days: Iterable[datetime]) -> Q:
    """SpendPeriod (or roll-up) rows of these days, of their hours (and blocks of hours) and of the
    blocks of days that hold them."""
    days = set(days)
    q = Q(span=Span.DAY, start__in=sorted(days))
    for first, last in runs(sorted(days), Span.DAY):
        q |= Q(span__in=HOUR_SPANS, start__gte=first, start__lt=last + DAY)
    for span, _ in BLOCKS:
        q |= Q(span=span, start__in=sorted({floor(day, span) for day in days}))
    return q


# Where an allocation stops costing (cost.billed_until), as a scalar subquery over one allocation:
# index lookups, whatever the planner thinks of the tables' sizes.
_ALLOCATION_END = (
    "COALESCE(a.ended_at, {least}(%(now)s, COALESCE("
    "(SELECT w.expires_at FROM workloads_workload w WHERE w.id = a.workload_id), %(now)s)))"
)
_CHANGES_SQL = """
SELECT held_from, seen, CASE WHEN end_now IS NULL THEN NULL ELSE {least}(end_now, through) END AS now_clipped,
       allocation_id, NULL AS storage_hold_id, end_now, ended
FROM (
  SELECT s.held_from, s.through, s.allocation_id, {least}(s.end_seen, s.through) AS seen,
         CASE WHEN a.id IS NULL THEN NULL ELSE {allocation_end} END AS end_now, a.ended_at AS ended
  FROM spend_spendopenhold s LEFT JOIN fleet_allocation a ON a.id = s.allocation_id
  WHERE s.allocation_id IN (  -- only those the database noted as changed (SpendHoldChange)
    SELECT c.allocation_id FROM spend_spendholdchange c WHERE c.allocation_id IS NOT NULL
    UNION SELECT x.id FROM spend_spendholdchange c JOIN fleet_allocation x ON x.workload_id = c.workload_id
  ) {team_s}
  {offset}
) open_allocations WHERE end_now IS NULL OR {least}(end_now, through) <> seen
UNION ALL
SELECT s.held_from, {least}(s.end_seen, s.through),
       CASE WHEN h.id IS NULL THEN NULL ELSE {least}(COALESCE(h.ended_at, %(now)s), s.through) END,
       NULL, s.storage_hold_id, CASE WHEN h.id IS NULL THEN NULL ELSE COALESCE(h.ended_at, %(now)s) END, h.ended_at
FROM spend_spendopenhold s LEFT JOIN fleet_storagehold h ON h.id = s.storage_hold_id
WHERE s.storage_hold_id IN (SELECT c.storage_hold_id FROM spend_spendholdchange c WHERE c.storage_hold_id IS NOT NULL) {team_s}
  AND (h.id IS NULL OR {least}(COALESCE(h.ended_at, %(now)s), s.through) <> {least}(s.end_seen, s.through))
UNION ALL
SELECT a.started_at, a.started_at, {allocation_end}, NULL, NULL, NULL, NULL FROM fleet_allocation a
WHERE a.id > %(allocation_seen)s AND a.started_at < %(before)s {team_a}
UNION ALL
SELECT h.started_at, h.started_at, COALESCE(h.ended_at, %(now)s), NULL, NULL, NULL, NULL FROM fleet_storagehold h
WHERE h.id > %(storage_seen)s AND h.started_at < %(before)s {team_h}
"""


def _moment(value) -> datetime:
    if isinstance(value, datetime):
        return utc(value) if value.tzinfo else value.replace(tzinfo=UTC)
    return parse_datetime(value).replace(tzinfo=UTC)  # SQLite: text, UTC


def _changes_sql(
    *, now: datetime, before: datetime, team_id: int | None, seen: tuple[int, int]
) -> tuple[str, dict]:
    least = "LEAST" if connection.vendor == "postgresql" else "MIN"
    team = "AND {alias}.team_id = %(team)s" if team_id is not None else ""
    sql = _CHANGES_SQL.format(
        # PostgreSQL: kept a subquery, each lookup runs once a row, not once for each use of its column
        offset="OFFSET 0" if connection.vendor == "postgresql" else "",
        least=least,
        allocation_end=_ALLOCATION_END.format(least=least),
        team_s=team.format(alias="s"),
        team_a=team.format(alias="a"),
        team_h=team.format(alias="h"),
    )
    adapt = connection.ops.adapt_datetimefield_value
    params = {"now": adapt(now), "before": adapt(before), "team": team_id}
    return sql, {**params, "allocation_seen": seen[0], "storage_seen": seen[1]}


def _stretch(held_from, seen, now_clipped) -> Interval:
    """The rolled time a changed hold makes wrong: all it added if it is gone, else between the
    end the roll-ups counted it to and the one it has now."""
    held_from, seen = _moment(held_from), _moment(seen)
    if now_clipped is None:
        return held_from, seen
    now_clipped = _moment(now_clipped)
    return min(seen, now_clipped), max(seen, now_clipped)


@dataclass(frozen=True)
class Change:
    """A hold the roll-ups no longer agree with: the rolled time it makes wrong; for an open hold
    the roll-ups counted, which (allocation or storage hold id), its billed end now (None: gone)
    and whether it has ended; for a hold inserted into rolled time, none of those."""

    stretch: Interval
    allocation_id: int | None = None
    storage_hold_id: int | None = None
    end_now: datetime | None = None
    ended: bool = False


def changes(
    *, now: datetime, before: datetime, team_id: int | None = None, seen: tuple[int, int] | None = None
) -> list[Change]:
    """The holds changed since their time was rolled: open holds the roll-ups counted whose billed
    end has moved before the end of what was rolled (ended in the past, an expiry moved) or that are
    gone; holds inserted (ids above the watermark) that started before `before`. One statement:
    of the remembered open holds only those the database noted as changed since the workers last
    looked (`SpendHoldChange`: a few since the last periodic run, not every open hold), and the
    newest holds. `team_id`: only that team's. `seen`: the watermark's ids, if the caller has read
    them."""
    if seen is None:
        mark = (
            SpendWatermark.objects.order_by("pk")
            .values_list("allocation_id_seen", "storage_hold_id_seen")
            .first()
        )
        seen = mark or (0, 0)
    sql, params = _changes_sql(now=now, before=before, team_id=team_id, seen=seen)
    found = []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for held_from, seen, now_clipped, allocation_id, storage_id, end_now, ended in cursor.fetchall():
            low, high = _stretch(held_from, seen, now_clipped)
            found.append(
                Change(
                    stretch=(low, high),
                    allocation_id=allocation_id,
                    storage_hold_id=storage_id,
                    end_now=None if end_now is None else _moment(end_now),
                    ended=ended is not None,
                )
            )
    return found


@dataclass
class Plan:
    """Where a report's figures come from: roll-up rows of these periods (by span), and the
    holds over these stretches (each within one UTC day when the report is by day)."""

    rolled: dict[str, list[datetime]] = field(default_factory=dict)
    live: list[Interval] = field(default_factory=list)
    # Stretches to take away: a range that starts or ends late in a rolled day reads the whole day
    # and subtracts the few hours outside the range, rather than costing the many inside.
    minus: list[Interval] = field(default_factory=list)

    @property
    def rolled_days(self) -> list[datetime]:
        return self.rolled.get(Span.DAY, [])


# The periods, and the holds watermark (a constant for the next statement: with it the planner
# estimates the holds newer than it from statistics, instead of guessing a third of the table).
# Hours and blocks of hours only of the range's first day and of the day before `end`'s day onwards
# (yesterday may still be rolled in part, within its grace): a plan reads a day in between whole, or,
# stale, from the holds (its hours go stale with it); forty-five periods a day otherwise read for
# nothing. (A day in between rolled only in part, the workers stopped, is costed from the holds.)
_PERIODS_SQL = """
SELECT 'p', span, start, until, NULL, NULL FROM spend_spendperiod
WHERE start >= %(first)s AND start < %(end)s AND NOT stale
  AND (span NOT IN ({hour_spans}) OR start < %(first_day_end)s OR start >= %(last_days)s)
UNION ALL SELECT 'w', NULL, NULL, NULL, allocation_id_seen, storage_hold_id_seen FROM spend_spendwatermark
""".format(hour_spans=", ".join(f"%(hour_span{n})s" for n in range(len(HOUR_SPANS))))  # noqa: S608 (placeholders)


def fresh_periods(
    *, start: datetime, end: datetime, now: datetime, team_id: int | None = None
) -> dict[tuple[str, datetime], datetime]:
    """The periods within [start, end) whose roll-ups a report may read now: (span, start) -> the
    end of what their rows cover (a day's `until`; today's is before its end). Two round trips:
    the periods, then the changes to the holds not rolled yet (`changes`)."""
    adapt = connection.ops.adapt_datetimefield_value
    periods, seen = [], (0, 0)
    with connection.cursor() as cursor:
        cursor.execute(
            _PERIODS_SQL,
            {
                "first": adapt(midnight(start)),
                "end": adapt(end),
                "first_day_end": adapt(midnight(start) + DAY),
                "last_days": adapt(midnight(end) - DAY),
                **{f"hour_span{n}": span for n, span in enumerate(HOUR_SPANS)},
            },
        )
        for kind, span, first, until, allocation_seen, storage_seen in cursor.fetchall():
            if kind == "p":
                periods.append((span, _moment(first), _moment(until)))
            else:
                seen = (allocation_seen, storage_seen)
    if not periods:
        return {}
    changed = [c.stretch for c in changes(now=now, before=end, team_id=team_id, seen=seen)]
    days = {period_start: until for span, period_start, until in periods if span == Span.DAY}
    bad = affected_days(changed, days)
    return {
        (span, period_start): until
        for span, period_start, until in periods
        if not (
            # an hour (or block of hours) counts only with its day fresh: they go stale and are
            # rolled together
            midnight(period_start) in bad or midnight(period_start) not in days
            if span in HOUR_SPANS
            else any(period_start <= day < until for day in bad)
        )
    }


def make_plan(
    *,
    start: datetime,
    end: datetime,
    fresh: dict[tuple[str, datetime], datetime],
    blocks: bool = True,
    split_days: bool = False,
) -> Plan:
    """Cover [start, end) with the largest fresh periods (blocks only if `blocks`), and leave the
    rest to live arithmetic, in as few stretches as may be (one per day if `split_days`)."""
    start, end = utc(start), utc(end)
    plan = Plan()
    last_fresh = max(fresh.values(), default=start)
    moment = start
    while moment < end:
        if moment >= last_fresh and not split_days:  # nothing rolled from here on: one stretch
            _live(plan, moment, end, merge=True)
            break
        day = midnight(moment)
        if moment == day:
            taken = None
            if blocks:
                for span, days in BLOCKS:
                    if (span, moment) in fresh and moment + DAY * days <= end:
                        taken = (span, moment + DAY * days)
                        break
            until = fresh.get((Span.DAY, moment))
            if taken is None and until is not None and until <= end:
                taken = (Span.DAY, until)
            if taken is not None:
                plan.rolled.setdefault(taken[0], []).append(moment)
                moment = taken[1]
                continue
        stop = min(day + DAY, end)
        _part_of_day(plan, day, moment, stop, fresh, merge=not (split_days and moment == day))
        moment = stop
    return plan


def _part_of_day(
    plan: Plan, day: datetime, low: datetime, high: datetime, fresh: dict, *, merge: bool
) -> None:
    """Cover [low, high), part of one day, with whichever leaves the least time to cost from the
    holds: the stretch itself, its hours (each hour direct or less its part outside), or the whole
    day less the part outside."""
    whole = fresh.get((Span.DAY, day)) == day + DAY
    hours = _by_hours(day, low, high, fresh)
    choices = [(high - low, 2, Plan(live=[(low, high)])), (hours[0], 1, hours[1])]
    if whole and high == day + DAY:
        choices.append((low - day, 0, Plan(rolled={Span.DAY: [day]}, minus=[(day, low)])))
    elif whole and low == day:
        choices.append((day + DAY - high, 0, Plan(rolled={Span.DAY: [day]}, minus=[(high, day + DAY)])))
    _, _, best = min(choices, key=lambda choice: choice[:2])  # least live time; then fewest rows
    for span, starts in best.rolled.items():
        plan.rolled.setdefault(span, []).extend(starts)
    plan.minus.extend(best.minus)
    for at, (first, last) in enumerate(best.live):
        _live(plan, first, last, merge=merge or at > 0 or first > low)


def _by_hours(day: datetime, low: datetime, high: datetime, fresh: dict) -> tuple[timedelta, Plan]:
    """[low, high) within `day` by fresh periods of hours: each block of 8 hours whole, or less its
    parts outside the stretch, or as its two halves likewise, down to single hours, whichever
    leaves the least time to cost from the holds (then the least of it taken away, then the fewest
    rows); the rest live. Old days keep only their blocks of 8 hours, recent days every span.
    Returns the live time and the plan."""
    plan, live = Plan(), timedelta(0)
    for n in range(0, 24, 8):
        time, _, rolled, minus, stretches = _cover(Span.HOURS_8, day + HOUR * n, low, high, fresh)
        live += time
        for span, start in rolled:
            plan.rolled.setdefault(span, []).append(start)
        plan.minus.extend(minus)
        for first, last in stretches:
            _live(plan, first, last, merge=True)
    return live, plan


# What a period of hours contributes to a cover: the time left to cost from the holds, the rows
# read, the periods read (span, start), the stretches to take away, the stretches costed.
Cover = tuple[timedelta, int, list[tuple[str, datetime]], list[Interval], list[Interval]]


def _cover(span: str, start: datetime, low: datetime, high: datetime, fresh: dict) -> Cover:
    """The cheapest cover of [low, high) within this period of hours (see `_by_hours`)."""
    end = period_end(start, span)
    first, last = max(low, start), min(high, end)
    if first >= last:
        return timedelta(0), 0, [], [], []
    choices: list[Cover] = [(last - first, 0, [], [], [(first, last)])]
    if fresh.get((span, start)) == end:
        outside = [(a, b) for a, b in ((start, first), (last, end)) if a < b]
        choices.append((sum((b - a for a, b in outside), timedelta(0)), 1, [(span, start)], outside, []))
    if span != Span.HOUR:
        one, two = (_cover(child, at, low, high, fresh) for child, at in halves(start, span))
        choices.append((one[0] + two[0], one[1] + two[1], one[2] + two[2], one[3] + two[3], one[4] + two[4]))
    # Least time to cost from the holds; then the least of it taken away; then the fewest rows.
    return min(
        choices, key=lambda choice: (choice[0], sum((b - a for a, b in choice[3]), timedelta(0)), choice[1])
    )


def _live(plan: Plan, low: datetime, high: datetime, *, merge: bool) -> None:
    if merge and plan.live and plan.live[-1][1] == low:
        plan.live[-1] = (plan.live[-1][0], high)
    else:
        plan.live.append((low, high))


def runs(starts: list[datetime], span: str) -> list[Interval]:
    """Consecutive periods of one span merged into [first start, last start] runs."""
    found: list[Interval] = []
    for moment in sorted(starts):
        if found and period_end(found[-1][1], span) == moment:
            found[-1] = (found[-1][0], moment)
        else:
            found.append((moment, moment))
    return found
