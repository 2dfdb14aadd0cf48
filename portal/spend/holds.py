"""Spend of the holds within one stretch of time, summed in SQL.

Cost is linear in the time held, so the database may add up price x share numerator x seconds
held (and share numerator x seconds, and price x share numerator x seconds held in idle minutes) over many holds,
exactly, per key and share denominator; `cost.share_units` turns each sum into exact units
(`cost.cost_of` does the same for a single hold). No hold is read into Python. The roll-ups are made by these
functions and a report uses them for whatever is not rolled up: one way to cost a hold.

PostgreSQL: one statement for GPU and storage holds, in exact numeric (`_pg_spend`); a GiST index
over each closed allocation's span (migration 0005 of this app) finds the closed holds that
overlap a stretch, an hour of last year as cheaply as the last hour; a partial index finds the
open ones by their start. Elsewhere (SQLite, where prices are REAL) the
ORM sums the exact time held per price and share and Python multiplies.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db import connection
from django.db.models import (
    BooleanField,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    OuterRef,
    Q,
    Subquery,
    Sum,
    Value,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce, Greatest, Least

from portal.fleet.models import Allocation, GpuMinute, StorageHold
from portal.spend.cost import EXACT, HOURS_PER_MONTH, SHARES_BASE, ZERO, from_units, held_seconds, share_units

STORAGE_DENOMINATOR = int(HOURS_PER_MONTH)
MINUTE = timedelta(minutes=1)  # the span of one telemetry reading (GpuMinute)
# Up to this long a stretch's idle time over the whole fleet is counted by device, beyond it (or
# for some teams' holds) hold by hold (PostgreSQL): at 10 M holds and 1,600 GPUs the two cost the
# same at 4 to 8 hours (bench/spend.py, docs/spend-measurements.md).
BY_DEVICE_UP_TO = timedelta(hours=4)

STORAGE = "storage"  # the kind of a storage hold, beside GPU type ids
# Why a sum is refused whose holds' share denominators do not all divide SHARES_BASE.
BAD_SHARES = f"a share denominator does not divide {SHARES_BASE}: add it to SHARES_BASE"
KEY_FIELDS = {"team": "team_id", "user": "user_id", "kind": "gpu_type_id", "workload": "workload_id"}
# A closed hold's span, in the form its GiST index (migration 0005 of this app) answers; open holds
# are found by their start in a partial index of their own.
CLOSED_SPAN_SQL = "tstzrange(fleet_allocation.started_at, GREATEST(fleet_allocation.started_at, fleet_allocation.ended_at), '[)')"
# Closed holds that started up to this long before a stretch are found by their start (a btree
# range); longer ones that started earlier by their span, in a GiST index of the long holds alone
# (migration 0009 of this app, whose predicate names the same interval).
LONG_HOLD = "24 hours"


# What a statement that sums many rows may use in memory for a hash or sort (PostgreSQL), per
# node: a workload report ranks some 15,000 workloads of numeric sums (10 MB), which the default
# 4 MB spills to disk in batches.
SUMMING_WORK_MEM = "16MB"


@contextmanager
def summing_settings() -> Iterator[None]:
    """PostgreSQL settings for the block's queries, which sum many rows: no JIT compilation (a
    report's sums over a few thousand roll-up rows cross jit_above_cost, and compiling them costs
    more, 40 ms and up, than running them) and SUMMING_WORK_MEM; the session's settings are put
    back after."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('jit'), current_setting('work_mem'), set_config('jit', 'off', false),"
            " set_config('work_mem', %s, false)",
            [SUMMING_WORK_MEM],
        )
        jit, work_mem, _, _ = cursor.fetchone()
    try:
        yield
    finally:
        if (jit, work_mem) != ("off", SUMMING_WORK_MEM):  # else nothing to put back (nested, say)
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('jit', %s, false), set_config('work_mem', %s, false)", [jit, work_mem]
                )


