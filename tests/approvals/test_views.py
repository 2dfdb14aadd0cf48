"""The approvals inbox: inline decisions by leads, never on one's own request."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from portal.approvals.services import approval_decide
from portal.catalog.demo import catalog_seed
from portal.deployments.services import deployment_request, deployment_scale
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Approval, Workload, WorkloadState
from tests.rows import HTMX, make_sandbox

BIG = {"team": "vision", "name": "big-train", "gpu_type": "h100-80gb", "count": 2, "ttl_hours": 48}


@pytest.fixture
def pending(researcher, fleet) -> Approval:
    """Alice's request for 2 H100s for 48 hours, waiting for a lead."""
    sandbox = sandbox_request(user=researcher, purpose="full finetune", **BIG)
    return Approval.objects.get(workload=sandbox)


def test_a_lead_sees_the_pending_request_with_its_cost_and_reason(lead_client, pending):
    page = lead_client.get("/approvals/").content.decode()

    assert f'id="approval-{pending.pk}"' in page
    assert "big-train" in page and "full finetune" in page
    assert "2x h100-80gb" in page and "48 h" in page
    assert "$660.48" in page  # 2 x 6.88 x 48
    # under the heading "Why it needs a lead", the reason alone
    assert '<td data-label="Why it needs a lead">More than 1 whole GPU and longer than 24 hours.</td>' in page
    assert 'value="approve"' in page and 'value="reject"' in page


def test_approving_inline_replaces_the_row_and_updates_the_badge_out_of_band(lead_client, pending, run_jobs):
    response = run_jobs(
        lambda: lead_client.post(f"/approvals/{pending.pk}/decide/", {"decision": "approve"}, **HTMX)
    )
    page = response.content.decode()

    pending.refresh_from_db()
    assert pending.state == Approval.State.APPROVED
    assert Workload.objects.get(pk=pending.workload_id).state == WorkloadState.RUNNING
    assert page.lstrip().startswith(f'<tr id="approval-{pending.pk}" class="approval-approved">')
    assert 'value="approve"' not in page
    assert (
        'id="nav-approvals-badge" class="count is-empty" title="Requests waiting for you" hx-swap-oob="true">0<'
        in page
    )


def test_rejecting_needs_a_reason_and_keeps_the_row_decidable(lead_client, pending):
    response = lead_client.post(
        f"/approvals/{pending.pk}/decide/", {"decision": "reject", "comment": " "}, **HTMX
    )
    page = response.content.decode()

    pending.refresh_from_db()
    assert pending.state == Approval.State.PENDING
    assert "Say why the request is rejected." in page
    assert 'value="reject"' in page


def test_a_comment_too_long_says_so_and_keeps_the_row_decidable(lead_client, pending):
    response = lead_client.post(
        f"/approvals/{pending.pk}/decide/", {"decision": "reject", "comment": "x" * 6400}, **HTMX
    )
    page = response.content.decode()
    pending.refresh_from_db()
    assert pending.state == Approval.State.PENDING
    assert "A comment is at most 1,000 characters; this one has 6,400." in page
    assert "Choose approve or reject." not in page and 'maxlength="1000"' in page


def test_rejecting_with_a_reason_ends_the_request(lead_client, pending):
    lead_client.post(
        f"/approvals/{pending.pk}/decide/", {"decision": "reject", "comment": "one GPU first"}, **HTMX
    )

    pending.refresh_from_db()
    assert pending.state == Approval.State.REJECTED
    assert pending.comment == "one GPU first"
    assert Workload.objects.get(pk=pending.workload_id).state == WorkloadState.REJECTED


def test_own_requests_are_listed_but_cannot_be_decided(researcher_client, lead_client, lead, fleet, pending):
    researcher_page = researcher_client.get("/approvals/").content.decode()
    assert "big-train" in researcher_page
    assert 'value="approve"' not in researcher_page
    assert "Your own request" in researcher_page

    own = sandbox_request(user=lead, **{**BIG, "name": "leads-own"})
    lead_page = lead_client.get("/approvals/").content.decode()
    own_row = lead_page.split(f'id="approval-{own.approvals.get().pk}"')[1].split("</tr>")[0]
    assert 'value="approve"' not in own_row

    response = lead_client.post(
        f"/approvals/{own.approvals.get().pk}/decide/", {"decision": "approve"}, **HTMX
    )
    assert "You cannot decide your own request" in response.content.decode()
    assert own.approvals.get().state == Approval.State.PENDING


