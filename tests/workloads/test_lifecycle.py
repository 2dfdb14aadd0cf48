"""Edge cases of the lifecycle: late approvals, failures with pending requests, extensions over
budget."""

from __future__ import annotations

import importlib
from datetime import timedelta
from decimal import Decimal

import pytest
from django.apps import apps as django_apps
from django.utils import timezone

from portal.accounts.models import Notification
from portal.approvals.services import approval_decide
from portal.fleet.models import Allocation
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Approval, Workload, WorkloadKind, WorkloadState
from portal.workloads.services import approval_link, workload_extend, workload_mark_failed, workload_terminate

pytestmark = pytest.mark.django_db
S = WorkloadState


def test_a_request_approved_after_its_named_end_ends_instead_of_starting(run_jobs, fleet, researcher, lead):
    # A lifetime in hours counts from the start; an end named in the request stays where it is.
    sandbox = sandbox_request(
        user=researcher,
        team="vision",
        name="late",
        gpu_type="h100-80gb",
        count=4,
        expires_at=timezone.now() + timedelta(hours=2),
    )
    approval = Approval.objects.get(workload=sandbox)
    run_jobs(
        lambda: approval_decide(
            user=lead, approval_id=approval.pk, approve=True, now=timezone.now() + timedelta(hours=3)
        )
    )
    sandbox.refresh_from_db()
    assert sandbox.state == S.EXPIRED
    assert not Allocation.objects.filter(workload=sandbox).exists()


def test_a_failure_cancels_pending_extension_requests(run_jobs, fleet, researcher, lead, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    workload_extend(user=researcher, workload_id=sandbox.pk, hours=40, kind=WorkloadKind.SANDBOX)
    run_jobs(lambda: workload_mark_failed(workload_id=sandbox.pk, message="node lost", now=timezone.now()))
    assert Approval.objects.get(workload=sandbox, kind=Approval.Kind.EXTEND).state == Approval.State.CANCELLED
    assert Workload.objects.get(pk=sandbox.pk).state == S.FAILED


def test_rejecting_a_request_cancels_the_extension_asked_while_it_waited(run_jobs, fleet, researcher, lead):
    """An extension asked of a request that still waits for a lead cannot be granted once the
    request is rejected: it is cancelled with it, and the leads' notice of it marked done."""
    sandbox = sandbox_request(
        user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=4, ttl_hours=8
    )
    workload_extend(user=researcher, workload_id=sandbox.pk, hours=20, kind=WorkloadKind.SANDBOX)
    create = Approval.objects.get(workload=sandbox, kind=Approval.Kind.CREATE)
    extension = Approval.objects.get(workload=sandbox, kind=Approval.Kind.EXTEND)
    notice = Notification.objects.get(user=lead, link=approval_link(extension))
    assert extension.state == Approval.State.PENDING and notice.read_at is None
    run_jobs(lambda: approval_decide(user=lead, approval_id=create.pk, approve=False, comment="not now"))
    extension.refresh_from_db()
    notice.refresh_from_db()
    assert Workload.objects.get(pk=sandbox.pk).state == S.REJECTED
    assert extension.state == Approval.State.CANCELLED and notice.read_at is not None
    assert not Approval.objects.filter(state=Approval.State.PENDING).exists()


def test_ending_a_running_sandbox_closes_the_leads_notice_of_its_pending_extension(
    run_jobs, fleet, researcher, lead, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    workload_extend(user=researcher, workload_id=sandbox.pk, hours=40, kind=WorkloadKind.SANDBOX)
    extension = Approval.objects.get(workload=sandbox, kind=Approval.Kind.EXTEND)
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=sandbox.pk, kind=WorkloadKind.SANDBOX))
    extension.refresh_from_db()
    assert extension.state == Approval.State.CANCELLED
    assert Notification.objects.get(user=lead, link=approval_link(extension)).read_at is not None


def test_an_extension_that_costs_more_than_the_budget_left_needs_a_lead(
    run_jobs, fleet, team, researcher, lead
):
    team.monthly_budget = Decimal("10")
    team.save()
    sandbox = run_jobs(
        lambda: sandbox_request(
            user=researcher, team="vision", name="one", gpu_type="h100-80gb", count=1, ttl_hours=1
        )
    )
    before = Workload.objects.get(pk=sandbox.pk).expires_at
    workload_extend(
        user=researcher, workload_id=sandbox.pk, hours=2, kind=WorkloadKind.SANDBOX
    )  # 2 x 6.88 > what is left of 10
    assert Workload.objects.get(pk=sandbox.pk).expires_at == before
    approval = Approval.objects.get(workload=sandbox, kind=Approval.Kind.EXTEND)
    assert "monthly budget" in approval.why_needed


def test_a_migration_closes_the_extensions_left_pending_on_rejected_requests(researcher, lead, fleet):
    """Before rejecting cancelled them, an extension asked while the request waited stayed pending;
    migration 0017 closes such approvals and the leads' notices of them."""
    sandbox = sandbox_request(
        user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=4, ttl_hours=8
    )
    workload_extend(user=researcher, workload_id=sandbox.pk, hours=20, kind=WorkloadKind.SANDBOX)
    extension = Approval.objects.get(workload=sandbox, kind=Approval.Kind.EXTEND)
    Workload.objects.filter(pk=sandbox.pk).update(state=S.REJECTED)  # rejected as before the fix
    Approval.objects.filter(workload=sandbox, kind=Approval.Kind.CREATE).update(state=Approval.State.REJECTED)
    running = sandbox_request(
        user=researcher, team="vision", name="small", gpu_type="h100-80gb", count=4, ttl_hours=8
    )
    cancelled = sandbox_request(
        user=researcher, team="vision", name="old", gpu_type="h100-80gb", count=4, ttl_hours=8
    )
    old = Approval.objects.get(workload=cancelled)
    Approval.objects.filter(pk=old.pk).update(
        state=Approval.State.CANCELLED
    )  # cancelled, its notice left unread
    migration = importlib.import_module("portal.workloads.migrations.0017_close_orphaned_approvals")
    migration.close_orphans(django_apps, None)
    extension.refresh_from_db()
    assert extension.state == Approval.State.CANCELLED
    assert Notification.objects.get(user=lead, link=approval_link(extension)).read_at is not None
    assert Notification.objects.get(user=lead, link=approval_link(old)).read_at is not None
    waiting = Approval.objects.get(workload=running)
    assert waiting.state == Approval.State.PENDING  # a live one is left alone, and its notice unread
    assert Notification.objects.get(user=lead, link=approval_link(waiting)).read_at is None
