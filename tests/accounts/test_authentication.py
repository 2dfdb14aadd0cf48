"""Bearer token authentication: a malformed header is no credential, never an error."""

from __future__ import annotations

from rest_framework.test import APIClient


def test_a_blank_authorization_header_is_not_an_error(fleet):
    response = APIClient().get("/api/v1/gpu-types", HTTP_AUTHORIZATION="   ")
    assert response.status_code == 200