@dataclass(frozen=True)
class HoldScope:
    """Whose holds a figure counts: every team's (`team_ids` None) or those of `team_ids`, and
    besides the holds of `user_id`; only `team_id`'s, if given."""

    team_ids: frozenset[int] | None = None
    user_id: int | None = None
    team_id: int | None = None

    def holds_q(self) -> Q | None:
        """The holds in scope, as a filter on holds (or roll-up rows of a level with users)."""
        q = None
        if self.team_ids is not None:
            q = Q(team_id__in=self.team_ids)
            if self.user_id is not None:
                q |= Q(user_id=self.user_id)
        if self.team_id is not None:
            q = Q(team_id=self.team_id) if q is None else q & Q(team_id=self.team_id)
        return q

    def holds_sql(self, alias: str) -> tuple[str, dict]:
        """The same filter in SQL (PostgreSQL) over the holds table named `alias`."""
        sql, params = "", {}
        if self.team_ids is not None:
            params["scope_teams"] = sorted(self.team_ids)
            own = f" OR {alias}.user_id = %(scope_user)s" if self.user_id is not None else ""
            params["scope_user"] = self.user_id
            sql += f" AND ({alias}.team_id = ANY(%(scope_teams)s){own})"
        if self.team_id is not None:
            params["scope_team"] = self.team_id
            sql += f" AND {alias}.team_id = %(scope_team)s"
        return sql, params


@dataclass
class Amount:
    """Spend in exact units (portal.spend.cost): cost, GPU-hours and the idle part of the cost."""

    cost: Decimal = ZERO
    gpu_hours: Decimal = ZERO
    idle_cost: Decimal = ZERO

    def add(self, other: Amount) -> None:
        self.cost = EXACT.add(self.cost, other.cost)
        self.gpu_hours = EXACT.add(self.gpu_hours, other.gpu_hours)
        self.idle_cost = EXACT.add(self.idle_cost, other.idle_cost)

    def minus(self, other: Amount) -> Amount:
        return Amount(
            cost=EXACT.subtract(self.cost, other.cost),
            gpu_hours=EXACT.subtract(self.gpu_hours, other.gpu_hours),
            idle_cost=EXACT.subtract(self.idle_cost, other.idle_cost),
        )

    @staticmethod
    def add_to(found: dict, key, amount: Amount) -> None:
        """`found[key]` plus `amount`. A key's first amount is kept as it is, not copied: the caller
        gives it up (some 15,000 keys of a report's edge are each found once)."""
        if key in found:
            found[key].add(amount)
        else:
            found[key] = amount

    @property
    def dollars(self) -> Decimal:
        return from_units(self.cost)

    def __bool__(self) -> bool:
        return bool(self.cost or self.gpu_hours or self.idle_cost)


def workload_expiry() -> Subquery:
    """SQL, over an allocation, for its workload's expiry: a scalar subquery (an index lookup per
    hold, never a join the planner might hash over every workload)."""
    workloads = Allocation.workload.field.related_model.objects  # no import upwards (layers)
    return Subquery(workloads.filter(pk=OuterRef("workload_id")).values("expires_at")[:1])


def allocation_billed_until(now: datetime):
    """SQL for `cost.billed_until` of an allocation: its end, else now or its workload's expiry."""
    return Coalesce(F("ended_at"), Least(Value(now), Coalesce(workload_expiry(), Value(now))))


def first_hold_at() -> datetime | None:
    """When the first hold began, GPU or storage (two index reads)."""
    starts = [
        model.objects.order_by("started_at").values_list("started_at", flat=True).first()
        for model in (Allocation, StorageHold)
    ]
    starts = [start.astimezone(UTC) for start in starts if start is not None]
    return min(starts) if starts else None


def overlapping_allocations(*, start: datetime, end: datetime, scope: Q | None = None):
    """Allocations whose span [started_at, ended_at or forever) overlaps [start, end)."""
    holds = Allocation.objects.filter(started_at__lt=end).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=start)
    )
    if connection.vendor == "postgresql":  # the same test, in the forms the two indexes answer
        closed = RawSQL(  # noqa: S611 (constant SQL, the times are bound parameters)
            f"fleet_allocation.ended_at IS NOT NULL AND {CLOSED_SPAN_SQL} && tstzrange(%s, %s, '[)')",
            (start, end),
            output_field=BooleanField(),
        )
        holds = holds.filter(Q(ended_at__isnull=True) | Q(closed))
    if scope is not None:
        holds = holds.filter(scope)
    return holds.order_by()


