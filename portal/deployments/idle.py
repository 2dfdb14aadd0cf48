"""Idle reclaim of deployments: one whose GPUs sat idle for the team's idle time is warned (the
owner may keep it), then scaled to zero replicas: its endpoint and expiry stay, nothing runs and
nothing is billed, and its page offers to scale it back to the replicas it had."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.services import notify
from portal.audit.services import audit_record
from portal.core.errors import Conflict
from portal.deployments.services import deployment_apply_scale, deployment_scale
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from portal.workloads.selectors import workload_get_for
from portal.workloads.services import IdleSweep, workloads_idle_sweep


def deployments_idle_sweep(*, now: datetime | None = None) -> IdleSweep:
    """Warn, scale to zero or clear running deployments by their GPUs' idleness."""
    return workloads_idle_sweep(
        now=now, kind=WorkloadKind.DEPLOYMENT, reclaim=_scale_to_zero, after_grace="it is scaled to zero"
    )


@transaction.atomic
def _scale_to_zero(deployment: Workload, now: datetime) -> None:
    locked = Workload.objects.select_for_update().get(pk=deployment.pk)
    if locked.state != WorkloadState.RUNNING or locked.idle_warned_at is None or locked.replicas == 0:
        return
    team, before = deployment.team, locked.replicas
    Workload.objects.filter(pk=locked.pk).update(idle_parked_replicas=before, idle_warned_at=None)
    locked.idle_parked_replicas, locked.idle_warned_at = before, None
    deployment_apply_scale(workload=locked, replicas=0, actor=None, now=now)
    detail = (
        f"scaled from {before} replicas to zero: its GPUs were idle past the warning and "
        f"{team.idle_grace_minutes} min of grace"
    )
    audit_record(actor=None, action="deployment.reclaimed", obj=locked, team=team, detail=detail)
    notify(
        kind="idle",
        user=deployment.owner,
        message=f"Deployment {deployment.name} was {detail}. Scale it back from its page when it is needed.",
        link=deployment.get_absolute_url(),
        email_subject=f"Deployment {deployment.name} was scaled to zero for being idle",
    )


def deployment_scale_back(*, user: User, deployment_id: int, now: datetime | None = None) -> Workload:
    """Scale a deployment that idle reclaim scaled to zero back to the replicas it had (with the
    quota and approval checks of any scale-up)."""
    deployment = workload_get_for(user=user, workload_id=deployment_id, kind=WorkloadKind.DEPLOYMENT)
    if deployment.replicas or not deployment.idle_parked_replicas:
        raise Conflict(f"Deployment {deployment.name} was not scaled to zero for being idle.")
    return deployment_scale(
        user=user,
        deployment_id=deployment_id,
        replicas=deployment.idle_parked_replicas,
        now=now or timezone.now(),
    )
