"""A form sent from a page older than the sign-in (another tab signed in or out, a page left open
for days): the portal's page, nothing changed, and the way back to the page it came from."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_a_stale_sign_in_form_gets_the_portals_page_and_the_way_back():
    client = Client(enforce_csrf_checks=True)
    response = client.post(
        "/login/",
        {"username": "alice", "password": "x"},
        HTTP_REFERER="http://testserver/login/?next=/spend/",
    )
    assert response.status_code == 403
    page = response.content.decode()
    assert "This form was out of date" in page and "Nothing was changed" in page
    assert 'href="/login/?next=/spend/">Open the page again' in page
    assert "CSRF verification failed" not in page  # not Django's page


def test_a_signed_in_form_from_elsewhere_goes_back_to_the_dashboard():
    client = Client(enforce_csrf_checks=True)
    client.force_login(UserFactory(username="dave"))
    response = client.post("/notifications/read/", HTTP_REFERER="https://evil.example.com/page")
    assert response.status_code == 403
    assert 'href="/">Open the page again' in response.content.decode()  # never off the portal
