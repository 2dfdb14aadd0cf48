"""A team's leads set its Hugging Face token in the portal: encrypted at rest, audited without
the token, never shown again; researchers and other teams' leads may not. The API reads and
changes the team's settings as the page does, all or nothing, writes with an admin-scoped token."""

from __future__ import annotations

import pytest
from django.db import connection

from portal.accounts.models import Team
from portal.accounts.services import team_hf_token_set
from portal.audit.models import AuditEvent
from portal.core.errors import NotAllowed, ValidationFailed
from tests.conftest import signed_in, token_client

pytestmark = pytest.mark.django_db


def test_a_lead_sets_the_token_it_is_encrypted_at_rest_and_audited_without_it(lead, team):
    team_hf_token_set(user=lead, team_slug=team.slug, token="  hf_SecretToken1234 ")
    assert Team.objects.get(pk=team.pk).hf_token == "hf_SecretToken1234"
    with connection.cursor() as cursor:
        cursor.execute("SELECT hf_token FROM accounts_team WHERE id = %s", [team.pk])
        (stored,) = cursor.fetchone()
    assert "hf_SecretToken1234" not in stored  # ciphertext in the database
    event = AuditEvent.objects.get(action="team.hf_token_set")
    assert event.detail == "ends in 1234" and "Secret" not in event.detail
    team_hf_token_set(user=lead, team_slug=team.slug, token="")
    assert not Team.objects.get(pk=team.pk).hf_token
    assert AuditEvent.objects.filter(action="team.hf_token_cleared").exists()


def test_only_the_teams_leads_and_admins_may_set_it_and_only_a_token(researcher, lead, team):
    with pytest.raises(NotAllowed):
        team_hf_token_set(user=researcher, team_slug=team.slug, token="hf_abcdefghij")
    with pytest.raises(ValidationFailed) as bad:
        team_hf_token_set(user=lead, team_slug=team.slug, token="not a token")
    assert bad.value.fields == {
        "token": [
            "A Hugging Face access token starts with hf_, has no spaces and is 10 to 200 characters long "
            "(this one has 11): copy the whole token from your Hugging Face settings."
        ]
    }
    with pytest.raises(ValidationFailed, match=r"\(this one has 8\)"):
        team_hf_token_set(user=lead, team_slug=team.slug, token="hf_short")  # the reason it fails, said
    assert not Team.objects.get(pk=team.pk).hf_token


def test_the_settings_page_shows_whether_a_token_is_set_never_the_token(lead, researcher, team):
    page = signed_in(lead)
    body = page.post(
        f"/teams/{team.slug}/settings/", {"token": "hf_PageToken9876"}, follow=True
    ).content.decode()
    assert "Hugging Face token saved." in body and "ending in <code>9876</code>" in body
    assert "hf_PageToken9876" not in body
    refused = signed_in(researcher).get(f"/teams/{team.slug}/settings/")
    assert refused.status_code == 403
    bad = page.post(f"/teams/{team.slug}/settings/", {"token": "nope"}).content.decode()
    assert "starts with hf_" in bad and 'aria-invalid="true"' in bad
    menu = page.get("/").content.decode()
    assert f'href="/teams/{team.slug}/settings/"' in menu

    # Save with the field empty (Enter in it, or a habit) keeps the token: only Remove removes it
    empty = page.post(f"/teams/{team.slug}/settings/", {"token": "  "})
    assert empty.status_code == 400 and "Paste a token to save it" in empty.content.decode()
    assert Team.objects.get(pk=team.pk).hf_token == "hf_PageToken9876"
    assert not AuditEvent.objects.filter(action="team.hf_token_cleared").exists()
    removed = page.post(f"/teams/{team.slug}/settings/", {"token": "", "clear": "1"}, follow=True)
    assert "Hugging Face token removed." in removed.content.decode()
    assert not Team.objects.get(pk=team.pk).hf_token


def test_the_token_never_shows_in_the_admin_or_in_printed_manifests(lead, team, admin_user):
    team_hf_token_set(user=lead, team_slug=team.slug, token="hf_AdminHidden42")
    page = signed_in(admin_user).get(f"/admin/accounts/team/{team.pk}/change/").content.decode()
    assert "hf_AdminHidden42" not in page and 'name="hf_token"' not in page
    from workers.manifests.serving import redacted

    shown = redacted([{"kind": "Secret", "data": {"HF_TOKEN": "aGZf"}}, {"kind": "Service"}])
    assert shown == [{"kind": "Secret", "data": {"HF_TOKEN": "<redacted>"}}, {"kind": "Service"}]


# The API: what the Team settings page does, for automation.

URL = "/api/v1/teams/vision/settings"


