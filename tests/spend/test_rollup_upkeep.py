"""Roll-ups kept true and cheap: holds changed after their days were rolled (ended in the past,
an expiry passed or moved, inserted, deleted), the periodic job, the rebuild command, and a
number of queries that does not grow with the holds."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import F, Q

from portal.fleet.models import Allocation, Gpu, StorageHold
from portal.spend import by_workload, selectors
from portal.spend.models import Level, Span, SpendOpenHold, SpendPeriod, SpendRollup, WorkloadSpend
from portal.spend.periods import HOUR_SPANS, fresh_periods, halves
from portal.spend.services import spend_changes_apply, spend_roll_day, spend_rollup_due
from portal.spend.totals import Scope, plan_for
from portal.workloads.models import Workload, WorkloadState
from portal.workloads.services.sweep import workloads_expire_overdue
from tests.rows import make_hold, make_sandbox
from tests.spend import reference

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 3, 20, 13, 30, tzinfo=UTC)
MONTH = {"start": datetime(2026, 3, 1, tzinfo=UTC), "end": NOW}


def day(n: int, hour: int = 0) -> datetime:
    return datetime(2026, 3, n, hour, tzinfo=UTC)


@pytest.fixture
def gpus(fleet) -> list[Gpu]:
    return list(Gpu.objects.filter(mig_enabled=False).order_by("index"))


def figures(user, **window) -> dict[str, list]:
    """Every grouping, as the roll-ups answer and as the slow definition does."""
    window = window or MONTH
    found = {}
    for group in selectors.GROUPS:
        got = selectors.spend_grouped(user=user, group_by=group, now=NOW, **window)
        want = reference.spend_grouped(user=user, group_by=group, now=NOW, **window)
        labels = group != "workload"
        found[group] = (reference.as_tuples(got, labels=labels), reference.as_tuples(want, labels=labels))
    return found


def assert_exact(user, team, **window) -> None:
    for group, (got, want) in figures(user, **window).items():
        assert got == want, group
    assert selectors.team_month_spend(team=team, now=NOW) == reference.team_month_spend(team=team, now=NOW)


def workload_tops(user, limit: int, **window) -> tuple[list, list]:
    """The workload report's rows, as the roll-ups answer and as the slow definition does."""
    got = selectors.spend_grouped(user=user, group_by="workload", limit=limit, now=NOW, **window)
    want = reference.spend_grouped(user=user, group_by="workload", limit=limit, now=NOW, **window)
    return reference.as_tuples(got, labels=False), reference.as_tuples(want, labels=False)


def claim(workload, cost) -> None:
    """Make a workload's one total claim `cost` units, its days' bounds with it (no day dearer, none
    known to cost anything): less than its days hold, to show which day rows are summed."""
    WorkloadSpend.objects.filter(workload=workload).update(cost=cost, peak_day_cost=cost, low_day_cost=0)


def edge_stretches(window: dict) -> dict[str, list[bool]]:
    """Whether each live stretch of the workload report's plan over `window`, added ("live") or
    taken away ("minus"), lies within the rolled part of a day the plan does not read whole."""
    plan = plan_for(now=NOW, scope=Scope(), keys=("workload",), **window)
    fresh, read = fresh_periods(now=NOW, **window), set(plan.rolled_days)
    return {
        name: [by_workload._in_rolled_day(low, high, fresh=fresh, read=read) for low, high in stretches]
        for name, stretches in (("live", plan.live), ("minus", plan.minus))
    }


def edges_in_rolled_days(window: dict) -> bool:
    return all(all(found) for found in edge_stretches(window).values())


def stale_days() -> set:
    return {p.start.date() for p in SpendPeriod.objects.filter(span=Span.DAY, stale=True)}


def test_the_periodic_job_rolls_closed_days_today_so_far_and_blocks_of_days(
    gpus, team, researcher, admin_user
):
    make_hold(gpu=gpus[0], user=researcher, team=team, started_at=day(1, 22), ended_at=day(9, 3))
    run = spend_rollup_due(now=NOW, days_per_run=100)
    assert run.days[0] == day(19).date() and run.days[-1] == day(1).date()
    assert run.partial == [day(20).date()]
    today = SpendPeriod.objects.get(span=Span.DAY, start=day(20))
    assert today.until == datetime(2026, 3, 20, 13, 28, tzinfo=UTC)  # a few minutes ago, to the minute
    assert SpendPeriod.objects.filter(span="2d", stale=False).exists()
    assert SpendPeriod.objects.filter(span="8d", start=day(8), stale=False).exists()  # aligned since 1970
    assert_exact(admin_user, team)
    again = spend_rollup_due(now=NOW, days_per_run=100)
    assert (again.days, again.partial, again.blocks) == ([], [], 0)  # nothing closed since


def test_a_hold_ended_in_the_past_after_its_days_were_rolled_counts_to_its_end_at_once(
    gpus, team, researcher, admin_user
):
    hold = make_hold(gpu=gpus[0], user=researcher, team=team, started_at=day(10, 6), ended_at=None)
    spend_rollup_due(now=NOW, days_per_run=100)
    assert SpendOpenHold.objects.filter(allocation=hold).exists()
    before = selectors.team_month_spend(team=team, now=NOW)
    Allocation.objects.filter(pk=hold.pk).update(ended_at=day(12, 18))  # ended, backdated
    after = selectors.team_month_spend(team=team, now=NOW)
    assert after == reference.team_month_spend(team=team, now=NOW) == Decimal("6.88") * 60
    assert after < before
    assert_exact(admin_user, team)  # before the workers have seen it
    assert spend_changes_apply(now=NOW) == 9  # 12 to 19 March, and today
    assert stale_days() == {day(n).date() for n in range(12, 21)}
    assert not SpendOpenHold.objects.filter(allocation=hold).exists()
    assert_exact(admin_user, team)  # stale days from the holds
    spend_rollup_due(now=NOW, days_per_run=100)
    assert stale_days() == set()
    assert_exact(admin_user, team)  # and from the roll-ups again


def test_a_workload_past_its_expiry_stops_costing_at_the_expiry_before_the_sweep(
    gpus, team, researcher, admin_user
):
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type, expires_at=day(15, 12))
    make_hold(
        gpu=gpus[0], user=researcher, team=team, workload=sandbox, started_at=day(14, 12), ended_at=None
    )
    assert selectors.team_month_spend(team=team, now=NOW) == Decimal("165.12")  # 24 h at 6.88, not 6 days
    spend_rollup_due(now=NOW, days_per_run=100)
    assert selectors.team_month_spend(team=team, now=NOW) == Decimal("165.12")
    assert_exact(admin_user, team)
    # The sweep ends it at its expiry: nothing rolled changes.
    assert workloads_expire_overdue(now=NOW) == [sandbox.pk]
    assert Allocation.objects.get(workload=sandbox).ended_at == day(15, 12)
    assert spend_changes_apply(now=NOW) == 0
    assert selectors.team_month_spend(team=team, now=NOW) == Decimal("165.12")


