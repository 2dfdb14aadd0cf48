"""What one sandbox or deployment has cost over its life, hour by hour (or day by day): its holds
priced by the one cost definition (portal.spend.selectors.allocation_cost), per interval and
summed. A workload has a handful of holds, so this is arithmetic over them, not a roll-up."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.utils import timezone

from portal.core.errors import ValidationFailed
from portal.fleet.models import Allocation
from portal.spend.selectors import allocation_cost, to_cents

STEPS = {3600: "hour", 86400: "day"}
MAX_POINTS = 2000


@dataclass(frozen=True)
class CostPoint:
    at: datetime  # the interval's start
    cost: Decimal  # within the interval, to the cent
    total: (
        Decimal  # from the start of its life to the interval's end, to the cent (not a sum of rounded costs)
    )


def workload_cost_series(*, workload, step: int = 3600, now: datetime | None = None) -> list[CostPoint]:
    """The workload's cost per interval of `step` seconds, from its first hold to now (or its end)."""
    if step not in STEPS:
        raise ValidationFailed("`step` is 3600 (hours) or 86400 (days).", fields={"step": ["3600 or 86400"]})
    now = now or timezone.now()
    holds = list(Allocation.objects.filter(workload=workload).select_related("workload"))
    if not holds:
        return []
    first = min(h.started_at for h in holds)
    last = max((h.ended_at or now) for h in holds)
    last = min(last, now)
    size = timedelta(seconds=step)
    origin = first.replace(minute=0, second=0, microsecond=0)
    if step == 86400:
        origin = origin.replace(hour=0)
    count = int((last - origin) / size) + 1
    if count > MAX_POINTS:
        raise ValidationFailed(
            f"That is {count} points; ask for days (`step=86400`).",
            fields={"step": [f"at most {MAX_POINTS} points"]},
        )
    points, running = [], Decimal(0)
    for n in range(count):
        start, end = origin + n * size, origin + (n + 1) * size
        cost = sum((allocation_cost(h, now=now, start=start, end=end) for h in holds), Decimal(0))
        running += cost
        points.append(CostPoint(at=start, cost=to_cents(cost), total=to_cents(running)))
    return points
