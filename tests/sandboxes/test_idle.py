"""Idle reclaim: a sandbox whose GPUs read idle for the team's idle time is warned, kept on its
owner's word, or ended after the grace period (its home kept); busy again clears the warning;
missing readings never count as idle."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.accounts.models import Notification
from portal.audit.models import AuditEvent
from portal.fleet.models import GpuMinute
from portal.workloads.models import Workload, WorkloadState
from portal.workloads.services import sandbox_keep, workloads_idle_sweep
from tests.rows import make_sandbox

pytestmark = pytest.mark.django_db


def minutes(gpu, start, count, *, utilization=1.0, processes=0):
    for n in range(count):
        GpuMinute.objects.create(
            gpu=gpu, device=gpu.uuid, minute=(start + timedelta(minutes=n)).replace(second=0, microsecond=0),
            samples=4, utilization_sum=utilization * 4, utilization_samples=4, processes_max=processes,
        )  # fmt: skip


@pytest.fixture
def idle_box(researcher, team, whole_gpus):
    team.idle_reclaim_minutes, team.idle_grace_minutes, team.idle_threshold_percent = 60, 30, 5
    team.save()
    now = timezone.now()
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0], hours_ago=3)
    minutes(whole_gpus[0], now - timedelta(minutes=61), 61, utilization=2.0)
    return sandbox, now


def test_an_idle_sandbox_is_warned_then_ended_after_the_grace_with_its_owner_told(
    run_jobs, idle_box, researcher
):
    sandbox, now = idle_box
    result = workloads_idle_sweep(now=now)
    assert result.warned == [sandbox.pk]
    sandbox.refresh_from_db()
    assert sandbox.idle_warned_at == now and sandbox.state == WorkloadState.RUNNING
    assert Notification.objects.filter(user=researcher, message__contains="idle for 60 min").exists()
    assert workloads_idle_sweep(now=now + timedelta(minutes=10)).warned == []  # told once
    minutes(sandbox.allocations.get().gpu, now, 31, utilization=0.0)
    result = run_jobs(lambda: workloads_idle_sweep(now=now + timedelta(minutes=31)))
    assert result.reclaimed == [sandbox.pk]
    sandbox.refresh_from_db()
    assert sandbox.state in (WorkloadState.TERMINATING, WorkloadState.TERMINATED)
    actions = set(AuditEvent.objects.filter(object_id=str(sandbox.pk)).values_list("action", flat=True))
    assert {"sandbox.idle_warned", "sandbox.reclaimed"} <= actions


def test_keeping_it_resets_the_clock_and_busy_again_clears_the_warning(
    idle_box, researcher, researcher_client
):
    sandbox, now = idle_box
    workloads_idle_sweep(now=now)
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert 'id="idle-warning"' in page and ">Keep it</button>" in page
    sandbox_keep(user=researcher, sandbox_id=sandbox.pk, now=now + timedelta(minutes=1))
    sandbox.refresh_from_db()
    assert sandbox.idle_warned_at is None and sandbox.idle_kept_at == now + timedelta(minutes=1)
    assert workloads_idle_sweep(now=now + timedelta(minutes=40)).warned == []  # the clock starts again

    minutes(sandbox.allocations.get().gpu, now + timedelta(minutes=1), 60, utilization=0.5)
    assert workloads_idle_sweep(now=now + timedelta(minutes=62)).warned == [sandbox.pk]
    minutes(sandbox.allocations.get().gpu, now + timedelta(minutes=62), 1, utilization=90.0)
    assert workloads_idle_sweep(now=now + timedelta(minutes=64)).cleared == [sandbox.pk]


def test_without_enough_readings_or_with_a_process_it_is_not_idle(researcher, team, whole_gpus):
    team.idle_reclaim_minutes = 60
    team.save()
    now = timezone.now()
    silent = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0], hours_ago=3)
    minutes(whole_gpus[0], now - timedelta(minutes=60), 30, utilization=0.0)  # half the minutes read
    working = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[1], hours_ago=3)
    for n in range(60):
        GpuMinute.objects.create(gpu=whole_gpus[1], device=whole_gpus[1].uuid, samples=1, processes_max=1,
                                 minute=(now - timedelta(minutes=60 - n)).replace(second=0, microsecond=0))  # fmt: skip
    young = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[2], hours_ago=0.5)
    minutes(whole_gpus[2], now - timedelta(minutes=30), 30, utilization=0.0)
    assert workloads_idle_sweep(now=now).warned == []
    team.idle_reclaim_minutes = 0  # the policy off: nothing is ever warned
    team.save()
    assert workloads_idle_sweep(now=now).warned == []
    assert {w.idle_warned_at for w in Workload.objects.filter(pk__in=[silent.pk, working.pk, young.pk])} == {
        None
    }


def test_keep_through_the_api_and_only_by_those_who_manage_it(idle_box, alice, carol):
    sandbox, now = idle_box
    workloads_idle_sweep(now=now)
    assert alice.get(f"/api/v1/sandboxes/{sandbox.number}").json()["idle_warned_at"] is not None
    assert carol.post(f"/api/v1/sandboxes/{sandbox.number}/keep").status_code == 404
    kept = alice.post(f"/api/v1/sandboxes/{sandbox.number}/keep")
    assert kept.status_code == 200 and kept.json()["idle_warned_at"] is None


def test_switching_idle_reclaim_off_clears_a_warning_and_on_again_starts_with_a_new_one(idle_box, team):
    sandbox, now = idle_box
    assert workloads_idle_sweep(now=now).warned == [sandbox.pk]
    team.idle_reclaim_minutes = 0  # a lead switches it off while it is warned
    team.save()
    assert workloads_idle_sweep(now=now + timedelta(minutes=1)).cleared == [sandbox.pk]
    sandbox.refresh_from_db()
    assert sandbox.idle_warned_at is None
    assert AuditEvent.objects.filter(
        action="sandbox.idle_cleared", detail__contains="switched idle reclaim off"
    )

    team.idle_reclaim_minutes = 60  # on again, long after the old warning's grace
    team.save()
    later = now + timedelta(hours=2)
    minutes(sandbox.allocations.get().gpu, now, 120, utilization=0.0)
    result = workloads_idle_sweep(now=later)
    assert result.warned == [sandbox.pk] and result.reclaimed == []  # warned first, never ended at once
