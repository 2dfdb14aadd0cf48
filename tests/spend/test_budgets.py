"""Budgets: the forecast to the month's end and the day the budget runs out, exact in Decimal;
leads told once per threshold per month; the 100 % policy (warn, block with the overage shown,
stop after a grace period); the budget API for members and leads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
import time_machine
from rest_framework.test import APIClient

from portal.accounts.models import BudgetAlert, Notification, Team
from portal.audit.models import AuditEvent
from portal.fleet.models import StorageHold
from portal.spend.budgets import budget_forecast, percent_label
from portal.workloads.models import Workload, WorkloadState
from portal.workloads.policy import request_verdict
from portal.workloads.services import budgets_watch
from tests.rows import make_sandbox

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)  # 10 days and 12 hours before December


@pytest.fixture
def spending(team, researcher, whole_gpus):
    """A sandbox holding a whole GPU at $4/h for 2 h so far, expiring in 10 h; a 100 GB home."""
    team.monthly_budget = Decimal("100.00")
    team.save()
    with time_machine.travel(NOW, tick=False):
        sandbox = make_sandbox(
            owner=researcher, team=team, gpu=whole_gpus[0], hours_ago=2, price=Decimal("4")
        )
        Workload.objects.filter(pk=sandbox.pk).update(expires_at=NOW + timedelta(hours=10))
        StorageHold.objects.create(user=researcher, team=team, key="home-alice", what="home of alice", size_gb=100,
                                   price_per_gb_month=Decimal("0.10"), started_at=NOW)  # fmt: skip
    return sandbox


def test_the_forecast_counts_live_work_until_its_expiry_and_storage_to_the_months_end(spending, team):
    forecast = budget_forecast(team=team, now=NOW)
    assert forecast.spent == Decimal("8.00")
    storage_hourly = Decimal("100") * Decimal("0.10") / 730
    assert forecast.hourly == Decimal("4") + storage_hourly
    hours_left = Decimal(10 * 24 + 12)
    expected = Decimal("8") + Decimal("4") * 10 + storage_hourly * hours_left
    assert forecast.month_end == expected.quantize(Decimal("0.01"))
    assert forecast.runs_out_at is None  # $48.34 by the month's end, under $100
    team.monthly_budget = Decimal("20.00")
    team.save()
    runs_out = budget_forecast(team=team, now=NOW).runs_out_at
    # $12 left at $4.0137/h: 2.99 h from now
    assert abs((runs_out - NOW).total_seconds() - float(Decimal(12) / (4 + storage_hourly) * 3600)) < 1


def test_leads_are_told_once_per_threshold_per_month(spending, team, lead):
    team.monthly_budget = Decimal("10.00")
    team.budget_thresholds = [50, 80]
    team.save()
    with time_machine.travel(NOW, tick=False):
        # $8.00 of $10: both passed at once, one alert of the higher (the lower recorded with it)
        assert budgets_watch().alerts == [("vision", 80)]
        assert budgets_watch().alerts == []
    assert Notification.objects.filter(user=lead, message__contains="80 % of its").count() == 1
    assert Notification.objects.filter(user=lead, kind="budget").count() == 1
    assert BudgetAlert.objects.count() == 2
    Workload.objects.filter(pk=spending.pk).update(expires_at=datetime(2026, 12, 2, tzinfo=UTC))
    with time_machine.travel(datetime(2026, 12, 1, 3, 0, tzinfo=UTC), tick=False):
        assert budgets_watch().alerts == [("vision", 80)]  # a new month: $12 of $10 again
    assert AuditEvent.objects.filter(action="team.budget_alert").count() == 2
    assert Notification.objects.filter(user=lead, message__contains="120 % of its $10.00").count() == 1


def test_block_shows_the_overage_and_warn_lets_it_pass(spending, team):
    team.monthly_budget = Decimal("20.00")
    team.save()
    verdict = request_verdict(team=team, count=1, is_slice=False, replicas=1, lifetime_hours=Decimal(4),
                              hourly_cost=Decimal(5), share=Fraction(1), now=NOW)  # fmt: skip
    assert not verdict.auto_approved
    assert "($12.00 left; this costs up to $20.00, $8.00 over)" in verdict.why_needed
    team.budget_policy = Team.BudgetPolicy.WARN
    team.save()
    verdict = request_verdict(team=team, count=1, is_slice=False, replicas=1, lifetime_hours=Decimal(4),
                              hourly_cost=Decimal(5), share=Fraction(1), now=NOW)  # fmt: skip
    assert verdict.auto_approved


def test_stop_ends_running_work_after_the_grace_and_a_raised_budget_lifts_it(
    run_jobs, spending, team, researcher, lead
):
    team.monthly_budget = Decimal("5.00")
    team.budget_policy, team.budget_stop_grace_hours = Team.BudgetPolicy.STOP, 2
    team.save()
    with time_machine.travel(NOW, tick=False):
        assert budgets_watch().stops_set == ["vision"]
    team.refresh_from_db()
    assert team.budget_stop_at == NOW + timedelta(hours=2)
    assert Notification.objects.filter(user=researcher, message__contains="running work ends at").exists()
    with time_machine.travel(NOW + timedelta(hours=1), tick=False):
        assert budgets_watch().ended == []  # still in its grace
    with time_machine.travel(NOW + timedelta(hours=2), tick=False):
        watch = run_jobs(budgets_watch)
    assert watch.ended == [spending.pk]
    spending.refresh_from_db()
    assert spending.state in (WorkloadState.TERMINATING, WorkloadState.TERMINATED)
    assert AuditEvent.objects.filter(action="sandbox.budget_stopped").exists()
    team.monthly_budget = Decimal("1000")
    team.save()
    with time_machine.travel(NOW + timedelta(hours=3), tick=False):
        assert budgets_watch().stops_lifted == ["vision"]
    team.refresh_from_db()
    assert team.budget_stop_at is None


def test_the_budget_api_for_members_and_leads(spending, team, researcher, lead, other_researcher):
    api = APIClient()
    api.force_authenticate(researcher)
    shown = api.get("/api/v1/teams/vision/budget").json()
    assert shown["budget"] == "100.00" and shown["thresholds"] == [50, 80, 100] and shown["policy"] == "block"
    assert api.patch("/api/v1/teams/vision/budget", {"policy": "warn"}, format="json").status_code == 403
    api.force_authenticate(other_researcher)
    assert api.get("/api/v1/teams/vision/budget").status_code == 404
    api.force_authenticate(lead)
    changed = api.patch("/api/v1/teams/vision/budget", {"thresholds": [90, 25], "policy": "stop",
                                                      "stop_grace_hours": 6}, format="json")  # fmt: skip
    assert changed.status_code == 200, changed.json()
    assert (changed.json()["thresholds"], changed.json()["policy"], changed.json()["stop_grace_hours"]) == (
        [25, 90], "stop", 6)  # fmt: skip
    for bad in ({"thresholds": [0]}, {"policy": "panic"}, {"stop_grace_hours": 0}, {"thresholds": "50"}):
        answer = api.patch("/api/v1/teams/vision/budget", bad, format="json")
        assert answer.status_code == 400 and "error" in answer.json(), bad
    team.refresh_from_db()
    assert team.budget_policy == "stop"


def test_the_spend_page_shows_the_forecast(spending, team, lead_client):
    page = lead_client.get("/spend/").content.decode()
    assert (
        'id="budget-vision"' in page
        and "by the month's end" in page
        and "Leads are told at 50, 80, 100 %" in page
    )


@pytest.mark.parametrize(
    ("amount", "budget", "label"),
    [
        ("0.00", "50000.00", "0"),
        ("0.01", "50000.00", "under 1"),
        ("466.86", "50000.00", "under 1"),
        ("499.99", "50000.00", "under 1"),
        ("500.00", "50000.00", "1"),
        ("96.82", "200.00", "48"),
        ("302.00", "200.00", "151"),
        ("5.00", "0.00", "100"),
    ],
)
def test_a_percentage_that_rounds_down_to_0_reads_under_1(amount, budget, label):
    assert percent_label(Decimal(amount), Decimal(budget)) == label


def test_a_small_spend_of_a_large_budget_reads_under_1_percent_on_the_page(spending, team, lead_client):
    team.monthly_budget = Decimal("50000.00")  # $8 spent by NOW, $48 and storage by the month's end
    team.save()
    with time_machine.travel(NOW, tick=False):
        page = lead_client.get("/spend/").content.decode()
        assert budget_forecast(team=team, now=NOW).used_percent == 0  # the API's whole number
    assert "left (under 1 %)" in page and "by the month's end (under 1 %)" in page


def test_a_budget_gone_over_reads_over_by_how_much_and_spent_not_a_time_it_runs_out(
    spending, team, lead_client
):
    team.monthly_budget = Decimal("5.00")  # $8 spent by NOW
    team.save()
    with time_machine.travel(NOW, tick=False):
        page = lead_client.get("/spend/").content.decode()
        budget_page = lead_client.get(f"/teams/{team.slug}/budget/").content.decode()
    assert budget_forecast(team=team, now=NOW).runs_out_at == NOW  # the API's: the time of reading
    for shown in (page, budget_page):
        assert '<strong class="money">$3.00</strong> over the budget (160 %)' in shown
        assert "$-3.00" not in shown and "runs out" not in shown and "; the budget is spent." in shown
        # drawn full: a meter stops at its max
        assert '<meter class="meter" min="0" max="100" value="160"' in shown
    assert "over by $3.00" in page  # the budget left, day by day, under the cumulative chart
