"""The audit log as CSV: the page's "Download CSV" and `GET /api/v1/audit-events?format=csv`
stream every event the filters match, with the page's visibility (leads their teams', admins
all, researchers nothing), and cells a spreadsheet would run as formulas defused."""

from __future__ import annotations

import csv
import io

import pytest

from portal.audit.services import audit_record
from portal.catalog.demo import catalog_seed
from portal.workloads.models import WorkloadState
from tests.rows import HTMX, make_deployment, make_sandbox

pytestmark = pytest.mark.django_db
PAGE_EXPORT = "/audit/export.csv"
API = "/api/v1/audit-events"


def rows_of(response) -> list[dict[str, str]]:
    body = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body)))


@pytest.fixture
def two_teams_events(researcher, other_researcher, team, other_team, h100):
    mine = make_sandbox(
        owner=researcher, team=team, name="vision-box", state=WorkloadState.QUEUED, gpu_type=h100
    )
    theirs = make_sandbox(
        owner=other_researcher, team=other_team, name="nlp-box", state=WorkloadState.QUEUED, gpu_type=h100
    )
    audit_record(
        actor=researcher, action="sandbox.request", obj=mine, team=team, to_state="queued", detail="asked"
    )
    audit_record(actor=researcher, action="sandbox.extend", obj=mine, team=team, detail="+4 h")
    audit_record(
        actor=other_researcher, action="sandbox.request", obj=theirs, team=other_team, to_state="queued"
    )
    return mine, theirs


def test_the_download_holds_the_teams_events_with_the_page_filters(lead_client, two_teams_events):
    mine, _theirs = two_teams_events
    response = lead_client.get(PAGE_EXPORT, {"action": "request", "page": "3"})

    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="audit_bob_')
    rows = rows_of(response)
    assert [
        (r["actor"], r["action"], r["object_type"], r["object_id"], r["team"], r["to_state"]) for r in rows
    ] == [("alice", "sandbox.request", "sandbox", str(mine.number), "vision", "queued")]
    assert rows[0]["created_at"].endswith("Z")


def test_an_admin_downloads_every_teams_events(admin_client, two_teams_events):
    rows = rows_of(admin_client.get(PAGE_EXPORT))

    assert {r["team"] for r in rows} == {"vision", "nlp"}
    assert len(rows) == 3


def test_researchers_cannot_download_the_log(researcher_client, two_teams_events):
    assert researcher_client.get(PAGE_EXPORT).status_code == 403


def test_a_bad_filter_is_refused_not_ignored(lead_client, two_teams_events):
    response = lead_client.get(PAGE_EXPORT, {"since": "yesterday"})

    assert response.status_code == 400
    assert "since" in response.content.decode()


def test_a_formula_like_cell_is_defused(lead_client, researcher, team, h100):
    box = make_sandbox(owner=researcher, team=team, name="box", state=WorkloadState.QUEUED, gpu_type=h100)
    audit_record(
        actor=researcher, action="sandbox.extend", obj=box, team=team, detail='=HYPERLINK("http://x")'
    )

    rows = rows_of(lead_client.get(PAGE_EXPORT))

    assert rows[0]["detail"] == '\'=HYPERLINK("http://x")'


def test_the_page_links_the_download_with_its_filters(lead_client, two_teams_events):
    page = lead_client.get("/audit/", {"action": "extend", "page": "1"}, **HTMX).content.decode()

    assert 'href="/audit/export.csv?action=extend"' in page


def test_the_download_reads_a_bounded_number_of_queries(
    lead_client, researcher, team, h100, django_assert_max_num_queries
):
    box = make_sandbox(owner=researcher, team=team, name="box", state=WorkloadState.QUEUED, gpu_type=h100)
    for index in range(30):
        audit_record(actor=researcher, action="sandbox.extend", obj=box, team=team, detail=f"+{index} h")

    with django_assert_max_num_queries(8):
        rows = rows_of(lead_client.get(PAGE_EXPORT))
    assert len(rows) == 30


def test_audit_rows_link_deployments_as_they_link_sandboxes(lead_client, researcher, team, h100):
    catalog_seed()
    deployment = make_deployment(owner=researcher, team=team, gpu_type=h100, state=WorkloadState.QUEUED)
    audit_record(actor=researcher, action="deployment.request", obj=deployment, team=team, to_state="queued")

    page = lead_client.get("/audit/").content.decode()

    assert f'href="/deployments/{deployment.number}/"' in page


# The API: the same rows as a download, the same visibility.


def test_the_api_streams_csv_for_format_csv_with_filters(bob, two_teams_events):
    response = bob.get(API, {"format": "csv", "action": "extend"})

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    rows = rows_of(response)
    assert [(r["action"], r["detail"]) for r in rows] == [("sandbox.extend", "'+4 h")]  # `+` defused


def test_the_api_csv_keeps_the_visibility(alice, carol, admin, two_teams_events):
    assert rows_of(alice.get(API, {"format": "csv"})) == []  # researchers read no events
    # every team's (and the portal-wide ones, such as the admin's own token, with no team)
    assert {r["team"] for r in rows_of(admin.get(API, {"format": "csv"}))} >= {"vision", "nlp"}


def test_the_api_refuses_an_unknown_format_in_its_error_shape(bob, two_teams_events):
    response = bob.get(API, {"format": "xlsx"})

    assert response.status_code == 400
    assert response.json()["error"]["fields"]["format"]


def test_a_bad_filter_with_csv_answers_json_errors(bob, two_teams_events):
    response = bob.get(API, {"format": "csv", "since": "yesterday"})

    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert "since" in response.json()["error"]["fields"]
