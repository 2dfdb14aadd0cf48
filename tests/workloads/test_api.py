"""GET /me: the user, their role in each team, the quota and budget each team has left, and the
project labels each uses."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.utils import timezone
from rest_framework.test import APIClient

from portal.fleet.models import Gpu
from portal.spend.models import Budget
from tests.factories import MembershipFactory
from tests.rows import make_hold, make_sandbox


def test_me_shows_the_user_and_their_role_in_each_team(researcher, other_team, alice):
    MembershipFactory(user=researcher, team=other_team, role="lead")
    body = alice.get("/api/v1/me").json()
    assert body["username"] == "alice"
    assert body["is_platform_admin"] is False
    assert [(t["slug"], t["role"]) for t in body["teams"]] == [("nlp", "lead"), ("vision", "researcher")]


def test_me_shows_quota_left_in_gpu_equivalents_after_a_slice(run_jobs, fleet, alice, slice_body):
    run_jobs(lambda: alice.post("/api/v1/sandboxes", slice_body, format="json"))
    vision = alice.get("/api/v1/me").json()["teams"][0]
    assert vision["quota"] == {"total": "16.000", "used": "0.143", "left": "15.857"}


def test_me_shows_budget_spent_this_month_and_left(fleet, team, researcher, alice):
    now = timezone.now()
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    gpu = Gpu.objects.filter(mig_enabled=False).first()
    # Held for the whole month so far plus a day before it: only this month counts.
    make_hold(gpu=gpu, user=researcher, team=team, started_at=month_start - timedelta(days=1), ended_at=None)
    hours = (now - month_start).total_seconds() / 3600
    budget = alice.get("/api/v1/me").json()["teams"][0]["budget"]
    assert budget["currency"] == "USD"
    assert budget["monthly"] == "50000.00"
    assert abs(float(budget["spent"]) - 6.88 * hours) < 0.05
    assert abs(float(budget["left"]) - (50000 - 6.88 * hours)) < 0.05


def test_me_says_who_is_a_platform_admin(admin):
    body = admin.get("/api/v1/me").json()
    assert body["is_platform_admin"] is True
    assert body["teams"] == []


def test_me_without_credentials_is_a_401_in_the_error_shape(db):
    response = APIClient().get("/api/v1/me")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert response["WWW-Authenticate"] == "Bearer"


def test_me_lists_the_project_labels_each_team_uses(team, other_team, researcher, h100, alice):
    MembershipFactory(user=researcher, team=other_team, role="researcher")
    make_sandbox(owner=researcher, team=team, gpu_type=h100, project="llm-eval")
    make_sandbox(owner=researcher, team=other_team, gpu_type=h100, project="nlp-chat")
    Budget.objects.create(team=team, kind="project", project="q4-launch", monthly_amount=Decimal("5"))

    teams = alice.get("/api/v1/me").json()["teams"]

    assert [(t["slug"], t["projects"]) for t in teams] == [
        ("nlp", ["nlp-chat"]),
        ("vision", ["llm-eval", "q4-launch"]),
    ]
