"""The workers' watch over teams' monthly budgets: leads told once per threshold per month (in the
portal and by e-mail), and the team's 100 % policy carried out. Under "stop", once the budget is
spent, the team's owners and leads are told when its running work will end; after the grace
period, still over, it ends (audited). Raising the budget, or a new month, lifts it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.accounts.models import BudgetAlert, Team
from portal.accounts.selectors import team_leads
from portal.accounts.services import notify
from portal.audit.services import audit_record
from portal.spend.budgets import budget_alerts_due, budget_forecast, month_bounds
from portal.workloads.models import LIVE_STATES, Workload, WorkloadState
from portal.workloads.services.lifecycle import workload_end

S = WorkloadState
SPEND_LINK = "/spend/"


@dataclass
class BudgetWatch:
    alerts: list[tuple[str, int]] = field(default_factory=list)  # (team, threshold)
    stops_set: list[str] = field(default_factory=list)
    stops_lifted: list[str] = field(default_factory=list)
    ended: list[int] = field(default_factory=list)


def budgets_watch(*, now: datetime | None = None) -> BudgetWatch:
    """One look at every team with a budget."""
    now = now or timezone.now()
    watch = BudgetWatch()
    month = month_bounds(now)[0].date()
    for team in Team.objects.filter(monthly_budget__gt=0).order_by("slug"):
        forecast = budget_forecast(team=team, now=now)
        sent = set(BudgetAlert.objects.filter(team=team, month=month).values_list("threshold", flat=True))
        for threshold in budget_alerts_due(forecast, sent):
            if _alert(team, month, threshold, forecast.spent, now):
                watch.alerts.append((team.slug, threshold))
        if team.budget_policy == Team.BudgetPolicy.STOP and forecast.over:
            if team.budget_stop_at is None:
                _announce_stop(team, now)
                watch.stops_set.append(team.slug)
            elif now >= team.budget_stop_at:
                watch.ended += _stop(team, now)
        elif team.budget_stop_at is not None:
            Team.objects.filter(pk=team.pk).update(budget_stop_at=None)
            audit_record(actor=None, action="team.budget_stop_lifted", obj=team, team=team,
                         detail="under budget again (raised, or a new month)")  # fmt: skip
            for lead in team_leads(team):
                notify(user=lead, message=f"Team {team.name}: under budget again; running work is no longer ended.",
                       link=SPEND_LINK)  # fmt: skip
            watch.stops_lifted.append(team.slug)
    return watch


def _alert(team: Team, month, threshold: int, spent, now: datetime) -> bool:
    try:
        with transaction.atomic():
            BudgetAlert.objects.create(team=team, month=month, threshold=threshold, spent=spent, sent_at=now)
    except IntegrityError:
        return False  # another worker told them
    message = (
        f"Team {team.name} has spent ${spent:,.2f} this month: {threshold} % of its "
        f"${team.monthly_budget:,.2f} budget."
    )
    if threshold >= 100:
        message += {
            Team.BudgetPolicy.WARN: " New requests are not held back for it.",
            Team.BudgetPolicy.BLOCK: " New requests and extensions now wait for a lead.",
            Team.BudgetPolicy.STOP: f" Running work ends {team.budget_stop_grace_hours} h after this unless the budget is raised.",
        }[team.budget_policy]
    audit_record(actor=None, action="team.budget_alert", obj=team, team=team, detail=message)
    for lead in team_leads(team):
        notify(user=lead, message=message, link=SPEND_LINK,
               email_subject=f"Team {team.name}: {threshold} % of the monthly budget spent")  # fmt: skip
    return True


def _running(team: Team):
    return Workload.objects.filter(team=team, state__in=[s for s in LIVE_STATES if s != S.PENDING_APPROVAL])


def _announce_stop(team: Team, now: datetime) -> None:
    at = now + timedelta(hours=team.budget_stop_grace_hours)
    Team.objects.filter(pk=team.pk).update(budget_stop_at=at)
    detail = f"the monthly budget is spent: running work ends at {at:%Y-%m-%d %H:%M} UTC unless it is raised"
    audit_record(actor=None, action="team.budget_stop_set", obj=team, team=team, detail=detail)
    owners = {w.owner for w in _running(team).select_related("owner")}
    for user in owners | set(team_leads(team)):
        notify(user=user, message=f"Team {team.name}: {detail}.", link=SPEND_LINK,
               email_subject=f"Team {team.name}: running work ends at {at:%H:%M} UTC")  # fmt: skip


def _stop(team: Team, now: datetime) -> list[int]:
    ended = []
    for workload in _running(team).select_related("owner", "team"):
        with transaction.atomic():
            locked = Workload.objects.select_for_update().get(pk=workload.pk)
            if locked.state not in LIVE_STATES or locked.state == S.PENDING_APPROVAL:
                continue
            detail = "ended: the team's monthly budget is spent (stop policy)"
            workload_end(workload=locked, ending_as=S.TERMINATED, actor=None, at=now, detail=detail)
            audit_record(
                actor=None, action=f"{locked.kind}.budget_stopped", obj=locked, team=team, detail=detail
            )
            notify(user=locked.owner, message=f"{locked.get_kind_display()} {locked.name} was {detail}.",
                   link=locked.get_absolute_url(), email_subject=f"{locked.name} was ended: budget spent")  # fmt: skip
            ended.append(locked.pk)
    return ended
