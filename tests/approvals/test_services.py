"""Leads decide requests over the line; nobody decides their own."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core import mail

from portal.accounts.models import Membership
from portal.approvals.services import approval_decide
from portal.core.errors import Conflict, NotAllowed, NotFound, ValidationFailed
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Approval, Workload, WorkloadKind, WorkloadState
from portal.workloads.services import workload_extend
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db
S = WorkloadState


@pytest.fixture
def big_request(fleet, researcher, lead):
    sandbox = sandbox_request(
        user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=4, ttl_hours=48
    )
    return Approval.objects.get(workload=sandbox)


def test_lead_approval_moves_the_request_on_and_tells_the_requester(run_jobs, big_request, lead, researcher):
    mail.outbox.clear()
    run_jobs(lambda: approval_decide(user=lead, approval_id=big_request.pk, approve=True, comment="go"))
    sandbox = Workload.objects.get(pk=big_request.workload_id)
    approval = Approval.objects.get(pk=big_request.pk)
    assert (
        approval.state == Approval.State.APPROVED and approval.decided_by == lead and approval.comment == "go"
    )
    assert sandbox.state == S.RUNNING
    assert sandbox.allocations.count() == 4
    messages = list(researcher.notifications.values_list("message", flat=True))
    assert "bob approved your request for big: go" in messages
    assert [m.to for m in mail.outbox] == [["alice@example.com"]]
    assert mail.outbox[0].subject == "Your request for big was approved"


def test_rejection_needs_a_reason_and_ends_the_request(big_request, lead):
    with pytest.raises(ValidationFailed) as refused:
        approval_decide(user=lead, approval_id=big_request.pk, approve=False, comment=" ")
    assert "reason" in refused.value.fields
    assert Approval.objects.get(pk=big_request.pk).state == Approval.State.PENDING
    approval_decide(user=lead, approval_id=big_request.pk, approve=False, comment="use a slice")
    sandbox = Workload.objects.get(pk=big_request.workload_id)
    assert sandbox.state == S.REJECTED
    assert sandbox.message == "Rejected by bob: use a slice"


def test_nobody_decides_their_own_request(fleet, team, lead):
    sandbox = sandbox_request(
        user=lead, team="vision", name="leads-own", gpu_type="h100-80gb", count=4, ttl_hours=2
    )
    approval = Approval.objects.get(workload=sandbox)
    with pytest.raises(NotAllowed):
        approval_decide(user=lead, approval_id=approval.pk, approve=True)


def test_admin_may_decide_any_teams_request(run_jobs, big_request, admin_user):
    run_jobs(lambda: approval_decide(user=admin_user, approval_id=big_request.pk, approve=True))
    assert Approval.objects.get(pk=big_request.pk).state == Approval.State.APPROVED


def test_researcher_of_the_team_cannot_decide_and_outsiders_cannot_see(big_request, team, other_researcher):
    colleague = UserFactory(username="dora")
    MembershipFactory(user=colleague, team=team, role=Membership.Role.RESEARCHER)
    with pytest.raises(NotFound):
        approval_decide(user=colleague, approval_id=big_request.pk, approve=True)
    with pytest.raises(NotFound):
        approval_decide(user=other_researcher, approval_id=big_request.pk, approve=True)


def test_deciding_twice_is_a_conflict(run_jobs, big_request, lead, admin_user):
    run_jobs(lambda: approval_decide(user=lead, approval_id=big_request.pk, approve=True))
    with pytest.raises(Conflict):
        approval_decide(user=admin_user, approval_id=big_request.pk, approve=False, comment="late")


def test_approved_extension_moves_the_expiry(run_jobs, fleet, researcher, lead, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    before = Workload.objects.get(pk=sandbox.pk).expires_at
    workload_extend(user=researcher, workload_id=sandbox.pk, hours=Decimal("30.5"), kind=WorkloadKind.SANDBOX)
    approval = Approval.objects.get(workload=sandbox, kind=Approval.Kind.EXTEND)
    approval_decide(user=lead, approval_id=approval.pk, approve=True)
    assert Workload.objects.get(pk=sandbox.pk).expires_at == before + timedelta(hours=30, minutes=30)
