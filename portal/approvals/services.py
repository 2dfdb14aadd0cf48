"""A lead's decision on an approval. Nobody decides their own request."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from portal.accounts.models import NotificationKind, User
from portal.accounts.notifications import notifications_mark_read_by_link
from portal.accounts.selectors import is_lead
from portal.accounts.services import notify
from portal.approvals.selectors import approval_get_for
from portal.audit.models import AuditEvent
from portal.audit.services import audit_record
from portal.core.errors import Conflict, NotAllowed, ValidationFailed
from portal.core.text import hours_words
from portal.deployments.services import deployment_apply_scale
from portal.fleet.selectors import price_per_hour
from portal.workloads.models import Approval, Workload, WorkloadState
from portal.workloads.policy import extended_lifetime, within_max_lifetime
from portal.workloads.selectors import asked_hours, cost_of_hours
from portal.workloads.services import (
    approval_link,
    tell_deciders,
    workload_apply_extension,
    workload_approve,
    workload_reject,
)


@transaction.atomic
def approval_decide(
    *, user: User, approval_id: int, approve: bool, comment: str = "", now: datetime | None = None
) -> Approval:
    """Approve or reject a pending request, extension or scale, and act on it at once."""
    now = now or timezone.now()
    # Lock order, as everywhere: the workload row, then its approvals, then the team (a scale's
    # quota check), then GPU types, then nodes.
    approval = approval_get_for(user=user, approval_id=approval_id)
    workload = (
        Workload.objects.select_for_update(of=("self",))
        .select_related("team", "owner", "gpu_type")
        .get(pk=approval.workload_id)
    )
    approval = Approval.objects.select_for_update().get(pk=approval.pk)
    if approval.requested_by_id == user.pk:
        raise NotAllowed("You cannot decide your own request; another lead or an admin must.")
    if not (user.is_platform_admin or is_lead(user=user, team=approval.team)):
        raise NotAllowed("Only a lead of the team or an admin may decide this request.")
    comment = (comment or "").strip()
    if not approve and not comment:
        raise ValidationFailed(
            "Say why the request is rejected.", fields={"reason": ["A reason is required."]}
        )
    if approval.state != Approval.State.PENDING:
        raise Conflict(f"This request was already {approval.state}.")
    claimed = Approval.objects.filter(pk=approval.pk, state=Approval.State.PENDING).update(
        state=Approval.State.APPROVED if approve else Approval.State.REJECTED,
        decided_by=user,
        decided_at=now,
        comment=comment[:1000],
    )
    if not claimed:
        raise Conflict("This request was decided meanwhile.")
    approval.refresh_from_db()
    audit_record(
        actor=user,
        action="approval.approve" if approve else "approval.reject",
        obj=approval,
        team=approval.team,
        from_state=Approval.State.PENDING,
        to_state=approval.state,
        detail=comment,
    )
    if approval.kind == Approval.Kind.CREATE:
        if approve:
            workload_approve(workload=workload, actor=user, now=now)
        else:
            workload_reject(workload=workload, actor=user, reason=comment, now=now)
    elif approve and approval.kind == Approval.Kind.EXTEND:
        _extend(approval, workload, user, now=now)
    elif approve and approval.kind == Approval.Kind.SCALE:
        if workload.state not in (WorkloadState.PROVISIONING, WorkloadState.RUNNING):
            raise Conflict(
                f"Deployment {workload.name} is {workload.get_state_display().lower()}; it can no longer be scaled."
            )
        deployment_apply_scale(workload=workload, replicas=approval.replicas, actor=user, now=now)
    verb = "approved" if approve else "rejected"
    what = {
        Approval.Kind.CREATE: "request for",
        Approval.Kind.EXTEND: "extension of",
        Approval.Kind.SCALE: "scaling of",
    }[approval.kind]
    message = f"{user.username} {verb} your {what} {workload.name}" + (f": {comment}" if comment else ".")
    notify(
        kind="decision",
        user=approval.requested_by,
        message=message,
        link=workload.get_absolute_url(),
        email_subject=f"Your {what} {workload.name} was {verb}",
        workload=workload,
    )
    # Decided by one lead: nothing is left for the others, so every decider's notice is done.
    notifications_mark_read_by_link(links=[approval_link(approval)], now=now)
    return approval


def approvals_remind_waiting(*, now: datetime | None = None) -> list[int]:
    """Remind the deciders of each request that has waited longer than its team's
    `approval_reminder_hours` (0: never), once per such interval: in the portal, by e-mail (with
    fresh one-time links) and to their and the team's webhooks. Returns the approvals reminded."""
    now = now or timezone.now()
    reminded = []
    waiting = (
        Approval.objects.filter(state=Approval.State.PENDING, team__approval_reminder_hours__gt=0)
        .select_related("team", "workload", "requested_by")
        .order_by("pk")
    )
    for approval in waiting:
        interval = timedelta(hours=approval.team.approval_reminder_hours)
        if now - approval.created_at < interval:
            continue
        if AuditEvent.objects.filter(
            action="approval.reminded",
            object_type="approval",
            object_id=str(approval.pk),
            created_at__gt=now - interval,
        ).exists():
            continue  # reminded within this interval
        hours = int((now - approval.created_at).total_seconds() // 3600)
        with transaction.atomic():
            audit_record(
                actor=None,
                action="approval.reminded",
                obj=approval,
                object_type="approval",
                team=approval.team,
                detail=f"waiting {hours} h",
            )
            tell_deciders(
                approval=approval,
                message=f"Reminder: {_asked(approval)} has waited {hours} h for a decision.",
                kind=NotificationKind.APPROVAL_REMINDER,
                reminder=True,
            )
        reminded.append(approval.pk)
    return reminded


def _asked(approval: Approval) -> str:
    """A waiting request as a reminder names it: what, for how long, the most it costs (or adds)
    at today's prices, as the first message to the leads did."""
    workload, who = approval.workload, approval.requested_by.username
    if approval.kind == Approval.Kind.SCALE:
        return f"{who}'s request to scale {workload.name} (team {approval.team.name}) to {approval.replicas} replicas"
    extend = approval.kind == Approval.Kind.EXTEND
    hours = approval.extend_hours if extend and approval.extend_hours is not None else workload.lifetime_hours
    billed = hours if extend else asked_hours(workload)
    cost = f"${cost_of_hours(workload, billed, price=price_per_hour(gpu_type=workload.gpu_type)):,.2f}"
    length = hours_words(hours)
    if extend:
        return f"{who}'s request to extend {workload.name} (team {approval.team.name}) by {length}, {cost} more at most,"
    return f"{who}'s request for {workload.gpu_label} ({workload.name}, team {approval.team.name}) for {length}, {cost} at most,"


def _extend(approval: Approval, workload: Workload, user: User, *, now: datetime) -> None:
    """The lead's yes overrides the auto-approval line and the budget, never the maximum lifetime."""
    if not workload.is_live:
        raise Conflict(
            f"{workload.kind.capitalize()} {workload.name} is {workload.get_state_display().lower()}; it can no longer be extended."
        )
    hours = approval.extend_hours
    lifetime = extended_lifetime(workload=workload, hours=hours)
    if not within_max_lifetime(team=workload.team, lifetime_hours=lifetime):
        raise ValidationFailed("The extension would pass the team's maximum lifetime.")
    workload_apply_extension(workload=workload, actor=user, hours=hours)
