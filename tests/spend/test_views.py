"""The spend page: exact figures by role and grouping, and budgets for leads."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from portal.fleet.models import Allocation, Gpu

JANUARY = {"start": "2026-01-01", "end": "2026-01-31"}


def hold(*, user, team, gpu: Gpu, start: datetime, hours: float, sevenths: int = 7) -> Allocation:
    """A hold of `sevenths`/7 of a GPU at $6.88 an hour."""
    return Allocation.objects.create(
        gpu=gpu,
        team=team,
        user=user,
        gpu_type=gpu.gpu_type,
        share_numerator=sevenths,
        share_denominator=7,
        mig_profile="" if sevenths == 7 else "1g.10gb",
        price_per_hour=Decimal("6.88"),
        started_at=start,
        ended_at=start + timedelta(hours=hours),
        released_at=start + timedelta(hours=hours),
    )


@pytest.fixture
def january(researcher, other_researcher, lead, team, other_team, whole_gpus):
    hold(user=researcher, team=team, gpu=whole_gpus[0], start=datetime(2026, 1, 10, 10, tzinfo=UTC), hours=3)
    hold(
        user=researcher,
        team=team,
        gpu=whole_gpus[1],
        start=datetime(2026, 1, 12, 8, tzinfo=UTC),
        hours=7,
        sevenths=1,
    )
    hold(user=lead, team=team, gpu=whole_gpus[2], start=datetime(2026, 1, 10, 22, tzinfo=UTC), hours=4)
    hold(
        user=other_researcher,
        team=other_team,
        gpu=whole_gpus[3],
        start=datetime(2026, 1, 11, tzinfo=UTC),
        hours=1,
    )


def test_a_researcher_sees_exactly_their_own_spend(researcher_client, january):
    page = researcher_client.get("/spend/", {**JANUARY, "group_by": "user"}).content.decode()

    assert 'id="spend-total">$27.52<' in page  # 3 h x 6.88 + 7 h x 6.88 / 7
    assert "Alice" in page
    assert not re.search(r"\b(carol|Bob)\b", page)  # a word: the random CSRF token can hold the letters
    assert "4.00" in page  # GPU-hours: 3 + 1
    # no agent read a minute idle: the total says so with a dash, as its rows do
    assert 'id="spend-idle">\u2013<' in page


def test_a_lead_sees_the_team_grouped_by_day(lead_client, january):
    page = lead_client.get("/spend/", {**JANUARY, "group_by": "day"}).content.decode()

    rows = {
        day: page.split(f'<tr><td class="stack-title">{day}')[1].split("</tr>")[0]
        for day in ("2026-01-10", "2026-01-11", "2026-01-12")
    }
    assert "$34.40" in rows["2026-01-10"]  # alice 3 h + bob 2 h before midnight
    assert "$13.76" in rows["2026-01-11"]  # bob's 2 h after midnight; carol's team is not his
    assert "$6.88" in rows["2026-01-12"]
    assert 'id="spend-total">$55.04<' in page
    # without JavaScript no chart is drawn: each says where its figures are instead of "Loading…"
    assert page.count("data-chart-waits>The figures are under <em>Show as table</em>") == 3


def test_an_admin_sees_every_team(admin_client, january):
    page = admin_client.get("/spend/", {**JANUARY, "group_by": "team"}).content.decode()

    assert "Vision" in page and "NLP" in page
    assert 'id="spend-total">$61.92<' in page


def test_the_range_defaults_to_this_month(researcher_client, researcher):
    today = timezone.now().date()

    page = researcher_client.get("/spend/").content.decode()

    assert f'value="{today.replace(day=1).isoformat()}"' in page
    assert f'value="{today.isoformat()}"' in page


def test_a_lead_sees_the_team_budget_used_and_left(lead_client, lead, team, whole_gpus):
    month_start = timezone.now().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    hold(user=lead, team=team, gpu=whole_gpus[0], start=month_start, hours=1)

    page = lead_client.get("/spend/").content.decode()

    assert '$6.88</strong> used of <span class="money">$50,000.00</span>' in page
    assert "$49,993.12</strong> left" in page

    team.monthly_budget = 0  # nothing may be spent without a lead: not "100 % used"
    team.save()
    page = lead_client.get("/spend/").content.decode()
    assert (
        '$6.88</strong> used of a budget of <span class="money">$0.00</span>: every request and extension '
        "that costs anything waits for a lead." in page
    )
    assert "(100 %)" not in page and "<meter" not in page


def test_researchers_see_no_team_budget(researcher_client, researcher):
    assert "used of" not in researcher_client.get("/spend/").content.decode()


def test_an_end_before_the_start_is_an_error(researcher_client, researcher):
    page = researcher_client.get("/spend/", {"start": "2026-02-01", "end": "2026-01-01"}).content.decode()

    assert "The end is before the start." in page
