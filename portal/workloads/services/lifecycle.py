"""The workload lifecycle as the workers drive it: place, start, fail, end, expire, drain.

Every function here is safe to call twice: it claims the row with a conditional update and does
nothing when another process got there first.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.notifications import notifications_mark_read_by_link
from portal.accounts.selectors import platform_admins
from portal.accounts.services import notify
from portal.audit.models import AuditEvent
from portal.audit.services import audit_record
from portal.core.errors import Conflict
from portal.core.jobs import enqueue
from portal.core.text import counted, sentence
from portal.fleet.models import Allocation
from portal.fleet.placement import NoFit
from portal.fleet.services import (
    allocation_place,
    allocations_end,
    allocations_place_queued,
    allocations_release,
    mig_slices_abandon,
)
from portal.workloads.models import Approval, Workload, WorkloadState
from portal.workloads.services.transitions import move, try_move

log = logging.getLogger(__name__)
RECONCILE_TASK = "workloads.reconcile"
DRAIN_TASK = "workloads.drain_queue"
S = WorkloadState


def _link(workload: Workload) -> str:
    return workload.get_absolute_url()


def workload_try_place(*, workload: Workload, now: datetime, actor: User | None = None) -> bool:
    """Place a queued workload if capacity allows; otherwise leave it queued with the reason. A
    scheduled one waits for its start (the drain places it then)."""
    if workload.start_at is not None and workload.start_at > now:
        return False
    with transaction.atomic():
        decision = allocation_place(holder=workload, now=now)
        if isinstance(decision, NoFit):
            message = f"Waiting for capacity: {decision.reason}."
            if workload.message != message:
                Workload.objects.filter(pk=workload.pk, state=S.QUEUED).update(message=message)
                workload.message = message
            return False
        _placed(workload, reason=decision.reason, actor=actor, now=now)
    return True


def _placed(workload: Workload, *, reason: str, actor: User | None, now: datetime) -> None:
    move(
        workload=workload,
        to=S.PROVISIONING,
        from_states=[S.QUEUED],
        actor=actor,
        event="placed",
        detail=reason,
        cluster=workload.cluster,
        node_name=workload.node_name,
        placement_reason=workload.placement_reason,
        message=f"Placed on {workload.node_name}; starting.",
        attempts=0,
        next_attempt_at=None,  # due at once
        last_error="",
    )
    enqueue(RECONCILE_TASK, workload.pk)


def workload_queue_drain(*, now: datetime | None = None) -> list[int]:
    """Place queued workloads that now fit: priority, then arrival; smaller ones backfill around
    a large one that does not fit, except behind one that has waited past
    PORTAL_STARVATION_MINUTES, which reserves its GPU type until it is placed.

    The queued rows are locked first (rows another drain or an ending holds are skipped, not
    waited for), then the GPU types: the same order as every other placement, so concurrent
    drains neither deadlock nor place a row twice.
    """
    now = now or timezone.now()
    placed: list[int] = []
    with transaction.atomic():
        queued = list(
            Workload.objects.select_for_update(of=("self",), skip_locked=True)
            .filter(state=S.QUEUED)
            .filter(Q(start_at__isnull=True) | Q(start_at__lte=now))  # scheduled ones wait for their start
            .select_related("team", "gpu_type")
            .order_by("-priority", "queued_at", "pk")
        )
        if not queued:
            return []
        decisions = allocations_place_queued(
            holders=queued, now=now, starvation_seconds=settings.PORTAL_STARVATION_MINUTES * 60
        )
        for workload in queued:
            if workload.pk in decisions:
                _placed(workload, reason=decisions[workload.pk].reason, actor=None, now=now)
                placed.append(workload.pk)
        # Deployments with several replicas are placed all at once or not at all, after the rest.
        for workload in queued:
            if workload.replicas > 1 and workload_try_place(workload=workload, now=now):
                placed.append(workload.pk)
    return placed


@transaction.atomic
def workload_requeue(*, workload_id: int, message: str, now: datetime) -> None:
    """Its placement could not be made real (a MIG layout failed): give the GPU back and wait
    for another place. The hold was never usable, so it is not billed."""
    workload = Workload.objects.select_related("team").get(pk=workload_id)
    if not try_move(
        workload=workload,
        to=S.QUEUED,
        from_states=[S.PROVISIONING],
        event="requeued",
        detail=message,
        message=f"{message} Waiting for another place."[:500],
        node_name="",
        placement_reason="",
        next_attempt_at=None,
    ):
        return
    holds = Allocation.objects.filter(workload=workload, released_at__isnull=True)
    nodes = set(holds.values_list("gpu__node_id", flat=True))
    holds.update(ended_at=F("started_at"))  # never usable, so never billed
    # Both hand the layout changes they make to the nodes' MIG job (fleet's mig_layout_changed).
    allocations_release(holder=workload, at=now)
    for node_id in sorted(nodes):
        mig_slices_abandon(node_id=node_id)
    enqueue(DRAIN_TASK)


def workload_approve(*, workload: Workload, actor: User, now: datetime) -> None:
    """A lead said yes: queue it and try to place it (or end it if its time ran out meanwhile)."""
    if workload.expires_at is not None and workload.expires_at <= now:
        # Approved too late (its request named an end that has passed): its time is over before it could start.
        workload_end(
            workload=workload,
            ending_as=S.EXPIRED,
            actor=actor,
            at=now,
            detail="expired before it was approved",
        )
        return
    move(
        workload=workload,
        to=S.QUEUED,
        from_states=[S.PENDING_APPROVAL],
        actor=actor,
        event="approved",
        queued_at=max(now, workload.start_at) if workload.start_at else now,
        message=f"Approved by {actor.username}."
        + (
            f" Scheduled to start at {workload.start_at:%Y-%m-%d %H:%M} UTC."
            if workload.start_at and workload.start_at > now
            else ""
        ),
    )
    workload_try_place(workload=workload, now=now, actor=actor)


def approval_link(approval: Approval) -> str:
    """Where a decider's notice of `approval` points: its row in the approvals inbox."""
    return f"{reverse('approvals')}#approval-{approval.pk}"