def test_moving_the_expiry_of_an_expired_workload_counts_the_time_again(gpus, team, researcher, admin_user):
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type, expires_at=day(15, 12))
    make_hold(
        gpu=gpus[0], user=researcher, team=team, workload=sandbox, started_at=day(14, 12), ended_at=None
    )
    spend_rollup_due(now=NOW, days_per_run=100)
    sandbox.expires_at = day(17, 12)  # extended before the sweep came by
    sandbox.save(update_fields=["expires_at"])
    assert selectors.team_month_spend(team=team, now=NOW) == Decimal("495.36")  # 72 h
    assert_exact(admin_user, team)
    spend_rollup_due(now=NOW, days_per_run=100)
    assert_exact(admin_user, team)


def test_holds_inserted_into_rolled_days_or_deleted_from_them_are_reflected(
    gpus, team, researcher, admin_user
):
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type)
    make_hold(gpu=gpus[0], user=researcher, team=team, workload=sandbox, started_at=day(3), ended_at=None)
    spend_rollup_due(now=NOW, days_per_run=100)
    make_hold(gpu=gpus[1], user=researcher, team=team, started_at=day(4), ended_at=day(5))  # an import
    StorageHold.objects.create(
        user=researcher, team=team, what="home", size_gb=73, price_per_gb_month=Decimal("0.1"),
        started_at=day(2), ended_at=day(6),
    )  # fmt: skip
    assert_exact(admin_user, team)
    sandbox.delete()  # its hold goes with it
    assert_exact(admin_user, team)
    spend_rollup_due(now=NOW, days_per_run=100)
    assert not WorkloadSpend.objects.filter(workload_id=sandbox.pk).exists()
    assert_exact(admin_user, team)


def test_a_requeued_hold_that_was_rolled_costs_nothing(gpus, team, researcher, admin_user):
    hold = make_hold(gpu=gpus[0], user=researcher, team=team, started_at=day(19, 23), ended_at=None)
    spend_rollup_due(now=NOW, days_per_run=100)
    Allocation.objects.filter(pk=hold.pk).update(ended_at=F("started_at"))  # never usable
    assert selectors.team_month_spend(team=team, now=NOW) == Decimal("0.00")
    assert_exact(admin_user, team)


def test_partial_day_edges_and_ranges_inside_one_day_are_exact(
    gpus, team, other_team, researcher, lead, admin_user
):
    make_hold(gpu=gpus[0], user=researcher, team=team, started_at=day(2, 7), ended_at=day(11, 4))
    make_hold(gpu=gpus[1], user=lead, team=team, started_at=day(5, 13), ended_at=None, share=(3, 7))
    spend_rollup_due(now=NOW, days_per_run=100)
    for start, end in (
        (datetime(2026, 3, 3, 5, 17, 3, tzinfo=UTC), datetime(2026, 3, 19, 22, 1, tzinfo=UTC)),
        (datetime(2026, 3, 6, 1, tzinfo=UTC), datetime(2026, 3, 6, 2, 30, tzinfo=UTC)),
        (
            datetime(2026, 3, 20, 9, tzinfo=UTC),
            datetime(2026, 3, 20, 13, 29, tzinfo=UTC),
        ),  # within today's roll-up
        (datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)),  # past now
    ):
        for viewer in (admin_user, lead, researcher):
            for group, (got, want) in figures(viewer, start=start, end=end).items():
                assert got == want, (viewer, group, start, end)


def test_the_workload_report_names_the_largest_and_sums_the_rest(gpus, team, researcher, admin_user):
    boxes = [make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type) for _ in range(4)]
    for n, box in enumerate(boxes):
        make_hold(
            gpu=gpus[n],
            user=researcher,
            team=team,
            workload=box,
            started_at=day(2 + n),
            ended_at=day(3 + n, n),
        )
    make_hold(gpu=gpus[5], user=researcher, team=team, started_at=day(8), ended_at=day(8, 2))  # no workload
    StorageHold.objects.create(
        user=researcher,
        team=team,
        what="home",
        size_gb=100,
        price_per_gb_month=Decimal("0.1"),
        started_at=day(1),
    )
    spend_rollup_due(now=NOW, days_per_run=100)
    rows = selectors.spend_grouped(user=admin_user, group_by="workload", limit=2, now=NOW, **MONTH)
    assert [r.key for r in rows] == [
        f"sandbox-{boxes[3].number}",
        f"sandbox-{boxes[2].number}",
        "storage",
        "others",
    ]
    assert rows[0].label == f"sandbox {boxes[3].name}"
    assert rows[0].cost == Decimal("6.88") * 27  # 27 h
    others = Decimal("6.88") * (24 + 25 + 2)  # the two smaller workloads and the hold of none
    assert rows[-1].cost == others
    want = reference.spend_grouped(user=admin_user, group_by="workload", limit=2, now=NOW, **MONTH)
    assert reference.as_tuples(rows, labels=False) == reference.as_tuples(want, labels=False)


def test_a_workload_held_under_two_users_is_ranked_on_all_its_time(gpus, team, researcher, lead, admin_user):
    """A sandbox whose holds were taken under two users has a total for each: the workload report
    ranks and costs it on both, however many smaller workloads lie between its two totals."""
    shared, *small = [make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type) for _ in range(10)]
    make_hold(gpu=gpus[0], user=researcher, team=team, workload=shared, started_at=day(2), ended_at=day(3, 3))
    make_hold(gpu=gpus[0], user=lead, team=team, workload=shared, started_at=day(4), ended_at=day(4, 1))
    for n, box in enumerate(small):
        make_hold(
            gpu=gpus[1 + n % 5],
            user=researcher,
            team=team,
            workload=box,
            started_at=day(5 + n),
            ended_at=day(5 + n, 2),
        )
    spend_rollup_due(now=NOW, days_per_run=100)
    assert WorkloadSpend.objects.filter(workload=shared).count() == 2

    for limit in (1, 3):
        rows = selectors.spend_grouped(user=admin_user, group_by="workload", limit=limit, now=NOW, **MONTH)
        assert rows[0].key == f"sandbox-{shared.number}"
        assert rows[0].cost == Decimal("6.88") * 28  # 27 h under one user, 1 h under the other
        want = reference.spend_grouped(user=admin_user, group_by="workload", limit=limit, now=NOW, **MONTH)
        assert reference.as_tuples(rows, labels=False) == reference.as_tuples(want, labels=False)


