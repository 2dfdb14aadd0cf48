from __future__ import annotations

from django.db.models import Q, QuerySet

from portal.accounts.models import User
from portal.accounts.selectors import lead_team_ids
from portal.core.errors import NotFound
from portal.workloads.models import Approval


def approvals_visible_to(user: User) -> QuerySet[Approval]:
    """Leads see their teams' approvals, admins all; a requester sees their own."""
    approvals = Approval.objects.select_related(
        "workload__gpu_type", "workload__owner", "team", "requested_by", "decided_by"
    )
    if user.is_platform_admin:
        return approvals
    return approvals.filter(Q(team_id__in=lead_team_ids(user)) | Q(requested_by=user))


def approval_get_for(*, user: User, approval_id: int, lock: bool = False) -> Approval:
    queryset = approvals_visible_to(user)
    if lock:
        queryset = queryset.select_for_update(of=("self",))
    approval = queryset.filter(pk=approval_id).first()
    if approval is None:
        raise NotFound(f"No approval {approval_id} that you can see.")
    return approval


def pending_count_for(user: User) -> int:
    """Requests waiting on this user (not their own)."""
    if not user.is_authenticated:
        return 0
    return approvals_visible_to(user).filter(state=Approval.State.PENDING).exclude(requested_by=user).count()