def approvals_cancel(*, workload: Workload, at: datetime) -> None:
    """Close what still waits for a lead on a workload that ended or was rejected (an extension or a
    scale asked meanwhile): cancelled, and the deciders' notices of it marked done, so that no lead
    is left a decision that can no longer be taken."""
    pending = list(Approval.objects.filter(workload=workload, state=Approval.State.PENDING).only("pk"))
    if not pending:
        return
    Approval.objects.filter(pk__in=[a.pk for a in pending], state=Approval.State.PENDING).update(
        state=Approval.State.CANCELLED, decided_at=at
    )
    notifications_mark_read_by_link(links=[approval_link(approval) for approval in pending], now=at)


def workload_reject(*, workload: Workload, actor: User, reason: str, now: datetime) -> None:
    """A lead said no: it ends as rejected, with the reason, and what else was asked of it (an
    extension) is cancelled."""
    move(
        workload=workload,
        to=S.REJECTED,
        from_states=[S.PENDING_APPROVAL],
        actor=actor,
        event="rejected",
        detail=reason,
        ended_at=now,
        message=f"Rejected by {actor.username}: {reason}"[:500],
    )
    approvals_cancel(workload=workload, at=now)


def workload_end(
    *, workload: Workload, ending_as: str, actor: User | None, at: datetime, detail: str
) -> None:
    """Begin ending a workload. Billing stops at `at`, or at its expiry if that came first (ended
    after its time ran out, before the sweep got to it); what holds no GPU ends at once."""
    at = _not_past_expiry(workload, at)
    if workload.state in (S.PENDING_APPROVAL, S.QUEUED):
        move(
            workload=workload,
            to=ending_as,
            from_states=[S.PENDING_APPROVAL, S.QUEUED],
            actor=actor,
            event=ending_as,
            detail=detail,
            ended_at=at,
            message=sentence(detail) + ".",
        )
        approvals_cancel(workload=workload, at=at)
        return
    if workload.state not in (S.PROVISIONING, S.RUNNING):
        raise Conflict(
            f"{workload.kind.capitalize()} {workload.name} is already {workload.get_state_display().lower()}."
        )
    move(
        workload=workload,
        to=S.TERMINATING,
        from_states=[S.PROVISIONING, S.RUNNING],
        actor=actor,
        event="terminating",
        detail=detail,
        ending_as=ending_as,
        ended_at=at,
        message=sentence(detail) + "; removing it from the cluster.",
        attempts=0,
        next_attempt_at=None,  # due at once
    )
    approvals_cancel(workload=workload, at=at)
    allocations_end(holder=workload, at=at)
    enqueue(RECONCILE_TASK, workload.pk)


