"""Blocks of 8 hours kept for old days (PORTAL_SPEND_8H_DAYS): an edge of a range up to a year
long is costed from at most 4 hours of holds, not up to 12, and every figure stays exact."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from portal.fleet.models import Allocation
from portal.spend import selectors
from portal.spend.models import Level, Span, SpendPeriod, SpendRollup
from portal.spend.periods import HOUR_SPANS
from portal.spend.services import spend_rollup_due
from portal.spend.totals import Scope, plan_for
from tests.rows import make_hold, make_sandbox
from tests.spend import reference
from tests.spend.test_rollup_upkeep import NOW, assert_blocks_add_up, day, gpus  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def at(n: int, hour: int, minute: int) -> datetime:
    return datetime(2026, 3, n, hour, minute, tzinfo=UTC)


def assert_exact_at(now: datetime, viewers, start: datetime, end: datetime) -> None:
    for viewer in viewers:
        for group in selectors.GROUPS:
            got = selectors.spend_grouped(user=viewer, group_by=group, start=start, end=end, now=now)
            want = reference.spend_grouped(user=viewer, group_by=group, start=start, end=end, now=now)
            labels = group != "workload"
            assert reference.as_tuples(got, labels=labels) == reference.as_tuples(want, labels=labels), (
                viewer.username,
                group,
                start,
                end,
            )


def spans_of(n: int) -> set[str]:
    """The fresh periods of the day and within it (blocks of days apart)."""
    return set(
        SpendPeriod.objects.filter(
            span__in=[Span.DAY, *HOUR_SPANS], start__gte=day(n), start__lt=day(n + 1), stale=False
        ).values_list("span", flat=True)
    )


@pytest.fixture
def holds(gpus, team, other_team, researcher, lead):  # noqa: F811 (the fixture imported above)
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type)
    make_hold(
        gpu=gpus[0], user=researcher, team=team, workload=sandbox, started_at=at(9, 7, 13), ended_at=None
    )
    make_hold(
        gpu=gpus[1],
        user=lead,
        team=other_team,
        started_at=at(11, 13, 5),
        ended_at=at(15, 3, 40),
        share=(3, 7),
    )
    make_hold(gpu=gpus[2], user=researcher, team=team, started_at=at(14, 9, 59), ended_at=at(19, 21, 7))
    return sandbox


def test_old_days_keep_blocks_of_8_hours_and_their_edges_cost_at_most_4_hours(
    holds, researcher, lead, admin_user, settings
):
    settings.PORTAL_SPEND_HOUR_DAYS = 2
    spend_rollup_due(now=NOW, days_per_run=100)
    # Old days rolled whole: the day and its three blocks of 8 hours, from the same holds.
    for n in range(9, 18):
        assert spans_of(n) == {Span.DAY, Span.HOURS_8}, n
    assert set(HOUR_SPANS) <= spans_of(18)  # recent: every span
    eights = SpendRollup.objects.filter(span=Span.HOURS_8, start__gte=day(12), start__lt=day(13))
    assert set(eights.values_list("level", flat=True)) == set(Level.values)  # the fine level too

    start, end = at(12, 5, 20), at(15, 14, 40)
    plan = plan_for(start=start, end=end, now=NOW, scope=Scope(), keys=("workload",))
    assert plan.rolled[Span.HOURS_8] == [day(12, 8), day(12, 16), day(15, 0), day(15, 8)]
    assert plan.live == [(start, day(12, 8))]  # 2 h 40 min: less than the block less 5 h 20 min
    assert plan.minus == [(end, day(15, 16))]  # the block 8-16 less 1 h 20 min
    for low, high in [*plan.live, *plan.minus]:
        assert high - low <= timedelta(hours=4)
    viewers = [admin_user, lead, researcher]
    for low, high in (
        (start, end),
        (at(10, 23, 59), at(16, 0, 1)),
        (at(13, 12, 0), at(13, 12, 30)),
        (start, NOW),
    ):
        assert_exact_at(NOW, viewers, low, high)


def test_a_changed_hold_on_an_old_day_rolls_its_blocks_of_8_hours_again(
    holds, researcher, admin_user, settings
):
    settings.PORTAL_SPEND_HOUR_DAYS = 2
    spend_rollup_due(now=NOW, days_per_run=100)
    Allocation.objects.filter(workload=holds).update(ended_at=at(12, 10, 30))  # ended in the past
    assert_exact_at(NOW, [admin_user, researcher], at(12, 9, 45), at(16, 3, 0))  # at once
    spend_rollup_due(now=NOW, days_per_run=100)
    assert not SpendPeriod.objects.filter(stale=True).exists()
    assert SpendPeriod.objects.get(span=Span.HOURS_8, start=day(12, 8)).rolled_at == NOW
    assert spans_of(12) == {Span.DAY, Span.HOURS_8}
    assert_exact_at(NOW, [admin_user, researcher], at(12, 9, 45), at(16, 3, 0))


def test_blocks_of_8_hours_outlive_the_hours_they_were_summed_from_until_they_too_grow_old(
    holds, researcher, lead, admin_user, settings
):
    settings.PORTAL_SPEND_HOUR_DAYS = 3
    settings.PORTAL_SPEND_8H_DAYS = 6
    spend_rollup_due(now=NOW, days_per_run=100)
    summed = dict(
        SpendRollup.objects.filter(span=Span.HOURS_8, start=day(17, 8), level=Level.TEAM).values_list(
            "team", "cost"
        )
    )
    later = NOW + timedelta(days=2)  # the 17th and 18th leave the days kept by the hour
    spend_rollup_due(now=later, days_per_run=100)
    assert spans_of(17) == spans_of(18) == {Span.DAY, Span.HOURS_8}
    again = SpendRollup.objects.filter(span=Span.HOURS_8, start=day(17, 8), level=Level.TEAM)
    assert dict(again.values_list("team", "cost")) == summed  # kept as summed from the hours
    assert min(SpendPeriod.objects.filter(span=Span.HOUR).values_list("start", flat=True)) == day(19)
    assert min(SpendPeriod.objects.filter(span=Span.HOURS_8).values_list("start", flat=True)) == day(16)
    assert not SpendRollup.objects.filter(span__in=HOUR_SPANS, start__lt=day(16)).exists()
    assert not SpendRollup.objects.filter(
        span__in=[Span.HOUR, Span.HOURS_2, Span.HOURS_4], start__lt=day(19)
    ).exists()
    assert_blocks_add_up()
    for low, high in ((at(16, 6, 10), at(18, 19, 50)), (at(15, 6, 10), later), (at(17, 2, 0), at(17, 9, 0))):
        assert_exact_at(later, [admin_user, lead, researcher], low, high)


def test_blocks_of_8_hours_are_caught_up_for_old_days_while_their_minutes_are_kept(
    holds, researcher, admin_user, settings
):
    settings.PORTAL_SPEND_HOUR_DAYS = 2
    settings.PORTAL_SPEND_8H_DAYS = 0  # as rolled before old days kept blocks of 8 hours
    settings.PORTAL_TELEMETRY_MINUTE_DAYS = 8  # minutes kept from the 13th: older days stay as they are
    spend_rollup_due(now=NOW, days_per_run=100)
    assert not SpendPeriod.objects.filter(span=Span.HOURS_8, start__lt=day(18)).exists()
    settings.PORTAL_SPEND_8H_DAYS = 400
    run = spend_rollup_due(now=NOW, days_per_run=100)
    assert run.hours > 0
    for n in range(9, 13):
        assert spans_of(n) == {Span.DAY}, n
    for n in range(13, 18):
        assert spans_of(n) == {Span.DAY, Span.HOURS_8}, n
    assert spend_rollup_due(now=NOW, days_per_run=100).hours == 0  # nothing left to do
    assert_exact_at(NOW, [admin_user, researcher], at(12, 5, 20), at(15, 14, 40))
    assert_exact_at(NOW, [admin_user, researcher], at(13, 17, 0), at(16, 2, 0))