def _billed_allocations(*, start: datetime, end: datetime, now: datetime, scope: Q | None):
    """Allocations that cost something within [start, end), with the stretch they cost."""
    return (
        overlapping_allocations(start=start, end=end, scope=scope)
        .alias(
            held_from=Greatest(F("started_at"), Value(start)),
            held_to=Least(allocation_billed_until(now), Value(end)),
        )
        .filter(held_to__gt=F("held_from"))
    )


def _idle_time() -> Subquery:
    """Per hold: how long of its billed stretch [held_from, held_to) fell in minutes whose device
    the agents read under its team's idle threshold (minutes without a figure do not count): each
    such minute counts the part of it the hold held, so the idle cost never exceeds the cost."""
    minute = F("minute")
    minutes = (
        GpuMinute.objects.filter(
            gpu_id=OuterRef("gpu_id"),
            minute__gt=OuterRef("idle_after"),
            minute__lt=OuterRef("held_to"),
            utilization_samples__gt=0,
        )
        .annotate(
            utilization=ExpressionWrapper(
                F("utilization_sum") / F("utilization_samples"), output_field=FloatField()
            ),
            device_start=Coalesce(F("mig_start"), Value(-1)),
        )
        .filter(
            utilization__lt=OuterRef("team__idle_threshold_percent"), device_start=OuterRef("slice_start")
        )
        .order_by()
        .annotate(
            time=Func(
                ExpressionWrapper(
                    Least(minute + Value(MINUTE), OuterRef("held_to"), output_field=DateTimeField())
                    - Greatest(minute, OuterRef("held_from"), output_field=DateTimeField()),
                    output_field=DurationField(),
                ),
                function="SUM",
                output_field=DurationField(),
            )
        )
        .values("time")
    )
    return Subquery(minutes, output_field=DurationField())


class _Sums:
    """Per key and share denominator: price x numerator x seconds held, numerator x seconds held,
    and price x numerator x idle seconds, added up exactly; `amounts` divides each once."""

    def __init__(self) -> None:
        self.found: dict[tuple, list] = {}

    def add(self, key: tuple, denominator: int, price_seconds, share_seconds, idle_seconds) -> None:
        sums = self.found.get((key, denominator))
        if sums is None:
            self.found[(key, denominator)] = [price_seconds, share_seconds, idle_seconds]
        else:
            sums[0] = EXACT.add(sums[0], price_seconds)
            sums[1] = EXACT.add(sums[1], share_seconds)
            sums[2] = EXACT.add(sums[2], idle_seconds)

    def amounts(self) -> Iterator[tuple[tuple, Amount]]:
        for (key, denominator), (price_seconds, share_seconds, idle_seconds) in self.found.items():
            yield (
                key,
                Amount(
                    cost=share_units(price_seconds, denominator),
                    gpu_hours=share_units(share_seconds, denominator),
                    idle_cost=share_units(idle_seconds, denominator),
                ),
            )


def allocation_sums(
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    keys: Sequence[str],
    scope: Q | None = None,
    idle: bool = True,
) -> Iterator[tuple[tuple, Amount]]:
    """GPU spend within [start, end) by `keys` (of KEY_FIELDS), one item per key and share
    denominator, through the ORM (SQLite; PostgreSQL has `_pg_spend`): the database sums the time
    held per price and share (SQLite keeps prices as REAL, so it must not multiply them)."""
    fields = [KEY_FIELDS[key] for key in keys]
    holds = _billed_allocations(start=start, end=end, now=now, scope=scope)
    held = ExpressionWrapper(F("held_to") - F("held_from"), output_field=DurationField())
    if idle:
        holds = holds.alias(
            idle_after=ExpressionWrapper(F("held_from") - Value(MINUTE), output_field=DateTimeField()),
            slice_start=Coalesce(F("mig_slice__start"), Value(-1)),
        )
    sums = _Sums()
    totals = {"held": Sum(held)}
    if idle:
        totals["idle"] = Sum(_idle_time())
    for row in holds.values(*fields, "price_per_hour", "share_numerator", "share_denominator").annotate(
        **totals
    ):
        price, numerator = row["price_per_hour"], row["share_numerator"]
        seconds = held_seconds(row["held"] or timedelta(0))
        sums.add(
            tuple(row[f] for f in fields),
            row["share_denominator"],
            EXACT.multiply(EXACT.multiply(price, numerator), seconds),
            EXACT.multiply(numerator, seconds),
            EXACT.multiply(EXACT.multiply(price, numerator), held_seconds(row.get("idle") or timedelta(0))),
        )
    return sums.amounts()


