"""Per-user and per-project monthly budgets within a team: spend exact to the cent, the forecast
and the day each runs out from the team's code, alerts once per threshold per month (to the leads,
and the user for theirs; a second worker cannot send twice), the team's block and stop policies
applied to that user's or project's work only, and the API (members read, leads write)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
import time_machine
from django.db import IntegrityError, transaction
from rest_framework.test import APIClient

from portal.accounts.models import Notification, Team
from portal.audit.models import AuditEvent
from portal.fleet.models import StorageHold
from portal.spend.budgets import target_forecasts
from portal.spend.models import Budget, BudgetAlertSent
from portal.spend.selectors import month_start
from portal.workloads.models import Workload, WorkloadState
from portal.workloads.policy import extension_verdict, request_verdict
from portal.workloads.services import budgets_watch
from tests.conftest import field_html
from tests.rows import make_hold, make_sandbox
from tests.spend import reference

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)  # 10 days and 12 hours before December
URL = "/api/v1/teams/vision/budgets"


@pytest.fixture
def spending(team, researcher, lead, whole_gpus):
    """Alice's sandbox of project llm-eval holds a whole GPU at $4/h for 2 h so far, expiring in
    10 h; Bob's, of no project, $3/h for 1 h; Alice has a 100 GB home."""
    team.monthly_budget = Decimal("100000.00")
    team.save()
    with time_machine.travel(NOW, tick=False):
        mine = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0], hours_ago=2, price=Decimal("4"),
                            project="llm-eval")  # fmt: skip
        theirs = make_sandbox(owner=lead, team=team, gpu=whole_gpus[1], hours_ago=1, price=Decimal("3"))
        Workload.objects.filter(pk=mine.pk).update(expires_at=NOW + timedelta(hours=10))
        Workload.objects.filter(pk=theirs.pk).update(expires_at=NOW + timedelta(hours=30))
        StorageHold.objects.create(user=researcher, team=team, key="home-alice", what="home of alice", size_gb=100,
                                   price_per_gb_month=Decimal("0.10"), started_at=NOW)  # fmt: skip
    return {"mine": mine, "theirs": theirs}


def _budget(team, kind, amount, *, user=None, project=""):
    return Budget.objects.create(
        team=team, kind=kind, user=user, project=project, monthly_amount=Decimal(amount)
    )


def test_user_and_project_forecasts_use_the_teams_code_exactly(spending, team, researcher):
    mine = _budget(team, "user", "20.00", user=researcher)
    project = _budget(team, "project", "10.00", project="llm-eval")

    (_, user_forecast), (_, project_forecast) = target_forecasts(team=team, budgets=[mine, project], now=NOW)

    storage_hourly = Decimal("100") * Decimal("0.10") / 730
    assert (user_forecast.kind, user_forecast.target) == ("user", "alice")
    assert user_forecast.spent == Decimal("8.00")  # 2 h at $4; the home starts now
    assert user_forecast.hourly == Decimal("4") + storage_hourly
    expected = Decimal("8") + Decimal("4") * 10 + storage_hourly * Decimal(10 * 24 + 12)
    assert user_forecast.month_end == expected.quantize(Decimal("0.01"))
    # $12 left at $4.0137/h: 2.99 h from now
    runs_out = (user_forecast.runs_out_at - NOW).total_seconds()
    assert abs(runs_out - float(Decimal(12) / (4 + storage_hourly) * 3600)) < 1
    # A project counts its workloads' GPU work, no storage: $2 left at $4/h, half an hour.
    assert (project_forecast.spent, project_forecast.hourly) == (Decimal("8.00"), Decimal("4"))
    assert project_forecast.month_end == Decimal("48.00")
    assert project_forecast.runs_out_at == NOW + timedelta(minutes=30)


def test_a_users_spend_is_the_reference_figure_to_the_cent(team, researcher, lead, admin_user, whole_gpus):
    """Seven holds of a seventh of a GPU at $1/h for 18 s: 1/1400 of a dollar each, exactly half a
    cent together, which rounds up; Bob's holds do not count."""
    start = month_start(NOW)
    for n in range(7):
        at = start + timedelta(days=n, hours=5)
        make_hold(gpu=whole_gpus[0], user=researcher, team=team, started_at=at, ended_at=at + timedelta(seconds=18),
                  mig_profile="1g.10gb", share=(1, 7), price=Decimal("1.0000"))  # fmt: skip
    make_hold(gpu=whole_gpus[1], user=lead, team=team, started_at=start, ended_at=start + timedelta(hours=1))
    budget = _budget(team, "user", "1.00", user=researcher)

    ((_, forecast),) = target_forecasts(team=team, budgets=[budget], now=NOW)

    want = reference.spend_grouped(user=admin_user, group_by="user", start=start, end=NOW, team=team, now=NOW)
    assert forecast.spent == next(r.cost for r in want if r.key == "alice") == Decimal("0.01")


