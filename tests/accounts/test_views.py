"""Signing in and out, what a signed-out visitor gets, and the personal access tokens page (the
secret is shown once; revoked tokens stop working)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.accounts.models import ApiToken
from portal.accounts.services import token_authenticate, token_create
from tests.rows import HTMX

PAGES = [
    "/",
    "/sandboxes/new/",
    "/sandboxes/1/",
    "/approvals/",
    "/spend/",
    "/fleet/",
    "/audit/",
    "/tokens/",
]


@pytest.mark.django_db
@pytest.mark.parametrize("path", PAGES)
def test_every_page_sends_a_signed_out_visitor_to_sign_in(client, path):
    response = client.get(path)

    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={path}"


def test_signing_in_lands_on_the_dashboard_with_the_navigation(client, researcher):
    response = client.post(reverse("login"), {"username": "alice", "password": "pw-for-tests"}, follow=True)

    assert response.redirect_chain[-1][0] == reverse("dashboard")
    page = response.content.decode()
    assert "My sandboxes" in page
    for link in ("Dashboard", "Request", "Approvals", "Spend", "Tokens", "Sign out"):
        assert link in page
    # researchers see neither the fleet nor the audit log in the navigation
    assert reverse("fleet") not in page
    assert reverse("audit") not in page


def test_a_wrong_password_keeps_the_visitor_on_the_sign_in_page(client, researcher):
    response = client.post(reverse("login"), {"username": "alice", "password": "nope"})

    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_signing_out_takes_a_post_and_ends_the_session(researcher_client):
    assert researcher_client.get(reverse("logout")).status_code == 405

    response = researcher_client.post(reverse("logout"))

    assert response.status_code == 302
    assert response["Location"] == reverse("login")
    assert researcher_client.get("/").status_code == 302


def test_leads_see_audit_and_admins_also_fleet_in_the_navigation(lead_client, admin_client):
    lead_page = lead_client.get("/").content.decode()
    admin_page = admin_client.get("/").content.decode()

    assert reverse("audit") in lead_page and reverse("fleet") not in lead_page
    assert reverse("audit") in admin_page and reverse("fleet") in admin_page


@pytest.mark.django_db
def test_a_signed_out_htmx_poll_sends_the_whole_window_to_sign_in(client):
    response = client.get("/", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/sandboxes/7/")

    assert response.status_code == 204
    assert response["HX-Redirect"] == "/login/?next=%2Fsandboxes%2F7%2F"


# Personal access tokens


def test_creating_a_token_shows_its_secret_once(researcher_client, researcher):
    response = researcher_client.post("/tokens/", {"name": "ci", "expires_days": "30"}, **HTMX)
    page = response.content.decode()

    token = ApiToken.objects.get(user=researcher)
    secret = page.split('<code id="new-token-secret">')[1].split("</code>")[0]
    assert secret.startswith(token.prefix)
    assert token_authenticate(raw=secret).user == researcher
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

    response = other_client.post(f"/tokens/{token.pk}/revoke/")

    token.refresh_from_db()
    assert token.revoked_at is None
    assert response.status_code == 404


def test_the_list_shows_only_my_tokens(researcher_client, researcher, other_researcher):
    token_create(user=researcher, name="mine")
    token_create(user=other_researcher, name="carols")

    page = researcher_client.get("/tokens/").content.decode()

    assert "<td>mine</td>" in page
    assert "carols" not in page


def test_the_bell_opens_the_notifications_page(researcher_client):
    page = researcher_client.get("/").content.decode()
    assert '<a class="bell" href="/notifications/"' in page