def test_a_workload_at_a_ranges_edge_with_a_total_under_another_user_inside_is_costed_on_it(
    gpus, team, researcher, lead, admin_user
):
    """A range from 12:30 to 12:30 of two rolled days: the workloads held at its edges are looked
    up only among those with totals under several users, so a workload held at the end by one user
    still counts its other user's total, which lies inside the range; the flag follows the holds."""
    shared, single = [make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type) for _ in range(2)]
    make_hold(gpu=gpus[0], user=researcher, team=team, workload=shared, started_at=day(8), ended_at=day(10))
    late = make_hold(
        gpu=gpus[0], user=lead, team=team, workload=shared, started_at=day(15, 12), ended_at=day(15, 14)
    )
    make_hold(
        gpu=gpus[1], user=researcher, team=team, workload=single, started_at=day(14), ended_at=day(15, 13)
    )
    make_hold(gpu=gpus[2], user=researcher, team=team, started_at=day(2), ended_at=day(2, 1))  # rolled from 2
    spend_rollup_due(now=NOW, days_per_run=100)
    assert set(WorkloadSpend.objects.filter(workload=shared).values_list("shared", flat=True)) == {True}
    assert list(WorkloadSpend.objects.filter(workload=single).values_list("shared", flat=True)) == [False]

    window = {"start": day(5, 12) + timedelta(minutes=30), "end": day(15, 12) + timedelta(minutes=30)}
    assert edges_in_rolled_days(window)  # the case at hand
    rows = selectors.spend_grouped(user=admin_user, group_by="workload", limit=5, now=NOW, **window)
    assert rows[0].key == f"sandbox-{shared.number}" and rows[0].cost == Decimal("6.88") * Decimal("48.5")
    want = reference.spend_grouped(user=admin_user, group_by="workload", limit=5, now=NOW, **window)
    assert reference.as_tuples(rows, labels=False) == reference.as_tuples(want, labels=False)

    late.delete()  # and its day rolled again: one user's total is left
    spend_roll_day(day=day(15), now=NOW)
    assert list(WorkloadSpend.objects.filter(workload=shared).values_list("shared", flat=True)) == [False]


def test_the_workloads_held_at_each_edge_are_looked_up_by_where_that_edge_lies(
    gpus, team, researcher, admin_user, settings
):
    """A range from 12:20 on a rolled day to now: its start reads the hour from 12:00 less twenty
    minutes (taken away, within the rolled part of a day read by the hour), its end is the minutes
    since today's roll-up. A workload held in those minutes whose rolled days lie inside the range
    costs its total there plus those minutes; one held only in the twenty minutes taken away has a
    day row on the start's day, so no total inside. Each edge is judged on its own."""
    settings.PORTAL_SPEND_HOUR_DAYS = 35  # the start's day, the 5th, is read by the hour
    boxes = [make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type) for _ in range(5)]
    back_now, in_minus, across_start, inside, at_start = boxes
    twenty = timedelta(minutes=20)
    for n, (box, start, end) in enumerate(
        (
            (back_now, day(8), day(9, 6)),  # 30 h inside, and again since a minute ago (below)
            (in_minus, day(5, 12), day(5, 12) + twenty / 2),  # within the twenty minutes only
            (across_start, day(5, 12), day(6, 8)),  # 19 h 40 in the range
            (inside, day(10), day(11, 4)),  # 28 h
            (at_start, day(5, 12) + twenty / 2, day(5, 14)),  # 1 h 40 in the range
        )
    ):
        make_hold(gpu=gpus[n], user=researcher, team=team, workload=box, started_at=start, ended_at=end)
    make_hold(gpu=gpus[0], user=researcher, team=team, workload=back_now, started_at=NOW - timedelta(minutes=1),
              ended_at=None)  # fmt: skip
    spend_rollup_due(now=NOW, days_per_run=100)

    window = {"start": day(5, 12) + twenty, "end": NOW}
    assert edge_stretches(window) == {"live": [False], "minus": [True]}
    for limit in (1, 2, 3, 5):
        got, want = workload_tops(admin_user, limit, **window)
        assert got == want, limit
    got, _ = workload_tops(admin_user, 5, **window)
    assert [key for key, *_ in got[:4]] == [
        f"sandbox-{box.number}" for box in (back_now, inside, across_start, at_start)
    ]
    assert got[0][2] == Decimal("206.51")  # 30 h and a minute at $6.88


def test_a_workload_in_an_edges_rolled_hours_only_counts_its_other_users_total_inside(
    gpus, team, researcher, lead, admin_user
):
    """The same, with the late hold in the rolled hours of the end's day, not in its live half hour:
    a workload read there only from hour rows still counts its total under the other user, which
    lies inside the range (one total alone would run across the range's end)."""
    shared, single = [make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type) for _ in range(2)]
    make_hold(gpu=gpus[0], user=researcher, team=team, workload=shared, started_at=day(8), ended_at=day(10))
    make_hold(gpu=gpus[0], user=lead, team=team, workload=shared, started_at=day(15, 3), ended_at=day(15, 5))
    make_hold(
        gpu=gpus[1], user=researcher, team=team, workload=single, started_at=day(14), ended_at=day(15, 13)
    )
    make_hold(gpu=gpus[2], user=researcher, team=team, started_at=day(2), ended_at=day(2, 1))  # rolled from 2
    spend_rollup_due(now=NOW, days_per_run=100)

    window = {"start": day(5, 12) + timedelta(minutes=30), "end": day(15, 12) + timedelta(minutes=30)}
    plan = plan_for(now=NOW, scope=Scope(), keys=("workload",), **window)
    # the late hold lies in rolled hours only: the live stretches are the two half hours at the ends
    assert all(high <= day(6) or low >= day(15, 12) for low, high in plan.live)
    for limit in (1, 5):
        got, want = workload_tops(admin_user, limit, **window)
        assert got == want
        assert got[0][0] == f"sandbox-{shared.number}" and got[0][2] == Decimal("6.88") * 50  # 48 h + 2 h