def test_alerts_go_once_per_threshold_per_month_to_the_leads_and_the_user(spending, team, researcher, lead):
    team.budget_thresholds = [50, 80]
    team.save()
    budget = _budget(team, "user", "10.00", user=researcher)  # $8.00 of $10
    _budget(team, "project", "100.00", project="llm-eval")  # 8 %: nothing to tell
    with time_machine.travel(NOW, tick=False):
        assert budgets_watch().target_alerts == [("vision", "user", "alice", 80)]  # the higher of both
        assert budgets_watch().target_alerts == []
    for person in (researcher, lead):
        assert (
            Notification.objects.filter(user=person, message__contains="alice's spend this month").count()
            == 1
        )
    assert BudgetAlertSent.objects.filter(budget=budget).count() == 2
    Workload.objects.filter(pk=spending["mine"].pk).update(expires_at=datetime(2026, 12, 2, tzinfo=UTC))
    with time_machine.travel(datetime(2026, 12, 1, 3, 0, tzinfo=UTC), tick=False):
        # a new month: $12 of $10 again (3 h at $4)
        assert budgets_watch().target_alerts == [("vision", "user", "alice", 80)]
    assert AuditEvent.objects.filter(action="team.target_budget_alert").count() == 2
    # $12.04 (the storage too): the share actually spent, not the threshold
    assert Notification.objects.filter(user=lead, message__contains="is $12.04, 120 % of its $10.00").exists()