def _not_past_expiry(workload: Workload, at: datetime) -> datetime:
    """`at`, or its expiry when that came first: nothing is billed past the agreed time."""
    return at if workload.expires_at is None else min(at, workload.expires_at)


def workload_mark_running(
    *, workload_id: int, access: str, now: datetime, message: str = "Running.", tell_owner: bool = True
) -> None:
    """It runs: the first time, its lifetime starts now (its expiry is set, unless its request
    named one); after a rescale, it keeps its start and expiry and serves the new replicas."""
    workload = Workload.objects.select_related("team", "owner").get(pk=workload_id)
    rescaled_from = workload.scaling_from
    first_start = workload.started_at is None
    fields: dict = {"started_at": workload.started_at or now, "scaling_from": None}
    if workload.expires_at is None:
        fields["expires_at"] = workload.expiry_from(now)
    if (
        not try_move(
            workload=workload,
            to=S.RUNNING,
            from_states=[S.PROVISIONING],
            event="running" if rescaled_from is None else "scaled_running",
            detail="" if rescaled_from is None else f"{rescaled_from} → {workload.replicas} replicas",
            access=access,
            message=message,
            attempts=0,
            # Running workloads stay watched: replica health, crashes, a node that went away.
            next_attempt_at=now + timedelta(seconds=WATCH_SECONDS),
            last_error="",
            access_problem="",  # the workload was just applied whole: its route and keys with it
            **fields,
        )
        or not tell_owner
    ):
        return
    # "is running" once, on the first start; a rescale says how many replicas run now (once per
    # scale); coming back up after anything else (a replaced pod) is no news.
    if first_start and rescaled_from is None:
        text = f"{workload.kind.capitalize()} {workload.name} is running."
    elif rescaled_from is not None and rescaled_from != workload.replicas:
        text = (
            f"{workload.kind.capitalize()} {workload.name} now runs {counted(workload.replicas, 'replica')}."
        )
    else:
        return
    notify(kind="running", user=workload.owner, message=text, link=_link(workload), workload=workload)


WATCH_SECONDS = 30.0  # how often a running workload's health is read
# How long a degraded workload must stay well to count as recovered: a crash loop runs for a
# while between crashes, and each turn must not read as a recovery.
RECOVERED_AFTER = timedelta(minutes=10)
RESTARTING = "Restarting"  # how the message of a sandbox whose pod is being replaced begins
RESTART_GRACE = timedelta(minutes=10)  # how long a new pod may take before it counts as degraded


def _restart_progress(workload: Workload, problem: str, now: datetime) -> dict:
    """While a pod replaced on its owner's request comes back, what the row should say (the old
    pod went on purpose: not a degradation, unless the new one takes past RESTART_GRACE); {}
    when no restart is under way."""
    if not workload.message.startswith(RESTARTING):
        return {}
    if not problem:
        return {"message": "Running."}
    if workload.restarted_at is None or now - workload.restarted_at < RESTART_GRACE:
        return {"message": f"{RESTARTING}: {problem}"[:500], "next_attempt_at": now + timedelta(seconds=3)}
    return {}


