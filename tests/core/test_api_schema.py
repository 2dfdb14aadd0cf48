"""The OpenAPI schema and its browsable docs are served, and describe the endpoints."""

from __future__ import annotations

import io
import json

from django.core.management import call_command
from rest_framework.test import APIClient


def test_the_openapi_schema_is_served_and_lists_the_endpoints(db):
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in [
        "/api/v1/me",
        "/api/v1/gpu-types",
        "/api/v1/sandboxes",
        "/api/v1/sandboxes/{id}",
        "/api/v1/sandboxes/{id}/extend",
        "/api/v1/sandboxes/{id}/terminate",
        "/api/v1/approvals",
        "/api/v1/approvals/{id}/approve",
        "/api/v1/approvals/{id}/reject",
        "/api/v1/spend",
        "/api/v1/fleet/gpus",
        "/api/v1/audit-events",
        "/api/v1/tokens",
        "/api/v1/tokens/{id}/revoke",
    ]:
        assert path in paths, path
    assert "bearerAuth" in response.json()["components"]["securitySchemes"]


def test_the_schema_generates_and_validates_without_warnings(db):
    out, err = io.StringIO(), io.StringIO()
    # --fail-on-warn raises on any warning, --validate on a schema that breaks the OpenAPI spec.
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--format", "openapi-json", stdout=out, stderr=err
    )
    schema = json.loads(out.getvalue())
    assert schema["openapi"].startswith("3.")
    assert "/api/v1/sandboxes" in schema["paths"]
    assert err.getvalue() == ""


def test_the_swagger_ui_is_served_from_local_assets(db):
    response = APIClient().get("/api/docs/")
    assert response.status_code == 200
    assert b"swagger-ui" in response.content
    assert b"cdn.jsdelivr" not in response.content