def test_a_second_worker_cannot_send_the_same_alert(team, researcher):
    budget = _budget(team, "user", "10.00", user=researcher)
    month = NOW.date().replace(day=1)
    BudgetAlertSent.objects.create(
        budget=budget, month=month, threshold=50, spent=Decimal("5.00"), sent_at=NOW
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        BudgetAlertSent.objects.create(
            budget=budget, month=month, threshold=50, spent=Decimal("5.00"), sent_at=NOW
        )


def test_block_holds_a_request_over_the_users_or_projects_budget_with_the_overage(
    spending, team, researcher, lead
):
    _budget(team, "user", "20.00", user=researcher)  # $12 left
    _budget(team, "project", "9.00", project="llm-eval")  # $1 left
    ask = {"team": team, "count": 1, "is_slice": False, "replicas": 1, "lifetime_hours": Decimal(4),
           "hourly_cost": Decimal(5), "share": Fraction(1), "now": NOW}  # fmt: skip

    mine = request_verdict(**ask, user_id=researcher.pk)
    assert not mine.auto_approved
    assert "alice's monthly budget ($12.00 left; this costs up to $20.00, $8.00 over)" in mine.why_needed
    assert "project llm-eval" not in mine.why_needed
    in_project = request_verdict(**ask, user_id=lead.pk, project="llm-eval")
    assert (
        "project llm-eval's monthly budget ($1.00 left; this costs up to $20.00, $19.00 over)"
        in in_project.why_needed
    )
    assert request_verdict(**ask, user_id=lead.pk).auto_approved  # Bob has no budget of his own
    extension = extension_verdict(workload=spending["mine"], hours=Decimal(10), now=NOW)
    assert not extension.auto_approved and "alice's monthly budget" in extension.why_needed
    team.budget_policy = Team.BudgetPolicy.WARN
    team.save()
    assert request_verdict(**ask, user_id=researcher.pk, project="llm-eval").auto_approved


def test_stop_ends_only_that_users_running_work_after_the_grace(run_jobs, spending, team, researcher, lead):
    team.budget_policy, team.budget_stop_grace_hours = Team.BudgetPolicy.STOP, 2
    team.save()
    budget = _budget(team, "user", "5.00", user=researcher)
    with time_machine.travel(NOW, tick=False):
        assert budgets_watch().stops_set == ["vision/user/alice"]
    budget.refresh_from_db()
    assert budget.stop_at == NOW + timedelta(hours=2)
    assert Notification.objects.filter(user=researcher, message__contains="running work ends at").exists()
    with time_machine.travel(NOW + timedelta(hours=2), tick=False):
        watch = run_jobs(budgets_watch)
    assert watch.ended == [spending["mine"].pk]
    for workload, states in ((spending["mine"], (WorkloadState.TERMINATING, WorkloadState.TERMINATED)),
                             (spending["theirs"], (WorkloadState.RUNNING,))):  # fmt: skip
        workload.refresh_from_db()
        assert workload.state in states
    Budget.objects.filter(pk=budget.pk).update(monthly_amount=Decimal("1000"))
    with time_machine.travel(NOW + timedelta(hours=3), tick=False):
        assert budgets_watch().stops_lifted == ["vision/user/alice"]
    budget.refresh_from_db()
    assert budget.stop_at is None


@time_machine.travel(NOW, tick=False)
def test_the_budgets_api_leads_write_members_read_others_find_nothing(
    spending, team, researcher, lead, other_researcher
):
    api = APIClient()
    api.force_authenticate(lead)
    put = api.put(f"{URL}/user/alice", {"monthly_amount": "20.00"}, format="json")
    assert put.status_code == 200, put.json()
    assert put.json()["monthly_amount"] == "20.00" and put.json()["spent"] == "8.00"
    assert put.json()["target"] == "alice" and put.json()["policy"] == "block"
    assert api.put(f"{URL}/project/llm-eval", {"monthly_amount": "9.50"}, format="json").status_code == 200
    changed = api.put(f"{URL}/user/alice", {"monthly_amount": "25"}, format="json")
    assert changed.json()["monthly_amount"] == "25.00"
    assert Budget.objects.filter(team=team).count() == 2

    api.force_authenticate(researcher)
    listed = api.get(URL).json()
    assert [(b["kind"], b["target"], b["monthly_amount"]) for b in listed["budgets"]] == [
        ("project", "llm-eval", "9.50"), ("user", "alice", "25.00")]  # fmt: skip
    assert api.get(f"{URL}/project/llm-eval").json()["forecast_month_end"] == "48.00"
    assert api.put(f"{URL}/user/alice", {"monthly_amount": "99"}, format="json").status_code == 403
    assert api.delete(f"{URL}/user/alice").status_code == 403

    api.force_authenticate(other_researcher)
    assert api.get(URL).status_code == 404
    assert api.get(f"{URL}/user/alice").status_code == 404

    api.force_authenticate(lead)
    for path, body in (
        ("user/alice", {"monthly_amount": "-1"}),
        ("user/alice", {"monthly_amount": "1.001"}),
        ("user/alice", {"monthly_amount": "lots"}),
        ("project/Bad_Label", {"monthly_amount": "5"}),
    ):
        answer = api.put(f"{URL}/{path}", body, format="json")
        assert answer.status_code == 400 and "error" in answer.json(), (path, body)
    assert (
        api.put(f"{URL}/user/carol", {"monthly_amount": "5"}, format="json").status_code == 404
    )  # not a member
    assert api.put(f"{URL}/team/vision", {"monthly_amount": "5"}, format="json").status_code == 404
    assert Budget.objects.get(team=team, kind="user").monthly_amount == Decimal("25.00")  # nothing changed
    assert api.delete(f"{URL}/user/alice").status_code == 204
    assert api.get(f"{URL}/user/alice").status_code == 404
    assert api.delete(f"{URL}/user/alice").status_code == 404


def test_leads_set_and_remove_budgets_on_the_web_members_only_read(
    spending, team, researcher, lead_client, researcher_client, other_client
):
    url = "/teams/vision/budgets/"
    assert 'hx-get="/teams/vision/budgets/"' in lead_client.get("/teams/vision/budget/").content.decode()
    hx = {"HTTP_HX_REQUEST": "true"}
    page = lead_client.post(url, {"kind": "user", "target": "alice", "monthly_amount": "20.00"}, **hx)
    assert 'id="target-budget-user-alice"' in page.content.decode()
    assert "The budget of alice is set: $20.00 a month." in page.content.decode()  # said, not only shown
    assert Budget.objects.get(team=team, user=researcher).monthly_amount == Decimal("20.00")
    bad = lead_client.post(url, {"kind": "project", "target": "Bad Label", "monthly_amount": "5"}, **hx)
    # said beside the name given, in words for people (the API's message starts "project: ")
    target = field_html(bad.content.decode(), "target")
    assert (
        "A project label is 1-40 lowercase letters, digits and hyphens" in target and "project:" not in target
    )
    stranger = lead_client.post(url, {"kind": "user", "target": "nobody", "monthly_amount": "5"}, **hx)
    assert "No member &#x27;nobody&#x27; in team vision." in field_html(stranger.content.decode(), "target")
    assert Budget.objects.count() == 1

    shown = researcher_client.get(url, **hx).content.decode()
    assert 'id="target-budget-user-alice"' in shown and "Set budget" not in shown
    assert researcher_client.post(url, {"kind": "user", "target": "alice", "remove": "on"}).status_code == 403
    assert other_client.get(url).status_code == 404
    mine = researcher_client.get("/spend/my-budgets/", **hx).content.decode()
    assert 'id="my-budget-vision"' in mine and "$20.00" in mine
    # $8 spent by NOW: over a budget of $5
    Budget.objects.filter(team=team, user=researcher).update(monthly_amount=Decimal("5.00"))
    with time_machine.travel(NOW, tick=False):
        over = researcher_client.get("/spend/my-budgets/", **hx).content.decode()
    assert (
        "$3.00</strong> over the budget (160 %)" in over
        and "; it is spent." in over
        and "runs out" not in over
    )
    assert 'hx-get="/spend/my-budgets/"' in researcher_client.get("/spend/").content.decode()
    with time_machine.travel(NOW, tick=False):  # over it: the table says so, not a moving "runs out" time
        table = lead_client.get(url, **hx).content.decode()
    assert '<span class="verdict bad">spent</span>' in table

    removed = lead_client.post(url, {"kind": "user", "target": "alice", "remove": "on"}, **hx)
    assert "The budget of alice is removed." in removed.content.decode()
    assert not Budget.objects.exists()
    plain = lead_client.post(
        url, {"kind": "project", "target": "detector", "monthly_amount": "9"}, follow=True
    )
    assert (
        "The budget of project detector is set: $9.00 a month." in plain.content.decode()
    )  # without htmx too
