"""The approvals API: the inbox, approve, reject; who may decide."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.workloads.models import Approval, Workload

URL = "/api/v1/approvals"


@pytest.fixture
def pending(fleet, alice, big_body) -> dict:
    """Alice's request for four H100s for 48 h, waiting for a lead."""
    response = alice.post("/api/v1/sandboxes", big_body, format="json")
    assert response.json()["state"] == "pending_approval"
    return response.json()


def test_the_leads_inbox_lists_the_pending_request_with_its_sandbox(pending, bob):
    body = bob.get(URL, {"state": "pending"}).json()
    assert body["count"] == 1
    approval = body["results"][0]
    assert approval["id"] == pending["approval"]["id"]
    assert approval["kind"] == "create"
    assert approval["state"] == "pending"
    assert approval["team"] == "vision"
    assert approval["requested_by"] == "alice"
    assert approval["decided_by"] is None
    assert approval["decided_at"] is None
    assert "more than 1 whole GPU" in approval["why_needed"]
    assert approval["sandbox"]["id"] == pending["id"]
    assert approval["sandbox"]["name"] == "big-train"
    assert approval["sandbox"]["owner"] == "alice"
    assert approval["sandbox"]["gpu"] == {
        "type": "h100-80gb",
        "count": 4,
        "mig_profile": None,
        "label": "4x h100-80gb",
    }


def test_the_state_filter_separates_pending_from_decided(pending, run_jobs, bob):
    run_jobs(lambda: bob.post(f"{URL}/{pending['approval']['id']}/approve", format="json"))
    assert bob.get(URL, {"state": "pending"}).json()["count"] == 0
    assert bob.get(URL, {"state": "approved"}).json()["count"] == 1


def test_the_team_filter_takes_its_slug_or_name_in_any_case(pending, bob):
    for team in ("vision", "Vision", "VISION"):
        assert bob.get(URL, {"team": team}).json()["count"] == 1
    assert bob.get(URL, {"team": "vis"}).json()["count"] == 0


def test_a_requester_sees_only_their_own_requests_and_other_teams_none(pending, alice, carol):
    assert [a["id"] for a in alice.get(URL).json()["results"]] == [pending["approval"]["id"]]
    assert carol.get(URL).json()["count"] == 0


def test_approving_places_the_sandbox_and_records_the_decider(pending, run_jobs, bob):
    response = run_jobs(
        lambda: bob.post(f"{URL}/{pending['approval']['id']}/approve", {"comment": "ok"}, format="json")
    )
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "approved"
    assert body["decided_by"] == "bob"
    assert body["comment"] == "ok"
    assert body["decided_at"] is not None
    assert body["sandbox"]["state"] in ("provisioning", "running")
    assert Workload.objects.get(kind="sandbox", number=pending["id"]).state == "running"


def test_an_admin_may_approve_too(pending, run_jobs, admin):
    response = run_jobs(lambda: admin.post(f"{URL}/{pending['approval']['id']}/approve", format="json"))
    assert response.status_code == 200
    assert response.json()["decided_by"] == "admin"


