"""The slow, obvious spend figures the roll-ups must equal to the cent: every hold the user may
see is read into Python and costed window by window, as spend was computed before the roll-ups
(open holds of expired workloads clipped at their expiry), but in exact fractions: share x hours x
price, rounded once. (Decimal's 28 digits, as the code before had them, can tip a total that lies
exactly on a half cent, made of sevenths, either way; the fraction cannot.)"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, time, timedelta
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from fractions import Fraction

from django.db.models import Q

from portal.fleet.models import Allocation, GpuMinute, StorageHold
from portal.spend.cost import billed_until
from portal.spend.selectors import (
    NO_PROJECT_KEY,
    OTHERS_KEY,
    STORAGE_KEY,
    STORAGE_LABEL,
    SpendRow,
    allocations_visible_to,
    month_start,
    storage_holds_visible_to,
)
from portal.workloads.models import Workload


def _seconds(low: datetime, high: datetime) -> Fraction:
    held = high - low
    return Fraction((held.days * 86400 + held.seconds) * 1_000_000 + held.microseconds, 1_000_000)


def _cost(price, numerator: int, denominator: int, seconds: Fraction) -> Fraction:
    return Fraction(price) * numerator * seconds / (denominator * 3600)


def _round(value: Fraction, rounding=ROUND_HALF_UP) -> Decimal:
    """Exactly: a fraction rounded to hundredths."""
    hundredths = value * 100
    whole = hundredths.numerator // hundredths.denominator
    rest = hundredths - whole
    up = rest > Fraction(1, 2) or (rest == Fraction(1, 2) and (rounding == ROUND_HALF_UP or whole % 2 == 1))
    return Decimal(whole + (1 if up else 0)).scaleb(-2)


def _days(start: datetime, end: datetime):
    day = start.date()
    while True:
        day_start = datetime.combine(day, time.min, tzinfo=start.tzinfo)
        if day_start >= end:
            return
        yield day, max(day_start, start), min(day_start + timedelta(days=1), end)
        day += timedelta(days=1)


def _idle_seconds(hold: Allocation, start: datetime, end: datetime) -> Fraction:
    """Seconds of [start, end) the hold held within minutes the agents read its device under the
    threshold: each such minute counts the part of it the hold held."""
    held_to = hold.ended_at
    if held_to is None:
        held_to = min(end, hold.workload.expires_at) if hold.workload_id else end
    low, high = max(start, hold.started_at), min(end, held_to)
    if high <= low:
        return Fraction(0)
    device_start = hold.mig_slice.start if hold.mig_slice_id and hold.mig_slice else None
    minutes = GpuMinute.objects.filter(
        gpu_id=hold.gpu_id,
        mig_start=device_start,
        minute__gt=low - timedelta(minutes=1),
        minute__lt=high,
        utilization_samples__gt=0,
    )
    return sum(
        (
            _seconds(max(m.minute, low), min(m.minute + timedelta(minutes=1), high))
            for m in minutes
            if m.utilization_sum / m.utilization_samples < hold.team.idle_threshold_percent
        ),
        Fraction(0),
    )


def _holds(user, team, start: datetime, end: datetime):
    for holds in (allocations_visible_to(user).select_related("workload"), storage_holds_visible_to(user)):
        holds = holds.filter(started_at__lt=end).filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
        if team is not None:
            holds = holds.filter(team=team)
        yield from holds


def amounts(*, user, group_by: str, start: datetime, end: datetime, team=None, now: datetime):
    """Exact (cost, gpu_hours, idle_cost) and label by key."""
    cost: dict[str, Fraction] = defaultdict(Fraction)
    hours: dict[str, Fraction] = defaultdict(Fraction)
    idle: dict[str, Fraction] = defaultdict(Fraction)
    labels: dict[str, str] = {}
    for hold in _holds(user, team, start, end):
        gpu = isinstance(hold, Allocation)
        held_from, held_to = max(hold.started_at, start), min(billed_until(hold, now=now), end)
        if held_to <= held_from:
            continue
        if group_by == "day":
            windows = [(d.isoformat(), d.isoformat(), a, b) for d, a, b in _days(held_from, held_to)]
        elif group_by == "user":
            windows = [
                (hold.user.username, hold.user.get_full_name() or hold.user.username, held_from, held_to)
            ]
        elif group_by == "team":
            windows = [(hold.team.slug, hold.team.name, held_from, held_to)]
        elif group_by == "gpu_type":
            kind = (hold.gpu_type.slug, hold.gpu_type.name) if gpu else (STORAGE_KEY, STORAGE_LABEL)
            windows = [(*kind, held_from, held_to)]
        elif group_by == "project":
            project = hold.workload.project if gpu and hold.workload_id else ""
            key = (project or NO_PROJECT_KEY) if gpu else STORAGE_KEY
            windows = [(key, STORAGE_LABEL if key == STORAGE_KEY else key, held_from, held_to)]
        else:  # workload
            key = (
                f"{hold.workload.kind}-{hold.workload.number}"
                if gpu and hold.workload_id
                else (OTHERS_KEY if gpu else STORAGE_KEY)
            )
            windows = [(key, key, held_from, held_to)]
        for key, label, low, high in windows:
            labels[key] = label
            seconds = _seconds(low, high)
            if gpu:
                n, d = hold.share_numerator, hold.share_denominator
                cost[key] += _cost(hold.price_per_hour, n, d, seconds)
                hours[key] += Fraction(n) * seconds / (d * 3600)
                idle[key] += _cost(hold.price_per_hour, n, d, _idle_seconds(hold, low, high))
            else:
                cost[key] += _cost(hold.price_per_gb_month, hold.size_gb, 730, seconds)
                hours[key] += 0
    return {key: (cost[key], hours[key], idle[key], labels[key]) for key in cost}


def row(key, label, cost, hours, idle) -> SpendRow:
    return SpendRow(
        key=key,
        label=label,
        cost=_round(cost),
        gpu_hours=_round(hours, ROUND_HALF_EVEN),
        idle_cost=_round(idle),
    )


def spend_grouped(*, user, group_by, start, end, team=None, now, limit=100) -> list[SpendRow]:
    found = amounts(user=user, group_by=group_by, start=start, end=end, team=team, now=now)
    if group_by == "workload":
        storage = found.pop(STORAGE_KEY, None)
        no_workload = found.pop(OTHERS_KEY, None)
        ids = {
            f"{kind}-{number}": pk
            for kind, number, pk in Workload.objects.values_list("kind", "number", "pk")
        }
        ranked = sorted(found.items(), key=lambda item: (-item[1][0], ids[item[0]]))  # ties: the lower id
        top, rest = ranked[:limit], [amount for _, amount in ranked[limit:]]
        if no_workload:
            rest.append(no_workload)
        rows = [(key, amount) for key, amount in top]
        rows = [row(key, None, c, h, i) for key, (c, h, i, _) in rows]
        if storage:
            rows.append(row(STORAGE_KEY, STORAGE_LABEL, *storage[:3]))
        others = row(
            OTHERS_KEY, "Everything else", *(sum((a[n] for a in rest), Fraction(0)) for n in range(3))
        )
        if others.cost or others.gpu_hours or others.idle_cost:
            rows.append(others)
        return rows
    rows = [row(key, label, c, h, i) for key, (c, h, i, label) in found.items()]
    if group_by == "day":
        return sorted(rows, key=lambda r: r.key)
    return sorted(rows, key=lambda r: (-r.cost, r.key))


def team_month_spend(*, team, now: datetime) -> Decimal:
    start = month_start(now)
    total = Fraction(0)
    for hold in Allocation.objects.filter(team=team).filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start)):
        held_from, held_to = max(hold.started_at, start), billed_until(hold, now=now)
        if held_to > held_from:
            total += _cost(
                hold.price_per_hour,
                hold.share_numerator,
                hold.share_denominator,
                _seconds(held_from, held_to),
            )
    for hold in StorageHold.objects.filter(team=team).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=start)
    ):
        held_from, held_to = max(hold.started_at, start), billed_until(hold, now=now)
        if held_to > held_from:
            total += _cost(hold.price_per_gb_month, hold.size_gb, 730, _seconds(held_from, held_to))
    return _round(total)


def as_tuples(rows: list[SpendRow], *, labels: bool = True) -> list[tuple]:
    return [(r.key, r.label if labels else None, r.cost, r.gpu_hours, r.idle_cost) for r in rows]
