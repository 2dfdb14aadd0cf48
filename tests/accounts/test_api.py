"""Personal access tokens over the API, and how requests authenticate (Bearer or session + CSRF)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework.test import APIClient

from portal.accounts.models import ApiToken
from portal.accounts.services import hash_token, token_create
from tests.conftest import bearer

URL = "/api/v1/tokens"


def test_a_new_token_is_shown_once_and_works(researcher, alice):
    response = alice.post(URL, {"name": "ci", "expires_days": 30}, format="json")
    assert response.status_code == 201
    created = response.json()
    raw = created["token"]
    assert raw.startswith("gpp_")
    assert created["name"] == "ci"
    assert created["active"] is True
    assert raw.startswith(created["prefix"])
    stored = ApiToken.objects.get(pk=created["id"])
    assert stored.token_hash == hash_token(raw)
    assert timedelta(days=29) < stored.expires_at - timezone.now() <= timedelta(days=30)

    listed = alice.get(URL).json()["results"]
    assert [t["name"] for t in listed] == ["ci", "tests"]
    assert all("token" not in t for t in listed)
    assert bearer(raw).get("/api/v1/me").json()["username"] == "alice"


def test_a_token_without_expiry_expires_with_the_default_or_never_with_no_maximum(
    alice, researcher, settings
):
    created = alice.post(URL, {"name": "unsaid"}, format="json").json()
    assert created["expires_at"] is not None  # 90 days, cut to the token making it
    settings.PORTAL_TOKEN_MAX_DAYS = 0
    _, raw = token_create(user=researcher, name="root", scope="admin")
    assert bearer(raw).post(URL, {"name": "forever"}, format="json").json()["expires_at"] is None


def test_token_input_errors_are_400s_naming_the_field(alice):
    for body, field in [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x", "expires_days": 0}, "expires_days"),
        ({"name": "x", "expires_days": 99999}, "expires_days"),
        ({"name": "x", "expires_days": "soon"}, "expires_days"),
    ]:
        response = alice.post(URL, body, format="json")
        assert response.status_code == 400, body
        assert field in response.json()["error"]["fields"], body
    assert ApiToken.objects.count() == 1  # the fixture's own


def test_a_revoked_token_is_refused_with_401(researcher, alice):
    token, raw = token_create(user=researcher, name="ci")
    assert bearer(raw).get("/api/v1/me").status_code == 200
    response = alice.post(f"{URL}/{token.pk}/revoke")
    assert response.status_code == 200
    assert response.json()["active"] is False
    assert response.json()["revoked_at"] is not None

    refused = bearer(raw).get("/api/v1/me")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthenticated"


def test_revoking_twice_is_a_conflict(researcher, alice):
    token, _ = token_create(user=researcher, name="ci")
    assert alice.post(f"{URL}/{token.pk}/revoke").status_code == 200
    again = alice.post(f"{URL}/{token.pk}/revoke")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "conflict"


def test_someone_elses_token_cannot_be_revoked(other_researcher, alice):
    token, raw = token_create(user=other_researcher, name="carols")
    assert alice.post(f"{URL}/{token.pk}/revoke").status_code == 404
    assert bearer(raw).get("/api/v1/me").status_code == 200


def test_someone_elses_tokens_are_not_listed(other_researcher, alice):
    token_create(user=other_researcher, name="carols")
    assert [t["name"] for t in alice.get(URL).json()["results"]] == ["tests"]


def test_an_expired_token_is_refused_with_401(researcher):
    token, raw = token_create(user=researcher, name="short", expires_days=1)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bearer(raw).get("/api/v1/me")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"


def test_an_unknown_or_malformed_token_is_refused_with_401(db):
    assert bearer("gpp_not-a-real-token").get("/api/v1/me").status_code == 401
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer two parts")
    assert client.get("/api/v1/me").status_code == 401


def test_a_token_of_a_deactivated_user_is_refused(researcher):
    _, raw = token_create(user=researcher, name="ci")
    researcher.is_active = False
    researcher.save()
    assert bearer(raw).get("/api/v1/me").status_code == 401


def test_the_browser_session_works_for_reads_but_writes_need_the_csrf_token(researcher):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="alice", password="pw-for-tests")
    assert client.get("/api/v1/me").json()["username"] == "alice"

    refused = client.post(URL, {"name": "from-browser"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"
    assert "CSRF" in refused.json()["error"]["message"]
    assert not ApiToken.objects.filter(name="from-browser").exists()

    csrf = client.get("/admin/login/").cookies["csrftoken"].value
    accepted = client.post(URL, {"name": "from-browser"}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert accepted.status_code == 201
