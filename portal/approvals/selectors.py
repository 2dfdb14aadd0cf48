"""Reads over approvals: who may see which, the one a lead opens, the pending count for the badge,
and the inbox rows with what each request would cost and who may decide it."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Q, QuerySet
from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.selectors import lead_team_ids
from portal.core.selectors import one_visible
from portal.fleet.selectors import current_prices
from portal.workloads.models import Approval
from portal.workloads.selectors import asked_hours, cost_of_hours, scale_cost


def approvals_visible_to(user: User) -> QuerySet[Approval]:
    """Leads see their teams' approvals, admins all; a requester sees their own."""
    approvals = Approval.objects.select_related(
        "workload__gpu_type", "workload__owner", "team", "requested_by", "decided_by"
    )
    if user.is_platform_admin:
        return approvals
    return approvals.filter(Q(team_id__in=lead_team_ids(user)) | Q(requested_by=user))


def approval_get_for(*, user: User, approval_id: int, lock: bool = False) -> Approval:
    return one_visible(approvals_visible_to(user), pk=approval_id, what="approval", lock=lock)


def pending_count_for(user: User) -> int:
    """Requests waiting on this user (not their own)."""
    if not user.is_authenticated:
        return 0
    return approvals_visible_to(user).filter(state=Approval.State.PENDING).exclude(requested_by=user).count()


def unread_count(user: User) -> int:
    """Unread notifications, for the bell's badge."""
    return user.notifications.filter(read_at__isnull=True).count()


@dataclass(frozen=True)
class ApprovalRow:
    approval: Approval
    hours: Decimal
    estimated_cost: Decimal | None  # None: a decided scale
    can_decide: bool
    error: str = ""


def approval_rows(approvals: list[Approval], *, user: User) -> list[ApprovalRow]:
    """Rows for approvals from `approvals_visible_to` (sandbox and GPU type selected): two queries
    for prices and one for the teams the user leads, however many rows."""
    prices = current_prices()
    led = set(lead_team_ids(user))
    now = timezone.now()
    rows = []
    for approval in approvals:
        sandbox = approval.workload
        price = prices.get(sandbox.gpu_type_id, Decimal(0))
        cost: Decimal | None
        if approval.kind == Approval.Kind.SCALE:
            # while it waits: the added replicas for the hours left; once decided, the replicas
            # it had then are gone from the row, so no figure rather than a wrong one
            hours, cost = sandbox.lifetime_hours, None
            if approval.state == Approval.State.PENDING and approval.replicas is not None:
                hours, cost = scale_cost(sandbox, approval.replicas, price=price, now=now)
        else:
            if approval.kind == Approval.Kind.EXTEND and approval.extend_hours is not None:
                hours = approval.extend_hours
                cost = cost_of_hours(sandbox, hours, price=price)
            else:
                hours = sandbox.lifetime_hours
                cost = cost_of_hours(sandbox, asked_hours(sandbox), price=price)
        can_decide = (
            approval.state == Approval.State.PENDING
            and approval.requested_by_id != user.pk
            and (user.is_platform_admin or approval.team_id in led)
        )
        rows.append(ApprovalRow(approval=approval, hours=hours, estimated_cost=cost, can_decide=can_decide))
    return rows
