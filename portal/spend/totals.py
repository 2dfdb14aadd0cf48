"""Spend over any range, by any key: roll-up rows for the fresh periods the range covers, and the
holds (in SQL) for the rest. Unrounded; reports round to cents.

By project: the project label belongs to the workload, so the roll-ups keep two levels of their
own (team and project label, and team, user and project label; storage apart; summed into blocks
like the other coarse levels): a year by project reads some 16 rows a team and project, whatever
the number of holds, workloads or users. The label is read when a day is rolled (it is set when
a workload is requested and never changes). The live stretches are costed from the holds by kind
and workload, and each workload is given its label in one more query. A hold of no workload, or of a workload without a
label, counts under "" (no project); storage under STORAGE ("storage" is not a valid label)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal

from django.db import connection
from django.db.models import Q, Sum
from django.db.models.functions import TruncDate

from portal.fleet.models import Allocation, StorageHold
from portal.spend.cost import EXACT
from portal.spend.holds import (
    STORAGE,
    Amount,
    HoldScope,
    first_hold_at,
    overlapping_allocations,
    spend_by_key,
)
from portal.spend.models import Level, Span, SpendRollup
from portal.spend.periods import DAY, Plan, fresh_periods, make_plan, midnight, runs, utc

CANONICAL = ("team", "user", "kind", "workload", "project")
ROLLUP_FIELDS = {
    "team": "team_id", "user": "user_id", "kind": "gpu_type_id", "workload": "workload_id", "project": "project",
}  # fmt: skip


def level_for(keys: set[str]) -> Level:
    """The coarsest roll-up level that has every one of `keys` (a project with team and user only)."""
    if "project" in keys:
        if not keys <= {"team", "user", "project"}:
            raise ValueError(f"no roll-up level has {sorted(keys)}")
        return Level.TEAM_PROJECT if "user" not in keys else Level.PROJECT
    if keys <= {"team"}:
        return Level.TEAM
    if keys <= {"team", "kind"}:
        return Level.TEAM_KIND
    if keys <= {"team", "user"}:
        return Level.USER
    return Level.FINE


@dataclass(frozen=True)
class Scope(HoldScope):
    """Whose holds a figure counts (see HoldScope), and how roll-up rows count them."""

    def rollup_parts(self, keys: tuple[str, ...]) -> list[tuple[Level, Q]]:
        """Roll-up levels and filters that together count the scope once: whole teams at the
        coarsest level the keys allow; one's own holds in other teams at a level with users."""
        only = Q() if self.team_id is None else Q(team_id=self.team_id)
        if self.team_ids is None:
            return [(level_for(set(keys)), only)]
        parts = []
        teams = self.team_ids if self.team_id is None else self.team_ids & {self.team_id}
        if teams:
            parts.append((level_for(set(keys)), Q(team_id__in=teams)))
        if self.user_id is not None:
            own = Q(user_id=self.user_id) & ~Q(team_id__in=self.team_ids) & only
            parts.append((level_for(set(keys) | {"user"}), own))
        return parts


def _rolled_q(plan: Plan) -> Q:
    q = Q(pk__in=[])
    for span, starts in plan.rolled.items():
        for first, last in runs(starts, span):
            q |= Q(span=span, start__gte=first, start__lte=last)
    return q


def rolled_sums(
    *,
    plan: Plan,
    keys: tuple[str, ...],
    scope: Scope,
    by_day: bool = False,
    spans: tuple[str, ...] | None = None,
) -> dict[tuple, Amount]:
    """Sums of the roll-up rows of the plan's periods (of `spans`, if given) by `keys` (+ day)."""
    found: dict[tuple, Amount] = {}
    if spans is not None:
        plan = Plan(rolled={span: starts for span, starts in plan.rolled.items() if span in spans})
    if not plan.rolled:
        return found
    fields = [ROLLUP_FIELDS[key] for key in keys] + (["storage"] if {"kind", "project"} & set(keys) else [])
    if by_day:
        fields.append("day")
    sums: dict[tuple, list] = {}
    for level, q in scope.rollup_parts(keys):
        rows = SpendRollup.objects.filter(level=level).filter(_rolled_q(plan)).filter(q)
        if by_day:
            rows = rows.annotate(day=TruncDate("start", tzinfo=UTC))
        totals = {"total_cost": Sum("cost"), "total_hours": Sum("gpu_hours"), "total_idle": Sum("idle_cost")}
        if connection.vendor != "postgresql":  # SQLite keeps units as text: added up below
            rows = rows.order_by().values_list(*fields, "cost", "gpu_hours", "idle_cost")
        elif fields:
            rows = rows.values(*fields).annotate(**totals).order_by()
            rows = rows.values_list(*fields, "total_cost", "total_hours", "total_idle")
        else:
            total = rows.aggregate(**totals)
            rows = None
        if rows is None:
            found_rows = [(total["total_cost"], total["total_hours"], total["total_idle"])]
        else:
            with connection.cursor() as cursor:  # rows straight from the cursor: thousands, not models
                cursor.execute(*rows.query.sql_with_params())
                found_rows = cursor.fetchall()
        for *key_values, cost, hours, idle in found_rows:
            if cost is None:  # a sum over no rows
                continue
            values = dict(zip(fields, key_values, strict=True))
            key = tuple(
                (STORAGE if values["storage"] else values[ROLLUP_FIELDS[k]])
                if k in ("kind", "project")
                else values[ROLLUP_FIELDS[k]]
                for k in keys
            )
            if by_day:
                day = values["day"]
                key += (date.fromisoformat(day) if isinstance(day, str) else day,)
            cost, hours, idle = Decimal(cost), Decimal(hours), Decimal(idle)
            total = sums.get(key)
            if total is None:
                sums[key] = [cost, hours, idle]
            else:
                total[0], total[1], total[2] = (
                    EXACT.add(total[0], cost),
                    EXACT.add(total[1], hours),
                    EXACT.add(total[2], idle),
                )
    for key, (cost, hours, idle) in sums.items():
        found[key] = Amount(cost=cost, gpu_hours=hours, idle_cost=idle)
    return found


