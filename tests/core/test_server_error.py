"""An error no view handled: API clients get the API's error shape, people a page of the portal's
look that says what to do, built without the database (the error may be the database)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import include, path

from portal import urls as portal_urls


def _boom(request):
    raise RuntimeError("a bug")


urlpatterns = [path("boom/", _boom), path("api/v1/boom/", _boom), path("", include("portal.urls"))]
handler500 = portal_urls.handler500

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]


@override_settings(DEBUG=False)
def test_an_api_client_gets_the_error_shape():
    response = Client(raise_request_exception=False).get("/api/v1/boom/")
    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "server_error"


@override_settings(DEBUG=False)
def test_a_person_gets_a_page_that_reads_no_database():
    with CaptureQueriesContext(connection) as queries:
        response = Client(raise_request_exception=False).get("/boom/")
    assert response.status_code == 500
    page = response.content.decode()
    assert "<h1>Something went wrong</h1>" in page and "css/portal.css" in page
    assert 'href="/">Back to the dashboard' in page
    assert queries.captured_queries == []  # the page itself reads nothing
