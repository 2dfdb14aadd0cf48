"""The periodic sweep: expiry (billed only to expires_at), warnings, and failures with backoff."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from portal.fleet.models import Allocation
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Approval, Workload, WorkloadKind, WorkloadState
from portal.workloads.services import workload_terminate, workloads_sweep
from workers.drivers.base import DriverError
from workers.reconcile import workloads as reconcile_module
from workers.reconcile.workloads import reconcile_workload

pytestmark = pytest.mark.django_db
S = WorkloadState


def test_sweep_expires_a_running_sandbox_and_bills_only_to_its_expiry(
    run_jobs, fleet, researcher, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    expires_at = Workload.objects.get(pk=sandbox.pk).expires_at
    late = expires_at + timedelta(hours=3)  # the workers were down for three hours

    result = run_jobs(lambda: workloads_sweep(now=late))

    sandbox.refresh_from_db()
    assert result.expired == [sandbox.pk]
    assert sandbox.state == S.EXPIRED
    allocation = Allocation.objects.get(workload=sandbox)
    assert allocation.ended_at == expires_at
    assert allocation.released_at is not None


def test_sweep_expires_a_request_whose_named_end_passed_while_waiting(run_jobs, fleet, researcher, lead):
    sandbox = sandbox_request(
        user=researcher,
        team="vision",
        name="big",
        gpu_type="h100-80gb",
        count=4,
        expires_at=timezone.now() + timedelta(hours=2),
    )
    # A lifetime in hours counts from the start: waiting for a lead does not use it up.
    waiting = sandbox_request(
        user=researcher, team="vision", name="big-ttl", gpu_type="h100-80gb", count=4, ttl_hours=2
    )
    run_jobs(lambda: workloads_sweep(now=timezone.now() + timedelta(hours=3)))
    sandbox.refresh_from_db()
    waiting.refresh_from_db()
    assert sandbox.state == S.EXPIRED
    assert Approval.objects.get(workload=sandbox).state == Approval.State.CANCELLED
    assert waiting.state == S.PENDING_APPROVAL and waiting.expires_at is None


def test_sweep_warns_the_owner_once_before_expiry(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    soon = Workload.objects.get(pk=sandbox.pk).expires_at - timedelta(minutes=10)
    mail.outbox.clear()
    first = run_jobs(lambda: workloads_sweep(now=soon))
    second = run_jobs(lambda: workloads_sweep(now=soon + timedelta(minutes=1)))
    assert first.warned == [sandbox.pk]
    assert second.warned == []
    assert "expires in 10 min" in researcher.notifications.first().message
    assert len(mail.outbox) == 1


def test_sweep_twice_changes_nothing_more(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    late = Workload.objects.get(pk=sandbox.pk).expires_at + timedelta(minutes=1)
    run_jobs(lambda: workloads_sweep(now=late))
    again = run_jobs(lambda: workloads_sweep(now=late))
    assert again.expired == []
    assert Workload.objects.get(pk=sandbox.pk).state == S.EXPIRED


def test_driver_errors_back_off_and_fail_after_the_last_attempt(
    settings, monkeypatch, fleet, researcher, slice_request
):
    settings.PORTAL_MAX_ATTEMPTS = 3
    sandbox = sandbox_request(user=researcher, **slice_request)  # placed; its job is not run

    class TimingOut:
        def apply_workload(self, spec):
            raise DriverError("API server timed out", retryable=True)

    monkeypatch.setattr(reconcile_module, "driver_for", lambda cluster: TimingOut())
    now = timezone.now()
    delays = []
    for _ in range(2):
        reconcile_workload(sandbox.pk, now=now)
        row = Workload.objects.get(pk=sandbox.pk)
        assert row.state == S.PROVISIONING
        assert "API server timed out" in row.last_error
        delays.append((row.next_attempt_at - now).total_seconds())
    assert delays == [2.0, 4.0]
    reconcile_workload(sandbox.pk, now=now)

    row = Workload.objects.get(pk=sandbox.pk)
    assert row.state == S.TERMINATING and row.ending_as == S.FAILED  # its objects go first
    assert row.message == "API server timed out"
    assert Allocation.objects.get(workload=row).ended_at is not None

    monkeypatch.undo()  # the cluster answers again: the teardown goes through
    reconcile_workload(sandbox.pk)
    row = Workload.objects.get(pk=sandbox.pk)
    assert row.state == S.FAILED
    assert row.message == "API server timed out"
    assert Allocation.objects.get(workload=row).released_at is not None


def test_a_teardown_the_cluster_refuses_for_good_frees_the_gpus_and_says_what_is_left(
    settings, monkeypatch, run_jobs, fleet, researcher, slice_request
):
    settings.PORTAL_MAX_ATTEMPTS = 2
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))

    class Forbidden:
        def delete_workload(self, spec):
            raise DriverError("the portal's service account may not delete namespaces", retryable=False)

    monkeypatch.setattr(reconcile_module, "driver_for", lambda cluster: Forbidden())
    workload_terminate(
        user=researcher, workload_id=sandbox.pk, kind=WorkloadKind.SANDBOX
    )  # its teardown job is not run
    reconcile_workload(sandbox.pk)
    assert Workload.objects.get(pk=sandbox.pk).state == S.TERMINATING
    reconcile_workload(sandbox.pk)
    row = Workload.objects.get(pk=sandbox.pk)
    assert row.state == S.TERMINATED
    assert "could not be removed" in row.message and row.namespace in row.message
    assert Allocation.objects.get(workload=row).released_at is not None


def test_forbidden_driver_error_fails_at_once(monkeypatch, fleet, researcher, slice_request):
    sandbox = sandbox_request(user=researcher, **slice_request)

    class Forbidden:
        def apply_workload(self, spec):
            raise DriverError("the portal's service account may not create namespaces", retryable=False)

    monkeypatch.setattr(reconcile_module, "driver_for", lambda cluster: Forbidden())
    reconcile_workload(sandbox.pk)
    row = Workload.objects.get(pk=sandbox.pk)
    assert row.state == S.TERMINATING and row.ending_as == S.FAILED
    assert row.next_attempt_at is None  # no retry of the create: its teardown is due at once
    assert "may not create namespaces" in row.message


def test_reconcile_of_a_well_running_sandbox_only_books_the_next_look(
    run_jobs, fleet, researcher, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    before = Workload.objects.get(pk=sandbox.pk)
    now = timezone.now()
    reconcile_workload(sandbox.pk, now=now)
    row = Workload.objects.get(pk=sandbox.pk)
    assert row.state == S.RUNNING and row.degraded_since is None
    assert row.next_attempt_at == now + timedelta(seconds=30)  # its health is read again in 30 s
    assert (row.message, row.attempts, row.started_at) == (before.message, before.attempts, before.started_at)
