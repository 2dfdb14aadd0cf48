"""The notifications page and API: every notification, paginated, marked read one or all, and
preferences per kind and channel."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import pytest
from django.core import mail
from django.utils import timezone

from portal.accounts.models import (
    NOT_EMAILED,
    EmailDelivery,
    Notification,
    NotificationKind,
    NotificationSettings,
)
from portal.accounts.notifications import notify
from tests.conftest import signed_in
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _many(user, count: int, *, read: int = 0) -> None:
    for number in range(count):
        note = notify(user=user, message=f"note {number}", kind=NotificationKind.BUDGET)
        Notification.objects.filter(pk=note.pk).update(
            created_at=timezone.now() - timedelta(minutes=count - number),
            read_at=timezone.now() if number < read else None,
        )


def test_the_dashboard_panel_says_how_many_more_and_links_to_the_page(researcher, researcher_client):
    _many(researcher, 15)
    html = researcher_client.get("/").content.decode()
    assert "5 more unread" in html
    assert 'href="/notifications/?order=unread"' in html
    assert 'href="/notifications/"' in html


def test_the_page_lists_every_notification_paginated_unread_first_on_request(
    researcher, researcher_client, other_researcher, django_assert_max_num_queries
):
    _many(researcher, 30, read=28)  # note 28 and 29 are the unread ones, and the newest
    notify(user=other_researcher, message="not yours")
    with django_assert_max_num_queries(12):
        first = researcher_client.get("/notifications/")
    html = first.content.decode()
    assert first.status_code == 200
    assert "note 29" in html and "note 5" in html and "note 4" not in html and "not yours" not in html
    assert "Page 1 of 2" in html
    Notification.objects.filter(message="note 0").update(read_at=None)
    unread_first = researcher_client.get("/notifications/?order=unread").content.decode()
    assert unread_first.index("note 29") < unread_first.index("note 0") < unread_first.index("note 27")


def test_marking_one_and_all_read_by_post(researcher, researcher_client, other_researcher):
    _many(researcher, 3)
    note = Notification.objects.get(message="note 1")
    assert researcher_client.get(f"/notifications/{note.pk}/read/").status_code == 405
    assert researcher_client.post(f"/notifications/{note.pk}/read/").status_code == 302
    assert Notification.objects.filter(user=researcher, read_at__isnull=True).count() == 2
    theirs = notify(user=other_researcher, message="theirs")
    assert researcher_client.post(f"/notifications/{theirs.pk}/read/").status_code == 404
    response = researcher_client.post("/notifications/read/", {"back": "notifications"})
    assert response["Location"] == "/notifications/"
    assert not Notification.objects.filter(user=researcher, read_at__isnull=True).exists()
    assert Notification.objects.get(pk=theirs.pk).read_at is None


def test_marking_read_needs_the_csrf_token(researcher):
    _many(researcher, 1)
    client = signed_in(researcher)
    client.handler.enforce_csrf_checks = True
    assert client.post("/notifications/read/").status_code == 403
    assert Notification.objects.filter(user=researcher, read_at__isnull=True).count() == 1


def test_preferences_turn_a_kind_off_per_channel(run_jobs, researcher, researcher_client):
    ticked = {f"portal:{kind}": "on" for kind in NotificationKind.values} | {
        f"email:{kind}": "on" for kind in NotificationKind.values if kind != "expiry_warning"
    }
    ticked.pop("portal:running")
    response = researcher_client.post("/notifications/preferences/", ticked | {"webhook_url": ""})
    assert response.status_code == 302
    prefs = NotificationSettings.objects.get(user=researcher)
    assert prefs.muted["portal"] == ["running"]
    assert prefs.muted["email"] == ["expiry_warning"]
    mail.outbox.clear()
    assert notify(user=researcher, message="up", kind="running") is None
    run_jobs(lambda: notify(user=researcher, message="soon", kind="expiry_warning", email_subject="soon"))
    run_jobs(lambda: notify(user=researcher, message="over", kind="budget", email_subject="over"))
    assert sorted(Notification.objects.filter(user=researcher).values_list("message", flat=True)) == [
        "over",
        "soon",
    ]
    assert [m.subject for m in mail.outbox] == ["over"]
    page = researcher_client.get("/notifications/").content.decode()
    assert 'name="portal:running" aria-label="Started and rescaled by portal">' in page
    # never e-mailed: no box to tick, and saving without one changes nothing
    assert 'name="email:running"' not in page and 'title="Never sent by email">—' in page
    ticked.pop("email:running")
    researcher_client.post("/notifications/preferences/", ticked | {"webhook_url": ""})
    assert "running" not in NotificationSettings.objects.get(user=researcher).muted["email"]


def test_a_refused_webhook_keeps_what_was_typed_and_unticked(researcher, researcher_client):
    ticked = {f"portal:{kind}": "on" for kind in NotificationKind.values}
    ticked.pop("portal:running")
    posted = ticked | {"webhook_url": "ftp://hooks.example.com/x", "webhook_format": "slack"}
    response = researcher_client.post("/notifications/preferences/", posted)
    assert response.status_code == 400
    page = response.content.decode()
    assert 'value="ftp://hooks.example.com/x"' in page and "autofocus" in page
    assert 'name="portal:running" aria-label="Started and rescaled by portal">' in page  # still unticked
    assert 'name="portal:budget" aria-label="Budget alerts by portal" checked>' in page
    assert '<option value="slack" selected>' in page
    assert not NotificationSettings.objects.filter(user=researcher, webhook_url__startswith="ftp:").exists()


def test_the_kinds_offered_without_e_mail_are_those_no_notice_sends_by_e_mail():
    """NOT_EMAILED is what the preferences promise: no `notify` of such a kind gives a subject."""
    found = set()
    root = Path(__file__).resolve().parents[2]
    for path in [*(root / "portal").rglob("*.py"), *(root / "workers").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "notify":
                given = {keyword.arg: keyword.value for keyword in node.keywords}
                kind = given.get("kind")
                if "email_subject" in given and isinstance(kind, ast.Constant):
                    found.add(kind.value)
    assert found and not found & NOT_EMAILED
    # and notify keeps the promise whatever a caller gives
    mail.outbox.clear()
    user = UserFactory(username="dora", email="dora@example.com")
    for kind in NOT_EMAILED:
        notify(user=user, message="m", kind=kind, email_subject="s")
    assert mail.outbox == [] and not EmailDelivery.objects.exists()


def test_a_webhook_url_the_portal_would_not_post_to_is_refused_with_nothing_saved(
    researcher, researcher_client
):
    response = researcher_client.post(
        "/notifications/preferences/", {"webhook_url": "http://example.com/hook"}
    )
    assert response.status_code == 400
    assert "Only https:// URLs are accepted." in response.content.decode()
    assert not NotificationSettings.objects.filter(user=researcher).exists()


def test_the_api_lists_and_marks_read(researcher, alice, carol):
    _many(researcher, 3)
    listed = alice.get("/api/v1/notifications").json()
    assert [row["message"] for row in listed["results"]] == ["note 2", "note 1", "note 0"]
    assert listed["results"][0]["kind"] == "budget" and listed["results"][0]["read_at"] is None
    first = listed["results"][0]["id"]
    assert carol.post(f"/api/v1/notifications/{first}/read").status_code == 404
    assert alice.post(f"/api/v1/notifications/{first}/read").json() == {"marked": 1}
    unread_first = alice.get("/api/v1/notifications?order=unread").json()["results"]
    assert [row["message"] for row in unread_first] == ["note 1", "note 0", "note 2"]
    assert alice.get("/api/v1/notifications?order=oldest").status_code == 400
    assert alice.post("/api/v1/notifications/read-all").json() == {"marked": 2}


def test_the_api_reads_and_changes_preferences(researcher, alice):
    got = alice.get("/api/v1/notifications/preferences").json()
    assert got["muted"] == {} and got["webhook_url"] == "" and "approval_reminder" in got["kinds"]
    put = alice.put(
        "/api/v1/notifications/preferences",
        {"muted": {"email": ["running", "idle"]}, "webhook_format": "slack"},
        format="json",
    )
    assert put.status_code == 200, put.json()
    assert put.json()["muted"] == {"email": ["idle", "running"]} and put.json()["webhook_format"] == "slack"
    bad = alice.put("/api/v1/notifications/preferences", {"muted": {"pigeon": ["running"]}}, format="json")
    assert bad.status_code == 400 and "pigeon" in bad.json()["error"]["message"]
    unknown_kind = alice.put(
        "/api/v1/notifications/preferences", {"muted": {"email": ["gossip"]}}, format="json"
    )
    assert unknown_kind.status_code == 400
    assert NotificationSettings.objects.get(user=researcher).muted == {"email": ["idle", "running"]}


def test_the_form_offers_only_kinds_that_can_reach_you_and_keeps_the_others(
    researcher, researcher_client, lead_client, admin_client
):
    researcher_page = researcher_client.get("/notifications/").content.decode()
    assert "Fleet alerts" not in researcher_page and "Approval requests" not in researcher_page
    assert "Decisions on my requests" in researcher_page
    assert "Approval requests" in lead_client.get("/notifications/").content.decode()
    assert "Fleet alerts" not in lead_client.get("/notifications/").content.decode()
    assert "Fleet alerts" in admin_client.get("/notifications/").content.decode()

    NotificationSettings.objects.create(user=researcher, muted={"email": ["approval_request"]})
    shown = ["decision", "running", "budget"]
    ticked = {f"{channel}:{kind}": "on" for channel in ("portal", "email", "webhook") for kind in shown}
    assert (
        researcher_client.post("/notifications/preferences/", ticked | {"webhook_url": ""}).status_code == 302
    )
    muted = NotificationSettings.objects.get(user=researcher).muted
    assert "approval_request" in muted["email"]  # hidden, and as it was: muted
    assert (
        "fleet" not in muted["portal"] and "approval_reminder" not in muted["email"]
    )  # hidden: as they were
    assert "health" in muted["portal"] and "decision" not in muted["portal"]  # shown: as ticked