def test_long_workloads_across_a_ranges_whole_days_are_costed_from_their_days_inside(
    gpus, team, other_team, researcher, other_researcher, lead, admin_user
):
    """Long workloads running across a range's whole days (most of their days inside it, or most
    outside), one of them under two users, with a day inside made stale: for every viewer and
    edge, the definition's figures."""
    long_one = make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type)
    make_hold(
        gpu=gpus[0], user=researcher, team=team, workload=long_one, started_at=day(1, 5), ended_at=day(19, 7)
    )
    make_hold(gpu=gpus[1], user=lead, team=team, workload=long_one, started_at=day(8, 1), ended_at=day(9, 2),
              share=(1, 7))  # fmt: skip
    running = make_sandbox(owner=other_researcher, team=other_team, gpu_type=gpus[0].gpu_type)
    make_hold(gpu=gpus[2], user=other_researcher, team=other_team, workload=running, started_at=day(2, 9),
              ended_at=None)  # fmt: skip
    for n in range(6):  # smaller ones inside, across an edge and outside
        box = make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type)
        make_hold(gpu=gpus[3 + n % 3], user=researcher, team=team, workload=box, started_at=day(2 + 3 * n, n),
                  ended_at=day(3 + 3 * n, 2 * n))  # fmt: skip
    spend_rollup_due(now=NOW, days_per_run=100)

    windows = [
        {"start": day(3, 12), "end": day(17, 6)},
        {"start": day(4), "end": day(17)},
        {"start": day(10), "end": day(12)},
        {"start": day(2, 20), "end": NOW},
    ]
    for stale in (False, True):
        if stale:  # a hold inserted into a rolled day inside: the day is read from the holds
            make_hold(gpu=gpus[1], user=lead, team=team, workload=long_one, started_at=day(11, 3),
                      ended_at=day(11, 9))  # fmt: skip
            spend_changes_apply(now=NOW)
            assert stale_days() == {day(11).date()}
        for viewer in (admin_user, lead, researcher, other_researcher):
            for window in windows:
                for limit in (1, 3):
                    got = selectors.spend_grouped(
                        user=viewer, group_by="workload", limit=limit, now=NOW, **window
                    )
                    want = reference.spend_grouped(
                        user=viewer, group_by="workload", limit=limit, now=NOW, **window
                    )
                    got, want = (
                        reference.as_tuples(got, labels=False),
                        reference.as_tuples(want, labels=False),
                    )
                    assert got == want, (viewer, window, stale)


def test_a_workload_across_an_edge_is_summed_only_if_its_total_could_reach_the_largest_inside(
    gpus, team, researcher, admin_user
):
    """A workload running across a range's edge whose total over all its rolled days is less than
    the `limit`-th largest total inside cannot be among the largest, so its day rows are not summed
    (PostgreSQL); shown by making one total claim less than its days hold. Here the range's edges
    lie in rolled days, so what a workload held there is in its total too. A workload with totals
    under several users, or fewer workloads known to cost something than `limit`, keeps its day
    rows summed."""
    boxes = [make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type) for _ in range(5)]
    inside_36, inside_10, small_across, late_across, early_across = boxes
    for box, start, end in (
        (inside_36, day(8), day(9, 12)),
        (inside_10, day(10), day(10, 10)),
        (small_across, day(6, 22), day(7, 2)),  # 4 h in all: never among the two largest
        (late_across, day(13, 2), day(16)),  # 34 h inside of 70
        (early_across, day(4), day(8, 4)),  # 39.5 h inside of 100, held at the range's start
    ):
        make_hold(gpu=gpus[boxes.index(box)], user=researcher, team=team, workload=box, started_at=start,
                  ended_at=end)  # fmt: skip
    spend_rollup_due(now=NOW, days_per_run=100)
    window = {"start": day(6, 12) + timedelta(minutes=30), "end": day(14, 12)}
    assert plan_for(now=NOW, scope=Scope(), keys=("workload",), **window).live
    assert edges_in_rolled_days(window)

    for limit in (1, 2, 3, 6):
        got, want = workload_tops(admin_user, limit, **window)
        assert got == want, limit
    assert [key for key, *_ in workload_tops(admin_user, 2, **window)[0][:2]] == [
        f"sandbox-{early_across.number}",
        f"sandbox-{inside_36.number}",
    ]

    # The early workload's total made to claim 1 unit (its days' bounds with it): less than the
    # second largest inside (10 h).
    claim(early_across, 1)
    got, want = workload_tops(admin_user, 2, **window)
    if connection.vendor == "postgresql":  # its day rows were not summed: it drops out
        assert [key for key, *_ in got[:2]] == [
            f"sandbox-{inside_36.number}",
            f"sandbox-{late_across.number}",
        ]
    else:  # SQLite sums every such workload's days
        assert got == want
    # three workloads known to cost something (two totals inside, and the early one's half hour
    # held live), fewer than five: nothing is left out
    got, want = workload_tops(admin_user, 5, **window)
    assert got == want
    WorkloadSpend.objects.filter(workload=early_across).update(shared=True)  # its total is not its only one
    got, want = workload_tops(admin_user, 2, **window)
    assert got == want


def test_a_workload_across_an_edge_counts_what_it_held_since_the_roll_up_beside_its_total(
    gpus, team, researcher, admin_user
):
    """A range ending now, with today rolled only to 1:00: a workload running since before the
    range's first day may have held more since the roll-up than its total says, so that counts
    towards whether its day rows are summed (PostgreSQL)."""
    inside_36, inside_10, running = [make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type)
                                     for _ in range(3)]  # fmt: skip
    make_hold(
        gpu=gpus[0], user=researcher, team=team, workload=inside_36, started_at=day(8), ended_at=day(9, 12)
    )
    make_hold(
        gpu=gpus[1], user=researcher, team=team, workload=inside_10, started_at=day(10), ended_at=day(10, 10)
    )
    make_hold(gpu=gpus[2], user=researcher, team=team, workload=running, started_at=day(4), ended_at=None)
    spend_rollup_due(now=day(20, 1), days_per_run=100)  # the workers are behind: 12.5 h since
    window = {"start": day(6), "end": NOW}

    for limit in (1, 2, 3):
        got, want = workload_tops(admin_user, limit, **window)
        assert got == want and got[0][0] == f"sandbox-{running.number}", limit
    # Its total made to claim 1 unit: with the 12.5 h since, still past the second largest inside
    # (10 h), so it is summed; not past the largest (36 h), so with one named it is not.
    claim(running, 1)
    got, want = workload_tops(admin_user, 2, **window)
    assert got == want
    got, want = workload_tops(admin_user, 1, **window)
    if connection.vendor == "postgresql":
        assert got[0][0] == f"sandbox-{inside_36.number}"
    else:
        assert got == want


def day_costs(workload) -> dict:
    """A workload's fine day rows' cost, summed by day."""
    found: dict = {}
    for start, cost in SpendRollup.objects.filter(
        level=Level.FINE, span=Span.DAY, workload=workload
    ).values_list("start", "cost"):
        found[start.date()] = found.get(start.date(), 0) + cost
    return found


