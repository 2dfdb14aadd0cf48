"""Someone leaves a team (an admin removes them or gives their membership to someone else, or
single sign-on no longer grants it) while
their work there runs: it goes on running on the team's budget, but they can no longer get into
it, extend or keep it (`portal.accounts.selectors.owner_shut_out`). The team's leads are told,
so that nobody pays for work its owner cannot use without knowing."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from portal.accounts.models import Membership, NotificationKind, Team, User
from portal.accounts.selectors import platform_admins, team_leads
from portal.accounts.services import notify
from portal.core.text import counted
from portal.workloads.models import Workload, WorkloadState

# What still runs, or waits to, on the team's budget (not what is already ending).
STILL_GOING = (
    WorkloadState.PENDING_APPROVAL,
    WorkloadState.QUEUED,
    WorkloadState.PROVISIONING,
    WorkloadState.RUNNING,
)


def membership_ended(*, user_id: int, team_id: int) -> None:
    """After the removal commits, tell the leads of the team what of the leaver's still runs."""
    # robust: a notice that fails must not fail the removal's request (an admin's, a sign-in's)
    transaction.on_commit(lambda: leaver_workloads_told(user_id=user_id, team_id=team_id), robust=True)


def membership_moving(*, membership: Membership) -> None:
    """Before a membership is saved: one given to another person or team is a new membership (its
    start is now: serving tokens count from it), and the person it was has left that team."""
    if membership.pk is None:
        return
    before = Membership.objects.filter(pk=membership.pk).values_list("user_id", "team_id").first()
    if before is not None and before != (membership.user_id, membership.team_id):
        membership._left = before
        membership.created_at = timezone.now()


def membership_moved(*, membership: Membership) -> None:
    """After it is saved (the old person no longer in the team): their leads are told, as for a
    membership deleted."""
    left = membership.__dict__.pop("_left", None)
    if left is not None:
        membership_ended(user_id=left[0], team_id=left[1])


def leaver_workloads_told(*, user_id: int, team_id: int) -> int:
    """Tell the team's leads (its admins where it has no other lead) of the work of someone no
    longer in it that runs or waits to: nothing if none, if they are back in the team already,
    or if they are a platform admin (not shut out). How many were told."""
    if Membership.objects.filter(user_id=user_id, team_id=team_id).exists():
        return 0
    live = list(
        Workload.objects.filter(owner_id=user_id, team_id=team_id, state__in=STILL_GOING).order_by("pk")
    )
    user, team = User.objects.filter(pk=user_id).first(), Team.objects.filter(pk=team_id).first()
    if not live or user is None or team is None or user.is_platform_admin:
        return 0
    sandboxes = sum(1 for workload in live if workload.kind == "sandbox")
    deployments = len(live) - sandboxes
    what = " and ".join(
        part
        for part in (
            counted(sandboxes, "sandbox", "sandboxes") if sandboxes else "",
            counted(deployments, "deployment") if deployments else "",
        )
        if part
    )
    message = (
        f"{user.username} is no longer in team {team.name}, and {what} of theirs "
        f"{'runs or waits' if len(live) == 1 else 'run or wait'} on the team's budget "
        f"({', '.join(workload.name for workload in live[:5])}{', …' if len(live) > 5 else ''}). "
        "They can no longer get into them, extend or keep them: keep or end them."
    )
    leads = [lead for lead in team_leads(team) if lead.pk != user_id] or platform_admins()
    for lead in leads:
        notify(
            user=lead,
            kind=NotificationKind.OTHER,
            message=message,
            link=live[0].get_absolute_url(),
            team=team,
        )
    return len(leads)
