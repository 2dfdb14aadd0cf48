"""Personal access tokens: shown once, stored hashed, expiring and revocable."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from portal.accounts.models import ApiToken
from portal.accounts.services import hash_token, token_authenticate, token_create, token_revoke
from portal.core.errors import Conflict, NotFound, ValidationFailed

pytestmark = pytest.mark.django_db


def test_token_is_stored_only_as_a_hash_and_authenticates(researcher):
    token, raw = token_create(user=researcher, name="ci")
    assert raw.startswith("gpp_") and len(raw) > 40
    stored = ApiToken.objects.get(pk=token.pk)
    assert stored.token_hash == hash_token(raw) and raw not in stored.token_hash
    assert token_authenticate(raw=raw).user == researcher
    assert token_authenticate(raw=raw + "x") is None


def test_expired_and_revoked_tokens_do_not_authenticate(researcher, lead):
    _token, raw = token_create(user=researcher, name="short", expires_days=1)
    assert token_authenticate(raw=raw, now=timezone.now() + timedelta(days=2)) is None
    other, other_raw = token_create(user=researcher, name="revoked")
    with pytest.raises(NotFound):
        token_revoke(user=lead, token_id=other.pk)
    token_revoke(user=researcher, token_id=other.pk)
    assert token_authenticate(raw=other_raw) is None
    with pytest.raises(Conflict):
        token_revoke(user=researcher, token_id=other.pk)


def test_token_needs_a_name_and_a_sane_expiry(researcher):
    with pytest.raises(ValidationFailed):
        token_create(user=researcher, name=" ")
    with pytest.raises(ValidationFailed):
        token_create(user=researcher, name="x", expires_days=0)
    assert ApiToken.objects.count() == 0


def test_every_token_expires_by_default_and_none_outlives_the_maximum(
    researcher, researcher_client, alice, settings
):
    """A token asked for with no expiry used to last for ever: a leaked one in an old CI config
    kept working years later. It now gets PORTAL_TOKEN_DEFAULT_DAYS, and PORTAL_TOKEN_MAX_DAYS caps
    any asked for, in the service, the API and the page alike."""
    assert (settings.PORTAL_TOKEN_DEFAULT_DAYS, settings.PORTAL_TOKEN_MAX_DAYS) == (90, 365)
    before = timezone.now()
    token, _ = token_create(user=researcher, name="ci")
    assert before + timedelta(days=90) <= token.expires_at <= timezone.now() + timedelta(days=90)
    with pytest.raises(ValidationFailed, match="between 1 and 365 days"):
        token_create(user=researcher, name="x", expires_days=366)
    assert token_create(user=researcher, name="year", expires_days=365)[0].expires_at is not None

    refused = alice.post("/api/v1/tokens", {"name": "long", "expires_days": 400}, format="json")
    assert refused.status_code == 400 and "expires_days" in refused.json()["error"]["fields"]
    page = researcher_client.get("/tokens/").content.decode()
    assert (
        'name="expires_days" value="90" min="1" max="365"' in page
        and "Between 1 and 365 days; 90 if left empty." in page
    )
    refused = researcher_client.post("/tokens/", {"name": "long", "expires_days": "400"}).content.decode()
    assert "Between 1 and 365." in refused
    made = researcher_client.post("/tokens/", {"name": "blank", "expires_days": ""})
    assert made.status_code == 200 and ApiToken.objects.get(name="blank").expires_at is not None
    assert not ApiToken.objects.filter(name="long").exists()

    settings.PORTAL_TOKEN_MAX_DAYS = 0  # no maximum: no expiry asked, none given
    assert token_create(user=researcher, name="forever")[0].expires_at is None
    assert token_create(user=researcher, name="decade", expires_days=3650)[0].expires_at is not None


def test_an_admin_finds_the_tokens_that_never_expire(researcher, admin_client, settings):
    settings.PORTAL_TOKEN_MAX_DAYS = 0
    token_create(user=researcher, name="forever")
    token_create(user=researcher, name="thirty-day-ci", expires_days=30)
    page = admin_client.get("/admin/accounts/apitoken/", {"expires_at__isnull": "True"}).content.decode()
    assert "forever" in page and "thirty-day-ci" not in page


def test_the_user_of_a_token_in_use_is_told_once_a_week_before_it_expires(
    researcher, researcher_client, lead, mailoutbox, run_jobs
):
    from portal.accounts.models import Notification
    from portal.accounts.services import tokens_warn_expiring

    now = timezone.now()
    in_use, _ = token_create(user=researcher, name="ci-nightly", expires_days=5)
    idle, _ = token_create(user=researcher, name="forgotten", expires_days=5)
    later, _ = token_create(user=researcher, name="later", expires_days=30)
    gone, _ = token_create(user=lead, name="revoked", expires_days=5)
    ApiToken.objects.filter(pk__in=[in_use.pk, later.pk, gone.pk]).update(
        last_used_at=now - timedelta(hours=2)
    )
    ApiToken.objects.filter(pk=idle.pk).update(last_used_at=now - timedelta(days=40))
    token_revoke(user=lead, token_id=gone.pk)

    assert run_jobs(lambda: tokens_warn_expiring(now=now)) == 1
    (note,) = Notification.objects.filter(user=researcher)
    assert note.kind == "expiry_warning" and note.link == "/tokens/"
    assert note.message.startswith(f"Your API token ci-nightly ({in_use.prefix}…) expires on ")
    (mail,) = mailoutbox
    assert mail.to == [researcher.email] and mail.subject.startswith("API token ci-nightly expires on ")
    assert tokens_warn_expiring(now=now + timedelta(hours=1)) == 0  # once
    page = researcher_client.get("/tokens/").content.decode()
    row = page.split(f'id="token-{in_use.pk}"')[1].split("</tr>")[0]
    assert '<span class="tag warn"' in row and ">expires soon<" in row
    assert '<span class="tag warn"' not in page.split(f'id="token-{later.pk}"')[1].split("</tr>")[0]
    # the table redrawn after a revoke (htmx) still warns of it
    redrawn = researcher_client.post(f"/tokens/{idle.pk}/revoke/", HTTP_HX_REQUEST="true").content.decode()
    row = redrawn.split(f'id="token-{in_use.pk}"')[1].split("</tr>")[0]
    assert ">expires soon<" in row


def test_create_token_command_prints_the_token_alone_on_the_last_line(researcher, capsys):
    call_command("create_token", "alice", "--expires-days", "7")
    raw = capsys.readouterr().out.strip().splitlines()[-1]
    assert token_authenticate(raw=raw).user == researcher
    assert ApiToken.objects.get(user=researcher).expires_at is not None


def test_seed_demo_is_idempotent(db, capsys):
    call_command("seed_demo")
    first = capsys.readouterr().out
    call_command("seed_demo")
    second = capsys.readouterr().out
    assert "objects created" in first and "(0 objects created)" in second
    assert "portal-demo" in second
