"""What users do to sandboxes: request, estimate, extend, terminate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from portal.accounts.models import Team, User
from portal.accounts.selectors import can_manage, is_lead, team_leads
from portal.accounts.services import notify
from portal.audit.services import audit_record
from portal.core.errors import Conflict, NotAllowed, QuotaExceeded, ValidationFailed
from portal.fleet.selectors import capacity_free_now, price_per_hour
from portal.spend.selectors import team_month_spend, to_cents
from portal.workloads.models import Approval, Workload, WorkloadKind, WorkloadState
from portal.workloads.policy import (
    fraction_to_decimal,
    hours_between,
    team_committed,
    verdict,
    workload_share,
)
from portal.workloads.selectors import workload_get_for
from portal.workloads.services.lifecycle import workload_end, workload_try_place
from portal.workloads.services.resolve import ResolvedRequest, resolve_request


@dataclass(frozen=True)
class Estimate:
    hourly_cost: Decimal
    total_cost: Decimal
    gpu_equivalents: Decimal
    quota_left: Decimal
    fits_quota: bool
    auto_approved: bool
    why_needed: str
    capacity_free_now: bool


def team_budget_left(team: Team, now: datetime) -> Decimal:
    return team.monthly_budget - team_month_spend(team=team, now=now)


def sandbox_estimate(*, user: User, now: datetime | None = None, **fields: object) -> Estimate:
    """What a request would cost, whether it would be approved at once, and whether it fits now."""
    now = now or timezone.now()
    resolved = resolve_request(user=user, now=now, check_name=False, **fields)
    left = resolved.team.quota_gpus - fraction_to_decimal(team_committed(resolved.team))
    decision = verdict(
        team=resolved.team,
        count=resolved.count,
        is_slice=resolved.shape is not None,
        lifetime_hours=resolved.lifetime_hours,
        hourly_cost=resolved.hourly_cost,
        budget_left=team_budget_left(resolved.team, now),
        replicas=resolved.replicas,
    )
    return Estimate(
        hourly_cost=to_cents(resolved.hourly_cost),
        total_cost=to_cents(resolved.hourly_cost * resolved.lifetime_hours),
        gpu_equivalents=fraction_to_decimal(resolved.share),
        quota_left=left,
        fits_quota=fraction_to_decimal(resolved.share) <= left,
        auto_approved=decision.auto_approved,
        why_needed=decision.why_needed,
        capacity_free_now=capacity_free_now(
            gpu_type=resolved.gpu_type, count=resolved.count, mig_profile=resolved.mig_profile
        ),
    )


def sandbox_request(*, user: User, now: datetime | None = None, **fields: object) -> Workload:
    """Request a sandbox: checked, counted against quota under a team lock, then approved at once
    (and placed) or sent to the team's leads."""
    now = now or timezone.now()
    resolved = resolve_request(user=user, now=now, **fields)
    return workload_create(user=user, resolved=resolved, now=now)


def workload_create(
    *,
    user: User,
    resolved: ResolvedRequest,
    now: datetime,
    before_placing: Callable[[Workload], None] | None = None,
) -> Workload:
    """Create a checked request (a sandbox or a deployment) under the team's quota lock.

    `before_placing` runs on the new row inside the same transaction, before it is placed, so a
    deployment's serving details exist before any worker sees it.
    """
    try:
        with transaction.atomic():
            return _create(user=user, resolved=resolved, now=now, before_placing=before_placing)
    except IntegrityError:
        # Two requests with one name raced past the check; the constraint kept one.
        message = f"You already have a live {resolved.kind} called {resolved.name!r}."
        raise ValidationFailed(message, fields={"name": [message]}) from None


def _create(
    *, user: User, resolved: ResolvedRequest, now: datetime, before_placing: Callable[[Workload], None] | None
) -> Workload:
    team = Team.objects.select_for_update(no_key=True).get(pk=resolved.team.pk)
    used = fraction_to_decimal(team_committed(team))
    wanted = fraction_to_decimal(resolved.share)
    left = team.quota_gpus - used
    if wanted > left:
        message = (
            f"Team {team.slug} has {left.normalize():f} of {team.quota_gpus.normalize():f} GPU equivalents "
            f"left; this request needs {wanted.normalize():f}."
        )
        raise QuotaExceeded(message, fields={"quota_left": str(left), "requested": str(wanted)})
    decision = verdict(
        team=team,
        count=resolved.count,
        is_slice=resolved.shape is not None,
        lifetime_hours=resolved.lifetime_hours,
        hourly_cost=resolved.hourly_cost,
        budget_left=team_budget_left(team, now),
        replicas=resolved.replicas,
    )
    state = WorkloadState.QUEUED if decision.auto_approved else WorkloadState.PENDING_APPROVAL
    sandbox = Workload.objects.create(
        kind=resolved.kind,
        replicas=resolved.replicas,
        name=resolved.name,
        team=team,
        owner=user,
        image=resolved.image,
        purpose=resolved.purpose,
        gpu_type=resolved.gpu_type,
        gpu_count=resolved.count,
        mig_profile=resolved.mig_profile,
        cpu=resolved.cpu,
        memory_gb=resolved.memory_gb,
        storage_gb=resolved.storage_gb,
        state=state,
        expires_at=resolved.expires_at,
        queued_at=now if decision.auto_approved else None,
        message="Approved by policy." if decision.auto_approved else decision.why_needed,
    )
    audit_record(
        actor=user,
        action=f"{sandbox.kind}.request",
        obj=sandbox,
        object_type=sandbox.kind,
        team=team,
        to_state=state,
        detail=f"{sandbox.gpu_label} for {resolved.lifetime_hours.quantize(Decimal('0.01'))} h",
    )
    if before_placing is not None:
        before_placing(sandbox)
    if decision.auto_approved:
        workload_try_place(sandbox, now=now)
    else:
        approval = Approval.objects.create(
            workload=sandbox, team=team, requested_by=user, why_needed=decision.why_needed
        )
        tell_deciders(
            approval, f"{user.username} asks for {sandbox.gpu_label} ({sandbox.name}). {decision.why_needed}"
        )
    return sandbox


