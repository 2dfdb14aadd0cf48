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