def storage_sums(
    *, start: datetime, end: datetime, now: datetime, keys: Sequence[str], scope: Q | None = None
) -> Iterator[tuple[tuple, Amount]]:
    """Storage spend within [start, end) by `keys`, as `allocation_sums` (kind: STORAGE; workload: none)."""
    holds = StorageHold.objects.filter(started_at__lt=end).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=start)
    )
    if scope is not None:
        holds = holds.filter(scope)
    holds = (
        holds.alias(
            held_from=Greatest(F("started_at"), Value(start)),
            held_to=Least(Coalesce(F("ended_at"), Value(now)), Value(end)),
        )
        .filter(held_to__gt=F("held_from"))
        .order_by()
    )
    fields = [KEY_FIELDS[key] for key in keys if key in ("team", "user")]
    held = ExpressionWrapper(F("held_to") - F("held_from"), output_field=DurationField())
    const = {"kind": STORAGE, "workload": None}

    def key_of(row) -> tuple:
        return tuple(const[k] if k in const else row[KEY_FIELDS[k]] for k in keys)

    sums = _Sums()
    for row in holds.values(*fields, "price_per_gb_month", "size_gb").annotate(held=Sum(held)):
        seconds = held_seconds(row["held"] or timedelta(0))
        sums.add(
            key_of(row),
            STORAGE_DENOMINATOR,
            EXACT.multiply(EXACT.multiply(row["price_per_gb_month"], row["size_gb"]), seconds),
            ZERO,
            ZERO,
        )
    return sums.amounts()


