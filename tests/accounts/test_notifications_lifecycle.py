"""What a workload's owner and the leads are told, and when: "is running" once, an expiry warning
that never comes at the start, a notice when it expires, and a decided request done for all leads."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.utils import timezone

from portal.accounts.models import Notification, NotificationKind
from portal.approvals.services import approval_decide
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Approval, Workload, WorkloadState
from portal.workloads.services import workload_mark_running, workloads_sweep
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db
S = WorkloadState


def _messages(user, kind=None) -> list[str]:
    rows = Notification.objects.filter(user=user)
    if kind:
        rows = rows.filter(kind=kind)
    return list(rows.order_by("created_at", "id").values_list("message", flat=True))


def test_running_is_told_once_not_again_when_it_comes_back_up(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    assert _messages(researcher, NotificationKind.RUNNING) == ["Sandbox mig-small is running."]
    # Its pod was replaced and it started again: that is no news.
    Workload.objects.filter(pk=sandbox.pk).update(state=S.PROVISIONING)
    workload_mark_running(workload_id=sandbox.pk, access="", now=timezone.now())
    assert Workload.objects.get(pk=sandbox.pk).state == S.RUNNING
    assert _messages(researcher, NotificationKind.RUNNING) == ["Sandbox mig-small is running."]


def test_a_rescale_says_how_many_replicas_run_once_per_scale(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    Workload.objects.filter(pk=sandbox.pk).update(state=S.PROVISIONING, scaling_from=2, replicas=1)
    workload_mark_running(workload_id=sandbox.pk, access="", now=timezone.now())
    workload_mark_running(workload_id=sandbox.pk, access="", now=timezone.now())  # seen twice: told once
    assert _messages(researcher, NotificationKind.RUNNING) == [
        "Sandbox mig-small is running.",
        "Sandbox mig-small now runs 1 replica.",
    ]


def test_a_lifetime_no_longer_than_the_warning_window_is_not_warned(
    run_jobs, fleet, researcher, slice_request, settings
):
    settings.PORTAL_EXPIRY_WARNING_MINUTES = 30
    mail.outbox.clear()
    sandbox = run_jobs(
        lambda: sandbox_request(user=researcher, **{**slice_request, "ttl_hours": Decimal("0.5")})
    )
    started = Workload.objects.get(pk=sandbox.pk).started_at
    result = run_jobs(lambda: workloads_sweep(now=started + timedelta(minutes=1)))
    assert result.warned == []
    assert _messages(researcher, NotificationKind.EXPIRY_WARNING) == []


def test_the_warning_comes_at_the_window_or_half_the_lifetime_whichever_is_later(
    run_jobs, fleet, researcher, slice_request, settings
):
    settings.PORTAL_EXPIRY_WARNING_MINUTES = 30
    sandbox = run_jobs(
        lambda: sandbox_request(user=researcher, **{**slice_request, "ttl_hours": Decimal("40") / 60})
    )
    row = Workload.objects.get(pk=sandbox.pk)
    expires = row.expires_at
    # 40 minutes: warned 20 minutes (half its lifetime) before its end, not 30.
    assert run_jobs(lambda: workloads_sweep(now=expires - timedelta(minutes=25))).warned == []
    assert run_jobs(lambda: workloads_sweep(now=expires - timedelta(minutes=19))).warned == [sandbox.pk]
    assert _messages(researcher, NotificationKind.EXPIRY_WARNING) == [
        "Sandbox mig-small expires in 19 min. Extend it to keep it."
    ]


def test_a_long_lifetime_is_warned_the_window_before_its_end(
    run_jobs, fleet, researcher, slice_request, settings
):
    settings.PORTAL_EXPIRY_WARNING_MINUTES = 30
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "ttl_hours": 4}))
    expires = Workload.objects.get(pk=sandbox.pk).expires_at
    assert run_jobs(lambda: workloads_sweep(now=expires - timedelta(minutes=31))).warned == []
    assert run_jobs(lambda: workloads_sweep(now=expires - timedelta(minutes=29))).warned == [sandbox.pk]


def test_the_owner_is_told_in_the_portal_and_by_email_when_it_expires(
    run_jobs, fleet, researcher, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    mail.outbox.clear()
    expires = Workload.objects.get(pk=sandbox.pk).expires_at
    run_jobs(lambda: workloads_sweep(now=expires + timedelta(minutes=1)))
    assert Workload.objects.get(pk=sandbox.pk).state == S.EXPIRED
    assert _messages(researcher, NotificationKind.EXPIRED) == [
        "Sandbox mig-small reached its expiry and was ended."
    ]
    assert [m.subject for m in mail.outbox] == ["Sandbox mig-small expired"]


def test_when_one_lead_decides_every_leads_ask_is_marked_read(run_jobs, fleet, team, researcher, lead):
    second_lead = UserFactory(username="dana")
    MembershipFactory(user=second_lead, team=team, role="lead")
    sandbox = sandbox_request(
        user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=4, ttl_hours=48
    )
    approval = Approval.objects.get(workload=sandbox)
    asks = Notification.objects.filter(kind=NotificationKind.APPROVAL_REQUEST)
    assert sorted(asks.values_list("user__username", flat=True)) == ["bob", "dana"]
    assert asks.filter(read_at__isnull=True).count() == 2
    run_jobs(lambda: approval_decide(user=lead, approval_id=approval.pk, approve=True, comment=""))
    assert asks.filter(read_at__isnull=True).count() == 0
    assert _messages(researcher, NotificationKind.DECISION) == ["bob approved your request for big."]
