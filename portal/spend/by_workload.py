"""The workload report: the `limit` workloads that cost most within a range, exact, and what
everything else cost, without summing a row per workload and day for a year.

Each workload's total over all its rolled days is kept (`WorkloadSpend`, with its first and last
rolled day; today's rows count, up to today's roll-up). Over a range whose whole days [first, end)
are rolled, a workload whose rolled days all lie inside costs exactly that total plus whatever it
held in the range's live stretches and rolled hours. So the candidates are: the largest such totals, read in order
from an index until `limit` are found outside the set below; and, computed exactly from their day
rows and the holds, the workloads that total cannot answer for: those running across the range's
first or last whole day, those with rows on a day that is stale, and those holding anything in a
live stretch or rolled hour of the range (a partial-day edge, the minutes since today's roll-up). Any other workload costs no more than `limit` of the candidates, so the
largest `limit` candidates are the largest `limit` workloads. Ties in cost go to the lower id.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db import connection
from django.db.models import BooleanField, Q, Sum
from django.db.models.expressions import RawSQL

from portal.spend.holds import STORAGE, Amount
from portal.spend.models import Level, Span, SpendPeriod, SpendRollup, WorkloadSpend
from portal.spend.periods import DAY, fresh_periods, runs, utc
from portal.spend.totals import Scope, live_sums, plan_for, rolled_sums

# Up to this many days the workload report finds the workloads of a range through its GiST index.
GIST_DAYS = 7
DAY_SPAN_SQL = "daterange(spend_workloadspend.first_day, spend_workloadspend.last_day, '[]')"


def _chunks(ids: list):
    """`ids` in lists short enough for one statement's parameters (SQLite allows few)."""
    size = 20_000 if connection.vendor == "postgresql" else 500
    for at in range(0, len(ids), size):
        yield ids[at : at + size]


def _straddling(*, first: date, end: date, scope_q: Q | None) -> set[int]:
    """Workloads whose rolled days run across `first` or across `end` (days, end exclusive)."""
    edges = [(first - timedelta(days=1), first), (end - timedelta(days=1), end)]
    rows = WorkloadSpend.objects.all()
    if scope_q is not None:
        rows = rows.filter(scope_q)
    if connection.vendor == "postgresql":  # the form the GiST index over the days answers
        q = Q(pk__in=[])
        for low, high in edges:
            q |= Q(
                RawSQL(  # noqa: S611 (constant SQL, the days are bound parameters)
                    f"{DAY_SPAN_SQL} @> daterange(%s, %s, '[]')", (low, high), output_field=BooleanField()
                )
            )
        rows = rows.filter(q)
    else:
        rows = rows.filter(
            Q(first_day__lte=edges[0][0], last_day__gte=edges[0][1])
            | Q(first_day__lte=edges[1][0], last_day__gte=edges[1][1])
        )
    return set(rows.values_list("workload_id", flat=True))


def _on_days(days: list[datetime], scope_q: Q | None) -> set[int]:
    """Workloads with fine rows on these days."""
    if not days:
        return set()
    rows = SpendRollup.objects.filter(
        level=Level.FINE, span=Span.DAY, start__in=days, workload_id__isnull=False
    )
    if scope_q is not None:
        rows = rows.filter(scope_q)
    return set(rows.values_list("workload_id", flat=True).distinct())


def _add_rows(found: dict[int, Amount], rows) -> None:
    for workload_id, cost, hours, idle in rows:
        amount = Amount(cost=Decimal(cost), gpu_hours=Decimal(hours), idle_cost=Decimal(idle))
        if workload_id in found:
            found[workload_id].add(amount)
        else:
            found[workload_id] = amount


def _day_rows(*, workload_ids: set[int], days: list[datetime], scope_q: Q | None) -> dict[int, Amount]:
    """Per workload, the sum of its fine rows on these days (added up in SQL on PostgreSQL)."""
    found: dict[int, Amount] = {}
    if not days or not workload_ids:
        return found
    when = Q(pk__in=[])
    for first, last in runs(days, Span.DAY):
        when |= Q(start__gte=first, start__lte=last)
    for chunk in _chunks(sorted(workload_ids)):
        rows = SpendRollup.objects.filter(level=Level.FINE, span=Span.DAY, workload_id__in=chunk).filter(when)
        if scope_q is not None:
            rows = rows.filter(scope_q)
        if connection.vendor == "postgresql":
            rows = rows.values("workload_id").annotate(c=Sum("cost"), h=Sum("gpu_hours"), i=Sum("idle_cost"))
            rows = rows.order_by().values_list("workload_id", "c", "h", "i")
        else:
            rows = rows.values_list("workload_id", "cost", "gpu_hours", "idle_cost")
        with connection.cursor() as cursor:
            cursor.execute(*rows.query.sql_with_params())
            _add_rows(found, cursor.fetchall())
    return found


def _totals_inside(*, workload_ids: set[int], first: date, end: date, scope_q: Q | None) -> dict[int, Amount]:
    """Of these workloads, those whose rolled days lie in [first, end): their totals."""
    found: dict[int, Amount] = {}
    for chunk in _chunks(sorted(workload_ids)):
        rows = WorkloadSpend.objects.filter(workload_id__in=chunk, first_day__gte=first, last_day__lt=end)
        if scope_q is not None:
            rows = rows.filter(scope_q)
        _add_rows(found, rows.values_list("workload_id", "cost", "gpu_hours", "idle_cost"))
    return found


