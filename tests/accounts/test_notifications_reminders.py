"""Leads are reminded of a request that waits longer than their team allows, once per interval."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.core import mail
from django.utils import timezone

from portal.accounts.models import Notification, NotificationKind
from portal.approvals.services import approval_decide, approvals_remind_waiting
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Approval
from workers.celery import _schedule

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(fleet, team, researcher, lead):
    team.approval_reminder_hours = 6
    team.save()
    sandbox = sandbox_request(
        user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=4, ttl_hours=48
    )
    return Approval.objects.get(workload=sandbox)


def _reminders(user) -> list[str]:
    return list(
        Notification.objects.filter(user=user, kind=NotificationKind.APPROVAL_REMINDER).values_list(
            "message", flat=True
        )
    )


def test_one_reminder_per_interval_to_the_leads_with_email(run_jobs, waiting, lead):
    start = waiting.created_at
    mail.outbox.clear()
    with time_machine.travel(start + timedelta(hours=5), tick=False):
        assert run_jobs(approvals_remind_waiting) == []
    with time_machine.travel(start + timedelta(hours=6, minutes=1), tick=False):
        assert run_jobs(approvals_remind_waiting) == [waiting.pk]
        assert run_jobs(approvals_remind_waiting) == []  # the next beat: already reminded
    assert _reminders(lead) == [
        "Reminder: alice's request for 4x h100-80gb (big, team Vision) for 48 h, $1,320.96 at most, "
        "has waited 6 h for a decision."
    ]
    assert [m.subject for m in mail.outbox] == [
        "Reminder: alice asks for sandbox big (team Vision): your approval"
    ]
    assert "/act/" in mail.outbox[0].body
    with time_machine.travel(start + timedelta(hours=11), tick=False):
        assert run_jobs(approvals_remind_waiting) == []
    with time_machine.travel(start + timedelta(hours=12, minutes=2), tick=False):
        assert run_jobs(approvals_remind_waiting) == [waiting.pk]
    assert len(_reminders(lead)) == 2


def test_no_reminder_when_the_team_says_never_or_once_decided(run_jobs, waiting, team, lead):
    team.approval_reminder_hours = 0
    team.save()
    with time_machine.travel(waiting.created_at + timedelta(days=3), tick=False):
        assert approvals_remind_waiting() == []
    team.approval_reminder_hours = 6
    team.save()
    run_jobs(lambda: approval_decide(user=lead, approval_id=waiting.pk, approve=True, comment=""))
    with time_machine.travel(timezone.now() + timedelta(days=3), tick=False):
        assert approvals_remind_waiting() == []
    assert _reminders(lead) == []


def test_the_beat_runs_the_reminders():
    entry = _schedule()["remind-approvals"]
    assert entry["task"] == "approvals.remind_waiting" and entry["schedule"] <= 3600


def test_an_extensions_reminder_says_the_hours_and_what_they_add(
    run_jobs, fleet, team, researcher, lead, slice_request
):
    from portal.workloads.models import WorkloadKind
    from portal.workloads.services import workload_extend

    team.approval_reminder_hours = 6
    team.save()
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    workload_extend(user=researcher, workload_id=sandbox.pk, hours=30, kind=WorkloadKind.SANDBOX)
    asked = Approval.objects.get(workload=sandbox, kind=Approval.Kind.EXTEND)

    with time_machine.travel(asked.created_at + timedelta(hours=6, minutes=1), tick=False):
        assert run_jobs(approvals_remind_waiting) == [asked.pk]

    # a 1g.10gb slice of an H100 at $6.88 / 7 an hour, for 30 more hours
    assert _reminders(lead) == [
        f"Reminder: alice's request to extend {sandbox.name} (team Vision) by 30 h, $29.49 more at most, "
        "has waited 6 h for a decision."
    ]
