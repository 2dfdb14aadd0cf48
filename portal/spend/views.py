"""The spend page: metered spend by user, team, GPU type or day, charted day by day; budgets for
leads; a team's budget alerts and policy (leads and admins set them, members read them)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods

from portal.accounts.models import Team
from portal.core.errors import DomainError, NotAllowed, NotFound
from portal.core.views import fragment, login_required, page, wants_fragment
from portal.core.web import add_service_errors
from portal.spend.budgets import (
    budget_forecast,
    budget_forecasts,
    team_budget_get,
    team_budget_set,
    thresholds_of,
)
from portal.spend.daily import MAX_DAYS, SPLIT_LABELS, sees_whole_team, spend_daily
from portal.spend.forms import GROUP_LABELS, BudgetPolicyForm, SpendForm
from portal.spend.selectors import spend_grouped, spend_teams


@login_required
@require_GET
def spend(request: HttpRequest) -> HttpResponse:
    """Researchers see their own spend, leads their teams', admins everything."""
    teams = spend_teams(request.user)
    member_teams = [] if request.user.is_platform_admin else _member_teams(request.user, teams)
    asked = request.GET
    if "team" not in asked and len(teams) == 1 and not member_teams and not request.user.is_platform_admin:
        # A lead of one team and in no other: open on that team, whose budget the charts can draw.
        asked = asked.copy()
        asked["team"] = teams[0].slug
    form = SpendForm(asked, teams=teams)
    rows, daily, daily_url = [], None, ""
    if form.is_valid():
        start, end = form.window()
        rows = spend_grouped(
            user=request.user,
            group_by=form.cleaned_data["group_by"],
            start=start,
            end=end,
            team=form.chosen_team(),
        )
        if end - start <= timedelta(days=MAX_DAYS):  # the charts' reach, as their API's
            split, team = form.cleaned_data["split"], form.chosen_team()
            daily = spend_daily(user=request.user, split=split, start=start, end=end, team=team)
            query = {"start": start.isoformat(), "end": end.isoformat(), "split": split}
            daily_url = f"{reverse('api-spend-daily')}?{urlencode({**query, **({'team': team.slug} if team else {})})}"
    context = {
        "form": form,
        "export_query": asked.urlencode(),  # the view shown, its default team included
        "rows": rows,
        "group_label": GROUP_LABELS.get(
            form.cleaned_data.get("group_by", "user") if form.is_valid() else "user"
        ),
        "total_cost": sum((row.cost for row in rows), Decimal(0)),
        "total_gpu_hours": sum((row.gpu_hours for row in rows), Decimal(0)),
        "total_idle": sum((row.idle_cost for row in rows), Decimal(0)),
        "budgets": budget_forecasts(teams),
        "daily": daily,
        "daily_url": daily_url,
        "split_label": SPLIT_LABELS.get(
            form.cleaned_data.get("split", "user") if form.is_valid() else "user"
        ),
        "max_days": MAX_DAYS,
        "member_teams": member_teams,
        "scope": "everyone's spend"
        if request.user.is_platform_admin
        else ("your teams' spend" if teams else "your own spend"),
    }
    return page(request, "spend/spend.html", context, fragment="spend/partials/spend_table.html")


def _member_teams(user, led: list[Team]) -> list[Team]:
    """The teams the user is in but does not lead: their budgets are theirs to read."""
    return list(
        Team.objects.filter(memberships__user=user).exclude(pk__in=[t.pk for t in led]).order_by("slug")
    )


@login_required
@require_http_methods(["GET", "POST"])
def team_budget(request: HttpRequest, slug: str) -> HttpResponse:
    """A team's budget this month, its alert thresholds and its policy at 100 %: members read them,
    leads and admins change them (as `PATCH /api/v1/teams/{slug}/budget`, audited the same way)."""
    try:
        team = team_budget_get(user=request.user, slug=slug)
    except NotFound as error:  # another team's: as if it did not exist
        raise Http404(error.message) from error
    can_change = sees_whole_team(request.user, team)
    form = BudgetPolicyForm.of(team, thresholds_of(team)) if can_change else None
    if request.method == "POST":
        if not can_change:
            raise PermissionDenied(
                "Only a lead of the team or an admin may change its budget alerts and policy."
            )
        form = BudgetPolicyForm(request.POST)
        if form.is_valid():
            try:
                team = team_budget_set(
                    user=request.user,
                    slug=team.slug,
                    thresholds=form.cleaned_data["thresholds"],
                    policy=form.cleaned_data["policy"],
                    stop_grace_hours=form.cleaned_data["stop_grace_hours"],
                )
            except NotAllowed as error:
                raise PermissionDenied(error.message) from error
            except DomainError as error:
                add_service_errors(form, error)
            else:
                messages.success(request, "Budget alerts and policy saved.")
                if not wants_fragment(request):
                    return redirect("team-budget", slug=team.slug)
                form = BudgetPolicyForm.of(team, thresholds_of(team))
    context = {"team": team, "budget": budget_forecast(team=team), "form": form, "can_change": can_change}
    if wants_fragment(request):
        return fragment(request, "spend/partials/budget_policy.html", context)
    return page(request, "spend/team_budget.html", context)
