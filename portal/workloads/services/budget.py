"""The workers' watch over teams' monthly budgets: leads told once per threshold per month (in the
portal, by e-mail and on the team's webhook; of the highest only, where several are passed at once,
with the share actually spent), and the team's 100 % policy carried out. Under
"stop", once the budget is spent, the team's owners and leads are told when its running work will
end; after the grace period, still over, it ends (audited). Raising the budget, or a new month,
lifts it.

A user's or a project label's budget in a team (portal.spend.models.Budget) is watched the same
way with the team's thresholds and policy: the leads told, and the user too for theirs; a
project's alert goes to the team's webhook as well, a user's only to that user's and the leads'
own channels (it concerns one person). Under "stop" only that user's (or project's) running work
ends."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.accounts.models import BudgetAlert, Team
from portal.accounts.notifications import team_webhook_notify
from portal.accounts.selectors import team_leads
from portal.accounts.services import notify
from portal.audit.services import audit_record
from portal.spend.budgets import Forecast, budget_alerts_due, budget_forecast, month_bounds, target_forecasts
from portal.spend.models import Budget, BudgetAlertSent
from portal.workloads.models import LIVE_STATES, Workload, WorkloadState
from portal.workloads.services.lifecycle import workload_end

S = WorkloadState
SPEND_LINK = "/spend/"


@dataclass
class BudgetWatch:
    alerts: list[tuple[str, int]] = field(default_factory=list)  # (team, threshold)
    target_alerts: list[tuple[str, str, str, int]] = field(
        default_factory=list
    )  # (team, kind, target, threshold)
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
        if (due := budget_alerts_due(forecast, sent)) and _alert(team, month, due, forecast, now):
            watch.alerts.append((team.slug, due[-1]))
        if team.budget_policy == Team.BudgetPolicy.STOP and forecast.over:
            if team.budget_stop_at is None:
                _announce_stop(team, now)
                watch.stops_set.append(team.slug)
            elif now >= team.budget_stop_at:
                watch.ended += _stop(team, now, running=_running(team), why="the team's")
        elif team.budget_stop_at is not None:
            Team.objects.filter(pk=team.pk).update(budget_stop_at=None)
            audit_record(actor=None, action="team.budget_stop_lifted", obj=team, team=team,
                         detail="under budget again (raised, or a new month)")  # fmt: skip
            for lead in team_leads(team):
                notify(kind="budget", user=lead, message=f"Team {team.name}: under budget again; running work is no longer ended.",
                       link=SPEND_LINK)  # fmt: skip
            watch.stops_lifted.append(team.slug)
    _watch_targets(watch=watch, month=month, now=now)
    return watch


def _watch_targets(*, watch: BudgetWatch, month, now: datetime) -> None:
    """The user and project budgets: alerts, and each one's stop under the team's policy."""
    by_team: dict[int, list[Budget]] = {}
    for budget in Budget.objects.filter(monthly_amount__gt=0).select_related("team", "user").order_by("pk"):
        by_team.setdefault(budget.team_id, []).append(budget)
    for budgets in by_team.values():
        team = budgets[0].team
        sent: dict[int, set[int]] = {}
        for budget_id, threshold in BudgetAlertSent.objects.filter(
            budget__in=budgets, month=month
        ).values_list("budget_id", "threshold"):
            sent.setdefault(budget_id, set()).add(threshold)
        for budget, forecast in target_forecasts(team=team, budgets=budgets, now=now):
            due = budget_alerts_due(forecast, sent.get(budget.pk, set()))
            if due and _target_alert(budget, forecast, month, due, now):
                watch.target_alerts.append((team.slug, budget.kind, budget.target, due[-1]))
            if team.budget_policy == Team.BudgetPolicy.STOP and forecast.over:
                if budget.stop_at is None:
                    _announce_target_stop(budget, now)
                    watch.stops_set.append(f"{team.slug}/{budget.kind}/{budget.target}")
                elif now >= budget.stop_at:
                    watch.ended += _stop(team, now, running=_running_of(budget), why=_whose(budget))
            elif budget.stop_at is not None:
                Budget.objects.filter(pk=budget.pk).update(stop_at=None)
                audit_record(actor=None, action="team.target_budget_stop_lifted", obj=team, team=team,
                             detail=f"{_whose(budget)} budget: under it again (raised, or a new month)")  # fmt: skip
                watch.stops_lifted.append(f"{team.slug}/{budget.kind}/{budget.target}")


def _whose(budget: Budget) -> str:
    return f"{budget.user.username}'s" if budget.kind == Budget.Kind.USER else f"project {budget.project}'s"


def _told(budget: Budget) -> set:
    """Who hears of a user's or project's budget: the team's leads, and the user for theirs."""
    people = set(team_leads(budget.team))
    if budget.kind == Budget.Kind.USER:
        people.add(budget.user)
    return people


