"""An address that only takes a form, opened in the browser (a reload of the address a form came
back with errors at, a bookmark), gets a page saying so with the way back: not Django's empty 405,
which browsers show as a broken page. The API keeps its own 405 in its error shape."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.conftest import signed_in

pytestmark = pytest.mark.django_db


def test_a_form_address_opened_in_the_browser_says_so_and_changes_nothing(researcher):
    client = signed_in(researcher)
    for address in ("/notifications/preferences/", "/notifications/read/", "/tokens/1/revoke/"):
        response = client.get(address)
        page = response.content.decode()
        assert response.status_code == 405 and response["Allow"] == "POST"
        assert 'id="form-address"' in page and "Nothing was changed." in page
        assert 'href="/"' in page  # the way back to the dashboard
    assert client.head("/notifications/read/").status_code == 405
    # signed out, the sign-in page first, as for any page
    assert Client().get("/notifications/preferences/").status_code == 302


def test_the_api_keeps_its_own_405(alice):
    response = alice.delete("/api/v1/me")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_the_address_of_part_of_a_page_opened_alone_goes_to_the_page(researcher, team, whole_gpus):
    from tests.rows import HTMX, make_sandbox

    client = signed_in(researcher)
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])
    parts = {
        "/sandboxes/estimate/?team=vision": "/sandboxes/new/",
        "/sandboxes/mig-profiles/": "/sandboxes/new/",
        "/deployments/new/fits/": "/deployments/new/",
        "/deployments/new/estimate/": "/deployments/new/",
        "/spend/my-budgets/": "/spend/",
        "/live/badges/": "/",
        f"/sandboxes/{sandbox.number}/insight/": f"/sandboxes/{sandbox.number}/",
        f"/sandboxes/{sandbox.number}/kubectl/": f"/sandboxes/{sandbox.number}/",
    }
    for part, page in parts.items():
        response = client.get(part)
        assert (response.status_code, response["Location"]) == (302, page), part
        assert client.get(part, **HTMX).status_code in (200, 204), part  # htmx still gets the part