def test_nobody_approves_their_own_request(fleet, team, lead, bob, big_body):
    """Bob is a lead, but his own request needs another lead or an admin."""
    sandbox = bob.post("/api/v1/sandboxes", big_body, format="json").json()
    response = bob.post(f"{URL}/{sandbox['approval']['id']}/approve", format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert Approval.objects.get().state == "pending"


def test_a_researcher_cannot_approve_their_own_request(pending, alice):
    response = alice.post(f"{URL}/{pending['approval']['id']}/approve", format="json")
    assert response.status_code == 403
    assert Workload.objects.get(kind="sandbox", number=pending["id"]).state == "pending_approval"


def test_another_teams_member_does_not_find_the_approval(pending, carol):
    response = carol.post(f"{URL}/{pending['approval']['id']}/approve", format="json")
    assert response.status_code == 404
    assert Approval.objects.get().state == "pending"


@pytest.mark.parametrize("body", [{}, {"reason": ""}, {"reason": "   "}, {"comment": "no reason key"}])
def test_rejecting_needs_a_reason(pending, bob, body):
    response = bob.post(f"{URL}/{pending['approval']['id']}/reject", body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert "reason" in error["fields"]
    assert Workload.objects.get(kind="sandbox", number=pending["id"]).state == "pending_approval"


def test_rejecting_with_a_reason_ends_the_request_and_tells_why(pending, bob, alice):
    response = bob.post(f"{URL}/{pending['approval']['id']}/reject", {"reason": "use 2 GPUs"}, format="json")
    assert response.status_code == 200
    assert response.json()["state"] == "rejected"
    assert response.json()["comment"] == "use 2 GPUs"

    sandbox = alice.get(f"/api/v1/sandboxes/{pending['id']}").json()
    assert sandbox["state"] == "rejected"
    assert "use 2 GPUs" in sandbox["message"]
    assert sandbox["approval"]["state"] == "rejected"
    assert sandbox["approval"]["comment"] == "use 2 GPUs"


def test_deciding_an_already_decided_request_is_a_conflict(pending, bob):
    bob.post(f"{URL}/{pending['approval']['id']}/reject", {"reason": "no"}, format="json")
    response = bob.post(f"{URL}/{pending['approval']['id']}/approve", format="json")
    assert response.status_code == 409
    assert Approval.objects.get().state == "rejected"


def test_listing_approvals_takes_the_same_few_queries_for_one_or_many(fleet, team, alice, bob, big_body):
    def count_queries(expected: int) -> int:
        bob.get(URL)
        with CaptureQueriesContext(connection) as queries:
            body = bob.get(URL).json()
        assert body["count"] == expected
        return len(queries)

    team.quota_gpus = 1000
    team.save()
    alice.post("/api/v1/sandboxes", big_body, format="json")
    one = count_queries(1)
    for number in range(12):
        alice.post("/api/v1/sandboxes", {**big_body, "name": f"big-{number}"}, format="json")
    assert count_queries(13) == one
    assert one <= 8


def test_one_approval_can_be_read_by_the_lead_but_not_by_another_team(pending, bob, carol):
    approval_id = pending["approval"]["id"]
    assert bob.get(f"{URL}/{approval_id}").json()["sandbox"]["name"] == "big-train"
    assert carol.get(f"{URL}/{approval_id}").status_code == 404


def test_an_approval_carries_what_the_inbox_weighs_cost_lifetime_purpose_and_who_may_decide(
    pending, run_jobs, alice, bob
):
    [seen_by_lead] = bob.get(URL, {"state": "pending"}).json()["results"]
    assert seen_by_lead["lifetime_hours"] == "48.00"
    assert seen_by_lead["estimated_cost"] == "1320.96"  # 4 x $6.88 x 48 h, as the page and e-mail say
    assert seen_by_lead["can_decide"] is True
    assert seen_by_lead["purpose"] == Workload.objects.get(name="big-train").purpose
    [own] = alice.get(URL).json()["results"]
    assert own["can_decide"] is False  # her own request
    one = bob.get(f"{URL}/{pending['approval']['id']}").json()
    assert (one["estimated_cost"], one["can_decide"]) == ("1320.96", True)
    decided = run_jobs(lambda: bob.post(f"{URL}/{pending['approval']['id']}/approve", format="json")).json()
    assert decided["can_decide"] is False  # decided


def test_the_requester_reads_the_whole_story_of_their_request_as_its_page_tells_it(
    pending, run_jobs, alice, bob, carol
):
    run_jobs(lambda: bob.post(f"{URL}/{pending['approval']['id']}/approve", {"comment": "go"}, format="json"))
    history = alice.get(f"/api/v1/sandboxes/{pending['id']}/history")
    assert history.status_code == 200, history.content
    events = history.json()["results"]
    actions = [event["action"] for event in events]
    assert actions[0] == "sandbox.request" and "approval.approve" in actions and "sandbox.running" in actions
    approve = events[actions.index("approval.approve")]
    assert approve["actor"] == "bob" and approve["words"] == "Request approved"
    started = events[actions.index("sandbox.running")]
    assert started["actor"] is None and started["words"] == "Started running"
    assert started["to_state"] == "running"
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)  # oldest first
    assert carol.get(f"/api/v1/sandboxes/{pending['id']}/history").status_code == 404
    assert alice.get(f"/api/v1/sandboxes/{pending['id']}/history", {"x": 1}).status_code == 400


def test_a_lead_may_not_decide_their_own_request_and_the_api_says_so(fleet, bob, admin, big_body):
    made = bob.post("/api/v1/sandboxes", big_body, format="json").json()
    [own] = [a for a in bob.get(URL).json()["results"] if a["id"] == made["approval"]["id"]]
    assert own["state"] == "pending" and own["can_decide"] is False  # a lead of the team, but their own
    [for_admin] = [a for a in admin.get(URL).json()["results"] if a["id"] == made["approval"]["id"]]
    assert for_admin["can_decide"] is True
