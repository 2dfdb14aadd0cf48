"""Which periods a report reads from roll-ups and which hours it costs from the holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from portal.spend.models import Span
from portal.spend.periods import DAY, HOUR, make_plan

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


def _hours(day: datetime, first: int = 0, last: int = 24) -> dict:
    return {(Span.HOUR, day + HOUR * n): day + HOUR * (n + 1) for n in range(first, last)}


def test_a_range_starting_at_noon_of_a_day_rolled_by_the_hour_reads_its_last_twelve_hours():
    plan = make_plan(start=D1 + 12 * HOUR, end=D3, fresh={**WHOLE, **_hours(D1)}, blocks=False)
    assert plan.rolled[Span.HOUR] == [D1 + HOUR * n for n in range(12, 24)]
    assert plan.rolled[Span.DAY] == [D2]
    assert plan.live == [] and plan.minus == []


def test_an_edge_within_an_hour_costs_at_most_half_an_hour_from_the_holds():
    start = D1 + timedelta(hours=12, minutes=10)
    plan = make_plan(start=start, end=D3, fresh={**WHOLE, **_hours(D1)}, blocks=False)
    assert plan.rolled[Span.HOUR] == [D1 + HOUR * n for n in range(12, 24)]  # hour 12 less 10 minutes
    assert plan.minus == [(D1 + 12 * HOUR, start)]
    late = D1 + timedelta(hours=12, minutes=50)
    plan = make_plan(start=late, end=D3, fresh={**WHOLE, **_hours(D1)}, blocks=False)
    assert plan.live == [(late, D1 + 13 * HOUR)]  # 10 minutes live, then hours 13-23
    assert plan.rolled[Span.HOUR] == [D1 + HOUR * n for n in range(13, 24)]
    end = D3 + timedelta(hours=5, minutes=40)
    plan = make_plan(start=D1, end=end, fresh={**WHOLE, **_hours(D3)}, blocks=False)
    assert plan.rolled[Span.DAY] == [D1, D2]
    assert plan.rolled[Span.HOUR] == [D3 + HOUR * n for n in range(6)]
    assert plan.minus == [(end, D3 + 6 * HOUR)]


def test_a_day_less_a_few_minutes_is_read_as_the_day_not_as_its_hours():
    start = D1 + timedelta(minutes=5)
    plan = make_plan(start=start, end=D3, fresh={**WHOLE, **_hours(D1)}, blocks=False)
    assert plan.rolled[Span.DAY] == [D1, D2]
    assert plan.minus == [(D1, start)]
    assert Span.HOUR not in plan.rolled


def test_hours_not_rolled_are_costed_from_the_holds():
    start = D1 + timedelta(hours=12)
    plan = make_plan(start=start, end=D3, fresh={**WHOLE, **_hours(D1, 14, 24)}, blocks=False)
    assert plan.live == [(start, D1 + 14 * HOUR)]
    assert plan.rolled[Span.HOUR] == [D1 + HOUR * n for n in range(14, 24)]


def _blocks(day: datetime, *, leave_out: tuple = ()) -> dict:
    """Every block of hours of `day`, fresh, but those left out."""
    found = {}
    for span, length in ((Span.HOURS_2, 2), (Span.HOURS_4, 4), (Span.HOURS_8, 8)):
        for n in range(0, 24, length):
            if (span, day + HOUR * n) not in leave_out:
                found[(span, day + HOUR * n)] = day + HOUR * (n + length)
    return found


def test_a_run_of_rolled_hours_is_read_as_the_largest_fresh_blocks_it_fills():
    start = D1 + timedelta(hours=1, minutes=20)
    fresh = {**WHOLE, **_hours(D1), **_blocks(D1)}
    plan = make_plan(start=start, end=D3, fresh=fresh, blocks=False)
    assert plan.rolled == {
        Span.HOUR: [D1 + HOUR],
        Span.HOURS_2: [D1 + 2 * HOUR],
        Span.HOURS_4: [D1 + 4 * HOUR],
        Span.HOURS_8: [D1 + 8 * HOUR, D1 + 16 * HOUR],
        Span.DAY: [D2],
    }
    assert plan.minus == [(D1 + HOUR, start)] and plan.live == []
    # A block not rolled (or stale) is read as its halves, and they as theirs.
    fresh = {
        **WHOLE,
        **_hours(D1),
        **_blocks(D1, leave_out=((Span.HOURS_8, D1 + 16 * HOUR), (Span.HOURS_4, D1 + 20 * HOUR))),
    }
    plan = make_plan(start=start, end=D3, fresh=fresh, blocks=False)
    assert plan.rolled[Span.HOURS_4] == [D1 + 4 * HOUR, D1 + 16 * HOUR]
    assert plan.rolled[Span.HOURS_2] == [D1 + 2 * HOUR, D1 + 20 * HOUR, D1 + 22 * HOUR]
    # An end at 12:40: hours 0-12 as 8 + 4, and hour 12 less its last 20 minutes.
    end = D3 + timedelta(hours=12, minutes=40)
    plan = make_plan(start=D1, end=end, fresh={**WHOLE, **_hours(D3), **_blocks(D3)}, blocks=False)
    assert plan.rolled == {
        Span.DAY: [D1, D2],
        Span.HOURS_8: [D3],
        Span.HOURS_4: [D3 + 8 * HOUR],
        Span.HOUR: [D3 + 12 * HOUR],
    }
    assert plan.minus == [(end, D3 + 13 * HOUR)] and plan.live == []