def test_a_workloads_total_keeps_its_dearest_day_and_its_cheapest_between_its_first_and_last(
    gpus, team, researcher
):
    """Its days summed by day (two holds on one day): the dearest; and the cheapest strictly between
    the first and the last, or zero where a day between has no row or none lies between. The
    migration sets both for totals kept before them, of two days or more (a one-day total's dearest
    day is its cost, which the report takes where the bound is unknown)."""
    steady, gapped, short, one_day = [
        make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type) for _ in range(4)
    ]
    for gpu, box, start, end in (
        (0, steady, day(3, 12), day(7, 6)),
        (2, gapped, day(3), day(4)),
        (2, gapped, day(6), day(6, 20)),
        (3, short, day(3, 20), day(4, 2)),
        (3, one_day, day(8, 1), day(8, 5)),
    ):
        make_hold(gpu=gpus[gpu], user=researcher, team=team, workload=box, started_at=start, ended_at=end)
    make_hold(gpu=gpus[1], user=researcher, team=team, workload=steady, started_at=day(5), ended_at=day(5, 12),
              price=Decimal("2.00"))  # fmt: skip
    spend_rollup_due(now=NOW, days_per_run=100)

    def bounds() -> dict:
        return {
            total.workload_id: (total.peak_day_cost, total.low_day_cost)
            for total in WorkloadSpend.objects.all()
        }

    costs = day_costs(steady)
    assert sorted(costs) == [day(n).date() for n in range(3, 8)]
    assert costs[day(6).date()] == costs[day(4).date()] and costs[day(7).date()] < costs[day(4).date()]
    rolled = {
        steady.pk: (costs[day(5).date()], costs[day(4).date()]),  # 24 h + 12 h at $2; 24 h
        gapped.pk: (day_costs(gapped)[day(3).date()], 0),  # no row on the 4th and 5th
        short.pk: (max(day_costs(short).values()), 0),  # no day between
        one_day.pk: (day_costs(one_day)[day(8).date()], 0),
    }
    assert bounds() == rolled

    WorkloadSpend.objects.update(peak_day_cost=None, low_day_cost=None)  # as totals kept before them
    importlib.import_module("portal.spend.migrations.0014_workload_spend_day_bounds_filled").fill(
        django_apps, SimpleNamespace(connection=connection)
    )
    assert bounds() == {**rolled, one_day.pk: (None, None)}


def test_a_workload_across_an_edge_is_summed_only_if_its_days_inside_could_reach_the_largest(
    gpus, team, researcher, admin_user
):
    """A workload across an edge whose total is large but whose dearest day, for each of its days
    from the day before the range's whole days to the day after, stays under the bar is left out
    (PostgreSQL): shown by making it claim a cheaper dearest day than it had. And one that costs at
    least its cheapest day between its first and last for each such day inside raises the bar:
    shown by making one claim a dearer cheapest day, which leaves out the workloads it outranks."""
    long_before, inside_36, inside_30, steady = [
        make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type) for _ in range(4)
    ]
    make_hold(
        gpu=gpus[0], user=researcher, team=team, workload=long_before, started_at=day(1), ended_at=day(11)
    )
    make_hold(
        gpu=gpus[1], user=researcher, team=team, workload=long_before, started_at=day(10), ended_at=day(11)
    )  # 48 h on the 10th, inside; 216 h before it
    make_hold(
        gpu=gpus[2], user=researcher, team=team, workload=inside_36, started_at=day(11), ended_at=day(12, 12)
    )
    make_hold(
        gpu=gpus[3], user=researcher, team=team, workload=inside_30, started_at=day(12), ended_at=day(13, 6)
    )
    make_hold(
        gpu=gpus[4], user=researcher, team=team, workload=steady, started_at=day(13, 6), ended_at=day(19)
    )
    spend_rollup_due(now=NOW, days_per_run=100)
    window = {"start": day(10), "end": day(15)}  # whole days 10 to 14: steady holds 42 h of them

    for limit in (1, 2, 3, 4):
        got, want = workload_tops(admin_user, limit, **window)
        assert got == want, limit
    assert [key for key, *_ in workload_tops(admin_user, 2, **window)[0][:2]] == [
        f"sandbox-{long_before.number}",
        f"sandbox-{steady.number}",
    ]

    # Its days claimed to cost at most 1 unit each: 2 on the 9th and 10th, under the second largest
    # inside (30 h).
    WorkloadSpend.objects.filter(workload=long_before).update(peak_day_cost=1)
    got, want = workload_tops(admin_user, 2, **window)
    if connection.vendor == "postgresql":  # its day rows were not summed: it drops out
        assert [key for key, *_ in got[:2]] == [f"sandbox-{steady.number}", f"sandbox-{inside_36.number}"]
    else:  # SQLite sums every such workload's days
        assert got == want
    WorkloadSpend.objects.filter(workload=long_before).update(peak_day_cost=F("cost"))

    # The steady one claimed to cost at least 1,000 h a day between its first and last: the bar for
    # one rises past every other (and past its own most), so none across is summed.
    hours = WorkloadSpend.objects.get(workload=inside_36).cost / 36
    WorkloadSpend.objects.filter(workload=steady).update(low_day_cost=hours * 1000)
    got, want = workload_tops(admin_user, 1, **window)
    if connection.vendor == "postgresql":
        assert [key for key, *_ in got[:1]] == [f"sandbox-{inside_36.number}"]
    else:
        assert got == want


def test_a_lead_of_two_teams_gets_the_largest_workloads_of_both_and_their_own_elsewhere(
    gpus, team, other_team, lead, researcher, other_researcher
):
    """The workload report of a lead reads the largest totals team by team and their own holds in
    teams they do not lead: whichever part holds the largest ones, the ranking is the definition's,
    with a team chosen or not; a researcher sees their own only."""
    from tests.factories import MembershipFactory, TeamFactory

    MembershipFactory(user=lead, team=other_team, role="lead")
    third = TeamFactory(slug="audio", name="Audio")
    holders = [(researcher, team), (other_researcher, other_team), (lead, third), (researcher, third)]
    for n in range(12):
        user, holder_team = holders[n % 4]
        box = make_sandbox(owner=user, team=holder_team, gpu_type=gpus[0].gpu_type)
        make_hold(gpu=gpus[n % 6], user=user, team=holder_team, workload=box,
                  started_at=day(2 + n % 9, n % 5), ended_at=day(2 + n % 9, n % 5) + timedelta(hours=1 + (n * 7) % 11))  # fmt: skip
    spend_rollup_due(now=NOW, days_per_run=100)
    seen = {
        r.key for r in selectors.spend_grouped(user=lead, group_by="workload", limit=12, now=NOW, **MONTH)
    }
    mine = {
        f"sandbox-{w.number}" for w in Workload.objects.filter(Q(team__in=[team, other_team]) | Q(owner=lead))
    }
    assert (
        seen - {"storage", "others"} == mine and len(mine) == 9
    )  # both teams' and the lead's own in a third
    for viewer, chosen in ((lead, None), (lead, team), (lead, other_team), (lead, third), (researcher, None)):
        for limit in (1, 2, 5):
            window = {"start": day(3, 7), "end": NOW} if limit == 2 else MONTH  # an edge inside a day too
            rows = selectors.spend_grouped(
                user=viewer, group_by="workload", team=chosen, limit=limit, now=NOW, **window
            )
            want = reference.spend_grouped(
                user=viewer, group_by="workload", team=chosen, limit=limit, now=NOW, **window
            )
            assert reference.as_tuples(rows, labels=False) == reference.as_tuples(want, labels=False), (
                viewer,
                chosen,
            )
            assert (
                len([r for r in rows if r.key.startswith("sandbox-")]) == min(limit, len(want) - 1) or chosen
            )


