"""The periodic sweep: expire what is overdue, warn what is about to expire, drain the queue."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.accounts.services import notify
from portal.core.errors import Conflict
from portal.workloads.models import Workload, WorkloadState
from portal.workloads.services.lifecycle import workload_end, workload_queue_drain

log = logging.getLogger(__name__)
S = WorkloadState


@dataclass
class SweepResult:
    """What one sweep did, by workload id (for logs and tests)."""

    expired: list[int] = field(default_factory=list)
    warned: list[int] = field(default_factory=list)
    placed: list[int] = field(default_factory=list)


def workloads_expire_overdue(*, now: datetime) -> list[int]:
    """End every live workload past its expiry. Billing stops at `expires_at`, not at `now`, so a
    sweep that runs late (workers were down) never bills past the agreed time."""
    expired = []
    overdue = Workload.objects.filter(
        expires_at__lte=now, state__in=[S.PENDING_APPROVAL, S.QUEUED, S.PROVISIONING, S.RUNNING]
    ).values_list("pk", flat=True)
    for workload_id in list(overdue):
        try:
            with transaction.atomic():
                workload = (
                    Workload.objects.select_for_update(of=("self",))
                    .select_related("team", "owner")
                    .get(pk=workload_id)
                )
                if workload.expires_at > now:
                    continue  # extended meanwhile
                workload_end(
                    workload=workload,
                    ending_as=S.EXPIRED,
                    actor=None,
                    at=min(now, workload.expires_at),
                    detail="expired",
                )
                label = f"{workload.kind.capitalize()} {workload.name}"
                notify(
                    kind="expired",
                    user=workload.owner,
                    message=f"{label} reached its expiry and was ended.",
                    link=workload.get_absolute_url(),
                    email_subject=f"{label} expired",
                    workload=workload,
                )
                expired.append(workload_id)
        except Conflict:
            continue
    return expired


def expiry_warning_lead(workload: Workload) -> timedelta | None:
    """How long before its expiry a workload's owner is warned: the warning window
    (PORTAL_EXPIRY_WARNING_MINUTES), or half the lifetime when that is shorter, so a warning never
    comes right at the start. A lifetime no longer than the window is not warned at all: its owner
    chose it knowing its end. None when there is no warning to give."""
    window = timedelta(minutes=settings.PORTAL_EXPIRY_WARNING_MINUTES)
    started = workload.started_at or workload.created_at
    if workload.expires_at is None or started is None:
        return None
    lifetime = workload.expires_at - started
    if lifetime <= window:
        return None
    return min(window, lifetime / 2)


def workloads_warn_expiring(*, now: datetime) -> list[int]:
    """Tell owners once when their running workload comes within its warning lead of expiry
    (`expiry_warning_lead`)."""
    window = now + timedelta(minutes=settings.PORTAL_EXPIRY_WARNING_MINUTES)
    warned = []
    candidates = Workload.objects.select_related("owner", "team").filter(
        state__in=[S.PROVISIONING, S.RUNNING],
        expires_at__gt=now,
        expires_at__lte=window,
        expiry_warned_at__isnull=True,
    )
    for workload in candidates:
        lead = expiry_warning_lead(workload)
        if lead is None or workload.expires_at - now > lead:
            continue
        claimed = Workload.objects.filter(pk=workload.pk, expiry_warned_at__isnull=True).update(
            expiry_warned_at=now
        )
        if not claimed:
            continue
        minutes = max(1, int((workload.expires_at - now).total_seconds() // 60))
        notify(
            kind="expiry_warning",
            user=workload.owner,
            workload=workload,
            message=f"{workload.kind.capitalize()} {workload.name} expires in {minutes} min. Extend it to keep it.",
            link=workload.get_absolute_url(),
            email_subject=f"{workload.kind.capitalize()} {workload.name} expires in {minutes} min",
        )
        warned.append(workload.pk)
    return warned


def workloads_due_for_reconcile(*, now: datetime) -> list[int]:
    """Sandboxes a worker should look at now: starting ones and ending ones whose time has come."""
    return list(
        Workload.objects.filter(
            Q(state__in=[S.PROVISIONING, S.TERMINATING])
            | Q(state=S.RUNNING)  # health is watched (on the WATCH_SECONDS cadence the row keeps)
        )
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .values_list("pk", flat=True)
    )


def workloads_sweep(*, now: datetime | None = None) -> SweepResult:
    """Expire the overdue, warn the nearly due, and drain the queue; reconcile steps that are due
    come from `workloads_due_for_reconcile`, on their own schedule."""
    now = now or timezone.now()
    return SweepResult(
        expired=workloads_expire_overdue(now=now),
        warned=workloads_warn_expiring(now=now),
        placed=workload_queue_drain(now=now),
    )