def workload_observed_health(*, workload_id: int, problem: str, now: datetime) -> None:
    """What the cluster says of a running workload: `problem` is "" when it is well. The first
    problem marks it degraded (audited, the owner told); problems after that change the message
    only; being well for RECOVERED_AFTER clears it (audited, the owner told), so a crash loop
    reads as one degradation, not one per crash. It is looked at again in WATCH_SECONDS."""
    workload = (
        Workload.objects.select_related("team", "owner").filter(pk=workload_id, state=S.RUNNING).first()
    )
    if workload is None:
        return
    fields: dict = {"next_attempt_at": now + timedelta(seconds=WATCH_SECONDS)}
    restart = _restart_progress(workload, problem, now)
    if restart:
        fields.update(restart)
    elif problem:
        message = f"Degraded: {problem}"[:500]
        fields.update(message=message, well_since=None)
        if workload.degraded_since is None:
            fields["degraded_since"] = now
            audit_record(
                actor=None,
                action=f"{workload.kind}.degraded",
                obj=workload,
                team=workload.team,
                detail=problem[:500],
            )
            notify(
                kind="health",
                user=workload.owner,
                message=f"{workload.kind.capitalize()} {workload.name}: {message}",
                link=_link(workload),
            )
    elif workload.degraded_since is not None and workload.well_since is None:
        fields["well_since"] = now  # well again: recovered if it stays so
    elif workload.degraded_since is not None and now - workload.well_since >= RECOVERED_AFTER:
        fields.update(degraded_since=None, well_since=None, message="Running.")
        audit_record(
            actor=None,
            action=f"{workload.kind}.recovered",
            obj=workload,
            team=workload.team,
            detail="running well again",
        )
        notify(
            kind="health",
            user=workload.owner,
            message=f"{workload.kind.capitalize()} {workload.name} is running well again.",
            link=_link(workload),
        )
    Workload.objects.filter(pk=workload_id, state=S.RUNNING).update(**fields)


def workload_access_observed(*, workload_id: int, problem: str) -> None:
    """How the worker's update of a running workload's route, quota and SSH keys went: `problem`
    is "" when it went well. Its page shows the problem until an update goes well; the first one
    of a run of failures is audited, so an operator finds a missing grant without the worker log."""
    problem = problem[:500]
    with transaction.atomic():
        rows = Workload.objects.filter(pk=workload_id, state=S.RUNNING).exclude(access_problem=problem)
        first = rows.filter(access_problem="").first() if problem else None
        rows.update(access_problem=problem)
        if first is not None:
            audit_record(
                actor=None, action=f"{first.kind}.access_failed", obj=first, team=first.team, detail=problem
            )


def workload_mark_waiting(
    *, workload_id: int, message: str, now: datetime, recheck_seconds: float = 1.0
) -> None:
    """The workload is still starting: note why and when to look again."""
    Workload.objects.filter(pk=workload_id, state=S.PROVISIONING).update(
        message=message[:500], next_attempt_at=now + timedelta(seconds=recheck_seconds)
    )


@transaction.atomic
def workload_mark_failed(*, workload_id: int, message: str, now: datetime) -> None:
    """The cluster could not run it: stop billing, tell the owner, and take its objects out of
    the cluster; it becomes `failed` (and its GPUs free) once they are gone, like any ending."""
    workload = Workload.objects.select_related("team", "owner").get(pk=workload_id)
    now = _not_past_expiry(workload, now)
    if not try_move(
        workload=workload,
        to=S.TERMINATING,
        from_states=[S.PROVISIONING, S.RUNNING],
        event="failing",
        detail=message,
        ending_as=S.FAILED,
        ended_at=now,
        message=message[:500],
        attempts=0,
        next_attempt_at=None,  # due at once
    ):
        return
    approvals_cancel(workload=workload, at=now)
    allocations_end(holder=workload, at=now)
    notify(
        kind="health",
        user=workload.owner,
        message=f"{workload.kind.capitalize()} {workload.name} failed: {message}",
        link=_link(workload),
        email_subject=f"{workload.kind.capitalize()} {workload.name} failed",
    )
    enqueue(RECONCILE_TASK, workload.pk)


STUCK_TERMINATING_MINUTES = 10