def test_rebuilding_twice_writes_the_same_rows_and_resumes_where_it_stopped(
    gpus, team, researcher, admin_user
):
    make_hold(gpu=gpus[0], user=researcher, team=team, started_at=day(1, 22), ended_at=day(9, 3))
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type)
    make_hold(
        gpu=gpus[1],
        user=researcher,
        team=team,
        workload=sandbox,
        started_at=day(4),
        ended_at=None,
        share=(1, 7),
    )

    def rows():
        fields = (
            "span",
            "start",
            "level",
            "team_id",
            "user_id",
            "gpu_type_id",
            "storage",
            "workload_id",
            "cost",
        )
        return sorted(SpendRollup.objects.values_list(*fields), key=str)

    call_command("spend_rollup", "--from", "2026-03-01", "--to", "2026-03-19", stdout=StringIO())
    first = rows()
    assert SpendPeriod.objects.filter(span=Span.DAY, stale=False).count() == 19
    fine = SpendRollup.objects.filter(level=Level.FINE, workload=sandbox)
    assert fine.filter(span=Span.DAY).count() == 16
    assert fine.filter(span=Span.HOURS_8).count() == 16 * 3  # old days keep blocks of 8 hours
    call_command("spend_rollup", "--from", "2026-03-01", "--to", "2026-03-19", stdout=StringIO())
    assert rows() == first
    SpendPeriod.objects.filter(span=Span.DAY, start__gte=day(10)).delete()  # as if it stopped on the 10th
    SpendRollup.objects.filter(span=Span.DAY, start__gte=day(10)).delete()
    out = StringIO()
    call_command("spend_rollup", "--from", "2026-03-01", "--to", "2026-03-19", "--missing", stdout=out)
    assert out.getvalue().startswith("Rolled 10 days from 2026-03-01 to 2026-03-19")
    assert rows() == first
    with pytest.raises(CommandError):
        call_command("spend_rollup", "--from", "2026-03-19", "--to", "2026-03-01")
    with pytest.raises(CommandError):
        call_command("spend_rollup", "--from", "March")


@pytest.mark.parametrize("holds", [3, 60])
def test_reports_read_a_number_of_queries_that_does_not_grow_with_the_holds(
    gpus,
    team,
    other_team,
    researcher,
    lead,
    other_researcher,
    admin_user,
    django_assert_max_num_queries,
    holds,
):
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type)
    for n in range(holds):
        start = day(1) + timedelta(hours=7 * n)
        make_hold(gpu=gpus[n % 8], user=[researcher, lead, other_researcher][n % 3], team=[team, team, other_team][n % 3],
                  workload=sandbox if n % 2 else None, started_at=start, ended_at=start + timedelta(hours=5))  # fmt: skip
    spend_rollup_due(now=NOW, days_per_run=100)
    with django_assert_max_num_queries(6):
        selectors.team_month_spend(team=team, now=NOW)
    for group in ("user", "team", "gpu_type", "day"):
        for viewer in (admin_user, lead):
            with django_assert_max_num_queries(9):
                selectors.spend_grouped(user=viewer, group_by=group, now=NOW, **MONTH)
    with django_assert_max_num_queries(18):
        selectors.spend_grouped(user=admin_user, group_by="workload", now=NOW, **MONTH)


def test_a_day_not_closed_cannot_be_rolled_whole(gpus):
    with pytest.raises(ValueError, match="cannot roll"):
        spend_roll_day(day=day(20), now=NOW, until=day(21))
    with pytest.raises(ValueError, match="UTC day"):
        spend_roll_day(day=day(19, 5), now=NOW)


def test_the_beat_rolls_spend_up_every_five_minutes():
    from workers.celery import _schedule
    from workers.tasks.spend import rollup_due

    assert _schedule()["roll-up-spend"] == {"task": rollup_due.name, "schedule": 300.0}


def test_the_api_reports_by_workload_within_a_limit(gpus, team, researcher, admin, admin_user):
    boxes = [
        make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type, state=WorkloadState.RUNNING)
        for _ in range(3)
    ]
    for n, box in enumerate(boxes):
        make_hold(
            gpu=gpus[n], user=researcher, team=team, workload=box, started_at=day(2), ended_at=day(2, n + 1)
        )
    response = admin.get(
        "/api/v1/spend",
        {"group_by": "workload", "limit": 1, "start": "2026-03-01T00:00:00Z", "end": "2026-03-08T00:00:00Z"},
    )
    assert response.status_code == 200, response.json()
    assert [(r["key"], r["cost"]) for r in response.json()["rows"]] == [
        (f"sandbox-{boxes[2].number}", "20.64"),
        ("others", "20.64"),
    ]
    assert admin.get("/api/v1/spend", {"group_by": "workload", "limit": 0}).status_code == 400


def hour_starts(**filters) -> set[datetime]:
    return set(SpendPeriod.objects.filter(span=Span.HOUR, **filters).values_list("start", flat=True))


