"""GET /me (teams, role, quota and budget left) and GET /gpu-types (catalogue, prices, capacity)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework.test import APIClient

from portal.fleet.models import Gpu
from tests.api.conftest import make_hold
from tests.factories import MembershipFactory


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


def test_gpu_types_list_profiles_price_and_free_capacity(fleet, alice):
    body = alice.get("/api/v1/gpu-types").json()
    assert body["count"] == 1
    h100 = body["results"][0]
    assert h100["slug"] == "h100-80gb"
    assert h100["name"] == "NVIDIA H100 80GB"
    assert h100["memory_gb"] == 80
    assert h100["price_per_hour"] == "6.88"
    profiles = {p["name"]: p for p in h100["mig_profiles"]}
    assert profiles["1g.10gb"]["compute_slices"] == 1
    assert profiles["1g.10gb"]["memory_gb"] == 10
    assert profiles["1g.10gb"]["gpu_equivalents"] == "0.143"
    assert profiles["3g.40gb"]["price_per_hour"] == "2.95"  # 6.88 x 3/7
    assert h100["capacity"]["gpus"] == 16
    assert h100["capacity"]["free_gpus"] == 8
    assert h100["capacity"]["free_slices"]["1g.10gb"] == 8


def test_gpu_type_capacity_drops_when_gpus_are_taken(run_jobs, fleet, alice, slice_body):
    whole = {"name": "one", "team": "vision", "gpu": {"type": "h100-80gb", "count": 1}, "ttl_hours": 1}
    run_jobs(lambda: alice.post("/api/v1/sandboxes", whole, format="json"))
    run_jobs(lambda: alice.post("/api/v1/sandboxes", slice_body, format="json"))
    capacity = alice.get("/api/v1/gpu-types").json()["results"][0]["capacity"]
    assert capacity["free_gpus"] == 7
    # The cut GPU cannot take a full 7g.80gb any more; the other seven can.
    assert capacity["free_slices"]["7g.80gb"] == 7
    assert capacity["free_slices"]["1g.10gb"] == 8


def test_gpu_types_are_open_to_anyone_but_me_needs_a_signed_in_user(fleet):
    response = APIClient().get("/api/v1/gpu-types")
    assert response.status_code == 200
    assert {row["slug"] for row in response.json()["results"]} == {"h100-80gb"}
    assert APIClient().get("/api/v1/me").status_code == 401