def tell_deciders(approval: Approval, message: str) -> None:
    deciders = [lead for lead in team_leads(approval.team) if lead.pk != approval.requested_by_id]
    if not deciders:
        deciders = list(User.objects.filter(is_staff=True).exclude(pk=approval.requested_by_id))
    for decider in deciders:
        notify(
            user=decider,
            message=message,
            link=reverse("approvals"),
            email_subject="GPU request awaits your approval",
        )


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
    hours: object,
    now: datetime | None = None,
    kind: str = WorkloadKind.SANDBOX,
) -> Workload:
    """Move the expiry by `hours`: at once within policy, else through a lead's approval."""
    now = now or timezone.now()
    sandbox = workload_get_for(user=user, workload_id=workload_id, lock=True, kind=kind)
    if not can_manage(user=user, team=sandbox.team, owner=sandbox.owner):
        raise NotAllowed(f"Only the owner or a lead of the team may extend this {sandbox.kind}.")
    try:
        extra = Decimal(str(hours))
    except ArithmeticError:
        extra = Decimal(0)
    if not extra.is_finite() or extra <= 0 or extra > 10000:
        raise ValidationFailed(
            "Extend by a number of hours above zero.", fields={"hours": ["Must be above zero."]}
        )
    if sandbox.state not in EXTENDABLE:
        raise Conflict(
            f"{sandbox.kind.capitalize()} {sandbox.name} is {sandbox.state}; only a live {sandbox.kind} can be extended."
        )
    team = sandbox.team
    new_expiry = sandbox.expires_at + timedelta(seconds=float(extra * 3600))
    lifetime = hours_between(sandbox.created_at, new_expiry)
    if lifetime > team.max_lifetime_hours:
        raise ValidationFailed(
            f"That would make the {sandbox.kind} live {lifetime.quantize(Decimal('0.1'))} hours; "
            f"team {team.slug} allows at most {team.max_lifetime_hours.normalize():f}.",
            fields={"hours": ["Beyond the team's maximum lifetime."]},
        )
    deciding_lead = user.pk != sandbox.owner_id and (user.is_platform_admin or is_lead(user=user, team=team))
    reasons = []
    if lifetime > team.auto_approve_max_hours:
        reasons.append(
            f"the {sandbox.kind} would live longer than {team.auto_approve_max_hours.normalize():f} hours"
        )
    hourly = price_per_hour(gpu_type=sandbox.gpu_type, at=now) * fraction_to_decimal(
        workload_share(sandbox), "0.000001"
    )
    if hourly * extra > team_budget_left(team, now):
        reasons.append("the added hours cost more than is left of the team's monthly budget")
    if deciding_lead or not reasons:
        workload_apply_extension(sandbox, new_expiry=new_expiry, actor=user, hours=extra)
        return sandbox
    if Approval.objects.filter(
        workload=sandbox, kind=Approval.Kind.EXTEND, state=Approval.State.PENDING
    ).exists():
        raise Conflict(f"An extension of this {sandbox.kind} already waits for a lead.")
    why = "Needs a lead's approval: " + " and ".join(reasons) + "."
    approval = Approval.objects.create(
        workload=sandbox,
        team=team,
        kind=Approval.Kind.EXTEND,
        requested_by=user,
        why_needed=why,
        extend_hours=extra,
    )
    audit_record(
        actor=user,
        action=f"{sandbox.kind}.extend_requested",
        obj=sandbox,
        object_type=sandbox.kind,
        team=team,
        detail=f"+{extra} h",
    )
    tell_deciders(
        approval, f"{user.username} asks to extend {sandbox.name} by {extra.normalize():f} h. {why}"
    )
    return sandbox


def workload_apply_extension(
    sandbox: Workload, *, new_expiry: datetime, actor: User | None, hours: Decimal
) -> None:
    Workload.objects.filter(pk=sandbox.pk).update(expires_at=new_expiry, expiry_warned_at=None)
    audit_record(
        actor=actor,
        action=f"{sandbox.kind}.extend",
        obj=sandbox,
        object_type=sandbox.kind,
        team=sandbox.team,
        detail=f"+{hours.normalize():f} h, expires {new_expiry.isoformat(timespec='seconds')}",
    )
    sandbox.expires_at = new_expiry
    sandbox.expiry_warned_at = None


@transaction.atomic
def workload_terminate(
    *, user: User, workload_id: int, now: datetime | None = None, kind: str = WorkloadKind.SANDBOX
) -> Workload:
    """End a sandbox (or deployment) now. Billing stops at once; the cluster objects go in the
    background."""
    now = now or timezone.now()
    sandbox = workload_get_for(user=user, workload_id=workload_id, lock=True, kind=kind)
    if not can_manage(user=user, team=sandbox.team, owner=sandbox.owner):
        raise NotAllowed(f"Only the owner, a lead of the team or an admin may end this {sandbox.kind}.")
    workload_end(sandbox, ending_as=WorkloadState.TERMINATED, actor=user, at=now, detail="ended on request")
    return sandbox