# The holds of the stretch, once (MATERIALIZED); the time they held, the minutes the agents read
# idle (counted by device over a short stretch, hold by hold over a long one) and storage, in exact
# units (cost.SHARES_BASE: every share denominator divides it, which `bad` checks), added up by key
# in the database.
_PG_SPEND = """
WITH held AS MATERIALIZED (
  SELECT y.*, GREATEST(y.started_at, %({p}start)s) AS held_from,
         LEAST(COALESCE(y.ended_at, LEAST(%({p}now)s, COALESCE(y.expires_at, %({p}now)s))), %({p}end)s) AS held_to,
         %({p}base)s / y.share_denominator AS per_share
  FROM (
    SELECT a.id, a.team_id, a.user_id, a.gpu_type_id, a.workload_id, a.gpu_id, a.share_numerator, a.share_denominator,
           a.price_per_hour, a.started_at, a.ended_at, t.idle_threshold_percent AS threshold,
           COALESCE(s.start, -1) AS slice_start, {workload_columns}
    FROM (  -- open holds by their start; closed ones by their start and end if they started at
      -- most LONG_HOLD before the stretch, else (longer, few) by their span: each through its own index
      SELECT * FROM fleet_allocation WHERE ended_at IS NULL AND started_at < %({p}end)s
      UNION ALL
      SELECT * FROM fleet_allocation WHERE ended_at IS NOT NULL
        AND started_at >= %({p}start)s::timestamptz - INTERVAL '{long_hold}' AND started_at < %({p}end)s
        AND ended_at > %({p}start)s
      UNION ALL
      SELECT * FROM fleet_allocation WHERE ended_at IS NOT NULL AND ended_at - started_at >= INTERVAL '{long_hold}'
        AND started_at < %({p}start)s::timestamptz - INTERVAL '{long_hold}' AND ended_at > %({p}start)s
        AND {span} && tstzrange(%({p}start)s, %({p}end)s, '[)')
    ) a
    JOIN accounts_team t ON t.id = a.team_id
    LEFT JOIN fleet_migslice s ON s.id = a.mig_slice_id {workload_join}
    WHERE TRUE {allocation_scope}
    OFFSET 0  -- kept a subquery: each hold's workload is looked up once, not once for each use
  ) y
){minutes}, parts ({names} storage, cost, hours, idle, bad) AS (
  SELECT {held_keys} false,
         SUM(x.price_per_hour * x.share_numerator * EXTRACT(EPOCH FROM x.held_to - x.held_from) * x.per_share),
         SUM(x.share_numerator * EXTRACT(EPOCH FROM x.held_to - x.held_from) * x.per_share), 0,
         SUM(CASE WHEN MOD(%({p}base)s, x.share_denominator) = 0 THEN 0 ELSE 1 END)
  FROM held x WHERE x.held_to > x.held_from
  GROUP BY {held_group}
  {idle}
  {storage}
)
SELECT {names} {storage_flag} SUM(cost), SUM(hours), SUM(idle), SUM(bad) FROM parts
{group}
"""
# Idle time over a long stretch, hold by hold: each one's minutes through the (gpu, minute) index.
_PG_IDLE_BY_HOLD = """UNION ALL
  SELECT {held_keys} false, 0, 0, SUM(x.price_per_hour * x.share_numerator * x.per_share * i.seconds), 0
  FROM (  -- no minute to look for outside the minutes kept (two index probes, not one a hold)
    SELECT * FROM held WHERE held_to > held_from
      AND held_to > (SELECT MIN(minute) FROM fleet_gpuminute)
      AND held_from < (SELECT MAX(minute) FROM fleet_gpuminute) + INTERVAL '1 minute'
  ) x CROSS JOIN LATERAL (  -- counted hold by hold: one row a hold to multiply, not one a minute
    SELECT SUM(EXTRACT(EPOCH FROM LEAST(m.minute + INTERVAL '1 minute', x.held_to) - GREATEST(m.minute, x.held_from)))
           AS seconds FROM fleet_gpuminute m
    WHERE m.gpu_id = x.gpu_id AND m.minute > x.held_from - INTERVAL '1 minute' AND m.minute < x.held_to
      AND m.utilization_samples > 0
      AND m.utilization_sum / m.utilization_samples < x.threshold AND COALESCE(m.mig_start, -1) = x.slice_start
  ) i
  WHERE i.seconds > 0
  GROUP BY {held_group}"""
# Idle time over a short stretch (an edge of a report, an hour): the stretch's idle minutes read
# once, by the minute index, and summed per device and idle threshold; a hold over the whole
# stretch takes its device's sum, and only those that start or end within it are matched to their
# minutes.
_PG_IDLE_BY_DEVICE = """UNION ALL
  SELECT {held_keys} false, 0, 0, SUM(x.rate * EXTRACT(EPOCH FROM x.idle)), 0
  FROM (
    -- a hold over the whole stretch: its device's idle time in the stretch, summed once a device
    SELECT {held_keys} x.share_denominator, x.price_per_hour * x.share_numerator * x.per_share AS rate, d.idle
    FROM held x JOIN device_idle d ON d.gpu_id = x.gpu_id AND d.device = x.slice_start AND d.threshold = x.threshold
    WHERE x.held_from = %({p}start)s AND x.held_to = %({p}end)s
    UNION ALL  -- one that starts or ends within it: its own minutes, its idle time summed as an interval
    SELECT {held_keys} x.share_denominator, x.price_per_hour * x.share_numerator * x.per_share,
           SUM(LEAST(m.minute + INTERVAL '1 minute', x.held_to) - GREATEST(m.minute, x.held_from))
    FROM held x JOIN minutes m ON m.gpu_id = x.gpu_id AND m.device = x.slice_start
     AND m.minute > x.held_from - INTERVAL '1 minute' AND m.minute < x.held_to AND m.utilization < x.threshold
    WHERE x.held_to > x.held_from AND (x.held_from > %({p}start)s OR x.held_to < %({p}end)s)
    GROUP BY x.id, {held_keys} x.share_denominator, x.price_per_hour, x.share_numerator, x.per_share
  ) x
  GROUP BY {held_group}"""
