"""A scheduled start: the request holds its quota from the start, waits queued until its time,
is placed by the sweep then, can be withdrawn before, and a bad start is refused."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from portal.accounts.models import Team
from portal.fleet.models import Allocation
from portal.sandboxes.services import sandbox_estimate
from portal.workloads.models import Workload, WorkloadState
from portal.workloads.policy import quota_left
from portal.workloads.services import workloads_sweep

pytestmark = pytest.mark.django_db
S = WorkloadState
URL = "/api/v1/sandboxes"


def _body(start_at, name: str = "later", count: int = 1) -> dict:
    body = {"name": name, "team": "vision", "gpu": {"type": "h100-80gb", "count": count}, "ttl_hours": 2}
    if start_at is not None:
        body["start_at"] = start_at.isoformat()
    return body


def _vision() -> Team:
    return Team.objects.get(slug="vision")


def test_a_scheduled_request_holds_its_quota_and_is_not_placed_before_its_time(run_jobs, fleet, alice):
    before = quota_left(team=_vision())
    start = timezone.now() + timedelta(hours=3)
    created = run_jobs(lambda: alice.post(URL, _body(start), format="json"))
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["state"] == "queued"
    assert body["start_at"] is not None
    assert body["queue_position"] is None  # it joins the queue at its start
    assert "scheduled to start" in body["message"].lower()
    assert quota_left(team=_vision()) == before - 1

    run_jobs(lambda: workloads_sweep(now=start - timedelta(minutes=1)))
    workload = Workload.objects.get(kind="sandbox", number=body["id"])
    assert workload.state == S.QUEUED
    assert not Allocation.objects.filter(workload=workload).exists()
    assert workload.expires_at is None  # the lifetime counts from the start


def test_the_sweep_places_it_at_its_start(run_jobs, fleet, alice):
    start = timezone.now() + timedelta(hours=1)
    created = run_jobs(lambda: alice.post(URL, _body(start), format="json"))
    assert created.status_code == 201
    with time_machine.travel(start + timedelta(seconds=30), tick=False):
        placed = run_jobs(lambda: workloads_sweep())
    workload = Workload.objects.get(kind="sandbox", number=created.json()["id"])
    assert workload.pk in placed.placed
    assert workload.state in (S.PROVISIONING, S.RUNNING)
    assert Allocation.objects.filter(workload=workload, released_at__isnull=True).count() == 1


def test_withdrawing_a_scheduled_request_frees_its_quota(run_jobs, fleet, alice):
    before = quota_left(team=_vision())
    created = alice.post(URL, _body(timezone.now() + timedelta(days=2)), format="json")
    assert created.status_code == 201
    assert "withdraw" in created.json()["allowed_actions"]
    withdrawn = alice.post(f"{URL}/{created.json()['id']}/withdraw")
    assert withdrawn.status_code == 200, withdrawn.json()
    assert withdrawn.json()["state"] == "terminated"
    assert quota_left(team=_vision()) == before


@pytest.mark.parametrize(
    ("offset", "words"),
    [
        (timedelta(minutes=-5), "at least 5 minutes from now"),
        (timedelta(minutes=2), "at least 5 minutes from now"),
        (timedelta(days=31), "at most 30 days ahead"),
    ],
)
def test_a_start_in_the_past_or_too_far_ahead_is_a_clear_400(fleet, alice, offset, words):
    refused = alice.post(URL, _body(timezone.now() + offset), format="json")
    assert refused.status_code == 400
    assert words in str(refused.json())
    assert "start_at" in str(refused.json())
    assert not Workload.objects.exists()


def test_an_end_time_counts_from_the_scheduled_start(fleet, researcher):
    start = timezone.now() + timedelta(hours=5)
    estimate = sandbox_estimate(
        user=researcher,
        team="vision",
        gpu_type="h100-80gb",
        count=1,
        expires_at=start + timedelta(hours=2),
        start_at=start,
    )
    assert estimate.starts_at == start
    assert estimate.lifetime_hours == Decimal(2)


def test_a_scheduled_request_over_the_line_still_waits_for_a_lead_then_for_its_time(
    run_jobs, fleet, alice, bob, big_body
):
    start = timezone.now() + timedelta(hours=6)
    created = alice.post(URL, {**big_body, "start_at": start.isoformat()}, format="json")
    assert created.json()["state"] == "pending_approval"
    approval_id = created.json()["approval"]["id"]
    decided = run_jobs(lambda: bob.post(f"/api/v1/approvals/{approval_id}/approve", format="json"))
    assert decided.status_code == 200, decided.json()
    workload = Workload.objects.get(kind="sandbox", number=created.json()["id"])
    assert workload.state == S.QUEUED
    assert workload.queued_at == start


def test_the_form_estimate_shows_what_is_reserved_and_when_it_starts(fleet, researcher_client):
    start = (timezone.now() + timedelta(hours=4)).replace(second=0, microsecond=0)
    form = {
        "team": "vision",
        "gpu_type": "h100-80gb",
        "gpu_mode": "whole",
        "count": 1,
        "lifetime_mode": "hours",
        "ttl_hours": 3,
        "start_at": start.strftime("%Y-%m-%dT%H:%M"),
    }
    panel = researcher_client.get("/sandboxes/estimate/", form, HTTP_HX_REQUEST="true")
    assert panel.status_code == 200
    html = panel.content.decode()
    assert f"starts {start:%Y-%m-%d %H:%M} UTC" in html
    assert "reserves 1 of Vision's quota (GPU equivalents)" in html
