"""Live pages: each live region polls with the version it shows; nothing changed is a 204 with
no rendering, something changed brings the new rows, badges or audit events."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.accounts.models import Notification
from portal.sandboxes.services import sandbox_request
from portal.workloads.services import workload_terminate
from tests.rows import HTMX

pytestmark = pytest.mark.django_db

SMALL = {"team": "vision", "name": "small-box", "gpu_type": "h100-80gb", "count": 1, "ttl_hours": 1}
BIG = {"team": "vision", "name": "big-train", "gpu_type": "h100-80gb", "count": 2, "ttl_hours": 48}


def live_version(html: str, region: str) -> str:
    """The version a region polls with (its hx-headers)."""
    tag = re.search(rf'<(?:section|span) id="{region}"[^>]*>', html, re.S).group(0)
    return re.search(r'"X-Live-Version": "([^"]+)"', tag).group(1)


def poll(client, url: str, version: str):
    return client.get(url, HTTP_X_LIVE_VERSION=version, **HTMX)


def test_an_idle_inbox_poll_is_a_204_from_two_queries(lead_client, researcher, fleet):
    sandbox_request(user=researcher, purpose="full finetune", **BIG)
    version = live_version(lead_client.get("/approvals/").content.decode(), "approval-table")

    with CaptureQueriesContext(connection) as queries:
        response = poll(lead_client, "/approvals/", version)

    assert response.status_code == 204 and response.content == b""
    # the session and the user, then the version: no rows read, nothing rendered
    assert len(queries) <= 3
    assert not any("workloads_approval" in q["sql"] for q in queries.captured_queries)


def test_a_new_request_makes_the_leads_inbox_poll_bring_the_new_row(lead_client, researcher, fleet):
    page = lead_client.get("/approvals/").content.decode()
    version = live_version(page, "approval-table")
    assert "big-train" not in page

    sandbox_request(user=researcher, purpose="full finetune", **BIG)
    response = poll(lead_client, "/approvals/", version)

    html = response.content.decode()
    assert response.status_code == 200
    assert "big-train" in html and 'value="approve"' in html
    assert live_version(html, "approval-table") != version  # the next poll is idle again
    assert (
        'id="nav-approvals-badge" class="count" title="Requests waiting for you" hx-swap-oob="true">1<'
        in html
    )


def test_a_new_team_request_reaches_the_leads_dashboard(lead_client, researcher, fleet):
    version = live_version(lead_client.get("/").content.decode(), "sandbox-table")
    with CaptureQueriesContext(connection) as queries:
        assert poll(lead_client, "/", version).status_code == 204
    assert len(queries) <= 3

    sandbox = sandbox_request(user=researcher, **SMALL)

    response = poll(lead_client, "/", version)
    assert response.status_code == 200
    assert f'id="sandbox-row-{sandbox.pk}"' in response.content.decode()


def test_the_dashboard_polls_slowly_when_nothing_is_live(lead_client):
    page = lead_client.get("/").content.decode()
    assert 'hx-trigger="every 10s"' in page and "data-live" in page


def test_the_badge_poll_is_a_204_until_a_count_moves(lead_client, lead, researcher, fleet):
    page = lead_client.get("/spend/").content.decode()
    version = live_version(page, "nav-live")
    assert version == "0.0"

    with CaptureQueriesContext(connection) as queries:
        idle = poll(lead_client, "/live/badges/", version)
    assert idle.status_code == 204 and idle.content == b""
    assert len(queries) <= 5  # session, user, the teams led, two counts

    sandbox_request(user=researcher, purpose="full finetune", **BIG)
    Notification.objects.create(user=lead, message="Something happened.")
    moved = poll(lead_client, "/live/badges/", version)

    html = moved.content.decode()
    assert moved.status_code == 200
    assert (
        'id="nav-approvals-badge" class="count" title="Requests waiting for you" hx-swap-oob="true">1<'
        in html
    )
    unread = Notification.objects.filter(user=lead, read_at__isnull=True).count()  # the request's too
    assert (
        f'id="nav-unread-badge" class="count" title="Unread notifications" hx-swap-oob="true">{unread}<'
        in html
    )
    assert live_version(html, "nav-live") == f"1.{unread}"
    assert poll(lead_client, "/live/badges/", f"1.{unread}").status_code == 204


def test_a_signed_out_badge_poll_goes_to_the_sign_in_page(client):
    response = client.get("/live/badges/", **HTMX)
    assert response.status_code == 204 and "/login" in response["HX-Redirect"]


def test_the_detail_poll_is_idle_until_an_event_then_brings_the_audit_trail(
    researcher_client, researcher, fleet
):
    sandbox = sandbox_request(user=researcher, **SMALL)
    url = f"/sandboxes/{sandbox.number}/"
    page = researcher_client.get(url).content.decode()
    version = live_version(page, "sandbox-live")
    assert 'id="audit-trail-events"' in page

    before = re.search(r'<div id="audit-trail-events">.*?</ol>', page, re.S).group(0).count("<li>")
    with CaptureQueriesContext(connection) as queries:
        assert poll(researcher_client, url, version).status_code == 204
    assert len(queries) <= 4

    workload_terminate(user=researcher, workload_id=sandbox.pk, kind="sandbox")
    html = poll(researcher_client, url, version).content.decode()

    trail = re.search(r'<div id="audit-trail-events" hx-swap-oob="true">.*?</ol>', html, re.S).group(0)
    assert trail.count("<li>") == before + 1 and "→ terminating" in trail


def test_a_poll_of_a_sandbox_one_may_not_see_is_still_a_404(other_client, researcher, fleet):
    sandbox = sandbox_request(user=researcher, **SMALL)
    assert poll(other_client, f"/sandboxes/{sandbox.number}/", "stale").status_code == 404
