"""A team's leads set its Hugging Face token in the portal: encrypted at rest, audited without
the token, never shown again; researchers and other teams' leads may not."""

from __future__ import annotations

import pytest
from django.db import connection

from portal.accounts.models import Team
from portal.accounts.services import team_hf_token_set
from portal.audit.models import AuditEvent
from portal.core.errors import NotAllowed, ValidationFailed
from tests.conftest import signed_in

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
    assert bad.value.fields == {"token": ["A Hugging Face access token starts with hf_ and has no spaces."]}
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


def test_the_token_never_shows_in_the_admin_or_in_printed_manifests(lead, team, admin_user):
    team_hf_token_set(user=lead, team_slug=team.slug, token="hf_AdminHidden42")
    page = signed_in(admin_user).get(f"/admin/accounts/team/{team.pk}/change/").content.decode()
    assert "hf_AdminHidden42" not in page and 'name="hf_token"' not in page
    from workers.manifests.serving import redacted

    shown = redacted([{"kind": "Secret", "data": {"HF_TOKEN": "aGZf"}}, {"kind": "Service"}])
    assert shown == [{"kind": "Secret", "data": {"HF_TOKEN": "<redacted>"}}, {"kind": "Service"}]
