"""Edge cases of the lifecycle: late approvals, failures with pending requests, extensions over
budget, failed MIG layouts beside slices in use, and malformed credentials."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from portal.approvals.models import Approval
from portal.approvals.services import approval_decide
from portal.fleet.models import Allocation, MigSlice
from portal.sandboxes.models import Sandbox, SandboxState
from portal.sandboxes.services import sandbox_extend, sandbox_mark_failed, sandbox_request
from workers.reconcile import mig as mig_module
from workers.reconcile import sandboxes as reconcile_module
from workers.reconcile.sandboxes import reconcile_sandbox

pytestmark = pytest.mark.django_db
S = SandboxState


def test_a_request_approved_after_its_expiry_ends_instead_of_starting(run_jobs, fleet, researcher, lead):
    sandbox = sandbox_request(
        user=researcher, team="vision", name="late", gpu_type="h100-80gb", count=4, ttl_hours=2
    )
    approval = Approval.objects.get(sandbox=sandbox)
    run_jobs(
        lambda: approval_decide(
            user=lead, approval_id=approval.pk, approve=True, now=timezone.now() + timedelta(hours=3)
        )
    )
    sandbox.refresh_from_db()
    assert sandbox.state == S.EXPIRED
    assert not Allocation.objects.filter(sandbox=sandbox).exists()


def test_a_failure_cancels_pending_extension_requests(run_jobs, fleet, researcher, lead, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    sandbox_extend(user=researcher, sandbox_id=sandbox.pk, hours=40)
    run_jobs(lambda: sandbox_mark_failed(sandbox_id=sandbox.pk, message="node lost", now=timezone.now()))
    assert Approval.objects.get(sandbox=sandbox, kind=Approval.Kind.EXTEND).state == Approval.State.CANCELLED
    assert Sandbox.objects.get(pk=sandbox.pk).state == S.FAILED


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
    before = Sandbox.objects.get(pk=sandbox.pk).expires_at
    sandbox_extend(user=researcher, sandbox_id=sandbox.pk, hours=2)  # 2 x 6.88 > what is left of 10
    assert Sandbox.objects.get(pk=sandbox.pk).expires_at == before
    approval = Approval.objects.get(sandbox=sandbox, kind=Approval.Kind.EXTEND)
    assert "monthly budget" in approval.why_needed


def test_a_failed_layout_change_drops_the_slice_being_cut_even_beside_a_slice_in_use(
    monkeypatch, run_jobs, fleet, researcher, slice_request
):
    first = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    gpu = Allocation.objects.get(sandbox=first).gpu
    second = sandbox_request(
        user=researcher, **{**slice_request, "name": "second"}
    )  # cut beside it, not started
    assert Allocation.objects.get(sandbox=second).gpu == gpu

    class FailingMig:
        def apply_mig_layout(self, node, layout):
            pass

        def mig_layout_state(self, node):
            return "failed"

    monkeypatch.setattr(reconcile_module, "driver_for", lambda cluster: FailingMig())
    monkeypatch.setattr(mig_module, "driver_for", lambda cluster: FailingMig())
    reconcile_sandbox(second.pk)
    assert Sandbox.objects.get(pk=second.pk).state == S.QUEUED
    assert list(MigSlice.objects.filter(gpu=gpu).values_list("state", flat=True)) == [MigSlice.State.READY]


def test_a_blank_authorization_header_is_not_an_error(fleet):
    response = APIClient().get("/api/v1/gpu-types", HTTP_AUTHORIZATION="   ")
    assert response.status_code == 200
