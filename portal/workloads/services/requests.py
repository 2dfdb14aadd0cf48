"""What users do to sandboxes and deployments: request, estimate, extend, terminate. The policy
verdicts come from `portal.workloads.policy`; these act on them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.accounts.action_links import action_links_for
from portal.accounts.models import Notification, Team, User
from portal.accounts.notifications import team_webhook_notify
from portal.accounts.selectors import can_manage, is_lead, refuse_owner_who_left, team_leads
from portal.accounts.services import notify
from portal.audit.services import audit_record
from portal.core.errors import Conflict, NotAllowed, ValidationFailed
from portal.core.text import hours_words
from portal.fleet.selectors import capacity_free_now, price_per_hour
from portal.spend.selectors import to_cents
from portal.workloads.models import WITHDRAWN_BY, Approval, Workload, WorkloadState
from portal.workloads.policy import (
    PolicyEstimate,
    Verdict,
    extended_expiry,
    extension_verdict,
    fraction_to_decimal,
    request_verdict,
)
from portal.workloads.selectors import cost_of_hours, waiting_cost, workload_get_for
from portal.workloads.services.lifecycle import approval_link, workload_end, workload_try_place
from portal.workloads.services.resolve import ResolvedRequest, WorkloadAsk, resolve_request
from portal.workloads.services.transitions import move


@dataclass(frozen=True)
class Estimate(PolicyEstimate):
    """A request's estimate, and whether the fleet has room for it now."""

    capacity_free_now: bool
    lifetime_hours: Decimal = Decimal(0)  # how long it runs, from when it starts running
    ends_at: datetime | None = None  # the end the request named, if it named one
    # A scheduled start: the quota is held from the request, and it is placed from this time.
    starts_at: datetime | None = None
    team: str = ""  # its slug
    team_name: str = ""


def workload_estimate(*, user: User, ask: WorkloadAsk, now: datetime | None = None) -> Estimate:
    """What a request would cost, whether it would be approved at once, and whether it fits now:
    the same policy verdict `workload_request` acts on."""
    now = now or timezone.now()
    resolved = resolve_request(user=user, ask=ask, check_name=False, now=now)
    decision = _verdict(resolved=resolved, team=resolved.team, now=now, user=user)
    assert decision.quota_left is not None
    return Estimate(
        hourly_cost=to_cents(resolved.hourly_cost),
        total_cost=to_cents(resolved.hourly_cost * resolved.lifetime_hours),
        gpu_equivalents=fraction_to_decimal(resolved.share),
        quota_left=decision.quota_left,
        fits_quota=decision.fits_quota,
        auto_approved=decision.auto_approved,
        why_needed=decision.why_needed,
        capacity_free_now=capacity_free_now(
            gpu_type=resolved.gpu_type, count=resolved.count, mig_profile=resolved.mig_profile
        ),
        lifetime_hours=resolved.lifetime_hours,
        ends_at=resolved.expires_at,
        starts_at=resolved.start_at,
        team=resolved.team.slug,
        team_name=resolved.team.name,
    )


def workload_request(
    *,
    user: User,
    ask: WorkloadAsk,
    now: datetime | None = None,
    before_placing: Callable[[Workload], None] | None = None,
) -> Workload:
    """Request a sandbox or deployment: checked, counted against quota under a team lock, then
    approved at once (and placed) or sent to the team's leads.

    `before_placing` runs on the new row inside the same transaction, before it is placed, so a
    deployment's serving details exist before any worker sees it.
    """
    now = now or timezone.now()
    resolved = resolve_request(user=user, ask=ask, now=now)
    try:
        with transaction.atomic():
            return _create(user=user, resolved=resolved, now=now, before_placing=before_placing)
    except IntegrityError:
        # Two requests with one name raced past the check; the constraint kept one.
        message = f"You already have a live {resolved.kind} called {resolved.name!r}."
        raise ValidationFailed(message, fields={"name": [message]}) from None


