"""Personal access tokens: the secret is shown once; revoked tokens stop working."""

from __future__ import annotations

from portal.accounts.models import ApiToken
from portal.accounts.services import token_authenticate, token_create
from tests.web.conftest import HTMX


def test_creating_a_token_shows_its_secret_once(researcher_client, researcher):
    response = researcher_client.post("/tokens/", {"name": "ci", "expires_days": "30"}, **HTMX)
    page = response.content.decode()

    token = ApiToken.objects.get(user=researcher)
    secret = page.split('<code id="new-token-secret">')[1].split("</code>")[0]
    assert secret.startswith(token.prefix)
    assert token_authenticate(raw=secret) == researcher
    assert "it will not be shown again" in page
    assert token.expires_at is not None

    later = researcher_client.get("/tokens/").content.decode()
    assert secret not in later
    assert f"{token.prefix}…" in later


def test_a_token_without_a_name_is_refused_next_to_the_field(researcher_client, researcher):
    page = researcher_client.post("/tokens/", {"name": "  "}, **HTMX).content.decode()

    assert "This field is required." in page.split('id="field-name"')[1].split("</div>")[0]
    assert not ApiToken.objects.exists()


def test_revoking_a_token_stops_it_working(researcher_client, researcher):
    token, secret = token_create(user=researcher, name="old")

    page = researcher_client.post(f"/tokens/{token.pk}/revoke/", **HTMX).content.decode()

    token.refresh_from_db()
    assert token.revoked_at is not None
    assert token_authenticate(raw=secret) is None
    assert "Token revoked." in page  # the message travels out of band
    assert f"/tokens/{token.pk}/revoke/" not in page


def test_nobody_revokes_another_users_token(other_client, researcher):
    token, _secret = token_create(user=researcher, name="alices")

    response = other_client.post(f"/tokens/{token.pk}/revoke/", follow=True)

    token.refresh_from_db()
    assert token.revoked_at is None
    assert "No such token." in response.content.decode()


def test_the_list_shows_only_my_tokens(researcher_client, researcher, other_researcher):
    token_create(user=researcher, name="mine")
    token_create(user=other_researcher, name="carols")

    page = researcher_client.get("/tokens/").content.decode()

    assert "<td>mine</td>" in page
    assert "carols" not in page
