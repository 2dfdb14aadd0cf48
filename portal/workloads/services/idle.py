"""Idle reclaim: a running sandbox whose GPUs have done nothing for the team's idle time (every
minute the node agents read under the team's threshold, or no process on them) is warned, in
the portal and by e-mail; its owner may keep it, which starts the clock again; after the grace
period, still idle, it is ended (its home volume is kept). Every step is audited.

Idle is judged only on readings: a sandbox whose devices sent fewer than four in five of the
window's minutes is never called idle (a silent agent is not an idle GPU)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.selectors import can_manage
from portal.accounts.services import notify
from portal.audit.services import audit_record
from portal.core.errors import Conflict, NotAllowed
from portal.fleet.models import Allocation, GpuMinute
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from portal.workloads.selectors import workload_get_for
from portal.workloads.services.lifecycle import workload_end

COVERAGE = 0.8  # of the window's minutes with readings, to judge at all


@dataclass(frozen=True)
class IdleSweep:
    warned: list[int]
    reclaimed: list[int]
    cleared: list[int]


def _link(workload: Workload) -> str:
    return workload.get_absolute_url()


def workload_idle_minutes(workload: Workload, *, since: datetime, now: datetime, threshold: int) -> bool:
    """Whether every device the workload holds read idle in every minute of [since, now), with
    readings for enough of them."""
    holds = list(
        Allocation.objects.filter(workload=workload, released_at__isnull=True).select_related("mig_slice")
    )
    if not holds:
        return False
    devices = Q(pk__in=[])
    for hold in holds:
        if hold.mig_slice_id:
            devices |= Q(gpu_id=hold.gpu_id, mig_start=hold.mig_slice.start)
        else:
            devices |= Q(gpu_id=hold.gpu_id, mig_start__isnull=True)
    rows = list(GpuMinute.objects.filter(devices, minute__gte=since, minute__lt=now))
    window = max(1, int((now - since).total_seconds() // 60))
    if len({row.minute for row in rows}) < COVERAGE * window:
        return False
    for row in rows:
        busy = row.utilization is not None and row.utilization >= threshold
        working = row.utilization is None and row.processes_max > 0
        if busy or working:
            return False
    return True


def workloads_idle_sweep(*, now: datetime | None = None) -> IdleSweep:
    """Warn, reclaim or clear running sandboxes by their GPUs' idleness and their team's policy."""
    now = now or timezone.now()
    warned, reclaimed, cleared = [], [], []
    running = Workload.objects.filter(
        kind=WorkloadKind.SANDBOX, state=WorkloadState.RUNNING, team__idle_reclaim_minutes__gt=0
    ).select_related("team", "owner")
    for sandbox in running:
        team = sandbox.team
        window = timedelta(minutes=team.idle_reclaim_minutes)
        since = max(filter(None, [now - window, sandbox.started_at, sandbox.idle_kept_at]))
        if since > now - window:  # it has not been running (or kept) for the whole window yet
            idle = False
        else:
            idle = workload_idle_minutes(sandbox, since=since, now=now, threshold=team.idle_threshold_percent)
        if not idle:
            if sandbox.idle_warned_at is not None:
                Workload.objects.filter(pk=sandbox.pk).update(idle_warned_at=None)
                audit_record(
                    actor=None, action="sandbox.idle_cleared", obj=sandbox, team=team, detail="busy again"
                )
                cleared.append(sandbox.pk)
            continue
        if sandbox.idle_warned_at is None:
            _warn(sandbox, now)
            warned.append(sandbox.pk)
        elif now - sandbox.idle_warned_at >= timedelta(minutes=team.idle_grace_minutes):
            _reclaim(sandbox, now)
            reclaimed.append(sandbox.pk)
    return IdleSweep(warned, reclaimed, cleared)


def _warn(sandbox: Workload, now: datetime) -> None:
    team = sandbox.team
    Workload.objects.filter(pk=sandbox.pk, state=WorkloadState.RUNNING).update(idle_warned_at=now)
    at = now + timedelta(minutes=team.idle_grace_minutes)
    detail = (
        f"its GPUs have been idle for {team.idle_reclaim_minutes} min (under {team.idle_threshold_percent} %); "
        f"it ends at {at:%H:%M} UTC unless kept"
    )
    audit_record(actor=None, action="sandbox.idle_warned", obj=sandbox, team=team, detail=detail)
    notify(
        user=sandbox.owner,
        message=f"Sandbox {sandbox.name}: {detail}.",
        link=_link(sandbox),
        email_subject=f"Sandbox {sandbox.name} is idle and will be ended",
    )


@transaction.atomic
def _reclaim(sandbox: Workload, now: datetime) -> None:
    locked = Workload.objects.select_for_update().get(pk=sandbox.pk)
    if locked.state != WorkloadState.RUNNING or locked.idle_warned_at is None:
        return
    team = sandbox.team
    detail = f"reclaimed: its GPUs were idle past the warning and {team.idle_grace_minutes} min of grace"
    workload_end(workload=locked, ending_as=WorkloadState.TERMINATED, actor=None, at=now, detail=detail)
    audit_record(actor=None, action="sandbox.reclaimed", obj=locked, team=team, detail=detail)
    notify(
        user=sandbox.owner,
        message=f"Sandbox {sandbox.name} was ended: {detail}. Your home volume is kept.",
        link=_link(sandbox),
        email_subject=f"Sandbox {sandbox.name} was ended for being idle",
    )


@transaction.atomic
def sandbox_keep(*, user: User, sandbox_id: int, now: datetime | None = None) -> Workload:
    """Keep an idle sandbox: the warning goes and the idle clock starts again."""
    now = now or timezone.now()
    sandbox = workload_get_for(user=user, workload_id=sandbox_id, lock=True, kind=WorkloadKind.SANDBOX)
    if not can_manage(user=user, team=sandbox.team, owner=sandbox.owner):
        raise NotAllowed("Only the owner, a lead of the team or an admin may keep this sandbox.")
    if sandbox.state != WorkloadState.RUNNING:
        raise Conflict(f"Sandbox {sandbox.name} is {sandbox.state}.")
    Workload.objects.filter(pk=sandbox.pk).update(idle_kept_at=now, idle_warned_at=None)
    audit_record(actor=user, action="sandbox.kept", obj=sandbox, team=sandbox.team, detail="kept though idle")
    sandbox.refresh_from_db()
    return sandbox
