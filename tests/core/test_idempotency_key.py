"""The Idempotency-Key header: an empty or blank key is refused, not taken as no key."""

from __future__ import annotations

import pytest

from portal.workloads.models import Workload

URL = "/api/v1/sandboxes"


@pytest.mark.parametrize("key", ["", "   "])
def test_an_empty_idempotency_key_is_refused_and_nothing_is_made(fleet, alice, slice_body, key):
    response = alice.post(URL, slice_body, format="json", HTTP_IDEMPOTENCY_KEY=key)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert "Idempotency-Key" in error["fields"]
    assert not Workload.objects.exists()


def test_a_key_of_201_characters_is_refused(fleet, alice, slice_body):
    response = alice.post(URL, slice_body, format="json", HTTP_IDEMPOTENCY_KEY="k" * 201)
    assert response.status_code == 400
    assert not Workload.objects.exists()
