"""Idle reclaim: a running sandbox or deployment whose GPUs have done nothing for the team's idle
time (every minute the node agents read under the team's threshold, or no process on them) is
warned, in the portal and by e-mail; its owner may keep it, which starts the clock again; after
the grace period, still idle, it is taken back: a sandbox is ended (its home volume is kept), a
deployment is scaled to zero (portal.deployments.idle). Every step is audited.

Idle is judged only on readings: a sandbox whose devices sent fewer than four in five of the
window's minutes is never called idle (a silent agent is not an idle GPU)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.selectors import can_manage, refuse_owner_who_left
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


def workloads_idle_sweep(
    *,
    now: datetime | None = None,
    kind: str = WorkloadKind.SANDBOX,
    reclaim: Callable[[Workload, datetime], None] | None = None,
    after_grace: str = "it ends",
) -> IdleSweep:
    """Warn, reclaim or clear running workloads of `kind` by their GPUs' idleness and their team's
    policy. `reclaim` takes one back (a sandbox: it ends; a deployment: see
    portal.deployments.idle); `after_grace` says in the warning what will happen."""
    now = now or timezone.now()
    reclaim = reclaim or _end_sandbox
    warned, reclaimed, cleared = [], [], []
    # warned before its team switched idle reclaim off: no longer warned, so that switching it on
    # again starts with a warning, never with a reclaim whose grace ran out meanwhile
    switched_off = Workload.objects.filter(
        kind=kind, state=WorkloadState.RUNNING, team__idle_reclaim_minutes=0, idle_warned_at__isnull=False
    ).select_related("team")
    for workload in switched_off:
        Workload.objects.filter(pk=workload.pk).update(idle_warned_at=None)
        detail = "its team switched idle reclaim off"
        audit_record(
            actor=None, action=f"{kind}.idle_cleared", obj=workload, team=workload.team, detail=detail
        )
        cleared.append(workload.pk)
    running = Workload.objects.filter(
        kind=kind, state=WorkloadState.RUNNING, team__idle_reclaim_minutes__gt=0, replicas__gt=0
    ).select_related("team", "owner")
    for workload in running:
        team = workload.team
        window = timedelta(minutes=team.idle_reclaim_minutes)
        since = max(filter(None, [now - window, workload.started_at, workload.idle_kept_at]))
        if since > now - window:  # it has not been running (or kept) for the whole window yet
            idle = False
        else:
            idle = workload_idle_minutes(
                workload, since=since, now=now, threshold=team.idle_threshold_percent
            )
        if not idle:
            if workload.idle_warned_at is not None:
                Workload.objects.filter(pk=workload.pk).update(idle_warned_at=None)
                audit_record(
                    actor=None, action=f"{kind}.idle_cleared", obj=workload, team=team, detail="busy again"
                )
                cleared.append(workload.pk)
            continue
        if workload.idle_warned_at is None:
            _warn(workload, now, after_grace)
            warned.append(workload.pk)
        elif now - workload.idle_warned_at >= timedelta(minutes=team.idle_grace_minutes):
            reclaim(workload, now)
            reclaimed.append(workload.pk)
    return IdleSweep(warned, reclaimed, cleared)


def _warn(workload: Workload, now: datetime, after_grace: str) -> None:
    team, what = workload.team, workload.get_kind_display()
    Workload.objects.filter(pk=workload.pk, state=WorkloadState.RUNNING).update(idle_warned_at=now)
    at = now + timedelta(minutes=team.idle_grace_minutes)
    detail = (
        f"its GPUs have been idle for {team.idle_reclaim_minutes} min (under {team.idle_threshold_percent} %); "
        f"{after_grace} at {at:%H:%M} UTC unless kept"
    )
    audit_record(actor=None, action=f"{workload.kind}.idle_warned", obj=workload, team=team, detail=detail)
    notify(
        kind="idle",
        user=workload.owner,
        message=f"{what} {workload.name}: {detail}.",
        link=_link(workload),
        email_subject=f"{what} {workload.name} is idle: {after_grace} at {at:%H:%M} UTC unless kept",
    )


@transaction.atomic
def _end_sandbox(sandbox: Workload, now: datetime) -> None:
    locked = Workload.objects.select_for_update().get(pk=sandbox.pk)
    if locked.state != WorkloadState.RUNNING or locked.idle_warned_at is None:
        return
    team = sandbox.team
    detail = f"reclaimed: its GPUs were idle past the warning and {team.idle_grace_minutes} min of grace"
    workload_end(workload=locked, ending_as=WorkloadState.TERMINATED, actor=None, at=now, detail=detail)
    audit_record(actor=None, action="sandbox.reclaimed", obj=locked, team=team, detail=detail)
    notify(
        kind="idle",
        user=sandbox.owner,
        message=f"Sandbox {sandbox.name} was ended: {detail}. Your home volume is kept.",
        link=_link(sandbox),
        email_subject=f"Sandbox {sandbox.name} was ended for being idle",
    )


@transaction.atomic
def workload_keep(*, user: User, workload_id: int, kind: str, now: datetime | None = None) -> Workload:
    """Keep an idle sandbox or deployment: the warning goes and the idle clock starts again."""
    now = now or timezone.now()
    workload = workload_get_for(user=user, workload_id=workload_id, lock=True, kind=kind)
    what = workload.get_kind_display()
    if not can_manage(user=user, team=workload.team, owner=workload.owner):
        raise NotAllowed(f"Only the owner, a lead of the team or an admin may keep this {what.lower()}.")
    refuse_owner_who_left(user=user, team=workload.team, owner=workload.owner, doing="keep")
    if workload.state != WorkloadState.RUNNING:
        raise Conflict(f"{what} {workload.name} is {workload.get_state_display().lower()}.")
    Workload.objects.filter(pk=workload.pk).update(idle_kept_at=now, idle_warned_at=None)
    audit_record(
        actor=user, action=f"{kind}.kept", obj=workload, team=workload.team, detail="kept though idle"
    )
    workload.refresh_from_db()
    return workload


def sandbox_keep(*, user: User, sandbox_id: int, now: datetime | None = None) -> Workload:
    return workload_keep(user=user, workload_id=sandbox_id, kind=WorkloadKind.SANDBOX, now=now)