def _largest_inside(
    *, first: date, end: date, scope_q: Q | None, skip: set[int], limit: int
) -> dict[int, Amount]:
    """The `limit` largest totals of workloads whose rolled days lie in [first, end), not in `skip`."""
    rows = WorkloadSpend.objects.filter(first_day__gte=first, last_day__lt=end).order_by(
        "-cost", "workload_id"
    )
    if scope_q is not None:
        rows = rows.filter(scope_q)
    found: dict[int, Amount] = {}
    if connection.vendor != "postgresql":  # SQLite keeps units as text, which sorts as text
        every = sorted(
            rows.values_list("workload_id", "cost", "gpu_hours", "idle_cost"),
            key=lambda r: (-Decimal(r[1]), r[0]),
        )
        for workload_id, cost, hours, idle in every:
            if workload_id not in skip and len(found) < limit:
                found[workload_id] = Amount(cost=cost, gpu_hours=hours, idle_cost=idle)
        return found
    if skip:  # one array parameter, however many (PostgreSQL hashes it)
        rows = rows.filter(
            RawSQL(
                "NOT (spend_workloadspend.workload_id = ANY(%s))",
                (sorted(skip),),
                output_field=BooleanField(),
            )
        )
    if (end - first).days <= GIST_DAYS:
        # A few days hold few workloads: found through the GiST index and sorted. Over more days
        # the cost index, read in order, reaches `limit` of them long before it would finish.
        rows = rows.filter(
            RawSQL(  # noqa: S611 (constant SQL, the days are bound parameters)
                f"{DAY_SPAN_SQL} <@ daterange(%s, %s, '[)')", (first, end), output_field=BooleanField()
            )
        )
    offset = 0
    while len(found) < limit:  # a workload has one row per team and user: nearly always one
        page = list(
            rows.values_list("workload_id", "cost", "gpu_hours", "idle_cost")[offset : offset + limit]
        )
        for workload_id, cost, hours, idle in page:
            if workload_id in found or len(found) < limit:
                found.setdefault(workload_id, Amount()).add(
                    Amount(cost=cost, gpu_hours=hours, idle_cost=idle)
                )
        if len(page) < limit:
            break
        offset += len(page)
    return found


def workload_spend(
    *, start: datetime, end: datetime, now: datetime, scope: Scope, limit: int
) -> tuple[list[tuple[int, Amount]], Amount, Amount]:
    """The `limit` workloads that cost most within [start, end), largest first; what GPU holds
    beside them cost (other workloads, holds of no workload); and what storage cost."""
    fresh = fresh_periods(start=start, end=end, now=now, team_id=scope.team_id)
    by_kind = rolled_sums(
        plan=plan_for(start=start, end=end, now=now, scope=scope, keys=("kind",), fresh=fresh),
        keys=("kind",),
        scope=scope,
    )
    plan = plan_for(start=start, end=end, now=now, scope=scope, keys=("workload",), fresh=fresh)
    # Live stretches (partial-day edges, the minutes since today's roll-up) are the same in both
    # plans (blocks only stand for runs of fresh days): costed once, by kind and workload.
    recent: dict[int, Amount] = {}
    for (kind, workload_id), amount in live_sums(
        plan=plan, keys=("kind", "workload"), scope=scope, now=now
    ).items():
        by_kind.setdefault((kind,), Amount()).add(amount)
        if workload_id is not None:
            recent.setdefault(workload_id, Amount()).add(amount)
    # Hours rolled at the range's edges count like live time: not in the workloads' totals.
    for (_, workload_id), amount in rolled_sums(
        plan=plan, keys=("kind", "workload"), scope=scope, spans=(Span.HOUR,)
    ).items():
        if workload_id is not None:
            recent.setdefault(workload_id, Amount()).add(amount)
    storage = by_kind.pop((STORAGE,), Amount())
    gpu_total = Amount()
    for amount in by_kind.values():
        gpu_total.add(amount)
    scope_q = scope.holds_q()
    days = plan.rolled_days

    inside: dict[int, Amount] = {}
    exact: dict[int, Amount] = {}
    exact_ids = set(recent)
    across: set[int] = set()
    if days:
        first, stop = min(days).date(), (max(days) + DAY).date()
        rolled = set(days)
        not_read = [
            utc(s)
            for s in SpendPeriod.objects.filter(
                span=Span.DAY, start__gte=min(days), start__lt=max(days) + DAY
            ).values_list("start", flat=True)
            if utc(s) not in rolled
        ]
        across = _on_days(not_read, scope_q) | _straddling(first=first, end=stop, scope_q=scope_q)
        # A workload of the live stretches whose rolled days lie inside: its total, plus the live part.
        exact = _totals_inside(workload_ids=exact_ids - across, first=first, end=stop, scope_q=scope_q)
        exact_ids |= across
        inside = _largest_inside(first=first, end=stop, scope_q=scope_q, skip=exact_ids, limit=limit)
    # The rest of the live stretches' workloads have no rolled day inside, unless they run across
    # an edge: only those (and any on a day not read) are summed from their day rows.
    exact.update(_day_rows(workload_ids=across - set(exact), days=days, scope_q=scope_q))
    for workload_id, amount in recent.items():
        exact.setdefault(workload_id, Amount()).add(amount)

    candidates = {w: amount for w, amount in {**inside, **exact}.items() if amount}
    top = sorted(candidates.items(), key=lambda item: (-item[1].cost, item[0]))[:limit]
    others = gpu_total
    for _, amount in top:
        others = others.minus(amount)
    return top, others, storage