def _verdict(*, resolved: ResolvedRequest, team: Team, now: datetime, user: User) -> Verdict:
    return request_verdict(
        team=team,
        count=resolved.count,
        is_slice=resolved.shape is not None,
        share=resolved.share,
        lifetime_hours=resolved.lifetime_hours,
        hourly_cost=resolved.hourly_cost,
        now=now,
        replicas=resolved.replicas,
        user_id=user.pk,
        project=resolved.project,
    )


def _create(
    *, user: User, resolved: ResolvedRequest, now: datetime, before_placing: Callable[[Workload], None] | None
) -> Workload:
    team = Team.objects.select_for_update(no_key=True).get(pk=resolved.team.pk)
    decision = _verdict(resolved=resolved, team=team, now=now, user=user).enforce()
    state = WorkloadState.QUEUED if decision.auto_approved else WorkloadState.PENDING_APPROVAL
    # A scheduled request joins the queue at its start: its place counts from then.
    joins_queue = max(now, resolved.start_at) if resolved.start_at else now
    approved_message = (
        f"Approved by policy; scheduled to start at {resolved.start_at:%Y-%m-%d %H:%M} UTC."
        if resolved.start_at
        else "Approved by policy."
    )
    workload = Workload.objects.create(
        kind=resolved.kind,
        replicas=resolved.replicas,
        name=resolved.name,
        team=team,
        owner=user,
        image=resolved.image,
        purpose=resolved.purpose,
        project=resolved.project,
        gpu_type=resolved.gpu_type,
        gpu_count=resolved.count,
        mig_profile=resolved.mig_profile,
        cpu=resolved.cpu,
        memory_gb=resolved.memory_gb,
        storage_gb=resolved.storage_gb,
        state=state,
        expires_at=resolved.expires_at,
        ttl_hours=resolved.lifetime_hours,
        queued_at=joins_queue if decision.auto_approved else None,
        start_at=resolved.start_at,
        message=approved_message if decision.auto_approved else decision.why_needed,
    )
    audit_record(
        actor=user,
        action=f"{workload.kind}.request",
        obj=workload,
        team=team,
        to_state=state,
        detail=f"{workload.gpu_label} for {hours_words(resolved.lifetime_hours)}"
        + (f", from {resolved.start_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if resolved.start_at else ""),
    )
    if before_placing is not None:
        before_placing(workload)
    if decision.auto_approved:
        workload_try_place(workload=workload, now=now)
    else:
        approval = Approval.objects.create(
            workload=workload, team=team, requested_by=user, why_needed=decision.why_needed
        )
        tell_deciders(
            approval=approval,
            message=_ask_message(user=user, workload=workload, why=decision.why_needed),
        )
    return workload


def _ask_message(*, user: User, workload: Workload, why: str) -> str:
    """What a decider is told of a new request, on every channel: enough to decide from an e-mail
    (what, for how long, the most it costs as the inbox and its page count it, why it waits, what
    for). The purpose is last (a long one is cut with the notice, not the reason) and on one line:
    a line break in it could pass for the e-mail's own approve link below."""
    start = workload.start_at
    when = f" from {start.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if start else ""
    cost = waiting_cost(workload)
    total = f", ${cost.total:,.2f} at most" if cost else ""
    purpose = " ".join(workload.purpose.split())
    return (
        f"{user.username} asks for {workload.gpu_label} ({workload.name}, team {workload.team.name}) for "
        f"{hours_words(workload.lifetime_hours)}{when}{total}. {why}"
        + (f" Purpose: “{purpose}”." if purpose else "")
    )


def tell_deciders(
    *,
    approval: Approval,
    message: str,
    kind: str = "approval_request",
    reminder: bool = False,
) -> None:
    """Tell the team's leads (or, with none but the requester, the admins) that a request waits:
    each by their own channels, with one-time approve and reject links in the e-mail and their
    webhook message; and the team's webhook once. The e-mail's subject names who asks for what,
    so that several in an inbox tell apart."""
    asked = {Approval.Kind.EXTEND: "more time for", Approval.Kind.SCALE: "to scale"}.get(approval.kind, "")
    workload = approval.workload
    email_subject = (
        f"{'Reminder: ' if reminder else ''}{approval.requested_by.username} asks {asked + ' ' if asked else 'for '}"
        f"{workload.kind} {workload.name} (team {approval.team.name}): your approval"
    )
    deciders = [lead for lead in team_leads(approval.team) if lead.pk != approval.requested_by_id]
    if not deciders:
        deciders = list(User.objects.filter(is_staff=True).exclude(pk=approval.requested_by_id))
    link = approval_link(approval)
    for decider in deciders:
        notify(
            kind=kind,
            user=decider,
            message=message,
            link=link,
            email_subject=email_subject,
            workload=approval.workload,
            team=approval.team,
            actions=action_links_for(approval_id=approval.pk, lead_id=decider.pk),
        )
    team_webhook_notify(team=approval.team, kind=kind, message=message, link=link, workload=approval.workload)


def _close_withdrawn(
    approvals: list[Approval], *, actor: User | None, now: datetime, why: str = "Withdrawn by the requester."
) -> None:
    """Close approvals their requester withdrew (or what was done since made moot): cancelled,
    audited, and the deciders' notices of them marked done (there is nothing left to decide)."""
    for approval in approvals:
        claimed = Approval.objects.filter(pk=approval.pk, state=Approval.State.PENDING).update(
            state=Approval.State.CANCELLED, decided_at=now, comment=why
        )
        if not claimed:
            continue
        approval.state = Approval.State.CANCELLED
        audit_record(
            actor=actor,
            action="approval.withdrawn",
            obj=approval,
            team=approval.team,
            from_state=Approval.State.PENDING,
            to_state=Approval.State.CANCELLED,
            detail=f"{approval.kind} request withdrawn by {actor.username if actor else 'the portal'}",
        )
        Notification.objects.filter(link=approval_link(approval), read_at__isnull=True).update(read_at=now)


EXTEND_MAX_HOURS = 10_000  # beyond any team's policy; what a lifetime's column holds stays far off
EXTENDABLE = (
    WorkloadState.PENDING_APPROVAL,
    WorkloadState.QUEUED,
    WorkloadState.PROVISIONING,
    WorkloadState.RUNNING,
)


@transaction.atomic
def workload_extend(
    *,
    user: User,
    workload_id: int,
    hours: Decimal | float,
    now: datetime | None = None,
    kind: str,
) -> Workload:
    """Move the expiry by `hours`: at once within policy, else through a lead's approval."""
    now = now or timezone.now()
    workload = workload_get_for(user=user, workload_id=workload_id, lock=True, kind=kind)
    if not can_manage(user=user, team=workload.team, owner=workload.owner):
        raise NotAllowed(f"Only the owner, a lead of the team or an admin may extend this {workload.kind}.")
    refuse_owner_who_left(user=user, team=workload.team, owner=workload.owner, doing="extend")
    try:
        extra = Decimal(str(hours))
    except ArithmeticError:
        extra = Decimal(0)
    if not extra.is_finite() or extra <= 0:
        raise ValidationFailed(
            "Extend by a number of hours above zero.", fields={"hours": ["Must be above zero."]}
        )
    if extra * 60 < 1:  # as a lifetime: what the pages and the audit log could not even show
        raise ValidationFailed(
            "Extend by at least one minute (0.0167 hours).",
            fields={"hours": ["Must be at least one minute (0.0167 hours)."]},
        )
    if extra > EXTEND_MAX_HOURS:
        raise ValidationFailed(
            f"Extend by at most {EXTEND_MAX_HOURS:,} hours at a time.",
            fields={"hours": [f"At most {EXTEND_MAX_HOURS:,}."]},
        )
    if workload.state not in EXTENDABLE:
        raise Conflict(
            f"{workload.kind.capitalize()} {workload.name} is {workload.get_state_display().lower()}; only a live {workload.kind} can be extended."
        )
    if workload.expires_at is not None and workload.expires_at <= now:
        raise Conflict(
            f"{workload.kind.capitalize()} {workload.name} expired at "
            f"{workload.expires_at:%Y-%m-%d %H:%M} UTC and is ending; it can no longer be extended."
        )
    team = workload.team
    decision = extension_verdict(workload=workload, hours=extra, now=now).enforce()
    deciding_lead = user.pk != workload.owner_id and (user.is_platform_admin or is_lead(user=user, team=team))
    if deciding_lead or decision.auto_approved:
        workload_apply_extension(workload=workload, actor=user, hours=extra)
        return workload
    if Approval.objects.filter(
        workload=workload, kind=Approval.Kind.EXTEND, state=Approval.State.PENDING
    ).exists():
        raise Conflict(f"An extension of this {workload.kind} already waits for a lead.")
    why = decision.why_needed
    approval = Approval.objects.create(
        workload=workload,
        team=team,
        kind=Approval.Kind.EXTEND,
        requested_by=user,
        why_needed=why,
        extend_hours=extra,
    )
    audit_record(
        actor=user,
        action=f"{workload.kind}.extend_requested",
        obj=workload,
        team=team,
        detail=f"+{hours_words(extra)}",
    )
    more = cost_of_hours(workload, extra, price=price_per_hour(gpu_type=workload.gpu_type, at=now))
    tell_deciders(
        approval=approval,
        message=f"{user.username} asks to extend {workload.name} (team {team.name}) by {hours_words(extra)}, "
        f"${more:,.2f} more at most. {why}",
    )
    return workload


def workload_apply_extension(*, workload: Workload, actor: User | None, hours: Decimal) -> None:
    """Lengthen its lifetime by `hours` now (policy or a lead has said yes) and audit it: the
    expiry moves too when it has one (it is running, or its request named its end)."""
    new_expiry = extended_expiry(workload=workload, hours=hours)
    ttl = workload.lifetime_hours if workload.ttl_hours is None else workload.ttl_hours
    ttl_hours = ttl + hours
    Workload.objects.filter(pk=workload.pk).update(
        expires_at=new_expiry, ttl_hours=ttl_hours, expiry_warned_at=None
    )
    when = f"expires {new_expiry:%Y-%m-%d %H:%M} UTC" if new_expiry else "not started yet"
    audit_record(
        actor=actor,
        action=f"{workload.kind}.extend",
        obj=workload,
        team=workload.team,
        detail=f"+{hours_words(hours)}, {when}",
    )
    workload.expires_at = new_expiry
    workload.ttl_hours = ttl_hours
    workload.expiry_warned_at = None


@transaction.atomic
def workload_terminate(*, user: User, workload_id: int, now: datetime | None = None, kind: str) -> Workload:
    """End a sandbox (or deployment) now. Billing stops at once; the cluster objects go in the
    background."""
    now = now or timezone.now()
    workload = workload_get_for(user=user, workload_id=workload_id, lock=True, kind=kind)
    if not can_manage(user=user, team=workload.team, owner=workload.owner):
        raise NotAllowed(f"Only the owner, a lead of the team or an admin may end this {workload.kind}.")
    workload_end(
        workload=workload, ending_as=WorkloadState.TERMINATED, actor=user, at=now, detail="ended on request"
    )
    return workload


WITHDRAWABLE = (WorkloadState.PENDING_APPROVAL, WorkloadState.QUEUED)


@transaction.atomic
def workload_withdraw(*, user: User, workload_id: int, now: datetime | None = None, kind: str) -> Workload:
    """Withdraw a request that has not started (waiting for a lead, or in the queue): it ends at
    once, nothing having been billed; its quota is free again, and its approval is closed with the
    leads' notice of it marked done."""
    now = now or timezone.now()
    workload = workload_get_for(user=user, workload_id=workload_id, lock=True, kind=kind)
    if not can_manage(user=user, team=workload.team, owner=workload.owner):
        raise NotAllowed(f"Only the owner, a lead of the team or an admin may withdraw this {workload.kind}.")
    if workload.state not in WITHDRAWABLE:
        raise Conflict(
            f"{workload.kind.capitalize()} {workload.name} is {workload.shown_state}; only a request that "
            "waits for approval or in the queue can be withdrawn."
            + (" Terminate it instead." if workload.is_live else "")
        )
    pending = list(
        Approval.objects.select_related("team").filter(workload=workload, state=Approval.State.PENDING)
    )
    move(
        workload=workload,
        to=WorkloadState.TERMINATED,
        from_states=WITHDRAWABLE,
        actor=user,
        event="withdrawn",
        detail=f"withdrawn while {workload.state.replace('_', ' ')}",
        ended_at=now,
        message=f"{WITHDRAWN_BY}{user.username} before it started; nothing was billed.",
    )
    _close_withdrawn(pending, actor=user, now=now)
    return workload


@transaction.atomic
def workload_extension_withdraw(
    *, user: User, workload_id: int, now: datetime | None = None, kind: str
) -> Workload:
    """Withdraw the extension of a workload that waits for a lead: its approval is closed, the
    leads' notice of it marked done, and the expiry stays as it is."""
    now = now or timezone.now()
    workload = workload_get_for(user=user, workload_id=workload_id, lock=True, kind=kind)
    if not can_manage(user=user, team=workload.team, owner=workload.owner):
        raise NotAllowed("Only the owner, a lead of the team or an admin may withdraw this extension.")
    pending = _waiting(workload, Approval.Kind.EXTEND)
    if not pending:
        raise Conflict(f"No extension of {workload.kind} {workload.name} waits for a lead.")
    audit_record(
        actor=user,
        action=f"{workload.kind}.extend_withdrawn",
        obj=workload,
        team=workload.team,
        detail=f"+{hours_words(pending[0].extend_hours)} withdrawn" if pending[0].extend_hours else "",
    )
    _close_withdrawn(pending, actor=user, now=now)
    return workload


def _waiting(workload: Workload, kind: str) -> list[Approval]:
    return list(
        Approval.objects.select_related("team").filter(
            workload=workload, kind=kind, state=Approval.State.PENDING
        )
    )


@transaction.atomic
def workload_scale_withdraw(*, user: User, workload_id: int, now: datetime | None = None) -> Workload:
    """Withdraw the scale of a deployment that waits for a lead: its approval is closed, the
    leads' notice of it marked done, and its replicas stay as they are."""
    now = now or timezone.now()
    workload = workload_get_for(user=user, workload_id=workload_id, lock=True, kind="deployment")
    if not can_manage(user=user, team=workload.team, owner=workload.owner):
        raise NotAllowed("Only the owner, a lead of the team or an admin may withdraw this scale request.")
    pending = _waiting(workload, Approval.Kind.SCALE)
    if not pending:
        raise Conflict(f"No scale of deployment {workload.name} waits for a lead.")
    audit_record(actor=user, action="deployment.scale_withdrawn", obj=workload, team=workload.team,
                 detail=f"to {pending[0].replicas} replicas withdrawn")  # fmt: skip
    _close_withdrawn(pending, actor=user, now=now)
    return workload


def workload_scale_superseded(
    *, workload: Workload, actor: User | None, replicas: int, now: datetime
) -> None:
    """A deployment is scaled at once (down, to the replicas it has, up within policy, or to zero
    by idle reclaim: `actor` None) while another scale waits for a lead: the waiting one is closed
    as withdrawn, since approving it later would undo what was just done (a deployment scaled to
    zero would start billing again)."""
    pending = _waiting(workload, Approval.Kind.SCALE)
    if not pending:
        return
    audit_record(actor=actor, action="deployment.scale_withdrawn", obj=workload, team=workload.team,
                 detail=f"to {pending[0].replicas} replicas withdrawn: scaled to {replicas} instead")  # fmt: skip
    _close_withdrawn(
        pending, actor=actor, now=now, why=f"Withdrawn: the deployment was scaled to {replicas} instead."
    )