_PG_IDLE_MINUTES = """, minutes AS MATERIALIZED (
  SELECT m.gpu_id, COALESCE(m.mig_start, -1) AS device, m.minute, m.utilization_sum / m.utilization_samples AS utilization
  FROM fleet_gpuminute m
  WHERE m.minute > %({p}start)s::timestamptz - INTERVAL '1 minute' AND m.minute < %({p}end)s AND m.utilization_samples > 0
    AND m.utilization_sum / m.utilization_samples < (SELECT MAX(threshold) FROM held)
), device_idle AS (
  SELECT m.gpu_id, m.device, t.threshold,
         SUM(LEAST(m.minute + INTERVAL '1 minute', %({p}end)s) - GREATEST(m.minute, %({p}start)s)) AS idle
  FROM minutes m JOIN (SELECT DISTINCT threshold FROM held) t ON m.utilization < t.threshold
  GROUP BY m.gpu_id, m.device, t.threshold
)"""
# What `_PG_SPEND` reads of each hold's workload: only an open hold's expiry matters (one index
# lookup each); by project, every hold's label as well ("" for none), in the same lookup.
_BY_KEY = {
    "workload_columns": "CASE WHEN a.ended_at IS NULL"
    " THEN (SELECT w.expires_at FROM workloads_workload w WHERE w.id = a.workload_id) END AS expires_at",
    "workload_join": "",
}
_BY_PROJECT = {
    "workload_columns": "CASE WHEN a.ended_at IS NULL THEN w.expires_at END AS expires_at,"
    " COALESCE(w.project, '') AS project",
    # (OFFSET 0: an index lookup a hold, never a join the planner might hash over every workload)
    "workload_join": "LEFT JOIN LATERAL (SELECT w.expires_at, w.project FROM workloads_workload w"
    " WHERE w.id = a.workload_id OFFSET 0) w ON TRUE",
}
_PG_STORAGE = """UNION ALL
  SELECT {storage_keys} true,
         SUM(h.price_per_gb_month * h.size_gb * %({p}storage_share)s * EXTRACT(EPOCH FROM
             LEAST(COALESCE(h.ended_at, %({p}now)s), %({p}end)s) - GREATEST(h.started_at, %({p}start)s))), 0, 0, 0
  FROM fleet_storagehold h
  WHERE h.started_at < %({p}end)s AND (h.ended_at IS NULL OR h.ended_at > %({p}start)s)
    AND LEAST(COALESCE(h.ended_at, %({p}now)s), %({p}end)s) > GREATEST(h.started_at, %({p}start)s) {storage_scope}
  {storage_group}"""


def _storage_flagged(keys: Sequence[str]) -> bool:
    """Whether `pg_spend_sql`'s rows by `keys` say which are storage: storage is a kind and a
    project of its own."""
    return bool({"kind", "project"} & set(keys))