def test_a_lead_reads_and_changes_the_teams_settings_through_the_api(bob, lead, team, settings):
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True  # the hook's host is this machine
    assert bob.get(URL).json() == {
        "team": "vision",
        "hf_token_set": False,
        "hf_token_ends_in": None,
        "webhook_url": "",
        "webhook_format": "generic",
        "approval_reminder_hours": team.approval_reminder_hours,
        "idle_reclaim_minutes": 0,
        "idle_threshold_percent": 5,
        "idle_grace_minutes": 30,
    }
    changed = bob.patch(URL, {"hf_token": "hf_SecretToken1234", "approval_reminder_hours": 8}, format="json")
    assert changed.status_code == 200, changed.content
    assert "hf_SecretToken1234" not in changed.content.decode()  # never shown again
    assert changed.json()["hf_token_set"] is True and changed.json()["hf_token_ends_in"] == "1234"
    team.refresh_from_db()
    assert team.hf_token == "hf_SecretToken1234" and team.approval_reminder_hours == 8

    hook = bob.patch(
        URL, {"webhook_url": "https://127.0.0.1/vision", "webhook_format": "slack"}, format="json"
    )
    assert hook.json()["webhook_url"] == "https://127.0.0.1/vision"
    assert (
        hook.json()["approval_reminder_hours"] == 8 and hook.json()["hf_token_set"] is True
    )  # the rest stays
    cleared = bob.patch(URL, {"hf_token": ""}, format="json").json()
    assert cleared["hf_token_set"] is False and cleared["webhook_format"] == "slack"
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"team.hf_token_set", "team.hf_token_cleared", "team.notifications_set"} <= actions


def test_a_refused_value_changes_nothing_even_beside_a_good_one(bob, team):
    refused = bob.patch(
        URL, {"hf_token": "hf_SecretToken1234", "webhook_url": "http://plain.example.com/x"}, format="json"
    )
    assert refused.status_code == 400, refused.content
    assert "webhook_url" in refused.json()["error"]["fields"], refused.json()
    bad_token = bob.patch(URL, {"hf_token": "not a token"}, format="json")
    assert bad_token.status_code == 400 and "hf_token" in bad_token.json()["error"]["fields"]
    assert bob.patch(URL, {"approval_reminder_hours": 721}, format="json").status_code == 400
    assert (
        bob.patch(URL, {"approval_reminder_hours": "8"}, format="json").status_code == 400
    )  # types are strict
    team.refresh_from_db()
    assert not team.hf_token and team.webhook_url == ""
    assert not AuditEvent.objects.filter(action__startswith="team.").exists()


def test_members_are_refused_outsiders_told_nothing_and_writes_need_the_admin_scope(
    alice, carol, admin, lead, team
):
    assert alice.get(URL).status_code == 403  # a researcher of the team
    assert carol.get(URL).status_code == 404  # another team's: as for a team that does not exist
    assert admin.get(URL).status_code == 200
    assert token_client(lead, "read").get(URL).status_code == 200
    for scope in ("read", "workloads"):
        refused = token_client(lead, scope).patch(URL, {"approval_reminder_hours": 2}, format="json")
        assert refused.status_code == 403, scope
    assert (
        "admin scope"
        in token_client(lead, "workloads").patch(URL, {}, format="json").json()["error"]["message"]
    )
    assert (
        token_client(lead, "admin").patch(URL, {"approval_reminder_hours": 2}, format="json").status_code
        == 200
    )


