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

On PostgreSQL the live stretches are costed, and the candidates costed exactly (often ten thousand
workloads in a recent edge's hours, and every workload with totals under several teams or users)
summed and ranked, in one statement beside the largest totals (`_top_pg`), so only a few hundred
rows reach Python; elsewhere `_top` does the same in Python.
There a workload running across an edge of the whole days is summed from its day rows only if the
most it can cost within the range reaches a bar that `limit` workloads are known to reach: one that
does not cannot be among the largest (most such workloads are small, and they hold a hundred
thousand day rows over 90 days of ten million holds). That most: the lesser of its one total (all
it cost on its rolled days) and its dearest day (`WorkloadSpend.peak_day_cost`) for each of its
days from the day before the whole days to the day after, with what it held in live stretches
outside rolled days. The bar: the `limit`-th largest of the largest totals inside and of what the
workloads across cost at least (their cheapest day between their first and last for each such day
inside, with their live part).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db import connection
from django.db.models import Q

from portal.spend.holds import BAD_SHARES, STORAGE, Amount, pg_spend_sql
from portal.spend.models import Level, Span, SpendPeriod, SpendRollup, WorkloadSpend
from portal.spend.periods import DAY, HOUR_SPANS, fresh_periods, midnight, runs, utc
from portal.spend.totals import Scope, live_sums, plan_for, rolled_sums

# Up to this many days the workload report finds the workloads of a range through its GiST index.
GIST_DAYS = 7
# A total's rolled days (alias w), in the form its GiST indexes answer (workload_spend_days; for totals
# of two days or more, workload_spend_across).
DAY_SPAN_SQL = "daterange(w.first_day, w.last_day, '[]')"


def _chunks(ids: list):
    """`ids` in lists short enough for one statement's parameters (SQLite allows few)."""
    for at in range(0, len(ids), 500):
        yield ids[at : at + 500]


def _straddling(*, first: date, end: date, scope_q: Q | None) -> set[int]:
    """Workloads whose rolled days run across `first` or across `end` (days, end exclusive).
    (SQLite: PostgreSQL finds them in the workload report's statement, `_PG_TOP`'s `across`,
    with bounds on what each costs within the range.)"""
    edges = [(first - timedelta(days=1), first), (end - timedelta(days=1), end)]
    rows = WorkloadSpend.objects.filter(
        Q(first_day__lte=edges[0][0], last_day__gte=edges[0][1])
        | Q(first_day__lte=edges[1][0], last_day__gte=edges[1][1])
    )
    if scope_q is not None:
        rows = rows.filter(scope_q)
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
    """Per workload, the sum of its fine rows on these days."""
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
        _add_rows(found, rows.values_list("workload_id", "cost", "gpu_hours", "idle_cost"))
    return found


def _inside(*, first: date, end: date, scope_q: Q | None):
    """The totals (`WorkloadSpend` rows) within the scope whose rolled days lie in [first, end), as
    (workload id, cost, GPU-hours, idle cost)."""
    rows = WorkloadSpend.objects.filter(first_day__gte=first, last_day__lt=end)
    if scope_q is not None:
        rows = rows.filter(scope_q)
    return rows.values_list("workload_id", "cost", "gpu_hours", "idle_cost")


def _totals_inside(*, workload_ids: set[int], first: date, end: date, scope_q: Q | None) -> dict[int, Amount]:
    """Of these workloads, those whose rolled days lie in [first, end): their totals."""
    found: dict[int, Amount] = {}
    for chunk in _chunks(sorted(workload_ids)):
        _add_rows(found, _inside(first=first, end=end, scope_q=scope_q).filter(workload_id__in=chunk))
    return found


def _largest_inside(
    *, first: date, end: date, scope_q: Q | None, skip: set[int], limit: int
) -> dict[int, Amount]:
    """The `limit` largest totals of workloads whose rolled days lie in [first, end), not in `skip`,
    each workload's rows (one per team and user) added up. SQLite keeps units as text, which sorts
    as text, so every total is read and ranked here (the embedded database's fleets are small)."""
    every: dict[int, Amount] = {}
    _add_rows(every, (row for row in _inside(first=first, end=end, scope_q=scope_q) if row[0] not in skip))
    return dict(_ranked(every, limit))


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
    if connection.vendor == "postgresql":
        top, live_by_kind = _top_pg(plan=plan, fresh=fresh, scope=scope, now=now, limit=limit)
        for kind, amount in live_by_kind.items():
            by_kind.setdefault((kind,), Amount()).add(amount)
    else:
        live: dict[int, Amount] = {}
        for (kind, workload_id), amount in live_sums(
            plan=plan, keys=("kind", "workload"), scope=scope, now=now
        ).items():
            by_kind.setdefault((kind,), Amount()).add(amount)
            if workload_id is not None:
                Amount.add_to(live, workload_id, amount)  # by_kind's sums are its own
        top = _top(plan=plan, live=live, scope=scope, limit=limit)
    storage = by_kind.pop((STORAGE,), Amount())
    gpu_total = Amount()
    for amount in by_kind.values():
        gpu_total.add(amount)
    others = gpu_total
    for _, amount in top:
        others = others.minus(amount)
    return top, others, storage


def _whole_days(days: list[datetime]) -> tuple[date, date, list[datetime]]:
    """The whole-day range [first, stop) the rolled `days` span, and its days that are not read
    (stale)."""
    rolled = set(days)
    not_read = [
        utc(s)
        for s in SpendPeriod.objects.filter(
            span=Span.DAY, start__gte=min(days), start__lt=max(days) + DAY
        ).values_list("start", flat=True)
        if utc(s) not in rolled
    ]
    return min(days).date(), (max(days) + DAY).date(), not_read


def _across(days: list[datetime], scope_q: Q | None) -> tuple[date, date, set[int]]:
    """The whole-day range the rolled `days` span, and the workloads whose totals cannot answer for
    it: those running across its ends, and those with rows on a day of it that is not read (stale)."""
    first, stop, not_read = _whole_days(days)
    return first, stop, _straddling(first=first, end=stop, scope_q=scope_q) | _on_days(not_read, scope_q)


def _ranked(candidates: dict[int, Amount], limit: int) -> list[tuple[int, Amount]]:
    found = {w: amount for w, amount in candidates.items() if amount}
    return sorted(found.items(), key=lambda item: (-item[1].cost, item[0]))[:limit]


def _top(*, plan, live: dict[int, Amount], scope: Scope, limit: int) -> list[tuple[int, Amount]]:
    """SQLite: the `limit` workloads that cost most over the plan, exactly: their rolled days (totals or
    day rows), the hours rolled at the range's edges and their `live` part."""
    recent = dict(live)  # its amounts are this report's own: added to in place
    # Hours rolled at the range's edges count like live time: not in the workloads' totals.
    for (_, workload_id), amount in rolled_sums(
        plan=plan, keys=("kind", "workload"), scope=scope, spans=HOUR_SPANS
    ).items():
        if workload_id is not None:
            recent.setdefault(workload_id, Amount()).add(amount)
    scope_q = scope.holds_q()
    days = plan.rolled_days
    inside: dict[int, Amount] = {}
    exact: dict[int, Amount] = {}
    exact_ids = set(recent)
    across: set[int] = set()
    if days:
        first, stop, across = _across(days, scope_q)
        # A workload of the live stretches whose rolled days lie inside: its total, plus the live part.
        exact = _totals_inside(workload_ids=exact_ids - across, first=first, end=stop, scope_q=scope_q)
        exact_ids |= across
        inside = _largest_inside(first=first, end=stop, scope_q=scope_q, skip=exact_ids, limit=limit)
    # The rest of the live stretches' workloads have no rolled day inside, unless they run across
    # an edge: only those (and any on a day not read) are summed from their day rows.
    exact.update(_day_rows(workload_ids=across - set(exact), days=days, scope_q=scope_q))
    for workload_id, amount in recent.items():
        exact.setdefault(workload_id, Amount()).add(amount)
    return _ranked({**inside, **exact}, limit)


# PostgreSQL: the edges' live stretches are costed by kind and workload, and the workloads costed
# exactly (those of the live stretches and rolled hours, and those running across an edge of the
# whole days) summed and ranked, in one statement; only their `limit` largest come back, beside the
# `limit` largest totals of the other workloads and the live stretches' sums by kind.
_PG_TOP = """
WITH edge (kind, workload_id, storage, cost, hours, idle, bad, outside) AS MATERIALIZED ({edge}
), live AS (  -- (outside: held in a stretch outside the rolled part of a day not read whole; plus:
  -- what it held in such stretches, of those not taken away only)
  SELECT workload_id, SUM(cost) AS cost, SUM(hours) AS hours, SUM(idle) AS idle, BOOL_OR(outside) AS outside,
         SUM(CASE WHEN outside THEN GREATEST(cost, 0) ELSE 0 END) AS plus
  FROM edge WHERE workload_id IS NOT NULL GROUP BY workload_id
), hour_rows AS MATERIALIZED (
  SELECT r.workload_id, r.cost, r.gpu_hours AS hours, r.idle_cost AS idle FROM spend_spendrollup r
  WHERE r.level = %(fine)s AND ({hours}) AND r.workload_id IS NOT NULL {scope_r}
), across (workload_id, most, least) AS MATERIALIZED (  -- the workloads the totals cannot answer
  -- for (`_across`): running across an edge of the whole days (through the GiST index over their
  -- days) or with rows on a day of them not read (stale). Where one total answers for all its rolled
  -- days (not under several teams or users, no stale day's rows), bounds on what it costs within the
  -- range (else NULL). At most: its total, or its dearest day for each of its days from the day
  -- before the whole days to the day after them, whichever is less (the edges' rolled hours, and
  -- live stretches in rolled days, lie in those days' rows: a fresh day's hours are rolled with it),
  -- and what it held in the live stretches unless they lie in rolled days. At least: its cheapest
  -- day between its first and last for each such day inside (zero unless it has a row on every day
  -- between) and its live part (its rolled hours add to that).
  SELECT a.workload_id, CASE WHEN a.alone THEN LEAST(a.total, a.by_days) + COALESCE(live.plus, 0) END,
         CASE WHEN a.alone THEN a.least + COALESCE(live.cost, 0) END FROM (
    SELECT workload_id, COUNT(*) = 1 AND NOT BOOL_OR(shared) AS alone, MAX(cost) AS total, MAX(by_days) AS by_days,
           MAX(least) AS least FROM (
      SELECT w.workload_id, w.cost, w.shared,
             w.peak_day_cost * (LEAST(w.last_day, %(stop)s) - GREATEST(w.first_day, %(edge0a)s) + 1) AS by_days,
             w.low_day_cost * GREATEST(LEAST(w.last_day - 1, %(stop)s::date - 1) - GREATEST(w.first_day + 1, %(first)s) + 1, 0) AS least
      FROM spend_workloadspend w
      WHERE {whole} AND w.last_day > w.first_day  -- (only these can run across: workload_spend_across)
        AND ({day_span} @> daterange(%(edge0a)s, %(edge0b)s, '[]')
             OR {day_span} @> daterange(%(edge1a)s, %(edge1b)s, '[]')) {scope_w}
      UNION ALL
      SELECT DISTINCT r.workload_id, NULL::numeric, true, NULL::numeric, NULL::numeric FROM spend_spendrollup r
      WHERE r.level = %(fine)s AND r.span = 'day' AND r.start = ANY(%(stale)s::timestamptz[])
        AND r.workload_id IS NOT NULL {scope_r}
    ) t GROUP BY workload_id
  ) a LEFT JOIN live ON live.workload_id = a.workload_id
), counted AS MATERIALIZED (  -- the workloads whose totals inside exact adds (not the largest's):
  -- those with totals under several teams or users (shared, few), wherever they were held; and those
  -- held in a live stretch that lies outside the rolled part of a day not read whole (one held only
  -- within such rolled parts, or in an edge's rolled hours, has a day row on that day, outside the
  -- whole days, so its one total does not lie inside)
  SELECT DISTINCT w.workload_id FROM spend_workloadspend w
  WHERE {whole} AND w.shared AND w.first_day >= %(first)s AND w.last_day < %(stop)s {scope_w}
  UNION SELECT workload_id FROM live WHERE outside
), largest AS MATERIALIZED ({largest}
), bar (at_least) AS (  -- the `limit`-th largest of what the largest totals inside cost and what
  -- the workloads across cost at least: `limit` workloads cost this much or more
  SELECT COALESCE((SELECT cost FROM (
    SELECT MAX(cost) AS cost FROM largest GROUP BY workload_id
    UNION ALL
    SELECT least FROM across WHERE least > 0
  ) l ORDER BY cost DESC OFFSET %(bar_offset)s LIMIT 1), 0)
), exact AS (
  SELECT workload_id, SUM(cost) AS cost, SUM(hours) AS hours, SUM(idle) AS idle FROM (
    SELECT workload_id, cost, hours, idle FROM live
    UNION ALL
    SELECT * FROM hour_rows
    UNION ALL  -- their totals inside; their ids as one array, so that the index is read once in their
    -- order (a join would probe it a workload at a time, a third slower)
    SELECT w.workload_id, w.cost, w.gpu_hours, w.idle_cost FROM spend_workloadspend w
    WHERE {whole} AND w.workload_id = ANY(ARRAY(SELECT workload_id FROM counted))
      AND w.workload_id NOT IN (SELECT workload_id FROM across) AND w.first_day >= %(first)s AND w.last_day < %(stop)s {scope_w}
    UNION ALL  -- one running across an edge (or on a day not read): its day rows, unless the most it
    -- can cost is less than the bar: it cannot be among the largest (its edges still come up, less
    -- still)
    SELECT r.workload_id, r.cost, r.gpu_hours, r.idle_cost FROM spend_spendrollup r
    WHERE r.level = %(fine)s AND r.span = 'day' AND r.workload_id = ANY(ARRAY(
        SELECT workload_id FROM across WHERE most IS NULL OR most >= (SELECT at_least FROM bar) ORDER BY workload_id
      )) AND ({days}) {scope_r}
    ORDER BY workload_id  -- summed in order: a hash of some 12,000 numeric sums cost twice as much
  ) parts GROUP BY workload_id
)
(SELECT 'e', workload_id, cost, hours, idle FROM exact WHERE cost <> 0 OR hours <> 0 OR idle <> 0
 ORDER BY cost DESC, workload_id LIMIT %(limit)s)
UNION ALL
(SELECT 'i', * FROM largest ORDER BY cost DESC, workload_id LIMIT %(rows)s)
UNION ALL  -- the live stretches by kind (storage apart), and a check of their share denominators
(SELECT CASE WHEN storage THEN 's' ELSE 'k' END, kind, SUM(cost), SUM(hours), SUM(idle) FROM edge
 GROUP BY storage, kind)
UNION ALL
(SELECT 'b', SUM(bad)::bigint, 0, 0, 0 FROM edge HAVING SUM(bad) > 0)
"""
# The live stretches (those taken away negated) as rows of kind, workload, storage flag, cost,
# GPU-hours, idle cost, bad share denominators and whether the stretch lies outside the rolled part
# of a day not read whole (`_in_rolled_day`; storage summed over no hold comes as a NULL cost).
_EDGE = (
    "SELECT kind, workload_id, storage, {sign}cost, {sign}hours, {sign}idle, bad, {outside}"
    " FROM ({sql}) e{n} ({columns}) WHERE cost IS NOT NULL"
)
_EDGE_COLUMNS = "kind, workload_id, storage, cost, hours, idle, bad"
_NO_EDGE = "SELECT NULL::bigint, NULL::bigint, false, 0::numeric, 0::numeric, 0::numeric, 0::bigint, false WHERE FALSE"
# The largest totals of one part of the scope (all of it, a team, or one's own rows in other
# teams), read in cost order from the index for that part, until `rows` are found.
_PG_LARGEST = """(SELECT w.workload_id, w.cost, w.gpu_hours, w.idle_cost FROM spend_workloadspend w
 WHERE {whole} AND w.first_day >= %(first)s AND w.last_day < %(stop)s {part} {within}
   AND w.workload_id NOT IN (SELECT workload_id FROM across) AND w.workload_id NOT IN (SELECT workload_id FROM counted)
 ORDER BY w.cost DESC, w.workload_id LIMIT %(rows)s)"""

_NONE_LARGEST = "SELECT NULL::bigint AS workload_id, 0::numeric AS cost, 0::numeric AS gpu_hours, 0::numeric AS idle_cost WHERE FALSE"


def _largest_parts(scope: Scope, params: dict) -> list[str]:
    """The scope as disjoint filters on `WorkloadSpend` (alias w), each answered by a cost index
    in order: the whole fleet; each team in it (team, cost); one's own rows outside those teams
    (user, cost). Filtered from the fleet-wide order instead, a lead of one team in sixty would
    read some sixty rows for each one kept."""
    only = "" if scope.team_id is None else " AND w.team_id = %(part_team)s"
    params["part_team"] = scope.team_id
    if scope.team_ids is None:
        return [only]
    teams = sorted(scope.team_ids if scope.team_id is None else scope.team_ids & {scope.team_id})
    parts = []
    for n, team_id in enumerate(teams):
        params[f"part_team{n}"] = team_id
        parts.append(f" AND w.team_id = %(part_team{n})s")
    if scope.user_id is not None:
        params["part_user"], params["part_teams"] = scope.user_id, sorted(scope.team_ids)
        parts.append(f" AND w.user_id = %(part_user)s AND NOT (w.team_id = ANY(%(part_teams)s)){only}")
    return parts


def _runs_sql(column: str, starts: list[datetime], span: str, params: dict, name: str) -> str:
    """`column` within the runs of consecutive periods, as SQL (FALSE for none)."""
    parts = []
    for n, (low, high) in enumerate(runs(starts, span)):
        params[f"{name}{n}a"], params[f"{name}{n}b"] = low, high
        parts.append(f"{column} BETWEEN %({name}{n}a)s AND %({name}{n}b)s")
    return " OR ".join(parts) or "FALSE"


def _hours_sql(plan, params: dict) -> str:
    """Roll-up rows (alias r) of the plan's hours and blocks of hours, as SQL (FALSE for none)."""
    parts = []
    for n, span in enumerate(span for span in HOUR_SPANS if plan.rolled.get(span)):
        params[f"hspan{n}"] = span
        parts.append(
            f"(r.span = %(hspan{n})s AND ({_runs_sql('r.start', plan.rolled[span], span, params, f'h{n}_')}))"
        )
    return " OR ".join(parts) or "FALSE"


def _edge_sql(*, plan, fresh: dict, scope: Scope, now: datetime, params: dict) -> str:
    """The plan's live stretches costed by kind and workload (`_EDGE` rows), as SQL."""
    stretches = [(low, high, "") for low, high in plan.live] + [(low, high, "-") for low, high in plan.minus]
    read = set(plan.rolled_days)
    parts = []
    for n, (low, high, sign) in enumerate(stretches):
        outside = "false" if _in_rolled_day(low, high, fresh=fresh, read=read) else "true"
        sql, more = pg_spend_sql(
            start=low, end=high, now=now, keys=("kind", "workload"), scope=scope, idle=True, storage=True,
            prefix=f"e{n}_",
        )  # fmt: skip
        params.update(more)
        parts.append(_EDGE.format(sign=sign, outside=outside, sql=sql, n=n, columns=_EDGE_COLUMNS))
    return "\n  UNION ALL ".join(parts) or _NO_EDGE


def _in_rolled_day(low: datetime, high: datetime, *, fresh: dict, read: set[datetime]) -> bool:
    """Whether a live stretch of a plan, added or taken away, lies within the rolled part of a
    fresh day that the plan does not read whole (`read`: an edge in an older or a recent day, not
    the minutes since today's roll-up nor a stretch taken away from a day read whole). A workload
    held there has a day row on that day, so its total under that team and user runs outside the
    range's whole days: only a workload with totals under another team or user too
    (`WorkloadSpend.shared`) can have one inside. And a workload's totals hold all it cost there."""
    day = midnight(low)
    until = fresh.get((Span.DAY, day))
    return until is not None and high <= until and day not in read


def _top_pg(
    *, plan, fresh: dict, scope: Scope, now: datetime, limit: int
) -> tuple[list[tuple[int, Amount]], dict]:
    """`_top` in one statement (PostgreSQL), the live stretches costed in it: no workload of the
    edges is read into Python. Returns the top and the live stretches' spend by kind (STORAGE apart)."""
    days = plan.rolled_days
    first = stop = None
    stale: list[datetime] = []
    if days:
        first, stop, stale = _whole_days(days)
    scope_r, params = scope.holds_sql("r")
    scope_w, more = scope.holds_sql("w")
    params.update(more)
    params.update(fine=Level.FINE, first=first, stop=stop, limit=limit, bar_offset=limit - 1, stale=stale)
    # the days either side of each edge of the whole days (as `_straddling`)
    params.update(
        edge0a=first and first - timedelta(days=1),
        edge0b=first,
        edge1a=stop and stop - timedelta(days=1),
        edge1b=stop,
    )
    within = ""
    if days and (stop - first).days <= GIST_DAYS:
        # A few days hold few workloads: found through the GiST index and sorted. Over more days
        # the cost index, read in order, reaches `limit` of them long before it would finish.
        within = f"AND {DAY_SPAN_SQL} <@ daterange(%(first)s, %(stop)s, '[)')"
    whole = "TRUE" if days else "FALSE"
    largest = [
        _PG_LARGEST.format(whole=whole, part=part, within=within) for part in _largest_parts(scope, params)
    ]
    sql_args = {
        "edge": _edge_sql(plan=plan, fresh=fresh, scope=scope, now=now, params=params),
        "hours": _hours_sql(plan, params),
        "days": _runs_sql("r.start", days, Span.DAY, params, "d"),
        "whole": whole,
        "day_span": DAY_SPAN_SQL,
        "scope_r": scope_r,
        "scope_w": scope_w,
        "largest": " UNION ALL ".join(largest) or _NONE_LARGEST,
    }
    rows = limit + 8  # a few more than needed: a workload with rows in two teams or users takes two
    while True:  # a workload has one total per team and user: nearly always one, so one round
        params["rows"] = rows
        with connection.cursor() as cursor:
            cursor.execute(_PG_TOP.format(**sql_args), params)
            found = cursor.fetchall()
        exact = {w: Amount(cost=c, gpu_hours=h, idle_cost=i) for kind, w, c, h, i in found if kind == "e"}
        totals = [(w, Amount(cost=c, gpu_hours=h, idle_cost=i)) for kind, w, c, h, i in found if kind == "i"]
        inside: dict[int, Amount] = {}
        for workload_id, amount in totals:
            if workload_id in inside or len(inside) < limit:
                inside.setdefault(workload_id, Amount()).add(amount)
        if len(totals) < rows or len(inside) == limit:  # all read, or `limit` found
            break
        rows *= 4
    if any(kind == "b" for kind, *_ in found):
        raise ValueError(BAD_SHARES)
    by_kind = {
        STORAGE if kind == "s" else key: Amount(cost=c, gpu_hours=h, idle_cost=i)
        for kind, key, c, h, i in found
        if kind in ("k", "s")
    }
    # All the rows of each, not only those read: one taken under two users has two. (A workload
    # none of whose rows was read could still add up to more than the smallest found; no path of
    # the portal moves a workload to another team or user, so that takes an import or an edit.)
    if inside:
        inside = _totals_inside(workload_ids=set(inside), first=first, end=stop, scope_q=scope.holds_q())
    return _ranked({**inside, **exact}, limit), by_kind
