"""Someone leaves a team (an admin removes them or gives their membership to someone else, or
single sign-on no longer grants it) while their work there runs: it goes on running on the team's
budget, but they can no longer get into it, extend or keep it
(`portal.accounts.selectors.owner_shut_out`). Their home, too, stays billed to the team until they
delete it or use it in another team. The team's leads are told, so that nobody pays for work or
storage its owner cannot use without knowing."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from portal.accounts.models import Membership, NotificationKind, Team, User
from portal.accounts.selectors import platform_admins, team_leads
from portal.accounts.services import notify
from portal.core.templatetags.money import usd
from portal.core.text import counted
from portal.fleet.models import StorageHold
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
    longer in it that runs or waits to, and of their home while it is billed to the team: nothing
    if neither, if they are back in the team already, or if they are a platform admin (not shut
    out). How many were told."""
    if Membership.objects.filter(user_id=user_id, team_id=team_id).exists():
        return 0
    live = list(
        Workload.objects.filter(owner_id=user_id, team_id=team_id, state__in=STILL_GOING).order_by("pk")
    )
    stored = _stored(user_id=user_id, team_id=team_id)
    user, team = User.objects.filter(pk=user_id).first(), Team.objects.filter(pk=team_id).first()
    if not (live or stored) or user is None or team is None or user.is_platform_admin:
        return 0
    message = f"{user.username} is no longer in team {team.name}"
    if live:
        message += f", and {_live_words(live)}"
    if stored:
        message += f"{'.' if live else ','} {'Their' if live else 'and their'} {stored}"
    message += "."
    link = live[0].get_absolute_url() if live else f"{reverse('spend')}?team={team.slug}&group_by=user"
    leads = [lead for lead in team_leads(team) if lead.pk != user_id] or platform_admins()
    for lead in leads:
        notify(user=lead, kind=NotificationKind.OTHER, message=message, link=link, team=team)
    return len(leads)


def _live_words(live: list[Workload]) -> str:
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
    return (
        f"{what} of theirs {'runs or waits' if len(live) == 1 else 'run or wait'} on the team's budget "
        f"({', '.join(workload.name for workload in live[:5])}{', …' if len(live) > 5 else ''}). "
        "They can no longer get into them, extend or keep them: keep or end them"
    )


def _stored(*, user_id: int, team_id: int) -> str:
    """Their storage still billed to the team (their home), in words; empty if none."""
    holds = StorageHold.objects.filter(user_id=user_id, team_id=team_id, ended_at__isnull=True)
    sizes = [(hold.size_gb, hold.price_per_gb_month) for hold in holds.only("size_gb", "price_per_gb_month")]
    if not sizes:
        return ""
    monthly = sum((gb * price for gb, price in sizes), Decimal(0))
    return (
        f"home ({sum(gb for gb, _ in sizes)} GB, {usd(round(monthly, 2))} a month) stays billed to the "
        "team until they delete it or a sandbox of theirs in another team takes it"
    )