def test_idle_reclaim_is_switched_on_and_tuned_from_the_api_and_the_page(bob, lead, team):
    on = bob.patch(URL, {"idle_reclaim_minutes": 60, "idle_grace_minutes": 15}, format="json")
    assert on.status_code == 200, on.content
    assert (on.json()["idle_reclaim_minutes"], on.json()["idle_grace_minutes"]) == (60, 15)
    assert on.json()["idle_threshold_percent"] == 5  # left as it was
    event = AuditEvent.objects.get(action="team.idle_reclaim_set")
    assert event.detail == "warned after 60 min under 5 % utilization, ended 15 min later"
    same = bob.patch(URL, {"idle_reclaim_minutes": 60, "idle_grace_minutes": 15}, format="json")
    assert same.status_code == 200 and AuditEvent.objects.filter(action="team.idle_reclaim_set").count() == 1
    notices = {"webhook_url": "", "webhook_format": "generic", "approval_reminder_hours": 13}
    bob.patch(URL, notices, format="json")
    bob.patch(URL, notices, format="json")  # saved as it was: not audited again
    assert AuditEvent.objects.filter(action="team.notifications_set").count() == 1

    for body, field in (
        ({"idle_reclaim_minutes": 5}, "idle_reclaim_minutes"),  # too soon to call a GPU idle
        ({"idle_threshold_percent": 0}, "idle_threshold_percent"),
        ({"idle_grace_minutes": 2}, "idle_grace_minutes"),
        ({"idle_reclaim_minutes": 90, "idle_grace_minutes": 100000}, "idle_grace_minutes"),
    ):
        refused = bob.patch(URL, body, format="json")
        assert refused.status_code == 400 and field in refused.json()["error"]["fields"], body
    team.refresh_from_db()
    assert (team.idle_reclaim_minutes, team.idle_grace_minutes) == (60, 15)  # nothing changed

    page_client = signed_in(lead)
    page = page_client.get("/teams/vision/settings/").content.decode()
    assert 'id="team-idle-reclaim"' in page and "warned after 60 minutes under 5 % utilization" in page
    bad = page_client.post(
        "/teams/vision/settings/",
        {
            "section": "idle",
            "idle_reclaim_minutes": "abc",
            "idle_threshold_percent": "5",
            "idle_grace_minutes": "15",
        },
    )
    assert bad.status_code == 400 and "0 (off) or 10 to 10080" in bad.content.decode()
    assert 'value="abc"' in bad.content.decode()  # what was typed stays to be mended
    off = page_client.post(
        "/teams/vision/settings/",
        {
            "section": "idle",
            "idle_reclaim_minutes": "0",
            "idle_threshold_percent": "5",
            "idle_grace_minutes": "15",
        },
    )
    assert off.status_code == 302
    team.refresh_from_db()
    assert team.idle_reclaim_minutes == 0
    assert '<span class="tag warn">off</span>' in page_client.get("/teams/vision/settings/").content.decode()


def test_a_misnamed_setting_is_refused_and_an_unresolvable_stored_hook_blocks_nothing(bob, team):
    refused = bob.patch(URL, {"token": "hf_SecretToken1234"}, format="json")  # the page's field name
    assert refused.status_code == 400 and "token" in refused.json()["error"]["fields"]
    team.webhook_url = "https://hooks.invalid/vision"  # stored earlier; its host no longer resolves
    team.save(update_fields=["webhook_url"])
    changed = bob.patch(URL, {"approval_reminder_hours": 3}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["webhook_url"] == "https://hooks.invalid/vision"
    assert bob.get(URL, {"x": "1"}).status_code == 400


def test_a_token_that_may_not_change_a_webhook_reads_only_its_host(bob, lead, team, settings):
    """The address of a Slack or Teams webhook is itself the right to post to the channel."""
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True
    hook = "https://127.0.0.1:8443/services/T000/B000/SecretPart"
    assert (
        bob.patch(URL, {"webhook_url": hook}, format="json").json()["webhook_url"] == hook
    )  # the page's session
    assert token_client(lead, "admin").get(URL).json()["webhook_url"] == hook
    for scope in ("read", "workloads"):
        assert token_client(lead, scope).get(URL).json()["webhook_url"] == "https://127.0.0.1:8443/…", scope

    sent_back = token_client(lead, "admin").patch(
        URL, {"webhook_url": "https://127.0.0.1:8443/…"}, format="json"
    )
    assert (
        sent_back.status_code == 400 and "whole URL" in sent_back.json()["error"]["fields"]["webhook_url"][0]
    )
    assert Team.objects.get(pk=team.pk).webhook_url == hook  # nothing changed

    prefs = "/api/v1/notifications/preferences"
    assert bob.put(prefs, {"webhook_url": hook}, format="json").json()["webhook_url"] == hook
    assert token_client(lead, "read").get(prefs).json()["webhook_url"] == "https://127.0.0.1:8443/…"
    assert token_client(lead, "admin").get(prefs).json()["webhook_url"] == hook


def test_the_flash_of_a_save_is_not_wiped_by_the_section_the_page_then_loads(lead, team):
    """The settings page loads its budget section with htmx on load: that GET must not carry the
    (by then empty) messages out of band over the "saved" the page shows; an action's answer does."""
    page_client = signed_in(lead)
    saved = page_client.post(
        "/teams/vision/settings/",
        {
            "section": "idle",
            "idle_reclaim_minutes": "30",
            "idle_threshold_percent": "5",
            "idle_grace_minutes": "15",
        },
        follow=True,
    ).content.decode()
    assert "Idle reclaim saved." in saved
    section = page_client.get(f"/teams/{team.slug}/budget/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="messages"' not in section
    answer = page_client.post(
        f"/teams/{team.slug}/budget/", {"thresholds": "50,80,100", "policy": "warn"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'id="messages"' in answer