def live_sums(
    *,
    plan: Plan,
    keys: tuple[str, ...],
    scope: Scope,
    now: datetime,
    by_day: bool = False,
    idle: bool = True,
    storage: bool = True,
) -> dict[tuple, Amount]:
    """Sums over the plan's live stretches, less those over its `minus` stretches, from the holds,
    by `keys` (+ the stretch's day)."""
    found: dict[tuple, Amount] = {}
    stretches = [(low, high, False) for low, high in plan.live]
    stretches += [(low, high, True) for low, high in plan.minus]
    for low, high, taken_away in stretches:
        if "project" in keys:
            part = _by_project(
                start=low, end=high, now=now, keys=keys, scope=scope, idle=idle, storage=storage
            )
        else:
            part = spend_by_key(
                start=low, end=high, now=now, keys=keys, scope=scope, idle=idle, storage=storage
            )
        for key, amount in part.items():
            key = (*key, low.date()) if by_day else key
            Amount.add_to(found, key, Amount().minus(amount) if taken_away else amount)
    return found


def _by_project(*, keys: tuple[str, ...], **spend: object) -> dict[tuple, Amount]:
    """`spend_by_key` by `keys` with a project: in SQL on PostgreSQL; elsewhere by kind and
    workload from the holds, then each workload given its project label."""
    if connection.vendor == "postgresql":
        return spend_by_key(keys=keys, **spend)  # type: ignore[arg-type]
    held = tuple(k for k in keys if k != "project")
    part = spend_by_key(keys=(*held, "kind", "workload"), **spend)  # type: ignore[arg-type]
    workloads = Allocation.workload.field.related_model.objects  # no import upwards (layers)
    ids = sorted({key[-1] for key in part if key[-1] is not None})
    labels: dict[int, str] = {}
    for at in range(0, len(ids), 500):
        labels.update(workloads.filter(pk__in=ids[at : at + 500]).values_list("pk", "project"))
    found: dict[tuple, Amount] = {}
    for key, amount in part.items():
        values = dict(zip((*held, "kind", "workload"), key, strict=True))
        values["project"] = STORAGE if values["kind"] == STORAGE else labels.get(values["workload"], "")
        found.setdefault(tuple(values[k] for k in keys), Amount()).add(amount)
    return found


def plan_for(
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    scope: Scope,
    keys: tuple[str, ...],
    by_day: bool = False,
    fresh: dict | None = None,
) -> Plan:
    """Which periods a report of `keys` over [start, end) reads from roll-ups, and which it costs
    live. `fresh`: the fresh periods, if the caller has read them for the same range."""
    if by_day and end > (horizon := midnight(now) + DAY) and not _billed_past(horizon, end):
        end = max(start, horizon)  # no day past tomorrow holds anything: do not cost them one by one
    if fresh is None:
        fresh = fresh_periods(start=start, end=end, now=now, team_id=scope.team_id)
    if by_day and (Span.DAY, midnight(start)) not in fresh:  # its first day not rolled up: is it
        # before the first hold? No day before it holds anything (years of them, asked for), and
        # none does if nothing was ever held: not costed one by one. (A day rolled up is after it.)
        first = first_hold_at()
        if first is None:
            end = start
        elif start < (first_day := midnight(first)):
            start = min(first_day, end)
    blocks = not by_day and all(level != Level.FINE for level, _ in scope.rollup_parts(keys))
    return make_plan(start=utc(start), end=utc(end), fresh=fresh, blocks=blocks, split_days=by_day)


def _billed_past(moment: datetime, end: datetime) -> bool:
    """Whether any hold was ended at a time after `moment` (one ended in the future)."""
    return (
        overlapping_allocations(start=moment, end=end).filter(ended_at__gt=moment).exists()
        or StorageHold.objects.filter(ended_at__gt=moment).exists()
    )


def spend_by(
    *,
    keys: tuple[str, ...],
    start: datetime,
    end: datetime,
    now: datetime,
    scope: Scope,
    by_day: bool = False,
    idle: bool = True,
) -> dict[tuple, Amount]:
    """Unrounded spend within [start, end) by `keys` (of CANONICAL, in that order; + the UTC day
    if `by_day`): roll-ups where fresh, the holds elsewhere."""
    plan = plan_for(start=start, end=end, now=now, scope=scope, keys=keys, by_day=by_day)
    found = rolled_sums(plan=plan, keys=keys, scope=scope, by_day=by_day)
    for key, amount in live_sums(
        plan=plan, keys=keys, scope=scope, now=now, by_day=by_day, idle=idle
    ).items():
        found.setdefault(key, Amount()).add(amount)
    if plan.minus:  # a key held only in the hours taken away comes to nothing: it had no spend
        found = {key: amount for key, amount in found.items() if amount}
    return found