def _target_alert(budget: Budget, forecast: Forecast, month, due: list[int], now: datetime) -> bool:
    """Tell of the highest of the thresholds `due` (several are passed at once when a budget is set
    below what is spent already); the lower ones are recorded as told with it."""
    team, threshold = budget.team, due[-1]
    try:
        with transaction.atomic():
            BudgetAlertSent.objects.bulk_create(
                BudgetAlertSent(budget=budget, month=month, threshold=t, spent=forecast.spent, sent_at=now)
                for t in due
            )
    except IntegrityError:
        return False  # another worker told them
    whose, percent = _whose(budget), forecast.used_label  # whole percent, rounded down
    message = (
        f"Team {team.name}: {whose} spend this month is ${forecast.spent:,.2f}, {percent} % of its "
        f"${budget.monthly_amount:,.2f} budget."
    )
    if threshold >= 100:
        message += {
            Team.BudgetPolicy.WARN: " New requests are not held back for it.",
            Team.BudgetPolicy.BLOCK: " New requests and extensions of it now wait for a lead.",
            Team.BudgetPolicy.STOP: f" Its running work ends {team.budget_stop_grace_hours} h after this unless the budget is raised.",
        }[team.budget_policy]
    audit_record(actor=None, action="team.target_budget_alert", obj=team, team=team, detail=message)
    for person in _told(budget):
        notify(kind="budget", user=person, message=message, link=SPEND_LINK,
               email_subject=f"Team {team.name}: {percent} % of {whose} monthly budget spent")  # fmt: skip
    if budget.kind == Budget.Kind.PROJECT:
        team_webhook_notify(team=team, kind="budget", message=message, link=SPEND_LINK)
    return True


def _running_of(budget: Budget):
    running = _running(budget.team)
    if budget.kind == Budget.Kind.USER:
        return running.filter(owner_id=budget.user_id)
    return running.filter(project=budget.project)


def _announce_target_stop(budget: Budget, now: datetime) -> None:
    team = budget.team
    at = now + timedelta(hours=team.budget_stop_grace_hours)
    Budget.objects.filter(pk=budget.pk).update(stop_at=at)
    detail = (
        f"{_whose(budget)} monthly budget is spent: its running work ends at {at:%Y-%m-%d %H:%M} UTC "
        "unless it is raised"
    )
    audit_record(actor=None, action="team.target_budget_stop_set", obj=team, team=team, detail=detail)
    owners = {w.owner for w in _running_of(budget).select_related("owner")}
    for user in owners | _told(budget):
        notify(kind="budget", user=user, message=f"Team {team.name}: {detail}.", link=SPEND_LINK,
               email_subject=f"Team {team.name}: running work ends at {at:%H:%M} UTC")  # fmt: skip


def _alert(team: Team, month, due: list[int], forecast: Forecast, now: datetime) -> bool:
    """Tell the leads of the highest of the thresholds `due`, recording the lower ones with it."""
    threshold = due[-1]
    try:
        with transaction.atomic():
            BudgetAlert.objects.bulk_create(
                BudgetAlert(team=team, month=month, threshold=t, spent=forecast.spent, sent_at=now)
                for t in due
            )
    except IntegrityError:
        return False  # another worker told them
    spent, percent = forecast.spent, forecast.used_label  # whole percent, rounded down
    message = (
        f"Team {team.name} has spent ${spent:,.2f} this month: {percent} % of its "
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
        notify(kind="budget", user=lead, message=message, link=SPEND_LINK,
               email_subject=f"Team {team.name}: {percent} % of the monthly budget spent")  # fmt: skip
    team_webhook_notify(team=team, kind="budget", message=message, link=SPEND_LINK)
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
        notify(kind="budget", user=user, message=f"Team {team.name}: {detail}.", link=SPEND_LINK,
               email_subject=f"Team {team.name}: running work ends at {at:%H:%M} UTC")  # fmt: skip


def _stop(team: Team, now: datetime, *, running, why: str) -> list[int]:
    """End the `running` work (of the team, a user or a project): `why` names whose budget."""
    ended = []
    for workload in running.select_related("owner", "team"):
        with transaction.atomic():
            locked = Workload.objects.select_for_update().get(pk=workload.pk)
            if locked.state not in LIVE_STATES or locked.state == S.PENDING_APPROVAL:
                continue
            detail = f"ended: {why} monthly budget is spent (stop policy)"
            workload_end(workload=locked, ending_as=S.TERMINATED, actor=None, at=now, detail=detail)
            audit_record(
                actor=None, action=f"{locked.kind}.budget_stopped", obj=locked, team=team, detail=detail
            )
            notify(kind="budget", user=locked.owner, message=f"{locked.get_kind_display()} {locked.name} was {detail}.",
                   link=locked.get_absolute_url(), email_subject=f"{locked.name} was ended: budget spent")  # fmt: skip
            ended.append(locked.pk)
    return ended