def test_recent_days_are_rolled_by_the_hour_too_and_reports_at_any_time_of_day_are_exact(
    gpus, team, other_team, researcher, lead, admin_user, settings
):
    settings.PORTAL_SPEND_HOUR_DAYS = 3
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type)
    make_hold(
        gpu=gpus[0], user=researcher, team=team, workload=sandbox, started_at=day(15, 7), ended_at=day(18, 12)
    )
    make_hold(gpu=gpus[1], user=lead, team=team, started_at=day(17, 13), ended_at=None, share=(3, 7))
    make_hold(gpu=gpus[2], user=researcher, team=team, started_at=day(18, 16), ended_at=day(20, 2))  # fmt: skip
    spend_rollup_due(now=NOW, days_per_run=100)
    # The last three closed days by the hour, and today's hours closed before its roll-up (13:28).
    want = {day(n) + timedelta(hours=h) for n in (17, 18, 19) for h in range(24)}
    want |= {day(20) + timedelta(hours=h) for h in range(13)}
    assert hour_starts(stale=False) == want
    assert not SpendRollup.objects.filter(span=Span.HOUR, start__lt=day(17)).exists()
    plan = plan_for(start=day(18, 12), end=NOW, now=NOW, scope=Scope(), keys=("user",))
    # Hours 12-24 of the 18th as two blocks of hours: 12-16 and 16-24.
    assert {span: plan.rolled.get(span) for span in HOUR_SPANS} == {
        Span.HOUR: None, Span.HOURS_2: None, Span.HOURS_4: [day(18, 12)], Span.HOURS_8: [day(18, 16)]
    }  # fmt: skip
    assert plan.live == [(datetime(2026, 3, 20, 13, 28, tzinfo=UTC), NOW)]  # since today's roll-up
    for start in (day(18, 12), datetime(2026, 3, 18, 12, 40, 7, tzinfo=UTC), day(17, 1), day(16, 12)):
        for end in (NOW, datetime(2026, 3, 19, 16, 20, tzinfo=UTC)):
            for viewer in (admin_user, lead, researcher):
                for group, (got, want_) in figures(viewer, start=start, end=end).items():
                    assert got == want_, (viewer, group, start, end)
    # The workload totals count each day once, not its hours again.
    assert WorkloadSpend.objects.get(workload=sandbox).first_day == day(15).date()
    assert_exact(admin_user, team, start=day(15), end=NOW)


def test_a_report_reads_only_the_hours_of_its_first_day_and_of_the_day_before_its_end(
    gpus, team, researcher, admin_user
):
    """Hours (and blocks of hours) are read for the range's first day and from the day before the
    day of its end: a day in between is read whole, or costed from the holds when stale (its hours
    stale with it)."""
    from portal.spend.periods import HOUR_SPANS, fresh_periods

    make_hold(gpu=gpus[0], user=researcher, team=team, started_at=day(9, 3), ended_at=None)
    spend_rollup_due(now=NOW, days_per_run=100)
    for start, end, days in (
        (day(10, 12), NOW, {10, 19, 20}),
        (day(10, 12), day(18), {10, 17}),
        (day(12), day(13, 7), {12, 13}),
    ):
        fresh = fresh_periods(start=start, end=end, now=NOW)
        assert {k[1].day for k in fresh if k[0] in HOUR_SPANS} == days, (start, end)
        assert {k[1].day for k in fresh if k[0] == Span.DAY} == {
            d for d in range(start.day, 21) if day(d) < end
        }
        assert_exact(admin_user, team, start=start, end=end)


def test_a_changed_hold_makes_its_days_hours_stale_and_the_workers_roll_them_again(
    gpus, team, researcher, admin_user, settings
):
    settings.PORTAL_SPEND_HOUR_DAYS = 3
    hold = make_hold(gpu=gpus[0], user=researcher, team=team, started_at=day(17, 6), ended_at=None)
    spend_rollup_due(now=NOW, days_per_run=100)
    Allocation.objects.filter(pk=hold.pk).update(
        ended_at=day(
            18,
            9,
        )
    )
    window = {"start": datetime(2026, 3, 18, 7, 15, tzinfo=UTC), "end": NOW}
    assert_exact(admin_user, team, **window)  # at once, before the workers run
    spend_rollup_due(now=NOW, days_per_run=100)
    assert not hour_starts(stale=True)
    assert not SpendPeriod.objects.filter(span__in=HOUR_SPANS, stale=True).exists()
    assert SpendPeriod.objects.get(span=Span.HOUR, start=day(18, 8)).rolled_at == NOW
    assert SpendPeriod.objects.get(span=Span.HOURS_8, start=day(18, 8)).rolled_at == NOW
    assert_blocks_add_up()
    assert_exact(admin_user, team, **window)


def test_hours_are_caught_up_for_recent_days_and_forgotten_as_days_grow_old(
    gpus, team, researcher, admin_user, settings
):
    settings.PORTAL_SPEND_HOUR_DAYS = 0
    make_hold(gpu=gpus[0], user=researcher, team=team, started_at=day(10, 6), ended_at=day(19, 20))
    spend_rollup_due(now=NOW, days_per_run=100)
    assert not hour_starts()
    settings.PORTAL_SPEND_HOUR_DAYS = 3  # raised: the days rolled before get their hours
    run = spend_rollup_due(now=NOW, days_per_run=100)
    assert run.hours > 0
    assert {h.date() for h in hour_starts(stale=False)} == {day(17).date(), day(18).date(), day(19).date()}
    assert_exact(admin_user, team, start=day(17, 11), end=NOW)
    later = NOW + timedelta(days=2)
    spend_rollup_due(now=later, days_per_run=100)
    assert min(hour_starts()) == day(19)  # three days before the 22nd
    assert not SpendRollup.objects.filter(span=Span.HOUR, start__lt=day(19)).exists()


def block_rows(span: str, start: datetime) -> dict[tuple, tuple]:
    rows = SpendRollup.objects.filter(span=span, start=start).values_list(
        "level", "team_id", "user_id", "gpu_type_id", "storage", "workload_id", "project",
        "cost", "gpu_hours", "idle_cost",
    )  # fmt: skip
    return {tuple(row[:7]): tuple(Decimal(v) for v in row[7:]) for row in rows}


def assert_blocks_add_up() -> None:
    """Every block of hours holds, at every level and key, exactly its two halves' rows added up
    (but an old day's blocks of 8 hours, kept alone: they outlive their halves)."""
    blocks = SpendPeriod.objects.filter(span__in=[Span.HOURS_2, Span.HOURS_4, Span.HOURS_8])
    assert blocks.exists()
    hours = SpendPeriod.objects.filter(span=Span.HOUR).values_list("start", flat=True)
    days_by_the_hour = {start.date() for start in hours}
    for block in blocks:
        if block.span == Span.HOURS_8 and block.start.date() not in days_by_the_hour:
            continue
        want: dict[tuple, tuple] = {}
        for span, start in halves(block.start, block.span):
            for key, amounts in block_rows(span, start).items():
                found = want.get(key, (Decimal(0),) * 3)
                want[key] = tuple(a + b for a, b in zip(found, amounts, strict=True))
        assert block_rows(block.span, block.start) == want, block
        if want:  # every level, the fine one too
            assert {key[0] for key in want} == set(Level.values), block


