"""The e-mails and webhook posts the Notifications and Team settings pages list, over the API:
yours to you, a team's to its leads and admins, newest first, with how each went."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.accounts.models import EmailDelivery, WebhookDelivery
from tests.conftest import token_client

pytestmark = pytest.mark.django_db
HOOK = "https://hooks.slack.com/services/T000/B000/SecretPart"


def test_you_read_your_latest_emails_and_posts_with_how_each_went(alice, researcher, lead):
    now = timezone.now()
    EmailDelivery.objects.create(
        user=researcher, address="a@example.com", subject="Old", body="x", kind="budget"
    )
    EmailDelivery.objects.create(
        user=researcher, address="a@example.com", subject="Running", body="x", kind="running",
        state=EmailDelivery.State.PENDING, attempts=1, last_error="SMTP 451", next_try_at=now + timedelta(minutes=5),
    )  # fmt: skip
    WebhookDelivery.objects.create(user=researcher, url=HOOK, webhook_format="slack", kind="budget", body={})
    WebhookDelivery.objects.create(
        user=lead, url=HOOK, webhook_format="slack", kind="budget", body={}
    )  # not hers

    body = alice.get("/api/v1/notifications/deliveries").json()
    assert [e["subject"] for e in body["emails"]] == ["Running", "Old"]  # newest first
    newest = body["emails"][0]
    assert (newest["state"], newest["attempts"], newest["last_error"], newest["sending"]) == (
        "pending", 1, "SMTP 451", False,
    )  # fmt: skip
    assert newest["retry_at"] is not None and newest["address"] == "a@example.com"
    assert [(w["url"], w["webhook_format"]) for w in body["webhooks"]] == [(HOOK, "slack")]

    assert len(alice.get("/api/v1/notifications/deliveries?limit=1").json()["emails"]) == 1
    assert alice.get("/api/v1/notifications/deliveries?limit=0").status_code == 400
    assert alice.get("/api/v1/notifications/deliveries?limt=1").status_code == 400
    read = token_client(researcher, "read").get("/api/v1/notifications/deliveries").json()
    assert read["webhooks"][0]["url"] == "https://hooks.slack.com/…"  # the address is the right to post


def test_a_teams_posts_are_for_its_leads_and_admins(bob, alice, carol, admin, lead, team):
    WebhookDelivery.objects.create(team=team, url=HOOK, webhook_format="teams", kind="approval", body={})
    url = f"/api/v1/teams/{team.slug}/deliveries"
    posts = bob.get(url).json()["webhooks"]
    assert [(p["kind"], p["state"], p["url"]) for p in posts] == [("approval", "pending", HOOK)]
    assert admin.get(url).status_code == 200
    assert alice.get(url).status_code == 403  # a researcher of the team
    assert carol.get(url).status_code == 404  # another team's: as for no team at all
    assert carol.get(f"{url}?limit=0").status_code == 404  # the team is checked before the query
    assert token_client(lead, "read").get(url).json()["webhooks"][0]["url"] == "https://hooks.slack.com/…"
