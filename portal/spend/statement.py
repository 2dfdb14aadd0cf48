"""A team's monthly statement: one calendar month (UTC) of spend with its totals, by user, by GPU
type and by workload (the largest, then the rest), idle cost, storage, and budget against actual.

Leads of the team and platform admins get the whole team's statement; a member who does not lead
it gets a statement of their own spend in the team (researchers see their own spend); anyone else
finds no such team. Every figure comes from `spend_grouped` and `budget_forecast`: the roll-ups,
as every other report reads them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_GET

from portal.accounts.models import Team, User
from portal.accounts.selectors import is_lead, user_teams
from portal.core.errors import NotFound, ValidationFailed
from portal.core.views import login_required, page
from portal.spend.budgets import Forecast, budget_alerts_due, budget_forecast, percent_label, whole_percent
from portal.spend.forms import FIRST_DAY
from portal.spend.selectors import STORAGE_KEY, SpendRow, spend_grouped, spend_teams

TOP_WORKLOADS = 20  # workloads named on a statement; the rest share one row
MONTH_FORMAT = re.compile(r"^(\d{4})-(\d{2})$")


def month_window(month: str, *, now: datetime) -> tuple[datetime, datetime]:
    """`YYYY-MM` as [first of the month, first of the next) in UTC; a month not begun yet, one
    before the reports' first day or anything else is a ValidationFailed."""
    found = MONTH_FORMAT.match(month or "")
    if not found or not 1 <= int(found[2]) <= 12:
        raise ValidationFailed(
            "month: A month as YYYY-MM, such as 2026-03.", fields={"month": ["A month as YYYY-MM."]}
        )
    year, number = int(found[1]), int(found[2])
    start = datetime(year, number, 1, tzinfo=UTC)
    if start.date() < FIRST_DAY:
        message = f"A month from {FIRST_DAY:%Y-%m} on."
        raise ValidationFailed(f"month: {message}", fields={"month": [message]})
    if start > now:
        message = "This month has not begun yet (months are counted in UTC)."
        raise ValidationFailed(f"month: {message}", fields={"month": [message]})
    end = datetime(year + number // 12, number % 12 + 1, 1, tzinfo=UTC)
    return start, end


@dataclass(frozen=True)
class Statement:
    team: Team
    month: date  # the first of the month
    start: datetime  # [start, end) in UTC
    end: datetime
    whole_team: bool  # False: only the viewer's own spend in the team
    to_date: bool  # the month is still running: figures up to `generated_at`
    generated_at: datetime
    total: SpendRow  # cost, GPU-hours and idle cost, each rounded once
    storage: Decimal
    by_user: list[SpendRow]
    by_gpu_type: list[SpendRow]
    by_workload: list[SpendRow]
    budget: Decimal | None  # the team's monthly budget (whole-team statements only)
    forecast: Forecast | None  # this month's forecast (whole-team statements of the running month)
    thresholds_crossed: list[int]

    @property
    def gpu_cost(self) -> Decimal:
        return self.total.cost - self.storage

    @property
    def used_percent(self) -> int | None:
        if self.budget is None:
            return None
        return whole_percent(self.total.cost, self.budget)

    @property
    def used_label(self) -> str | None:
        return None if self.budget is None else percent_label(self.total.cost, self.budget)

    @property
    def left(self) -> Decimal | None:
        return None if self.budget is None else self.budget - self.total.cost

    @property
    def left_shown(self) -> Decimal | None:
        """What is left, or by how much the month went over (`left` without its sign)."""
        return None if self.left is None else abs(self.left)


def statement_team(*, user: User, slug: str) -> tuple[Team, bool]:
    """The team and whether the user sees all of it (a lead, an admin) or only their own part (a
    member); anyone else finds no team."""
    team = Team.objects.filter(slug=slug).first()
    if team is not None:
        if user.is_platform_admin or is_lead(user=user, team=team):
            return team, True
        if team.memberships.filter(user=user).exists():
            return team, False
    raise NotFound(f"No team {slug!r} that you belong to.")


def team_statement(*, user: User, slug: str, month: str, now: datetime | None = None) -> Statement:
    """The statement of team `slug` for `month` (YYYY-MM, UTC) as `user` may see it."""
    now = now or timezone.now()
    start, end = month_window(month, now=now)
    team, whole_team = statement_team(user=user, slug=slug)

    def grouped(group_by: str, **extra: int) -> list[SpendRow]:
        return spend_grouped(user=user, group_by=group_by, start=start, end=end, team=team, now=now, **extra)

    totals = grouped("team")
    total = totals[0] if totals else SpendRow(key=team.slug, label=team.name, cost=Decimal("0.00"),
                                              gpu_hours=Decimal("0.00"), idle_cost=Decimal("0.00"))  # fmt: skip
    by_gpu_type = grouped("gpu_type")
    storage = next((row.cost for row in by_gpu_type if row.key == STORAGE_KEY), Decimal("0.00"))
    to_date = start <= now < end
    forecast = budget_forecast(team=team, now=now) if whole_team and to_date else None
    return Statement(
        team=team,
        month=start.date(),
        start=start,
        end=end,
        whole_team=whole_team,
        to_date=to_date,
        generated_at=now,
        total=total,
        storage=storage,
        by_user=grouped("user"),
        by_gpu_type=by_gpu_type,
        by_workload=grouped("workload", limit=TOP_WORKLOADS),
        budget=team.monthly_budget if whole_team else None,
        forecast=forecast,
        thresholds_crossed=budget_alerts_due(forecast, set()) if forecast else [],
    )


# Web


@login_required
@require_GET
def statement_page(request: HttpRequest, slug: str, month: str) -> HttpResponse:
    """The printable statement; a malformed or future month is a 400 that says so."""
    try:
        statement = team_statement(user=request.user, slug=slug, month=month)
    except NotFound as missing:
        raise Http404(missing.message) from missing
    except ValidationFailed as refused:  # said in words, without the API's field name
        why = (refused.fields or {}).get("month", [refused.message])[0]
        context = {"error": f"No statement for {month}: {why}", "slug": slug, "month": month}
        return page(request, "spend/statement.html", context, status=400)
    context = {
        "statement": statement,
        "teams": user_teams(request.user) if not request.user.is_platform_admin else [],
    }
    return page(request, "spend/statement.html", context)


@login_required
@require_GET
def statement_pick(request: HttpRequest) -> HttpResponse:
    """The spend page's month picker: to the statement of the team and month chosen (by default
    the viewer's first team, else the first whose spend they see as a whole (an admin's), and this
    month)."""
    slug = request.GET.get("team", "")
    if not slug:
        teams = user_teams(request.user) or spend_teams(request.user)
        if not teams:
            raise Http404("You belong to no team.")
        slug = teams[0].slug
    month = request.GET.get("month") or f"{timezone.now():%Y-%m}"
    if not re.fullmatch(r"[-a-zA-Z0-9_]+", slug) or not re.fullmatch(r"[0-9-]{1,10}", month):
        context = {"error": "Pick a team and a month (YYYY-MM).", "slug": slug, "month": month}
        return page(request, "spend/statement.html", context, status=400)
    return redirect("spend-statement", slug=slug, month=month)
