"""Spend is derived from allocations in Decimal, exact to the cent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from portal.fleet.models import Allocation, Gpu
from portal.spend.selectors import hold_cost, spend_grouped, team_month_spend

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 10, 22, 0, tzinfo=UTC)


def hold(
    *,
    user,
    team,
    gpu_type,
    hours,
    numerator=1,
    denominator=1,
    start=T0,
    price="6.88",
    workload=None,
    profile="",
):
    gpu = Gpu.objects.filter(gpu_type=gpu_type).order_by("pk").first()
    return Allocation.objects.create(
        gpu=gpu,
        mig_profile=profile,
        workload=workload,
        team=team,
        user=user,
        gpu_type=gpu_type,
        share_numerator=numerator,
        share_denominator=denominator,
        price_per_hour=Decimal(price),
        started_at=start,
        ended_at=start + timedelta(hours=hours),
        released_at=start + timedelta(hours=hours),
    )


def test_a_slice_for_two_hours_costs_its_seventh_of_the_price():
    cost = hold_cost(
        price_per_hour=Decimal("6.88"), numerator=1, denominator=7, start=T0, end=T0 + timedelta(hours=2)
    )
    assert cost == Decimal("6.88") * 2 / 7  # 1.965714…, never a float
    assert isinstance(cost, Decimal)


def test_spend_by_team_user_gpu_type_and_day(fleet, h100, team, researcher, lead, admin_user):
    hold(user=researcher, team=team, gpu_type=h100, hours=2, numerator=1, denominator=7, profile="1g.10gb")
    hold(
        user=lead,
        team=team,
        gpu_type=h100,
        hours=1.5,
        numerator=3,
        denominator=1,
        start=T0 + timedelta(minutes=30),
    )
    window = {"start": datetime(2026, 11, 1, tzinfo=UTC), "end": datetime(2026, 12, 1, tzinfo=UTC)}

    by_team = spend_grouped(user=admin_user, group_by="team", **window)
    assert [(r.key, r.cost, r.gpu_hours) for r in by_team] == [("vision", Decimal("32.93"), Decimal("4.79"))]

    by_user = spend_grouped(user=admin_user, group_by="user", **window)
    assert [(r.key, r.cost) for r in by_user] == [("bob", Decimal("30.96")), ("alice", Decimal("1.97"))]

    by_day = spend_grouped(user=admin_user, group_by="day", **window)
    assert [(r.key, r.cost) for r in by_day] == [("2026-11-10", Decimal("32.93"))]


def test_day_grouping_splits_a_hold_at_midnight(fleet, h100, team, researcher, admin_user):
    hold(user=researcher, team=team, gpu_type=h100, hours=4, price="6.00")  # 22:00 to 02:00
    rows = spend_grouped(
        user=admin_user,
        group_by="day",
        start=datetime(2026, 11, 1, tzinfo=UTC),
        end=datetime(2026, 12, 1, tzinfo=UTC),
    )
    assert [(r.key, r.cost) for r in rows] == [
        ("2026-11-10", Decimal("12.00")),
        ("2026-11-11", Decimal("12.00")),
    ]


def test_window_clips_holds_that_cross_its_edges(fleet, h100, team, researcher, admin_user):
    hold(user=researcher, team=team, gpu_type=h100, hours=4, price="6.00")
    rows = spend_grouped(
        user=admin_user,
        group_by="team",
        start=datetime(2026, 11, 11, tzinfo=UTC),
        end=datetime(2026, 11, 11, 1, tzinfo=UTC),
    )
    assert rows[0].cost == Decimal("6.00")


def test_researchers_see_their_own_spend_and_leads_their_teams(
    fleet, h100, team, other_team, researcher, lead, other_researcher
):
    hold(user=researcher, team=team, gpu_type=h100, hours=1)
    hold(user=lead, team=team, gpu_type=h100, hours=1)
    hold(user=other_researcher, team=other_team, gpu_type=h100, hours=1)
    window = {"start": datetime(2026, 11, 1, tzinfo=UTC), "end": datetime(2026, 12, 1, tzinfo=UTC)}
    assert {r.key for r in spend_grouped(user=researcher, group_by="user", **window)} == {"alice"}
    assert {r.key for r in spend_grouped(user=lead, group_by="user", **window)} == {"alice", "bob"}


def test_many_short_holds_add_up_like_one_long_one(fleet, h100, team, researcher):
    for minute in range(60):
        hold(
            user=researcher,
            team=team,
            gpu_type=h100,
            hours=1 / 60,
            start=T0 + timedelta(minutes=minute),
            numerator=1,
            denominator=7,
        )
    assert team_month_spend(team=team, now=datetime(2026, 11, 20, tzinfo=UTC)) == Decimal("0.98")  # 6.88 / 7


def test_a_home_is_billed_per_gb_month_beside_gpu_time_exact_to_the_cent(
    fleet, h100, team, researcher, lead, admin_user
):
    from portal.fleet.models import StorageHold
    from portal.spend.selectors import storage_cost

    # 50 GB for 73 hours at $0.10 per GB-month (730 h): 50 x 73 / 730 x 0.10 = $0.50 exactly
    home = StorageHold.objects.create(
        user=researcher, team=team, what="home of alice", size_gb=50, price_per_gb_month=Decimal("0.10"),
        started_at=T0, ended_at=T0 + timedelta(hours=73),
    )  # fmt: skip
    assert storage_cost(home, now=T0) == Decimal("0.5")
    # grown to 120 GB: 120 x 1 h / 730 x 0.10 = 0.016438...; three such hours add to the cent only in the total
    for n in range(3):
        StorageHold.objects.create(
            user=researcher, team=team, what="home of alice", size_gb=120, price_per_gb_month=Decimal("0.10"),
            started_at=T0 + timedelta(hours=73 + n), ended_at=T0 + timedelta(hours=74 + n),
        )  # fmt: skip
    hold(user=lead, team=team, gpu_type=h100, hours=1)  # $6.88 of GPU time
    window = {"start": datetime(2026, 11, 1, tzinfo=UTC), "end": datetime(2026, 12, 1, tzinfo=UTC)}
    storage = Decimal("0.5") + Decimal(360) / Decimal(7300)  # 0.549315...

    by_type = spend_grouped(user=admin_user, group_by="gpu_type", **window)
    assert [(r.key, r.cost, r.gpu_hours) for r in by_type] == [
        ("h100-80gb", Decimal("6.88"), Decimal("1.00")),
        ("storage", Decimal("0.55"), Decimal("0.00")),
    ]
    by_user = spend_grouped(user=admin_user, group_by="user", **window)
    assert [(r.key, r.cost) for r in by_user] == [("bob", Decimal("6.88")), ("alice", Decimal("0.55"))]
    by_team = spend_grouped(user=admin_user, group_by="team", **window)
    assert [(r.key, r.cost) for r in by_team] == [
        ("vision", (Decimal("6.88") + storage).quantize(Decimal("0.01")))
    ]
    by_day = spend_grouped(user=admin_user, group_by="day", **window)
    # each day rounded on its own: 6.88 + 2 h of 50 GB; 24 h; 24 h; 23 h of 50 GB + 1 h of 120 GB; 2 h of 120 GB
    assert [(r.key, r.cost) for r in by_day] == [
        ("2026-11-10", Decimal("6.89")),
        ("2026-11-11", Decimal("0.16")),
        ("2026-11-12", Decimal("0.16")),
        ("2026-11-13", Decimal("0.17")),
        ("2026-11-14", Decimal("0.03")),
    ]
    with time_machine.travel(datetime(2026, 11, 30, tzinfo=UTC)):
        assert team_month_spend(team=team) == Decimal("7.43")  # the budget counts storage too
    assert spend_grouped(user=lead, group_by="user", **window)[1].key == "alice"  # a lead sees the team's
    assert [r.key for r in spend_grouped(user=researcher, group_by="gpu_type", **window)] == ["storage"]


def test_idle_cost_is_the_price_of_the_minutes_the_agents_read_idle_exact_to_the_cent(
    fleet, h100, team, researcher, admin_user
):
    from portal.fleet.models import GpuMinute

    # a whole H100 at $6.88/h for 2 h; the agent read 45 of its minutes under 5 % and 30 busy
    allocation = hold(user=researcher, team=team, gpu_type=h100, hours=2)
    for n in range(75):
        utilization = 2.0 if n < 45 else 60.0
        GpuMinute.objects.create(gpu=allocation.gpu, device=allocation.gpu.uuid, minute=T0 + timedelta(minutes=n),
                                 samples=2, utilization_sum=2 * utilization, utilization_samples=2)  # fmt: skip
    GpuMinute.objects.create(gpu=allocation.gpu, device=allocation.gpu.uuid, minute=T0 + timedelta(hours=3),
                             samples=1, utilization_sum=0, utilization_samples=1)  # after the hold: not counted  # fmt: skip
    window = {"start": datetime(2026, 11, 1, tzinfo=UTC), "end": datetime(2026, 12, 1, tzinfo=UTC)}
    (row,) = spend_grouped(user=admin_user, group_by="user", **window)
    assert (row.cost, row.idle_cost) == (Decimal("13.76"), Decimal("5.16"))  # 45/60 x 6.88
    team.idle_threshold_percent = 70
    team.save()
    (row,) = spend_grouped(user=admin_user, group_by="team", **window)
    assert row.idle_cost == Decimal("8.60")  # all 75 read minutes are under 70 %
    by_day = spend_grouped(user=admin_user, group_by="day", **window)
    assert sum(r.idle_cost for r in by_day) == Decimal("8.60")


@pytest.mark.parametrize("group_by", ["user", "workload", "day"])
def test_a_minute_read_idle_counts_only_the_part_of_it_held(
    fleet, h100, team, researcher, admin_user, group_by
):
    """A hold from 10:00:40 to 10:05:20 in six minutes all read idle: idle cost is its whole cost,
    not six minutes' worth; an open hold's current minute counts up to now."""
    from portal.fleet.models import GpuMinute

    start = T0 + timedelta(seconds=40)
    allocation = hold(user=researcher, team=team, gpu_type=h100, hours=280 / 3600, start=start)
    for n in range(8):
        GpuMinute.objects.create(gpu=allocation.gpu, device=allocation.gpu.uuid, minute=T0 + timedelta(minutes=n),
                                 samples=1, utilization_sum=0, utilization_samples=1)  # fmt: skip
    window = {"start": T0 - timedelta(hours=1), "end": T0 + timedelta(hours=1)}
    (row,) = spend_grouped(user=admin_user, group_by=group_by, **window)
    assert row.cost == row.idle_cost == Decimal("0.54")  # 280 s at $6.88/h; six whole minutes would be $0.69
    Allocation.objects.filter(pk=allocation.pk).update(ended_at=None)  # still held: up to now, 10:02:30
    (row,) = spend_grouped(
        user=admin_user, group_by=group_by, now=T0 + timedelta(minutes=2, seconds=30), **window
    )
    assert row.cost == row.idle_cost == Decimal("0.21")  # 110 s


@pytest.mark.parametrize("group_by", ["team", "workload"])
def test_idle_counts_at_the_first_and_last_minute_kept_and_nothing_beyond(
    fleet, h100, team, researcher, admin_user, group_by
):
    """Only 10:02 to 10:05 were read (all idle) for a hold from 10:00 to 10:10: a stretch that
    reaches half into the first or the last minute kept counts that half; one wholly before or
    after the minutes kept counts no idle time."""
    from portal.fleet.models import GpuMinute

    allocation = hold(user=researcher, team=team, gpu_type=h100, hours=10 / 60, start=T0)
    for n in (2, 3, 4):
        GpuMinute.objects.create(gpu=allocation.gpu, device=allocation.gpu.uuid, minute=T0 + timedelta(minutes=n),
                                 samples=1, utilization_sum=0, utilization_samples=1)  # fmt: skip
    at = lambda minutes, seconds=0: T0 + timedelta(minutes=minutes, seconds=seconds)  # noqa: E731
    for (start, end), idle in {
        (at(0), at(2, 30)): Decimal("0.06"),  # 30 s of the first minute kept at $6.88/h
        (at(4, 30), at(10)): Decimal("0.06"),  # 30 s of the last
        (at(0), at(10)): Decimal("0.34"),  # 180 s
        (at(0), at(2)): Decimal("0.00"),
        (at(5), at(10)): Decimal("0.00"),
    }.items():
        (row,) = spend_grouped(user=admin_user, group_by=group_by, start=start, end=end)
        assert row.idle_cost == idle, (start, end)