def test_a_post_without_htmx_redirects_back_with_a_message(lead_client, pending, run_jobs):
    response = run_jobs(
        lambda: lead_client.post(f"/approvals/{pending.pk}/decide/", {"decision": "approve"}, follow=True)
    )

    assert response.redirect_chain[-1][0] == "/approvals/"
    assert "Approved; the requester has been told." in response.content.decode()


def test_the_state_filter_shows_the_history(lead_client, pending, run_jobs):
    run_jobs(lambda: lead_client.post(f"/approvals/{pending.pk}/decide/", {"decision": "approve"}, **HTMX))

    assert "big-train" not in lead_client.get("/approvals/").content.decode()
    history = lead_client.get("/approvals/?state=approved").content.decode()
    assert "big-train" in history and "by bob" in history
    assert "big-train" in lead_client.get("/approvals/?state=").content.decode()


def test_the_inbox_queries_stay_bounded(lead_client, researcher, team, h100, django_assert_max_num_queries):
    for _ in range(30):
        sandbox = make_sandbox(
            owner=researcher, team=team, state=WorkloadState.PENDING_APPROVAL, gpu_type=h100
        )
        Approval.objects.create(workload=sandbox, team=team, requested_by=researcher, why_needed="long")

    with django_assert_max_num_queries(13):
        response = lead_client.get("/approvals/")

    assert response.content.decode().count('value="approve"') == 30


def test_a_researcher_who_leads_no_team_keeps_the_link_to_follow_their_own_requests(
    researcher_client, lead_client, fleet, pending
):
    page = researcher_client.get("/approvals/").content.decode()
    assert 'href="/approvals/"' in page  # the nav link: the page lists her requests and their decisions
    assert "Your requests over your team&#x27;s auto-approval line" in page or (
        "Your requests over your team's auto-approval line" in page
    )
    assert "Your requests over" not in lead_client.get("/approvals/").content.decode()


def test_a_scale_request_shows_what_the_added_replicas_cost_for_the_time_left(
    lead_client, lead, researcher, run_jobs, fleet
):
    """A lead deciding a scale sees its cost: the added replicas' share for the hours left."""
    catalog_seed()
    start = timezone.now().replace(microsecond=0)
    with time_machine.travel(start, tick=False):
        deployment = run_jobs(
            lambda: deployment_request(
                user=researcher, team="vision", name="llama8b", model="llama-3.1-8b-instruct",
                gpu_type="h100-80gb", count=1, replicas=1, ttl_hours=8,
            )
        )  # fmt: skip
    with time_machine.travel(start + timedelta(hours=2), tick=False):
        deployment_scale(user=researcher, deployment_id=deployment.pk, replicas=3)  # over 1 whole GPU: a lead
        assert Approval.objects.filter(workload=deployment, kind=Approval.Kind.SCALE).exists()
        page = lead_client.get("/approvals/").content.decode()
    assert "6 h left" in page
    assert "+$82.56" in page  # two more replicas of 1 x $6.88 for 6 hours
    scale = Approval.objects.get(workload=deployment, kind=Approval.Kind.SCALE)
    with time_machine.travel(start + timedelta(hours=2), tick=False):
        body = lead_client.get(f"/api/v1/approvals/{scale.pk}").json()
    assert (body["estimated_cost"], body["lifetime_hours"]) == ("82.56", "6.00")  # the API says the same
    run_jobs(lambda: approval_decide(user=lead, approval_id=scale.pk, approve=True))
    decided = lead_client.get(f"/api/v1/approvals/{scale.pk}").json()
    assert decided["estimated_cost"] is None  # its replicas then are gone: no figure, not a wrong one
    assert "+$0.00" not in lead_client.get("/approvals/", {"state": "approved"}).content.decode()