def test_recent_hours_are_summed_into_blocks_of_two_four_and_eight_hours_that_add_up(
    gpus, team, other_team, researcher, lead, admin_user, settings
):
    settings.PORTAL_SPEND_HOUR_DAYS = 2
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type)
    make_hold(gpu=gpus[0], user=researcher, team=team, workload=sandbox, started_at=day(18, 7), ended_at=None)
    make_hold(
        gpu=gpus[1], user=lead, team=other_team, started_at=day(18, 13), ended_at=day(19, 3), share=(3, 7)
    )
    make_hold(gpu=gpus[2], user=researcher, team=team, started_at=day(19, 9), ended_at=day(20, 5))
    spend_rollup_due(now=NOW, days_per_run=100)
    starts = {
        span: sorted(SpendPeriod.objects.filter(span=span, stale=False).values_list("start", flat=True))
        for span in (Span.HOURS_2, Span.HOURS_4, Span.HOURS_8)
    }
    # Two closed days whole; today (rolled to 13:28) as far as its hours have closed (0-13).
    assert starts[Span.HOURS_8] == [day(n, h) for n in (18, 19) for h in (0, 8, 16)] + [day(20, 0)]
    assert starts[Span.HOURS_4] == [day(n, h) for n in (18, 19) for h in range(0, 24, 4)] + [
        day(20, 0), day(20, 4), day(20, 8)
    ]  # fmt: skip
    assert starts[Span.HOURS_2] == [day(n, h) for n in (18, 19) for h in range(0, 24, 2)] + [
        day(20, h) for h in range(0, 12, 2)
    ]
    assert_blocks_add_up()
    plan = plan_for(
        start=datetime(2026, 3, 18, 1, 20, tzinfo=UTC), end=NOW, now=NOW, scope=Scope(), keys=("workload",)
    )
    assert {span: plan.rolled.get(span) for span in HOUR_SPANS} == {
        Span.HOUR: [day(18, 1)], Span.HOURS_2: [day(18, 2)], Span.HOURS_4: [day(18, 4)],
        Span.HOURS_8: [day(18, 8), day(18, 16)],
    }  # fmt: skip
    assert plan.minus == [(day(18, 1), datetime(2026, 3, 18, 1, 20, tzinfo=UTC))]
    later = NOW + timedelta(hours=3)  # today's hours 13-15 close: blocks 12-14, 14-16, 12-16, 8-16 follow
    spend_rollup_due(now=later, days_per_run=100)
    today = set(SpendPeriod.objects.filter(start__gte=day(20, 8), stale=False).values_list("span", "start"))
    assert {(Span.HOURS_2, day(20, 14)), (Span.HOURS_4, day(20, 12)), (Span.HOURS_8, day(20, 8))} < today
    assert (Span.HOURS_2, day(20, 16)) not in today
    assert_blocks_add_up()
    for start in (
        datetime(2026, 3, 18, 1, 20, tzinfo=UTC),
        day(19, 2),
        datetime(2026, 3, 19, 14, 59, 31, tzinfo=UTC),
    ):
        for end in (NOW, datetime(2026, 3, 19, 22, 40, tzinfo=UTC), datetime(2026, 3, 20, 12, 5, tzinfo=UTC)):
            for viewer in (admin_user, lead, researcher):
                for group, (got, want) in figures(viewer, start=start, end=end).items():
                    assert got == want, (viewer, group, start, end)


def test_blocks_of_hours_are_summed_for_hours_rolled_without_them_and_pruned_with_their_days(
    gpus, team, researcher, admin_user, settings
):
    settings.PORTAL_SPEND_HOUR_DAYS = 3
    settings.PORTAL_SPEND_8H_DAYS = 0  # no blocks kept beyond the hours
    settings.PORTAL_TELEMETRY_MINUTE_DAYS = 1  # the hours of closed days can no longer be rolled
    make_hold(gpu=gpus[0], user=researcher, team=team, started_at=day(16, 6), ended_at=day(19, 20))
    spend_rollup_due(now=NOW, days_per_run=100)
    blocks = SpendPeriod.objects.filter(span__in=[Span.HOURS_2, Span.HOURS_4, Span.HOURS_8])
    made = set(blocks.values_list("span", "start"))
    # As a database rolled before blocks of hours were kept: hours only.
    SpendRollup.objects.filter(span__in=[Span.HOURS_2, Span.HOURS_4, Span.HOURS_8]).delete()
    blocks.delete()
    SpendPeriod.objects.filter(span=Span.HOUR, start=day(18, 5)).delete()  # one hour missing too
    SpendRollup.objects.filter(span=Span.HOUR, start=day(18, 5)).delete()
    run = spend_rollup_due(now=NOW, days_per_run=100)
    assert run.hours > 0
    missing = {(Span.HOURS_2, day(18, 4)), (Span.HOURS_4, day(18, 4)), (Span.HOURS_8, day(18, 0))}
    # Closed days at once; today's come with its next roll-up, when hours are rolled anyway.
    assert set(blocks.values_list("span", "start")) == {b for b in made if b[1] < day(20)} - missing
    assert not SpendPeriod.objects.filter(span=Span.HOUR, start=day(18, 5)).exists()  # no minutes left
    assert_blocks_add_up()
    assert_exact(admin_user, team, start=datetime(2026, 3, 17, 1, 10, tzinfo=UTC), end=NOW)
    assert spend_rollup_due(now=NOW, days_per_run=100).hours == 0  # nothing left to do
    later = NOW + timedelta(days=2)
    spend_rollup_due(now=later, days_per_run=100)
    assert min(blocks.values_list("start", flat=True)) == day(19)
    assert not SpendRollup.objects.filter(span__in=HOUR_SPANS, start__lt=day(19)).exists()


def test_migration_0012_marks_the_totals_of_workloads_held_under_several_users(gpus, team, researcher, lead):
    shared, single = [make_sandbox(owner=researcher, team=team, gpu_type=gpus[0].gpu_type) for _ in range(2)]
    make_hold(gpu=gpus[0], user=researcher, team=team, workload=shared, started_at=day(8), ended_at=day(9))
    make_hold(gpu=gpus[0], user=lead, team=team, workload=shared, started_at=day(10), ended_at=day(11))
    make_hold(gpu=gpus[1], user=researcher, team=team, workload=single, started_at=day(8), ended_at=day(9))
    spend_rollup_due(now=NOW, days_per_run=100)
    WorkloadSpend.objects.update(shared=False)  # as the totals were before the flag

    importlib.import_module("portal.spend.migrations.0012_workload_spend_shared").mark_shared(
        django_apps, None
    )

    flags = sorted(WorkloadSpend.objects.values_list("workload_id", "shared"))
    assert flags == [(shared.pk, True), (shared.pk, True), (single.pk, False)]
