"""The spend page: metered spend by user, team, GPU type or day; budgets for leads."""

from __future__ import annotations

from decimal import Decimal

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from portal.core.views import login_required, page
from portal.spend.budgets import budget_forecasts
from portal.spend.forms import GROUP_LABELS, SpendForm
from portal.spend.selectors import spend_grouped, spend_teams


@login_required
@require_GET
def spend(request: HttpRequest) -> HttpResponse:
    """Researchers see their own spend, leads their teams', admins everything."""
    teams = spend_teams(request.user)
    form = SpendForm(request.GET, teams=teams)
    rows = []
    if form.is_valid():
        start, end = form.window()
        rows = spend_grouped(
            user=request.user,
            group_by=form.cleaned_data["group_by"],
            start=start,
            end=end,
            team=form.chosen_team(),
        )
    context = {
        "form": form,
        "rows": rows,
        "group_label": GROUP_LABELS.get(
            form.cleaned_data.get("group_by", "user") if form.is_valid() else "user"
        ),
        "total_cost": sum((row.cost for row in rows), Decimal(0)),
        "total_gpu_hours": sum((row.gpu_hours for row in rows), Decimal(0)),
        "total_idle": sum((row.idle_cost for row in rows), Decimal(0)),
        "budgets": budget_forecasts(teams),
        "scope": "everyone" if request.user.is_platform_admin else ("your teams" if teams else "you"),
    }
    return page(request, "spend/spend.html", context, fragment="spend/partials/spend_table.html")
