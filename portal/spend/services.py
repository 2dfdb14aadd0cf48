"""Spend roll-ups: how reports stay fast with millions of holds, and exact.

Why: a report used to read every hold of its range into Python (a team's month-to-date with a
million holds took 14 s, the spend API over 30 days 83 s), and the month-to-date figure is on the
path of every request, extension and approval (the budget check).

What: the workers sum closed time into roll-up rows (`SpendRollup`) per UTC day, at six levels:
team; team and kind (a GPU type, or storage); team and user; team, user, kind and workload; team,
user and the workload's project label; and team and project label (storage apart; read from the
workloads when the day is rolled, see `portal.spend.totals`). Today is rolled too, up to a few
minutes ago, every TODAY_EVERY. Days are summed into blocks of 2, 4 ... 256 days aligned since 1970 (all levels but
the fine one), so any run of whole days is a handful of periods: a year by team reads about 16 rows a team, by user 16 a user, whatever the number of holds
(`periods.make_plan` picks them). Whatever no fresh period covers, the partial-day edges of a range
and the minutes since today's roll-up, is costed from the holds in SQL (`holds.spend_by_key`); on
PostgreSQL a GiST index over each closed allocation's span finds the closed holds of any stretch,
last year's as cheaply as today's, and a partial index the open ones by their start. The workload report keeps one row more per workload, its total over
its rolled days (`WorkloadSpend`), to take the largest of a year in one index scan (`by_workload`).

Recent days (PORTAL_SPEND_HOUR_DAYS, 35 by default) are also rolled by the hour, with the day and
from the same holds and minutes (`_roll_hours`), so a range starting or ending within one of them
(the last 30 days, ending now) costs at most half an hour at each edge from the holds, not half a
day. Their hours are summed into blocks of 2, 4 and 8 hours aligned in the day, at every level,
the fine one included (`_roll_hour_blocks`): the hours of an edge are read as a few blocks (12
hours: 8 + 4), not as up to 23 hours of rows per workload. Older days keep their blocks of 8 hours
for PORTAL_SPEND_8H_DAYS (400 by default; an old day rolled again rolls them from the holds), so an
edge of a range up to a year long costs at most 4 hours from the holds, not 12; their hours and
smaller blocks are dropped (`spend_hours_prune`).

Why not something else: hourly rows kept for ever, or a roll-up per workload and month, would be
as many rows as the holds at the fine levels; running sums per day would make every correction rewrite the rest
of the year; a materialized view cannot be refreshed one day at a time.

Exact: roll-ups are made by the same function a report uses for live time (`holds.spend_by_key`:
the database adds price x share x seconds held exactly, per key and share denominator, and
`cost.per_share_hour` divides once, as `cost.cost_of` does for one hold). Rows keep amounts
unrounded to 18 places (every cost with a finite decimal expansion exactly); totals are rounded to
cents at the end, as before. (On SQLite, the embedded default, the database adds such amounts as
floating point: 15 significant digits, the most Django keeps there.)

True when holds change: closed time changes only when a hold that was open when a day was rolled
has its end moved into rolled time (ended in the past, its workload's expiry moved, deleted), or
when a hold is inserted into rolled time (an import, a backdated hold). `SpendOpenHold` remembers
every hold open at a roll-up and the end it was counted to; `SpendWatermark` the highest hold ids
checked; `SpendHoldChange` the holds (and workloads' expiries) written since the workers last
looked, noted by database triggers. Every report compares those few with what was remembered, and
the holds newer than the watermark (one statement), and costs the days they touch from the holds,
so a change shows at once; the workers' periodic `spend_rollup_due` marks those days (and their
blocks) stale, rolls them again and deletes the notes it read. No code that writes holds has to
call spend (fleet, below spend in the layers, cannot). Not seen: price corrections, and deletions
or edits of holds that had ended before their day was rolled; after those, rebuild with
`manage.py spend_rollup`.

Idle cost is rolled with the rest, from the node agents' minutes as they were when the day was
rolled, with the team's threshold of then (minutes are pruned after PORTAL_TELEMETRY_MINUTE_DAYS; the
roll-up keeps what they said, where a report from the holds alone would find nothing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Value
from django.utils import timezone

from portal.fleet.models import Allocation, StorageHold
from portal.spend.cost import EXACT, ZERO
from portal.spend.holds import (
    STORAGE,
    Amount,
    allocation_billed_until,
    first_hold_at,
    overlapping_allocations,
    spend_by_key,
    summing_settings,
)
from portal.spend.models import (
    Level,
    Span,
    SpendHoldChange,
    SpendOpenHold,
    SpendPeriod,
    SpendRollup,
    SpendWatermark,
    WorkloadSpend,
)
from portal.spend.periods import (
    BLOCKS,
    DAY,
    HOUR,
    HOUR_BLOCKS,
    HOUR_SPANS,
    SPAN_HOURS,
    affected_days,
    changes,
    floor,
    halves,
    midnight,
    period_end,
    periods_of_days_q,
    utc,
)

CANONICAL = ("team", "user", "kind", "workload")
# A day's finest sums (CANONICAL) with what each key derives: its workload's project label, and
# whether it is storage (the project level keeps storage apart from work of no project).
DERIVED = (*CANONICAL, "project", "storage")
LEVEL_KEYS = {
    Level.TEAM: ("team",),
    Level.TEAM_KIND: ("team", "kind"),
    Level.USER: ("team", "user"),
    Level.FINE: CANONICAL,
    Level.PROJECT: ("team", "user", "project", "storage"),
    Level.TEAM_PROJECT: ("team", "project", "storage"),
}
BLOCK_LEVELS = (Level.TEAM, Level.TEAM_KIND, Level.USER, Level.PROJECT, Level.TEAM_PROJECT)
# A day is rolled whole this long after it has closed (holds and readings written in transactions
# that began before its end have committed by then); today (and yesterday until then) is rolled
# up to a few minutes ago, again every TODAY_EVERY.
DAY_GRACE = timedelta(minutes=15)
TODAY_GRACE = timedelta(minutes=2)
TODAY_EVERY = timedelta(minutes=10)
DAYS_PER_RUN = 14  # a periodic run catches up on history this many days at a time (newest first)
CHUNK = 500


def _chunks(ids: Iterable, size: int = CHUNK) -> Iterator[list]:
    ids = list(ids)
    for at in range(0, len(ids), size):
        yield ids[at : at + size]


def _lock() -> SpendWatermark:
    """Serialize roll-ups (the watermark's row); call inside a transaction."""
    SpendWatermark.objects.get_or_create(pk=1)
    return SpendWatermark.objects.select_for_update().get(pk=1)


def _key_fields(keys: tuple[str, ...], key: tuple) -> dict:
    values = dict(zip(keys, key, strict=True))
    fields: dict = {"team_id": values["team"]}
    if "user" in values:
        fields["user_id"] = values["user"]
    if "kind" in values:
        storage = values["kind"] == STORAGE
        fields["storage"] = storage
        fields["gpu_type_id"] = None if storage else values["kind"]
    if "workload" in values:
        fields["workload_id"] = values["workload"]
    return fields


ROLLUP_COLUMNS = (
    "span", "start", "level", "team_id", "user_id", "gpu_type_id", "storage", "workload_id", "project", "cost",
    "gpu_hours", "idle_cost",
)  # fmt: skip


def _projects(workload_ids: Iterable[int | None]) -> dict[int, str]:
    """The project label of each of these workloads that has one."""
    workloads = Allocation.workload.field.related_model.objects  # no import upwards (layers)
    found: dict[int, str] = {}
    for chunk in _chunks(sorted({w for w in workload_ids if w is not None})):
        found.update(workloads.filter(pk__in=chunk).exclude(project="").values_list("pk", "project"))
    return found


def _rollup_rows(
    *, span: str, start: datetime, fine: dict[tuple, Amount], projects: dict[int, str]
) -> Iterator[tuple]:
    """The rows (ROLLUP_COLUMNS) of every level for one day or hour, from its finest sums and the
    project label of each workload (`projects`; none: "")."""
    derived = {
        (*key, projects.get(key[3], "") if key[2] != STORAGE else "", key[2] == STORAGE): amount
        for key, amount in fine.items()
    }
    for level, keys in LEVEL_KEYS.items():
        index = [DERIVED.index(k) for k in keys]
        summed: dict[tuple, list] = {}
        for key, amount in derived.items():
            sub = tuple(key[i] for i in index)
            total = summed.get(sub)
            if total is None:
                summed[sub] = [amount.cost, amount.gpu_hours, amount.idle_cost]
            else:
                total[0] = EXACT.add(total[0], amount.cost)
                total[1] = EXACT.add(total[1], amount.gpu_hours)
                total[2] = EXACT.add(total[2], amount.idle_cost)
        for sub, (cost, hours, idle) in summed.items():
            values = dict(zip(keys, sub, strict=True))
            kind = values.get("kind")
            yield (
                span,
                start,
                level,
                values["team"],
                values.get("user"),
                None if kind == STORAGE else kind,
                values.get("storage", kind == STORAGE),
                values.get("workload"),
                values.get("project", ""),
                cost,
                hours,
                idle,
            )


def _insert_rollups(rows: Iterable[tuple]) -> int:
    """Write roll-up rows: COPY on PostgreSQL, bulk INSERT elsewhere."""
    if connection.vendor == "postgresql":
        count = 0
        columns = ", ".join(ROLLUP_COLUMNS)
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(f"COPY spend_spendrollup ({columns}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
                count += 1
        return count
    made = SpendRollup.objects.bulk_create(
        (SpendRollup(**dict(zip(ROLLUP_COLUMNS, row, strict=True))) for row in rows), batch_size=1000
    )
    return len(made)


def _note_open_holds(*, start: datetime, end: datetime, now: datetime) -> None:
    """Remember the holds open now that overlap [start, end), and to when they were counted. Done
    before the sums are read: a hold that ends in between is then seen as changed (and its period
    rolled again), never missed."""
    for relation, holds in (
        (
            "allocation",
            overlapping_allocations(start=start, end=end)
            .filter(ended_at__isnull=True)
            .annotate(end_now=allocation_billed_until(now)),
        ),
        (
            "storage_hold",
            StorageHold.objects.filter(ended_at__isnull=True, started_at__lt=end).annotate(
                end_now=Value(now)
            ),
        ),
    ):
        found = list(holds.values_list("pk", "team_id", "started_at", "end_now"))
        for chunk in _chunks(found):
            through = dict(
                SpendOpenHold.objects.filter(**{f"{relation}_id__in": [row[0] for row in chunk]}).values_list(
                    f"{relation}_id", "through"
                )
            )
            SpendOpenHold.objects.bulk_create(
                [
                    SpendOpenHold(
                        **{f"{relation}_id": pk},
                        team_id=team_id,
                        held_from=started_at,
                        through=max(through.get(pk, end), end),
                        end_seen=end_now,
                    )
                    for pk, team_id, started_at, end_now in chunk
                ],
                update_conflicts=True,
                unique_fields=[relation],
                update_fields=["team", "held_from", "through", "end_seen"],
            )


_REFRESH_WORKLOADS_SQL = """
INSERT INTO spend_workloadspend (workload_id, team_id, user_id, first_day, last_day, cost, gpu_hours, idle_cost, shared,
                                 peak_day_cost, low_day_cost)
SELECT workload_id, team_id, user_id, first_day, last_day, SUM(cost), SUM(hours), SUM(idle),
       COUNT(*) OVER (PARTITION BY workload_id) > 1, MAX(cost),
       CASE WHEN COUNT(*) = last_day - first_day + 1
            THEN COALESCE(MIN(cost) FILTER (WHERE day > first_day AND day < last_day), 0) ELSE 0 END
FROM (  -- each total's days, its rows summed by day (one a GPU type)
  SELECT workload_id, team_id, user_id, day, SUM(cost) AS cost, SUM(gpu_hours) AS hours, SUM(idle_cost) AS idle,
         MIN(day) OVER held AS first_day, MAX(day) OVER held AS last_day
  FROM (SELECT *, (start AT TIME ZONE 'UTC')::date AS day FROM spend_spendrollup
        WHERE level = %(fine)s AND span = %(day)s AND workload_id = ANY(%(ids)s)) r
  GROUP BY workload_id, team_id, user_id, day
  WINDOW held AS (PARTITION BY workload_id, team_id, user_id)
) days
GROUP BY workload_id, team_id, user_id, first_day, last_day
"""


def _refresh_workload_spend(workload_ids: Iterable[int | None]) -> None:
    """Each workload's total over its rolled days, again from its fine day rows."""
    ids = sorted({w for w in workload_ids if w is not None})
    if connection.vendor == "postgresql":  # two statements, whatever the number of workloads
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM spend_workloadspend WHERE workload_id = ANY(%s)", [ids])
            cursor.execute(_REFRESH_WORKLOADS_SQL, {"fine": Level.FINE, "day": Span.DAY, "ids": ids})
        return
    for chunk in _chunks(ids):  # SQLite keeps units as text: added up here
        WorkloadSpend.objects.filter(workload_id__in=chunk).delete()
        totals: dict[tuple, list] = {}  # cost, GPU-hours, idle cost, and its rows' cost by day
        for workload_id, team_id, user_id, start, cost, hours, idle in SpendRollup.objects.filter(
            level=Level.FINE, span=Span.DAY, workload_id__in=chunk
        ).values_list("workload_id", "team_id", "user_id", "start", "cost", "gpu_hours", "idle_cost"):
            found = totals.setdefault((workload_id, team_id, user_id), [ZERO, ZERO, ZERO, {}])
            found[:3] = [EXACT.add(found[0], cost), EXACT.add(found[1], hours), EXACT.add(found[2], idle)]
            by_day, day = found[3], utc(start).date()
            by_day[day] = EXACT.add(by_day.get(day, ZERO), cost)
        holders = Counter(workload_id for workload_id, _, _ in totals)
        WorkloadSpend.objects.bulk_create(
            WorkloadSpend(
                workload_id=workload_id,
                team_id=team_id,
                user_id=user_id,
                first_day=min(by_day),
                last_day=max(by_day),
                cost=cost,
                gpu_hours=hours,
                idle_cost=idle,
                shared=holders[workload_id] > 1,
                peak_day_cost=max(by_day.values()),
                low_day_cost=_low_day_cost(by_day),
            )
            for (workload_id, team_id, user_id), (cost, hours, idle, by_day) in totals.items()
        )


def _low_day_cost(costs: dict[date, Decimal]) -> Decimal:
    """`WorkloadSpend.low_day_cost` of a total's days and what each cost."""
    first, last = min(costs), max(costs)
    if len(costs) != (last - first).days + 1:
        return ZERO
    return min((cost for day, cost in costs.items() if first < day < last), default=ZERO)


# One index lookup per remembered hold (a scalar subquery), whatever the planner thinks of the sizes.
_FORGET_ENDED_SQL = """
DELETE FROM spend_spendopenhold WHERE id IN (
  SELECT id FROM (
    SELECT s.id, s.through, s.end_seen,
           CASE WHEN s.allocation_id IS NOT NULL
                THEN (SELECT a.ended_at FROM fleet_allocation a WHERE a.id = s.allocation_id)
                ELSE (SELECT h.ended_at FROM fleet_storagehold h WHERE h.id = s.storage_hold_id) END AS ended
    FROM spend_spendopenhold s
  ) remembered WHERE ended >= through OR ended = end_seen
)
"""


def _apply_changes(*, now: datetime, watermark: SpendWatermark) -> int:
    """See spend_changes_apply; under the roll-up lock."""
    rolled = {
        utc(start): utc(until)
        for start, until in SpendPeriod.objects.filter(span=Span.DAY).values_list("start", "until")
    }
    # The changes noted so far: deleted once applied. Ones noted meanwhile (their transaction
    # committing later) stay for the next run, whatever their ids.
    noted = list(SpendHoldChange.objects.values_list("pk", flat=True))
    found = changes(now=now, before=max(rolled.values(), default=now))
    days = affected_days([change.stretch for change in found], rolled)
    if days:
        SpendPeriod.objects.filter(periods_of_days_q(days), stale=False).update(stale=True)
    for change in found:
        if change.allocation_id is None and change.storage_hold_id is None:
            continue  # an inserted hold: nothing remembered
        seen = SpendOpenHold.objects.filter(
            allocation_id=change.allocation_id, storage_hold_id=change.storage_hold_id
        )
        if change.end_now is None or change.ended:
            seen.delete()  # gone, or ended: its days are stale and will be rolled as they are now
        else:
            seen.update(end_seen=change.end_now)
    # Holds that ended after everything rolled with them open, or where they were counted to (the
    # expiry sweep ends a hold at the expiry it was clipped at), change nothing: forget them.
    with connection.cursor() as cursor:
        cursor.execute(_FORGET_ENDED_SQL)
    for chunk in _chunks(noted):
        SpendHoldChange.objects.filter(pk__in=chunk).delete()
    top = {
        "allocation_id_seen": Allocation.objects.aggregate(top=Max("pk"))["top"] or 0,
        "storage_hold_id_seen": StorageHold.objects.aggregate(top=Max("pk"))["top"] or 0,
    }
    if top != {
        "allocation_id_seen": watermark.allocation_id_seen,
        "storage_hold_id_seen": watermark.storage_hold_id_seen,
    }:
        SpendWatermark.objects.filter(pk=watermark.pk).update(**top)
    return len(days)


def spend_changes_apply(*, now: datetime | None = None) -> int:
    """Mark stale the periods whose holds changed since they were rolled (an open hold's end moved
    before the end of what was rolled, a hold vanished, a hold was inserted into rolled time), and
    forget the open holds that have ended. Returns the number of stale stretches found."""
    now = now or timezone.now()
    with summing_settings(), transaction.atomic():
        return _apply_changes(now=now, watermark=_lock())


def spend_roll_day(
    *, day: datetime, now: datetime | None = None, until: datetime | None = None, note_open: bool = True
) -> int:
    """Roll one UTC day from the holds, replacing its rows (one transaction): all of it, or up to
    `until` (today). Refreshes its workloads' totals and leaves its blocks to be summed again.
    Returns the number of rows written; running it twice writes the same rows. `note_open=False`:
    the caller has noted the open holds for this day already (a rebuild, once for all days)."""
    now = now or timezone.now()
    day = utc(day)
    if midnight(day) != day:
        raise ValueError(f"not the start of a UTC day: {day}")
    until = min(until or day + DAY, day + DAY)
    if until > now or until <= day:
        raise ValueError(f"cannot roll {day:%Y-%m-%d} up to {until} at {now}")
    with summing_settings(), transaction.atomic():
        _apply_changes(now=now, watermark=_lock())
        if note_open:
            _note_open_holds(start=day, end=until, now=now)
        fine = spend_by_key(start=day, end=until, now=now, keys=CANONICAL)
        rows = SpendRollup.objects.filter(span=Span.DAY, start=day)
        touched = set(rows.filter(level=Level.FINE).values_list("workload_id", flat=True).distinct())
        rows.delete()
        projects = _projects(key[3] for key in fine)
        written = _insert_rollups(_rollup_rows(span=Span.DAY, start=day, fine=fine, projects=projects))
        SpendPeriod.objects.update_or_create(
            span=Span.DAY, start=day, defaults={"until": until, "stale": False, "rolled_at": now}
        )
        SpendPeriod.objects.filter(periods_of_days_q([day]), span__in=[span for span, _ in BLOCKS]).update(
            stale=True
        )
        _refresh_workload_spend(touched | {key[3] for key in fine})
        written += _roll_hours(day=day, until=until, now=now, again=until == day + DAY, projects=projects)
    return written


def hours_kept_from(now: datetime) -> datetime:
    """The first day rolled by the hour as well (PORTAL_SPEND_HOUR_DAYS before today)."""
    return midnight(now) - DAY * settings.PORTAL_SPEND_HOUR_DAYS


def eights_kept_from(now: datetime) -> datetime:
    """The first day whose blocks of 8 hours are kept (PORTAL_SPEND_8H_DAYS before today, or
    the first day kept by the hour if that is earlier)."""
    return min(midnight(now) - DAY * settings.PORTAL_SPEND_8H_DAYS, hours_kept_from(now))


def _rolled_span(day: datetime, until: datetime, now: datetime) -> str | None:
    """The periods of hours a day rolled up to `until` rolls from the holds: hours for a recent
    day, blocks of 8 hours for an older day rolled whole, none for older days or when not kept."""
    if day >= hours_kept_from(now) and settings.PORTAL_SPEND_HOUR_DAYS:
        return Span.HOUR
    if day >= eights_kept_from(now) and until == day + DAY and settings.PORTAL_SPEND_8H_DAYS:
        return Span.HOURS_8
    return None


def _roll_hours(
    *, day: datetime, until: datetime, now: datetime, again: bool, projects: dict[int, str] | None = None
) -> int:
    """Roll the whole hours of a recent day up to `until` (the blocks of 8 hours of an older day
    rolled whole), within the day's roll-up (the same holds, the same minutes), then sum hours into
    blocks of hours: all of them if `again` (the day is rolled whole, or was stale), else those not
    rolled yet or stale (today's, as they close). `projects`: the labels of the day's workloads, if
    the caller has read them (every hour's workloads are among them). Returns the rows written."""
    span = _rolled_span(day, until, now)
    if span is None:
        return 0
    step = period_end(day, span) - day
    fresh = set() if again else _fresh_hour_periods(day, until)
    written = 0
    hour = day
    while hour + step <= until:
        if (span, hour) not in fresh:
            fine = spend_by_key(start=hour, end=hour + step, now=now, keys=CANONICAL)
            SpendRollup.objects.filter(span=span, start=hour).delete()
            labels = projects if projects is not None else _projects(key[3] for key in fine)
            written += _insert_rollups(_rollup_rows(span=span, start=hour, fine=fine, projects=labels))
            SpendPeriod.objects.update_or_create(
                span=span, start=hour, defaults={"until": hour + step, "stale": False, "rolled_at": now}
            )
            fresh.add((span, hour))
            fresh.difference_update((block, floor(hour, block)) for block, _ in HOUR_BLOCKS if block != span)
        hour += step
    if span != Span.HOUR:
        return written
    return written + _roll_hour_blocks(day=day, until=until, now=now, fresh=fresh)


def _fresh_hour_periods(day: datetime, until: datetime) -> set[tuple[str, datetime]]:
    """The hours and blocks of hours of [day, until) that are rolled and fresh, as (span, start)."""
    return {
        (span, utc(start))
        for span, start in SpendPeriod.objects.filter(
            span__in=HOUR_SPANS, start__gte=day, start__lt=until, stale=False
        ).values_list("span", "start")
    }


def _roll_hour_blocks(*, day: datetime, until: datetime, now: datetime, fresh: set) -> int:
    """Sum the blocks of 2, 4 and 8 hours of [day, until) that are not in `fresh` (span, start) and
    whose halves are, smallest first, each from its halves' rows at every level; `fresh` gains
    them. Returns the rows written."""
    written = 0
    for span, length in reversed(HOUR_BLOCKS):
        start = day
        while start + HOUR * length <= until:
            parts = halves(start, span)
            if (span, start) not in fresh and all(part in fresh for part in parts):
                SpendRollup.objects.filter(span=span, start=start).delete()
                written += _sum_block(span=span, start=start, parts=parts, levels=Level.values)
                SpendPeriod.objects.update_or_create(
                    span=span,
                    start=start,
                    defaults={"until": period_end(start, span), "stale": False, "rolled_at": now},
                )
                fresh.add((span, start))
            start += HOUR * length
    return written


def spend_hours_prune(*, now: datetime) -> int:
    """Forget the hour roll-ups and blocks of 2 and 4 hours of days older than
    PORTAL_SPEND_HOUR_DAYS, and the blocks of 8 hours of days older than PORTAL_SPEND_8H_DAYS; how
    many periods went. The periods go first, in their own transaction: a report that reads them no
    longer plans on those hours before their rows are gone."""
    kept = {
        span: eights_kept_from(now) if span == Span.HOURS_8 else hours_kept_from(now) for span in HOUR_SPANS
    }
    with transaction.atomic():
        _lock()
        gone = 0
        for span, first in kept.items():
            gone += SpendPeriod.objects.filter(span=span, start__lt=first).delete()[0]
    # A day of rows at a time, found through the (level, span, start) index: one DELETE over every
    # old hour read the whole table (the planner expects most rows before `first`), a minute at 10
    # million holds on every run, with nothing to delete.
    for level in Level.values:
        for span, first in kept.items():
            rows = SpendRollup.objects.filter(level=level, span=span)
            while (
                oldest := rows.filter(start__lt=first)
                .order_by("start")
                .values_list("start", flat=True)
                .first()
            ):
                day = midnight(oldest)
                rows.filter(start__gte=day, start__lt=min(day + DAY, first)).delete()
    return gone


def _fresh_whole(span: str, starts: list[datetime]) -> set[datetime]:
    """Of these periods, those rolled whole and fresh."""
    found = SpendPeriod.objects.filter(span=span, start__in=starts, stale=False).values_list("start", "until")
    return {utc(start) for start, until in found if utc(until) == period_end(utc(start), span)}


# The halves as a range of starts, not a list: a list left the planner free to read every row of
# the span through the (level, span, team, start) index and test each start on the table, which it
# did (five seconds a block at 10 M holds) while its statistics had not yet seen the span's rows
# (a rebuild reaching its first days of hours, the first blocks of a kind ever summed).
_BLOCK_SQL = """
INSERT INTO spend_spendrollup (span, start, level, team_id, user_id, gpu_type_id, storage, workload_id, project,
                               cost, gpu_hours, idle_cost)
SELECT %(span)s, %(start)s, level, team_id, user_id, gpu_type_id, storage, workload_id, project, SUM(cost),
       SUM(gpu_hours), SUM(idle_cost)
FROM spend_spendrollup WHERE span = %(child)s AND start >= %(start)s AND start < %(end)s AND level = ANY(%(levels)s)
GROUP BY level, team_id, user_id, gpu_type_id, storage, workload_id, project
"""


def _sum_block(
    *, span: str, start: datetime, parts: list[tuple[str, datetime]], levels: Iterable[int] = BLOCK_LEVELS
) -> int:
    """Write a block's rows: its halves' rows of `levels` added up by level and key (in SQL on
    PostgreSQL). Returns how many."""
    child, starts, levels = parts[0][0], [s for _, s in parts], list(levels)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                _BLOCK_SQL,
                {
                    "span": span,
                    "start": start,
                    "end": period_end(start, span),
                    "child": child,
                    "levels": levels,
                },
            )
            return cursor.rowcount
    totals: dict[tuple, list] = {}  # SQLite keeps units as text: added up here
    for *key, cost, hours, idle in SpendRollup.objects.filter(
        span=child, start__in=starts, level__in=levels
    ).values_list(
        "level", "team_id", "user_id", "gpu_type_id", "storage", "workload_id", "project", "cost", "gpu_hours",
        "idle_cost",
    ):  # fmt: skip
        found = totals.setdefault(tuple(key), [ZERO, ZERO, ZERO])
        found[0], found[1], found[2] = (
            EXACT.add(found[0], cost),
            EXACT.add(found[1], hours),
            EXACT.add(found[2], idle),
        )
    return _insert_rollups(
        (span, start, level, team, user, gpu_type, storage, workload, project, cost, hours, idle)
        for (level, team, user, gpu_type, storage, workload, project), (cost, hours, idle) in totals.items()
    )


def spend_roll_blocks(*, days: Iterable[datetime], now: datetime | None = None) -> int:
    """Sum again every block that holds one of `days`, is not fresh, and whose halves are rolled
    whole and fresh, smallest first (each block from its halves' rows). Returns how many."""
    now = now or timezone.now()
    done = 0
    for span, _ in reversed(BLOCKS):
        starts = sorted({floor(day, span) for day in days})
        wanted = set(starts) - _fresh_whole(span, starts)
        for start in sorted(wanted):
            parts = halves(start, span)
            if len(_fresh_whole(parts[0][0], [s for _, s in parts])) < 2:
                continue
            with summing_settings(), transaction.atomic():
                _lock()
                SpendRollup.objects.filter(span=span, start=start).delete()
                _sum_block(span=span, start=start, parts=parts)
                SpendPeriod.objects.update_or_create(
                    span=span,
                    start=start,
                    defaults={"until": period_end(start, span), "stale": False, "rolled_at": now},
                )
            done += 1
    return done


def _days(first: date, last: date) -> list[datetime]:
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    return [start + DAY * n for n in range(max((last - first).days + 1, 0))]


@dataclass
class RollupRun:
    """What one run of the periodic roll-up did."""

    stale_found: int = 0
    days: list[date] = field(default_factory=list)
    partial: list[date] = field(default_factory=list)
    blocks: int = 0
    hours: int = 0  # hour (and block of hours) rows written for recent days rolled before they were kept


def spend_rollup_due(*, now: datetime | None = None, days_per_run: int = DAYS_PER_RUN) -> RollupRun:
    """The workers' periodic job: mark changed periods stale; roll the closed days not rolled whole
    or stale (newest first, `days_per_run` at most); roll today (and yesterday, within its grace) up
    to a few minutes ago when that is older than TODAY_EVERY; sum the blocks that became whole."""
    now = now or timezone.now()
    run = RollupRun(stale_found=spend_changes_apply(now=now))
    first = first_hold_at()
    if first is None:
        return run
    periods = {
        utc(start): (utc(until), stale)
        for start, until, stale in SpendPeriod.objects.filter(
            span=Span.DAY, start__gte=midnight(first)
        ).values_list("start", "until", "stale")
    }
    last_whole = midnight(now - DAY_GRACE) - DAY
    for day in reversed(_days(first.date(), now.date())):
        until, stale = periods.get(day, (day, True))
        if day <= last_whole:
            if (stale or until < day + DAY) and len(run.days) < days_per_run:
                spend_roll_day(day=day, now=now)
                run.days.append(day.date())
        else:
            # Not to the end: the day is rolled whole only after DAY_GRACE (late holds and readings).
            target = min(
                day + DAY - timedelta(minutes=1), (now - TODAY_GRACE).replace(second=0, microsecond=0)
            )
            if target > day and (stale or until <= target - TODAY_EVERY):
                spend_roll_day(day=day, now=now, until=target)
                run.partial.append(day.date())
    run.blocks = spend_roll_blocks(days=[_as_day(d) for d in run.days], now=now)
    run.hours = _hours_caught_up(periods=periods, now=now, days_per_run=days_per_run)
    spend_hours_prune(now=now)
    return run


def _hours_caught_up(*, periods: dict, now: datetime, days_per_run: int) -> int:
    """Roll the hours (blocks of 8 hours, for older days) of days rolled whole before they were
    kept (a new install, PORTAL_SPEND_HOUR_DAYS or PORTAL_SPEND_8H_DAYS raised), while the node
    agents' minutes for their idle cost are still kept (the day's rows were rolled from them); and
    sum the blocks of hours that their rolled hours are missing (rolled before blocks of hours were
    kept). Returns the rows written."""
    kept = eights_kept_from(now)
    with_minutes = midnight(now) - DAY * (settings.PORTAL_TELEMETRY_MINUTE_DAYS - 1)
    rolled = {
        (span, utc(start))
        for span, start in SpendPeriod.objects.filter(
            span__in=HOUR_SPANS, start__gte=kept, stale=False
        ).values_list("span", "start")
    }
    written = days = 0
    for day, (until, stale) in sorted(periods.items(), reverse=True):
        span = _rolled_span(day, until, now)
        if span is None or stale or until != day + DAY or days >= days_per_run:
            continue
        length = SPAN_HOURS[span]
        hours = {(span, day + HOUR * n) for n in range(0, 24, length)}
        blocks_to_sum = span == Span.HOUR and any(
            (block, start) not in rolled
            and all((Span.HOUR, start + HOUR * n) in rolled for n in range(block_length))
            for block, block_length in HOUR_BLOCKS
            for start in (day + HOUR * n for n in range(0, 24, block_length))
        )
        hours_to_roll = day >= with_minutes and not hours <= rolled
        if not (blocks_to_sum or hours_to_roll):
            continue
        with summing_settings(), transaction.atomic():
            _lock()
            if not SpendPeriod.objects.filter(
                span=Span.DAY, start=day, until=day + DAY, stale=False
            ).exists():
                continue  # made stale since the run began: rolled again, hours and all, next run
            if hours_to_roll:
                written += _roll_hours(day=day, until=until, now=now, again=False)
            else:
                fresh = _fresh_hour_periods(day, until)
                written += _roll_hour_blocks(day=day, until=until, now=now, fresh=fresh)
        days += 1
    return written


def _as_day(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def spend_rollup_rebuild(
    *, first: date, last: date, now: datetime | None = None, only_missing: bool = False
) -> Iterator[tuple[date, int]]:
    """Roll every closed day of [first, last] again from the holds, each in its own transaction
    (so an interrupted rebuild keeps the days it finished), then sum their blocks; yields (day,
    rows) as it goes. `only_missing`: skip days already rolled whole and fresh (to resume)."""
    now = now or timezone.now()
    spend_changes_apply(now=now)
    days = [d for d in _days(first, last) if d + DAY <= now]
    if not days:
        return
    with transaction.atomic():  # the holds open now, once for every day (each day would repeat it)
        _lock()
        _note_open_holds(start=days[0], end=days[-1] + DAY, now=now)
    whole = _fresh_whole(Span.DAY, days) if only_missing else set()
    rolled = 0
    for day in days:
        if day not in whole:
            yield day.date(), spend_roll_day(day=day, now=now, note_open=False)
            rolled += 1
            # The tables grow fast, and the first day kept by the hour brings spans never seen
            # before: statistics for the planner.
            if rolled in (1, 4, 16, 64, 256) or day == hours_kept_from(now):
                _analyze()
    spend_roll_blocks(days=days, now=now)
    _analyze()


def _analyze() -> None:
    """PostgreSQL: fresh statistics of the roll-up tables, so the planner picks their indexes."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "ANALYZE spend_spendrollup, spend_workloadspend, spend_spendopenhold, spend_spendperiod"
            )
