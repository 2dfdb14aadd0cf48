"""Signing in and out, and what a signed-out visitor gets."""

from __future__ import annotations

import pytest
from django.urls import reverse

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
