"""The closed holds of a stretch, found the way PostgreSQL finds them: those that started at most
holds.LONG_HOLD before it by their start, longer ones by their span. Holds on every side of both
boundaries, costed before any roll-up (the whole range from the holds), against the definition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from portal.fleet.models import Gpu
from portal.spend import selectors
from tests.rows import make_hold, make_sandbox
from tests.spend import reference

pytestmark = pytest.mark.django_db
START = datetime(2026, 9, 5, 12, 30, tzinfo=UTC)
END = datetime(2026, 9, 6, tzinfo=UTC)
NOW = datetime(2026, 9, 20, tzinfo=UTC)
DAY, HOUR, SECOND = timedelta(days=1), timedelta(hours=1), timedelta(seconds=1)

# (started, ended, hours held within [START, END))
HOLDS = [
    (START - 3 * DAY, START + HOUR, 1),  # long, started days before: by its span
    (START - DAY, START + HOUR / 6, Decimal(1) / 6),  # started exactly a day before: by its start
    (START - DAY - SECOND, START + 36 * SECOND, Decimal(1) / 100),  # a second longer: by its span
    (START - 2 * HOUR, START, 0),  # ended as the stretch begins
    (START - 5 * DAY, START - HOUR, 0),  # long, ended before
    (START - 2 * DAY, END + DAY, Decimal("11.5")),  # long, across the whole stretch
    (START + HOUR, START + 2 * HOUR, 1),  # inside
    (END - HOUR / 60 * 3, END + 2 * DAY, Decimal(1) / 20),  # starts at the end, runs on
    (END, END + HOUR, 0),  # starts as the stretch ends
    (START - 10 * DAY, None, Decimal("11.5")),  # open
]


def test_closed_holds_on_every_side_of_a_stretch_cost_their_time_within_it(
    fleet, team, researcher, admin_user
):
    gpus = list(Gpu.objects.filter(mig_enabled=False).order_by("index"))
    boxes = []
    for n, (started, ended, _) in enumerate(HOLDS):
        box = make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type, expires_at=NOW + DAY)
        make_hold(gpu=gpus[n % len(gpus)], user=researcher, team=team, workload=box, started_at=started,
                  ended_at=ended)  # fmt: skip
        boxes.append(box)
    rows = selectors.spend_grouped(
        user=admin_user, group_by="workload", limit=len(HOLDS), start=START, end=END, now=NOW
    )
    cost = {r.key: r.cost for r in rows}
    for box, (_, _, hours) in zip(boxes, HOLDS, strict=True):
        want = (Decimal("6.88") * Decimal(hours)).quantize(Decimal("0.01"))
        assert cost.get(f"sandbox-{box.number}", Decimal("0.00")) == want, box.number
    want = reference.spend_grouped(
        user=admin_user, group_by="workload", limit=len(HOLDS), start=START, end=END, now=NOW
    )
    assert reference.as_tuples(rows, labels=False) == reference.as_tuples(want, labels=False)
