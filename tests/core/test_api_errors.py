"""Bad input is a 400 in the error shape, never a 500; other failures keep the shape too."""

from __future__ import annotations

import json

import pytest
from rest_framework.throttling import UserRateThrottle

from portal.workloads.models import Workload

URL = "/api/v1/sandboxes"
GOOD = {"name": "ok", "team": "vision", "gpu": {"type": "h100-80gb", "count": 1}, "ttl_hours": 1}

WRONG_TYPES = {
    "gpu as a string": ({"gpu": "h100"}, "gpu"),
    "gpu as a list": ({"gpu": ["h100-80gb"]}, "gpu"),
    "gpu without a type": ({"gpu": {"count": 1}}, "gpu.type"),
    "count as a word": ({"gpu": {"type": "h100-80gb", "count": "two"}}, "gpu.count"),
    "count as a fraction": ({"gpu": {"type": "h100-80gb", "count": 1.5}}, "gpu.count"),
    "count as a boolean": ({"gpu": {"type": "h100-80gb", "count": True}}, "gpu.count"),
    "mig_profile as an object": ({"gpu": {"type": "h100-80gb", "mig_profile": {"a": 1}}}, "gpu.mig_profile"),
    "ttl_hours as a word": ({"ttl_hours": "abc"}, "ttl_hours"),
    "ttl_hours as a boolean": ({"ttl_hours": True}, "ttl_hours"),
    "ttl_hours far too large": ({"ttl_hours": 1e30}, "ttl_hours"),
    "ttl_hours not a number": ({"ttl_hours": "NaN"}, "ttl_hours"),
    "ttl_hours infinite": ({"ttl_hours": "Infinity"}, "ttl_hours"),
    "expires_at not a time": ({"ttl_hours": None, "expires_at": "tomorrow"}, "expires_at"),
    "cpu as a word": ({"cpu": "many"}, "cpu"),
    "memory_gb as a list": ({"memory_gb": [64]}, "memory_gb"),
    "name as an object": ({"name": {"x": 1}}, "name"),
    "team missing": ({"team": None}, "team"),
    "purpose too long": ({"purpose": "x" * 301}, "purpose"),
}


@pytest.mark.parametrize("change, field", WRONG_TYPES.values(), ids=WRONG_TYPES.keys())
def test_a_wrong_json_type_is_a_400_naming_the_field(fleet, alice, change, field):
    response = alice.post(URL, {**GOOD, **change}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["fields"], error
    assert not Workload.objects.exists()


def test_a_missing_body_lists_every_required_field(fleet, alice):
    response = alice.post(URL)
    assert response.status_code == 400
    assert {"name", "team", "gpu"} <= set(response.json()["error"]["fields"])


def test_a_json_list_body_is_a_400(fleet, alice):
    response = alice.post(URL, [GOOD], format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


def test_malformed_json_is_a_400_parse_error(fleet, alice):
    response = alice.post(URL, data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"


def test_a_form_encoded_body_without_a_gpu_object_is_a_400(fleet, alice):
    """Nested gpu cannot be form-encoded: a 400, not a 500."""
    response = alice.post(
        URL, data="name=x&team=vision&gpu=h100", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 400
    assert "gpu" in response.json()["error"]["fields"]


@pytest.mark.parametrize(
    "body", [{}, {"hours": "abc"}, {"hours": None}, {"hours": True}, {"hours": 0}, {"hours": -3}]
)
def test_a_bad_extension_is_a_400_naming_hours(run_jobs, fleet, alice, body):
    workload_id = run_jobs(lambda: alice.post(URL, GOOD, format="json")).json()["id"]
    expires_at = Workload.objects.get().expires_at
    response = alice.post(f"{URL}/{workload_id}/extend", body, format="json")
    assert response.status_code == 400
    assert "hours" in response.json()["error"]["fields"]
    assert Workload.objects.get().expires_at == expires_at


def test_a_bad_approval_comment_type_is_a_400(fleet, bob):
    response = bob.post("/api/v1/approvals/1/reject", {"reason": ["a", "b"]}, format="json")
    assert response.status_code == 400
    assert "reason" in response.json()["error"]["fields"]


def test_a_wrong_method_is_a_405_in_the_error_shape(fleet, alice):
    response = alice.delete(URL)
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_too_many_requests_are_a_429_in_the_error_shape(fleet, alice, monkeypatch):
    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {"user": "2/minute"})
    statuses = [alice.get("/api/v1/me").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    response = alice.get("/api/v1/me")
    assert response.json()["error"]["code"] == "rate_limited"
    assert "Retry-After" in response


def test_error_bodies_always_have_code_message_and_fields(fleet, alice):
    response = alice.post(URL, data=json.dumps({"gpu": "h100"}), content_type="application/json")
    assert set(response.json()) == {"error"}
    assert set(response.json()["error"]) == {"code", "message", "fields"}