def pg_spend_sql(
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    keys: Sequence[str],
    scope: HoldScope | None,
    idle: bool,
    storage: bool,
    prefix: str = "",
) -> tuple[str, dict]:
    """The statement of `_pg_spend` and its parameters, the stretch's named with `prefix` (so that
    several stretches can be costed in one statement of a caller's). Its rows: the keys, whether
    the row is storage (with "kind" or "project" among the keys), cost, GPU-hours and idle cost in
    exact units, and how many holds' share denominators do not divide SHARES_BASE."""
    scope = scope or HoldScope()
    allocation_scope, params = scope.holds_sql("a")
    storage_scope, more = scope.holds_sql("h")
    params.update(more)
    held = {
        "team": "x.team_id", "user": "x.user_id", "kind": "x.gpu_type_id", "workload": "x.workload_id",
        "project": "x.project",
    }  # fmt: skip
    stored = {"team": "h.team_id", "user": "h.user_id", "project": "NULL::text"}
    names = "".join(f"k{n}, " for n in range(len(keys)))
    held_keys = "".join(f"{held[k]}, " for k in keys)
    held_group = ", ".join([held[k] for k in keys] + ["x.share_denominator"])
    storage_keys = "".join(f"{stored.get(k, 'NULL::bigint')}, " for k in keys)
    storage_group = [stored[k] for k in keys if k in ("team", "user")]
    flagged = _storage_flagged(keys)
    # By device only over every team's holds: a team's few would pay for the whole fleet's minutes.
    whole_fleet = scope.team_ids is None and scope.team_id is None and scope.user_id is None
    idle_sql = _PG_IDLE_BY_DEVICE if whole_fleet and end - start <= BY_DEVICE_UP_TO else _PG_IDLE_BY_HOLD
    by = [f"k{n}" for n in range(len(keys))] + (["storage"] if flagged else [])
    sql = _PG_SPEND.format(
        span=CLOSED_SPAN_SQL,
        long_hold=LONG_HOLD,
        allocation_scope=allocation_scope,
        names=names,
        held_keys=held_keys,
        held_group=held_group,
        idle=idle_sql.format(held_keys=held_keys, held_group=held_group, p=prefix) if idle else "",
        minutes=_PG_IDLE_MINUTES.format(p=prefix) if idle and idle_sql is _PG_IDLE_BY_DEVICE else "",
        storage=_PG_STORAGE.format(
            p=prefix,
            storage_keys=storage_keys,
            storage_scope=storage_scope,
            storage_group=f"GROUP BY {', '.join(storage_group)}" if storage_group else "",
        )
        if storage
        else "",
        storage_flag="storage," if flagged else "",
        **(_BY_PROJECT if "project" in keys else _BY_KEY),
        group=f"GROUP BY {', '.join(by)}" if by else "",
        p=prefix,
    )
    stretch = {
        "start": start, "end": end, "now": now, "base": SHARES_BASE,
        "storage_share": SHARES_BASE // STORAGE_DENOMINATOR,
    }  # fmt: skip
    params.update({prefix + name: value for name, value in stretch.items()})
    return sql, params


def _pg_spend(*, keys: Sequence[str], **stretch) -> Iterator[tuple[tuple, Amount]]:
    """`spend_by_key` on PostgreSQL: GPU and storage holds in one statement, in exact numeric,
    one row per key (`stretch`: the rest of `pg_spend_sql`'s arguments)."""
    sql, params = pg_spend_sql(keys=keys, **stretch)
    flagged = _storage_flagged(keys)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    for row in rows:
        values, flag = row[: len(keys)], row[len(keys)] if flagged else False
        cost, hours, idle_units, bad = row[-4:]
        if cost is None:  # summed over nothing
            continue
        if bad:
            raise ValueError(BAD_SHARES)
        if flag:
            values = tuple(
                STORAGE if k in ("kind", "project") else v for k, v in zip(keys, values, strict=True)
            )
        yield values, Amount(cost=cost, gpu_hours=hours, idle_cost=idle_units)


def spend_by_key(
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    keys: Sequence[str],
    scope: HoldScope | None = None,
    idle: bool = True,
    storage: bool = True,
) -> dict[tuple, Amount]:
    """GPU and storage spend within [start, end) by `keys`, unrounded: one statement on
    PostgreSQL, two queries elsewhere. "project" (the workload's label; STORAGE for storage) is
    a key on PostgreSQL only: `totals` labels the workloads itself elsewhere."""
    found: dict[tuple, Amount] = {}
    if connection.vendor == "postgresql":
        parts = [_pg_spend(start=start, end=end, now=now, keys=keys, scope=scope, idle=idle, storage=storage)]
    else:
        q = scope.holds_q() if scope is not None else None
        parts = [allocation_sums(start=start, end=end, now=now, keys=keys, scope=q, idle=idle)]
        if storage:
            parts.append(storage_sums(start=start, end=end, now=now, keys=keys, scope=q))
    for part in parts:
        for key, amount in part:
            Amount.add_to(found, key, amount)
    return found
