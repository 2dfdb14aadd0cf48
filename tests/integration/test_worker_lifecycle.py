"""A sandbox from request to running to expiry, driven by a real Celery worker on Redis."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.fleet.models import Allocation
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Workload, WorkloadState

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def wait_for_state(workload_id: int, state: str, timeout: float = 45) -> Workload:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sandbox = Workload.objects.get(pk=workload_id)
        if sandbox.state == state:
            return sandbox
        time.sleep(0.25)
    raise AssertionError(f"sandbox stayed {sandbox.state} ({sandbox.message}), never {state}")


def test_worker_runs_a_sandbox_and_expires_it_billing_only_to_expiry(
    celery_worker_process, fleet, researcher, slice_request
):
    sandbox = sandbox_request(user=researcher, **slice_request)
    assert sandbox.state == WorkloadState.PROVISIONING

    running = wait_for_state(sandbox.pk, WorkloadState.RUNNING)
    assert running.access.startswith("https://")
    assert running.started_at is not None

    expires_at = timezone.now() + timedelta(seconds=2)
    Workload.objects.filter(pk=sandbox.pk).update(expires_at=expires_at)
    expired = wait_for_state(sandbox.pk, WorkloadState.EXPIRED)

    allocation = Allocation.objects.get(workload=expired)
    assert allocation.ended_at == expires_at
    assert allocation.released_at is not None
    assert allocation.released_at >= expires_at


def test_worker_catches_up_on_sandboxes_that_expired_while_it_was_down(
    fleet, researcher, slice_request, request
):
    sandbox = sandbox_request(user=researcher, **slice_request)
    # The worker is not running yet: the sandbox stays placed but not started, and its time runs out.
    expires_at = timezone.now() - timedelta(minutes=5)
    Workload.objects.filter(pk=sandbox.pk).update(expires_at=expires_at)

    request.getfixturevalue("celery_worker_process")
    expired = wait_for_state(sandbox.pk, WorkloadState.EXPIRED)

    allocation = Allocation.objects.get(workload=expired)
    assert allocation.ended_at == expires_at
