"""GET /audit-events: admins see all, leads their teams', researchers none; filterable, paginated."""

from __future__ import annotations

URL = "/api/v1/audit-events"


def test_an_admin_sees_every_event_newest_first(run_jobs, fleet, alice, carol, admin, slice_body, other_team):
    run_jobs(lambda: alice.post("/api/v1/sandboxes", slice_body, format="json"))
    carol.post("/api/v1/sandboxes", {**slice_body, "team": "nlp", "name": "carols"}, format="json")
    body = admin.get(URL).json()
    teams = {e["team"] for e in body["results"]}
    assert {"vision", "nlp"} <= teams
    times = [e["created_at"] for e in body["results"]]
    assert times == sorted(times, reverse=True)
    request = next(e for e in body["results"] if e["action"] == "sandbox.request" and e["team"] == "vision")
    assert request["actor"] == "alice"
    assert request["object_type"] == "sandbox"
    assert request["to_state"] == "queued"


def test_a_lead_sees_their_teams_events_only(fleet, alice, bob, carol, slice_body, other_team):
    alice.post("/api/v1/sandboxes", slice_body, format="json")
    carol.post("/api/v1/sandboxes", {**slice_body, "team": "nlp", "name": "carols"}, format="json")
    body = bob.get(URL).json()
    assert body["count"] > 0
    assert {e["team"] for e in body["results"]} == {"vision"}


def test_a_researcher_sees_no_audit_events(fleet, alice, slice_body):
    alice.post("/api/v1/sandboxes", slice_body, format="json")
    assert alice.get(URL).json()["count"] == 0


def test_audit_events_filter_by_action_and_actor_and_paginate(run_jobs, fleet, alice, admin, slice_body):
    run_jobs(lambda: alice.post("/api/v1/sandboxes", slice_body, format="json"))
    requested = admin.get(URL, {"action": "sandbox.request", "actor": "alice"}).json()
    assert [e["action"] for e in requested["results"]] == ["sandbox.request"]
    page = admin.get(URL, {"page_size": 1}).json()
    assert len(page["results"]) == 1
    assert page["count"] > 1
    assert page["next"]


def test_a_bad_since_filter_is_a_400(admin):
    response = admin.get(URL, {"since": "last tuesday"})
    assert response.status_code == 400
    assert "since" in response.json()["error"]["fields"]
