"""Bodies no client sends on purpose (nested a thousand deep, ten megabytes, thousands of form
fields) are refused in the API's error shape, never a 500 nor Django's HTML page."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.urls import URLResolver, get_resolver

from portal.core.parsers import MAX_JSON_DEPTH
from portal.workloads.models import Workload

URL = "/api/v1/sandboxes"
SAMPLE = {"int": "1", "uuid": str(uuid.uuid4())}


def api_post_paths() -> list[str]:
    """Every /api/v1/ path whose view takes a POST, with sample values for its parameters."""

    def walk(patterns, prefix):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern), getattr(pattern.callback, "cls", None)

    paths = []
    for route, view in walk(get_resolver().url_patterns, "/"):
        if route.startswith("/api/v1/") and view is not None and hasattr(view, "post"):
            paths.append(
                re.sub(r"<(?:(\w+):)?\w+>", lambda match: SAMPLE.get(match.group(1) or "str", "x"), route)
            )
    return sorted(set(paths))


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("body", ["[" * 1000 + "]" * 1000, nested(1000)], ids=["arrays", "objects"])
def test_json_nested_a_thousand_deep_is_a_400_parse_error(fleet, alice, body):
    response = alice.post(URL, data=body, content_type="application/json")

    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "parse_error"
    assert f"deeper than {MAX_JSON_DEPTH}" in error["message"]
    assert not Workload.objects.exists()


def test_json_nested_just_past_the_limit_is_refused_and_at_the_limit_parsed(fleet, alice):
    deep = '{"name":' + nested(MAX_JSON_DEPTH) + "}"  # MAX_JSON_DEPTH + 1 levels
    assert (
        alice.post(URL, data=deep, content_type="application/json").json()["error"]["code"] == "parse_error"
    )

    at_limit = '{"name":' + nested(MAX_JSON_DEPTH - 1) + "}"
    error = alice.post(URL, data=at_limit, content_type="application/json").json()["error"]
    assert error["code"] == "invalid"  # parsed, then refused by the serializer: name is no string
    assert "name" in error["fields"]


@pytest.mark.parametrize("path", api_post_paths())
def test_no_post_endpoint_answers_deep_json_with_a_server_error(fleet, admin, path):
    response = admin.post(path, data="[" * 1000 + "]" * 1000, content_type="application/json")

    assert response.status_code < 500, (path, response.status_code)
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"code", "message", "fields"}


def test_the_post_endpoints_are_found():
    assert {URL, "/api/v1/sandboxes/1/extend", "/api/v1/approvals/1/reject"} <= set(api_post_paths())


def test_a_ten_megabyte_json_body_is_a_413_in_the_error_shape(fleet, alice):
    body = json.dumps({"name": "x" * (10 * 1024 * 1024), "team": "vision"})

    response = alice.post(URL, data=body, content_type="application/json")

    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "request_too_large"
    assert "2.5 MB" in error["message"]
    assert not Workload.objects.exists()


def test_two_thousand_form_fields_are_a_413_in_the_error_shape(fleet, alice):
    body = "&".join(f"field{n}=1" for n in range(2000))

    response = alice.post(URL, data=body, content_type="application/x-www-form-urlencoded")

    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "too_many_fields"
    assert "1000" in error["message"]


def test_a_refused_body_outside_the_api_views_still_gets_the_error_shape(rf, settings):
    """handler400 (a body read by a middleware, a path no API view serves): the same shape."""
    from django.core.exceptions import RequestDataTooBig

    from portal.core.views import bad_request

    response = bad_request(rf.post("/api/v1/nowhere"), RequestDataTooBig("too big"))

    assert response.status_code == 413
    assert json.loads(response.content)["error"]["code"] == "request_too_large"


def test_the_web_ui_keeps_djangos_bad_request_page(rf):
    from django.core.exceptions import TooManyFieldsSent

    from portal.core.views import bad_request

    response = bad_request(rf.post("/sandboxes/new/"), TooManyFieldsSent("too many"))

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_a_request_refused_before_any_view_gets_the_error_shape_on_api_paths(client):
    api = client.get("/api/v1/me", HTTP_HOST="elsewhere.example")  # DisallowedHost, in a middleware
    web = client.get("/tokens/", HTTP_HOST="elsewhere.example")

    assert api.status_code == 400
    assert api.json()["error"]["code"] == "bad_request"
    assert web.status_code == 400
    assert web["Content-Type"].startswith("text/html")
