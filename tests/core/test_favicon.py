"""/favicon.ico, asked for by browsers on pages that name no icon (the browsable API), leads to
the portal's icon for anyone, signed in or not."""

from __future__ import annotations

import pytest
from django.templatetags.static import static

pytestmark = pytest.mark.django_db


def test_the_icon_path_leads_to_the_portals_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == static("favicon.svg")
    assert client.get(response["Location"]).status_code == 200
