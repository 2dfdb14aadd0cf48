"""Spend reports as documents: the JSON report (with the team's budget state when it concerns one
team), and CSV or JSON downloads of any spend view, streamed.

A download writes its header before any figure is read and each row as it comes, so a response
starts at once and holds no more than the selectors hand over: by day the range is read a month
at a time; by user, team or GPU type the rows are one per key; by workload at most `limit` named
rows plus storage and everything else. Figures are those of `spend_grouped` (cents, as strings).

CSV columns: key, label, cost, gpu_hours, idle_cost (USD; cost includes idle_cost).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET
from rest_framework.utils.encoders import JSONEncoder

from portal.accounts.models import Team, User
from portal.accounts.selectors import user_teams
from portal.core.csv_lines import csv_lines
from portal.core.views import login_required
from portal.spend.budgets import Forecast, budget_forecast
from portal.spend.forms import SpendForm
from portal.spend.selectors import CENT, WORKLOAD_LIMIT, SpendRow, spend_grouped, spend_teams
from portal.spend.serializers import SpendBudgetSerializer, SpendReportSerializer, SpendRowSerializer

FORMATS = {"csv": "text/csv", "json": "application/json"}
CSV_COLUMNS = ("key", "label", "cost", "gpu_hours", "idle_cost")
CURRENCY = "USD"


def report_budget(*, user: User, team: Team | None) -> Forecast | None:
    """The budget state a report carries: of the team asked for, else of the viewer's only team
    (not for admins, whose reports span the fleet); None when the report is not about one team."""
    if team is None:
        if user.is_platform_admin:
            return None
        teams = user_teams(user)
        if len(teams) != 1:
            return None
        team = teams[0]
    return budget_forecast(team=team)


def spend_report(
    *, user: User, group_by: str, start: datetime, end: datetime, team: Team | None, limit: int
) -> dict[str, Any]:
    """The spend report as `SpendReportSerializer` shows it: rows, their sums, the budget state."""
    rows = spend_grouped(user=user, group_by=group_by, start=start, end=end, team=team, limit=limit)
    return {
        **_header(group_by=group_by, start=start, end=end, team=team),
        "budget": report_budget(user=user, team=team),
        "total": sum((row.cost for row in rows), Decimal(0)),
        "gpu_hours": sum((row.gpu_hours for row in rows), Decimal(0)),
        "rows": rows,
    }


def _header(*, group_by: str, start: datetime, end: datetime, team: Team | None) -> dict[str, Any]:
    return {
        "group_by": group_by,
        "start": start,
        "end": end,
        "team": team.slug if team is not None else None,
        "currency": CURRENCY,
    }


def _month_ends(start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime]]:
    """[start, end) cut at the first of each month (UTC)."""
    low = start
    while low < end:
        first = low.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        high = min(end, (first + timedelta(days=32)).replace(day=1))
        yield low, high
        low = high


def export_rows(
    *,
    user: User,
    group_by: str,
    start: datetime,
    end: datetime,
    team: Team | None,
    limit: int = WORKLOAD_LIMIT,
    now: datetime | None = None,
) -> Iterator[SpendRow]:
    """The rows of a spend view, lazily: by day a month at a time (each day's row is the same
    whatever range it is read in), otherwise the view's rows, which `spend_grouped` reads at once."""
    now = now or timezone.now()
    if group_by == "day":
        for low, high in _month_ends(start, end):
            yield from spend_grouped(user=user, group_by="day", start=low, end=high, team=team, now=now)
        return
    yield from spend_grouped(
        user=user, group_by=group_by, start=start, end=end, team=team, now=now, limit=limit
    )


def _money(value: Decimal) -> str:
    return format(value.quantize(CENT), "f")


def spend_csv_lines(rows: Iterable[SpendRow]) -> Iterator[str]:
    """One header line, then a line per row (decimal strings; labels defused against formulas)."""
    return csv_lines(
        CSV_COLUMNS,
        (
            [row.key, row.label, _money(row.cost), _money(row.gpu_hours), _money(row.idle_cost)]
            for row in rows
        ),
    )


def json_chunks(
    *, header: dict[str, Any], budget: Forecast | None, rows: Iterable[SpendRow]
) -> Iterator[str]:
    """The spend report's JSON document, written row by row; its sums come last."""
    head = SpendReportSerializer(
        {**header, "budget": None, "total": Decimal(0), "gpu_hours": Decimal(0), "rows": []}
    ).data
    opening = {key: head[key] for key in ("group_by", "start", "end", "team", "currency")}
    opening["budget"] = SpendBudgetSerializer(budget).data if budget is not None else None
    yield json.dumps(opening, cls=JSONEncoder)[:-1] + ', "rows": ['
    total, gpu_hours = Decimal(0), Decimal(0)
    for index, row in enumerate(rows):
        total += row.cost
        gpu_hours += row.gpu_hours
        yield ("," if index else "") + json.dumps(SpendRowSerializer(row).data, cls=JSONEncoder)
    yield f'], "total": "{_money(total)}", "gpu_hours": "{_money(gpu_hours)}"}}'


def export_filename(
    *, user: User, group_by: str, start: datetime, end: datetime, team: Team | None, fmt: str
) -> str:
    """spend_<whose>_<first day>_<last day>_by-<grouping>.<fmt>; the last day is the one `end`
    (exclusive) closes, or `end`'s own day when it is not a midnight."""
    whose = team.slug if team is not None else ("all" if user.is_platform_admin else user.username)
    end_utc = end.astimezone(UTC)
    last = end_utc.date() - timedelta(days=1) if end_utc.time() == time.min else end_utc.date()
    first = start.astimezone(UTC).date()
    return f"spend_{whose}_{first:%Y-%m-%d}_{max(first, last):%Y-%m-%d}_by-{group_by}.{fmt}"


def spend_export(
    *,
    fmt: str,
    user: User,
    group_by: str,
    start: datetime,
    end: datetime,
    team: Team | None,
    limit: int = WORKLOAD_LIMIT,
) -> StreamingHttpResponse:
    """A spend view as a CSV or JSON download, streamed."""
    rows = export_rows(user=user, group_by=group_by, start=start, end=end, team=team, limit=limit)
    if fmt == "csv":
        body: Iterator[str] = spend_csv_lines(rows)
    else:
        header = _header(group_by=group_by, start=start, end=end, team=team)
        body = json_chunks(header=header, budget=report_budget(user=user, team=team), rows=rows)
    response = StreamingHttpResponse(body, content_type=f"{FORMATS[fmt]}; charset=utf-8")
    filename = export_filename(user=user, group_by=group_by, start=start, end=end, team=team, fmt=fmt)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "private, no-store"
    return response


# Web: the spend page's "Download CSV" and "Download JSON", with the page's filters.


@login_required
@require_GET
def spend_download(request: HttpRequest, fmt: str) -> HttpResponse:
    """The spend page's view (same query string) as a download."""
    if fmt not in FORMATS:
        return HttpResponseBadRequest("Downloads are csv or json.", content_type="text/plain")
    form = SpendForm(request.GET, teams=spend_teams(request.user))
    if not form.is_valid():  # back to the page, which says what to fix beside the fields
        messages.error(request, "Nothing was downloaded: the filters below need fixing first.")
        return redirect(f"{reverse('spend')}?{request.GET.urlencode()}")
    start, end = form.window()
    return spend_export(
        fmt=fmt,
        user=request.user,
        group_by=form.cleaned_data["group_by"],
        start=start,
        end=end,
        team=form.chosen_team(),
    )
