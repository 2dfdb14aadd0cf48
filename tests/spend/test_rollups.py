"""Roll-ups give the same figures, to the cent, as costing every hold one by one (tests/spend/
reference.py): on random holds across day boundaries, open ones, ones of workloads past their
expiry, a workload's holds under several users, slices, price changes, storage and idle minutes;
over whole days, blocks of days, partial-day edges (of days rolled by the hour and of older ones)
and today."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from portal.fleet.models import Allocation, Gpu, GpuMinute, StorageHold
from portal.spend import selectors
from portal.spend.models import Span, SpendOpenHold, SpendPeriod, SpendRollup, SpendWatermark, WorkloadSpend
from portal.spend.services import spend_rollup_due
from portal.workloads.models import Workload
from tests.rows import make_sandbox
from tests.spend import reference

pytestmark = pytest.mark.django_db
BASE = datetime(2026, 3, 1, tzinfo=UTC)
NOW = BASE + timedelta(days=22, hours=13, minutes=27, seconds=5, microseconds=250)
PRICES = ["6.88", "2.5000", "0.0001", "13.3333", "1.0000"]
SHARES = [(1, 1), (1, 7), (3, 7), (2, 8)]

seconds_in_range = st.integers(0, int((NOW - BASE).total_seconds()) + 3600)
holds_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "who": st.integers(0, 2),
            "workload": st.one_of(st.none(), st.integers(0, 3)),
            # a workload's hold taken under another user (and team): its totals are several (shared)
            "as_owner": st.booleans(),
            "start": seconds_in_range,
            "micro": st.integers(0, 999_999),
            "length": st.one_of(st.none(), st.integers(0, 4 * 86400)),
            "share": st.sampled_from(SHARES),
            "price": st.sampled_from(PRICES),
        }
    ),
    min_size=1,
    max_size=14,
)
storage_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "who": st.integers(0, 2),
            "start": seconds_in_range,
            "length": st.one_of(st.none(), st.integers(1, 10 * 86400)),
            "size": st.sampled_from([1, 50, 120]),
            "price": st.sampled_from(["0.1000", "0.0800"]),
        }
    ),
    max_size=3,
)
minutes_strategy = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, int((NOW - BASE).total_seconds()) // 60), st.floats(0, 100)),
    max_size=25,
)
ranges_strategy = st.lists(
    st.tuples(st.integers(-86400, 24 * 86400), st.integers(1, 23 * 86400)), min_size=1, max_size=1
)


@pytest.fixture
def people(fleet, team, other_team, researcher, lead, other_researcher, admin_user):
    return {
        "holders": [(researcher, team), (lead, team), (other_researcher, other_team)],
        "viewers": [admin_user, lead, researcher],
        "teams": [team, other_team],
        "gpus": list(Gpu.objects.order_by("pk")[:4]),
    }


def _clear() -> None:
    for model in (
        SpendRollup, SpendPeriod, WorkloadSpend, SpendOpenHold, SpendWatermark, Allocation, StorageHold, GpuMinute, Workload
    ):  # fmt: skip
        model.objects.all().delete()


def _load(people, holds, storage, minutes, *, expired: bool) -> None:
    workloads = {}
    for n in range(4):
        owner, team = people["holders"][n % 3]
        # workload 3 expired before now, while one of its holds may still be open (sweep not run)
        expires = BASE + timedelta(days=20, hours=5) if (expired and n == 3) else NOW + timedelta(days=30)
        workloads[n] = make_sandbox(
            owner=owner, team=team, gpu_type=people["gpus"][0].gpu_type, expires_at=expires
        )
    for n, spec in enumerate(holds):
        owner, team = people["holders"][spec["who"]]
        workload = workloads[spec["workload"]] if spec["workload"] is not None else None
        if workload is not None and spec["as_owner"]:
            owner, team = workload.owner, workload.team
        start = BASE + timedelta(seconds=spec["start"], microseconds=spec["micro"])
        end = None if spec["length"] is None else start + timedelta(seconds=spec["length"])
        if end is not None and end > NOW:
            end = None
        Allocation.objects.create(
            gpu=people["gpus"][n % 4],
            mig_profile="" if spec["share"] == (1, 1) else "1g.10gb",
            workload=workload,
            team=team,
            user=owner,
            gpu_type=people["gpus"][0].gpu_type,
            share_numerator=spec["share"][0],
            share_denominator=spec["share"][1],
            price_per_hour=Decimal(spec["price"]),
            started_at=min(start, NOW),
            ended_at=end,
            released_at=end or NOW,
        )
    for spec in storage:
        owner, team = people["holders"][spec["who"]]
        start = min(BASE + timedelta(seconds=spec["start"]), NOW)
        end = None if spec["length"] is None else start + timedelta(seconds=spec["length"])
        StorageHold.objects.create(
            user=owner, team=team, what="home", size_gb=spec["size"], price_per_gb_month=Decimal(spec["price"]),
            started_at=start, ended_at=end if end is not None and end < NOW else None,
        )  # fmt: skip
    for gpu_index, minute, utilization in minutes:
        gpu = people["gpus"][gpu_index]
        GpuMinute.objects.get_or_create(
            device=gpu.uuid,
            minute=BASE + timedelta(minutes=minute),
            defaults={"gpu": gpu, "samples": 2, "utilization_sum": 2 * utilization, "utilization_samples": 2},
        )


def assert_same_figures(people, ranges, *, viewers=None) -> None:
    for viewer in viewers or people["viewers"]:
        for offset, length in ranges:
            start = BASE + timedelta(seconds=offset)
            for end in (start + timedelta(seconds=length), NOW):
                if end <= start:
                    continue
                for group in selectors.GROUPS:
                    # the workload report with a bar from its largest total inside, and from its third
                    for limit in (1, 3) if group == "workload" else (2,):
                        got = selectors.spend_grouped(
                            user=viewer, group_by=group, start=start, end=end, now=NOW, limit=limit
                        )
                        want = reference.spend_grouped(
                            user=viewer, group_by=group, start=start, end=end, now=NOW, limit=limit
                        )
                        labels = group != "workload"
                        assert reference.as_tuples(got, labels=labels) == reference.as_tuples(
                            want, labels=labels
                        ), (viewer.username, group, start, end, limit)
    for team in people["teams"]:
        assert selectors.team_month_spend(team=team, now=NOW) == reference.team_month_spend(
            team=team, now=NOW
        )
    by_team = selectors.teams_month_spend(now=NOW)
    assert {t: c for t, c in by_team.items() if c} == {
        t.pk: reference.team_month_spend(team=t, now=NOW)
        for t in people["teams"]
        if reference.team_month_spend(team=t, now=NOW)
    }


@pytest.mark.long
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    holds=holds_strategy,
    storage=storage_strategy,
    minutes=minutes_strategy,
    ranges=ranges_strategy,
    expired=st.booleans(),
    end_one=st.one_of(st.none(), st.tuples(st.integers(0, 13), st.integers(0, 20 * 86400))),
)
def test_rolled_up_figures_equal_every_hold_costed_one_by_one(
    people, holds, storage, minutes, ranges, expired, end_one, settings
):
    # The last four days by the hour too: edges of both kinds (every range that ends now in rolled
    # hours, most starts in older days' blocks of 8 hours), and a roll-up short enough per example.
    settings.PORTAL_SPEND_HOUR_DAYS = 4
    _clear()
    _load(people, holds, storage, minutes, expired=expired)
    spend_rollup_due(now=NOW, days_per_run=100)
    assert SpendPeriod.objects.filter(span=Span.DAY, stale=False).exists()
    assert_same_figures(people, ranges)
    if end_one is not None:
        # A hold open when its days were rolled is ended in the past: reports see it at once...
        hold = Allocation.objects.filter(ended_at__isnull=True).order_by("pk")[end_one[0] % 14 :].first()
        if hold is not None:
            Allocation.objects.filter(pk=hold.pk).update(
                ended_at=max(hold.started_at, BASE + timedelta(seconds=end_one[1]))
            )
            assert_same_figures(people, ranges, viewers=people["viewers"][:1])
            # ... and once the workers have rolled those days again, from the roll-ups.
            spend_rollup_due(now=NOW, days_per_run=100)
            assert not SpendPeriod.objects.filter(stale=True, span=Span.DAY).exists()
            assert_same_figures(people, ranges, viewers=people["viewers"][:1])


def test_a_total_exactly_on_a_half_cent_made_of_sevenths_rounds_up(people, admin_user):
    """Seven holds of a seventh of a GPU at $1/h for 18 s, each on its own day: each costs
    1/1400 of a dollar (0.000714285...), together exactly half a cent: 0.01, not 0.00."""
    _clear()
    researcher, team = people["holders"][0]
    for n in range(7):
        start = BASE + timedelta(days=n, hours=5)
        Allocation.objects.create(
            gpu=people["gpus"][0], mig_profile="1g.10gb", team=team, user=researcher,
            gpu_type=people["gpus"][0].gpu_type, share_numerator=1, share_denominator=7,
            price_per_hour=Decimal("1.0000"), started_at=start, ended_at=start + timedelta(seconds=18),
            released_at=start + timedelta(seconds=18),
        )  # fmt: skip
    spend_rollup_due(now=NOW, days_per_run=100)
    window = {"start": BASE, "end": NOW, "now": NOW}
    (row,) = selectors.spend_grouped(user=admin_user, group_by="team", **window)
    assert row.cost == Decimal("0.01")
    assert row.gpu_hours == Decimal("0.00")  # 7 x 18 s / 7 = 18 s of a GPU
    assert selectors.team_month_spend(team=team, now=NOW) == Decimal("0.01")
    assert [r.cost for r in selectors.spend_grouped(user=admin_user, group_by="day", **window)] == [
        Decimal("0.00")
    ] * 7