def workload_removal_stuck(*, workload_id: int, now: datetime) -> bool:
    """The cluster has been removing the workload's objects (its namespace Terminating: a
    finalizer that never finishes, a webhook that is down) for STUCK_TERMINATING_MINUTES: tell the
    platform admins, once, and audit it. Its GPUs stay held until the objects are gone. Returns
    whether they were told now."""
    workload = Workload.objects.select_related("team").filter(pk=workload_id, state=S.TERMINATING).first()
    ended = workload.ended_at if workload else None
    if workload is None or ended is None or now - ended < timedelta(minutes=STUCK_TERMINATING_MINUTES):
        return False
    action = f"{workload.kind}.removal_stuck"
    if AuditEvent.objects.filter(
        action=action, object_type=workload.kind, object_id=str(workload.pk)
    ).exists():
        return False
    minutes = int((now - ended).total_seconds() // 60)
    detail = f"namespace {workload.namespace} still terminating {minutes} minutes after it ended; its GPUs stay held"
    audit_record(actor=None, action=action, obj=workload, team=workload.team, detail=detail)
    for admin in platform_admins():
        notify(
            kind="fleet",
            user=admin,
            message=f"{workload.kind.capitalize()} {workload.name}: {detail}.",
            link=_link(workload),
        )
    return True


@transaction.atomic
def workload_mark_ended(*, workload_id: int, now: datetime, note: str = "") -> None:
    """The cluster objects are gone (or, with a `note`, could not be removed and were given
    up on): reach the end state and free the GPUs."""
    workload = Workload.objects.select_related("team").get(pk=workload_id)
    ending_as = workload.ending_as or S.TERMINATED
    fields: dict = {"next_attempt_at": None}
    if ending_as == S.EXPIRED:
        fields["message"] = "Expired."
    elif ending_as == S.TERMINATED:
        fields["message"] = "Terminated."
    if note:
        fields["message"] = f"{fields.get('message', workload.message)} {note}".strip()[:500]
    if not try_move(
        workload=workload,
        to=ending_as,
        from_states=[S.TERMINATING],
        event=ending_as,
        **fields,
    ):
        return
    allocations_release(holder=workload, at=now)  # freed MIG layouts go to the nodes' MIG job
    enqueue(DRAIN_TASK)


def workload_attempt_failed(*, workload_id: int, error: str, retryable: bool, now: datetime) -> None:
    """A driver call failed: back off and try again. Provisioning gives up after
    PORTAL_MAX_ATTEMPTS, or at once on a final error. A teardown retries a transient error for as
    long as it takes (the GPUs stay held until the objects are gone) and gives up only on a final
    refusal after PORTAL_MAX_ATTEMPTS, leaving the namespace to an admin."""
    workload = Workload.objects.get(pk=workload_id)
    attempts = workload.attempts + 1
    giving_up = not retryable or attempts >= settings.PORTAL_MAX_ATTEMPTS
    if workload.state == S.PROVISIONING and giving_up:
        workload_mark_failed(workload_id=workload_id, message=error, now=now)
        return
    if workload.state == S.TERMINATING and not retryable and attempts >= settings.PORTAL_MAX_ATTEMPTS:
        # The cluster refuses the teardown for good: free the GPUs in the portal and say what is
        # left behind, rather than hold them forever. Drift repair deletes the namespace later.
        workload_mark_ended(
            workload_id=workload_id,
            now=now,
            note=f"Its namespace {workload.namespace} could not be removed ({error}); an admin must delete it.",
        )
        return
    delay = min(300, 2**attempts)
    Workload.objects.filter(pk=workload_id, state__in=[S.PROVISIONING, S.RUNNING, S.TERMINATING]).update(
        attempts=attempts,
        last_error=error[:2000],
        next_attempt_at=now + timedelta(seconds=delay),
        message=f"Retrying in {delay} s: {error}"[:500],
    )


def workload_restart_begun(*, workload_id: int, now: datetime) -> None:
    """The worker replaced the workload's pod as its owner asked: look again in a few seconds."""
    workload = Workload.objects.filter(pk=workload_id, state=S.RUNNING).first()
    if workload is None:
        return
    # The request it carried out, not the moment: a restart asked for meanwhile is still due.
    Workload.objects.filter(pk=workload_id, state=S.RUNNING).update(
        restarted_at=workload.restart_requested_at or now, next_attempt_at=now + timedelta(seconds=3)
    )
    audit_record(
        actor=None,
        action=f"{workload.kind}.restarted",
        obj=workload,
        team=workload.team,
        detail="a new pod was asked for",
    )
