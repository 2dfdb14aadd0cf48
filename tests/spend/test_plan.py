"""Which periods a report reads from roll-ups and which hours it costs from the holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from portal.spend.models import Span
from portal.spend.periods import DAY, make_plan

D1 = datetime(2026, 3, 10, tzinfo=UTC)
D2, D3 = D1 + DAY, D1 + 2 * DAY
WHOLE = {(Span.DAY, D1): D2, (Span.DAY, D2): D3, (Span.DAY, D3): D3 + DAY}


def test_a_range_starting_early_in_a_rolled_day_costs_the_rest_of_that_day_live():
    plan = make_plan(start=D1 + timedelta(hours=20), end=D3, fresh=WHOLE, blocks=False)
    assert plan.live == [(D1 + timedelta(hours=20), D2)]
    assert plan.rolled[Span.DAY] == [D2]
    assert plan.minus == []


def test_a_range_starting_late_in_a_rolled_day_reads_the_day_less_the_hours_before_it():
    plan = make_plan(start=D1 + timedelta(hours=3), end=D3, fresh=WHOLE, blocks=False)
    assert plan.rolled[Span.DAY] == [D1, D2]
    assert plan.minus == [(D1, D1 + timedelta(hours=3))]
    assert plan.live == []


def test_a_range_ending_late_in_a_rolled_day_reads_the_day_less_the_hours_after_it():
    plan = make_plan(start=D1, end=D3 + timedelta(hours=22), fresh=WHOLE, blocks=False)
    assert plan.rolled[Span.DAY] == [D1, D2, D3]
    assert plan.minus == [(D3 + timedelta(hours=22), D3 + DAY)]
    assert plan.live == []


def test_a_day_rolled_only_in_part_is_never_taken_whole():
    partial = {**WHOLE, (Span.DAY, D3): D3 + timedelta(hours=5)}
    plan = make_plan(start=D1, end=D3 + timedelta(hours=22), fresh=partial, blocks=False)
    assert plan.minus == []
    assert plan.rolled[Span.DAY] == [D1, D2, D3]  # the part rolled, [D3, D3 + 5 h)
    assert plan.live == [(D3 + timedelta(hours=5), D3 + timedelta(hours=22))]
