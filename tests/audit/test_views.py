"""The audit page: leads see their teams' events, admins all; filtered and paginated."""

from __future__ import annotations

from portal.audit.services import audit_record
from portal.workloads.models import WorkloadState
from tests.rows import HTMX, make_sandbox


def test_researchers_get_a_403_page(researcher_client, researcher):
    response = researcher_client.get("/audit/")

    assert response.status_code == 403
    assert "for team leads and platform admins" in response.content.decode()


def test_a_lead_sees_the_teams_events_and_not_other_teams(
    lead_client, researcher, other_researcher, team, other_team, h100
):
    mine = make_sandbox(
        owner=researcher, team=team, name="vision-box", state=WorkloadState.QUEUED, gpu_type=h100
    )
    theirs = make_sandbox(
        owner=other_researcher, team=other_team, name="nlp-box", state=WorkloadState.QUEUED, gpu_type=h100
    )
    audit_record(actor=researcher, action="sandbox.request", obj=mine, team=team, to_state="queued")
    audit_record(
        actor=other_researcher, action="sandbox.request", obj=theirs, team=other_team, to_state="queued"
    )

    page = lead_client.get("/audit/").content.decode()

    assert "vision-box" in page
    assert "nlp-box" not in page


def test_the_filter_narrows_by_action_and_answers_htmx_with_the_table(lead_client, researcher, team, h100):
    sandbox = make_sandbox(
        owner=researcher, team=team, name="filtered", state=WorkloadState.QUEUED, gpu_type=h100
    )
    audit_record(actor=researcher, action="sandbox.request", obj=sandbox, team=team, detail="asked")
    audit_record(actor=researcher, action="sandbox.extend", obj=sandbox, team=team, detail="+4 h")

    page = lead_client.get("/audit/", {"action": "extend"}, **HTMX).content.decode()

    assert page.lstrip().startswith('<section id="audit-table"')
    assert "+4 h" in page
    assert "asked" not in page


def test_an_admin_pages_through_every_event(admin_client, researcher, team, h100):
    sandbox = make_sandbox(
        owner=researcher, team=team, name="busy", state=WorkloadState.QUEUED, gpu_type=h100
    )
    for number in range(60):
        audit_record(
            actor=researcher, action="sandbox.extend", obj=sandbox, team=team, detail=f"step {number}"
        )

    first = admin_client.get("/audit/").content.decode()
    second = admin_client.get("/audit/", {"page": 2}).content.decode()

    assert "step 59" in first and "step 10" in first and "step 9<" not in first
    assert "step 9<" in second and "step 0<" in second
    assert "Page 1 of 2 · 60 in all" in first
    assert 'href="?page=2"' in first
