"""Spend API: the report's query parameters and the report."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from portal.accounts.models import Team
from portal.core.errors import NotFound
from portal.core.serializers import QuerySerializer
from portal.spend.budget_api import TeamBudgetSerializer
from portal.spend.budgets import Forecast, budget_alerts_due
from portal.spend.forms import FIRST_DAY, LAST_DAY
from portal.spend.selectors import GROUPS, WORKLOAD_LIMIT


def month_start(now: datetime) -> datetime:
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def within_report_range(value: datetime) -> datetime:
    """A report's start or end, in the years a report may cover (as the spend page's)."""
    if not FIRST_DAY <= value.date() <= LAST_DAY:
        raise serializers.ValidationError(f"Must be between {FIRST_DAY} and {LAST_DAY}.")
    return value


class SpendQuerySerializer(QuerySerializer):
    """`group_by` (default team), `start` (default the first of this month, UTC), `end` (default
    now), `team` (a slug: only that team's spend), `limit` (by workload: how many to name)."""

    group_by = serializers.ChoiceField(choices=GROUPS, default="team")
    start = serializers.DateTimeField(required=False, help_text="ISO 8601; inclusive.")
    end = serializers.DateTimeField(required=False, help_text="ISO 8601; exclusive.")
    team = serializers.CharField(required=False, max_length=50)
    limit = serializers.IntegerField(
        min_value=1,
        max_value=1000,
        default=WORKLOAD_LIMIT,
        help_text="By workload: the workloads that cost most, this many; the rest share one row, "
        "`others`, and storage has its own, `storage`.",
    )

    def validate_team(self, slug: str) -> Team:
        user = self.context["request"].user
        teams = Team.objects.filter(slug=slug)
        if not user.is_platform_admin:
            teams = teams.filter(memberships__user=user)
        team = teams.first()
        if team is None:  # a team the caller may not see answers as one that does not exist
            raise NotFound(f"You are not a member of a team called {slug!r}.")
        return team

    def validate_start(self, value: datetime) -> datetime:
        return within_report_range(value)

    def validate_end(self, value: datetime) -> datetime:
        return within_report_range(value)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        now = timezone.now()
        data.setdefault("end", now)
        data.setdefault("start", month_start(now))
        if data["end"] <= data["start"]:
            raise serializers.ValidationError({"end": ["Must be after start."]})
        return data


class SpendRowSerializer(serializers.Serializer):
    key = serializers.CharField(
        help_text=(
            "Username, team slug, GPU type slug, ISO date, project label, or a workload's kind and "
            "number (`sandbox-12`, `deployment-3`); `storage`, `others`."
        )
    )
    label = serializers.CharField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=2)
    gpu_hours = serializers.DecimalField(max_digits=14, decimal_places=2)
    idle_cost = serializers.DecimalField(
        max_digits=14, decimal_places=2, help_text="The part of `cost` paid for GPU minutes read idle."
    )


class SpendBudgetSerializer(TeamBudgetSerializer):
    """This month's budget state of the team a report concerns (as `/teams/{slug}/budget`)."""

    forecast_percent = serializers.IntegerField(
        help_text="`forecast_month_end` as a percentage of the budget."
    )
    thresholds_crossed = serializers.SerializerMethodField(
        help_text="The alert thresholds this month's spend has reached, lowest first."
    )

    def get_thresholds_crossed(self, forecast: Forecast) -> list[int]:
        return budget_alerts_due(forecast, set())


class SpendReportSerializer(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=GROUPS)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    team = serializers.CharField(allow_null=True)
    currency = serializers.CharField()
    budget = SpendBudgetSerializer(
        allow_null=True,
        required=False,
        help_text="When the report concerns one team (`team`, or a member's only team): its budget "
        "state this month (UTC), whatever the report's range. Null otherwise.",
    )
    total = serializers.DecimalField(max_digits=14, decimal_places=2, help_text="The sum of the rows.")
    gpu_hours = serializers.DecimalField(max_digits=14, decimal_places=2)
    rows = SpendRowSerializer(many=True)


class TeamStatementSerializer(serializers.Serializer):
    """A team's monthly statement (UTC month): the figures of `/spend/statement/<team>/<month>/`."""

    team = serializers.CharField(source="team.slug")
    team_name = serializers.CharField(source="team.name")
    month = serializers.DateField(format="%Y-%m", help_text="YYYY-MM")
    start = serializers.DateTimeField(help_text="The first of the month, 00:00 UTC; inclusive.")
    end = serializers.DateTimeField(help_text="The first of the next month, 00:00 UTC; exclusive.")
    scope = serializers.SerializerMethodField(
        help_text="`team`: the whole team (its leads, admins); `own`: the caller's own spend in it."
    )
    to_date = serializers.BooleanField(help_text="The month is still running: figures up to `generated_at`.")
    generated_at = serializers.DateTimeField()
    currency = serializers.SerializerMethodField()
    total = serializers.DecimalField(source="total.cost", max_digits=14, decimal_places=2)
    gpu_hours = serializers.DecimalField(source="total.gpu_hours", max_digits=14, decimal_places=2)
    idle_cost = serializers.DecimalField(
        source="total.idle_cost", max_digits=14, decimal_places=2,
        help_text="The part of `total` paid for GPU minutes the node agents read idle (where they reported).",
    )  # fmt: skip
    gpu_cost = serializers.DecimalField(max_digits=14, decimal_places=2, help_text="`total` less `storage`.")
    storage = serializers.DecimalField(max_digits=14, decimal_places=2, help_text="Persistent homes.")
    budget = serializers.DecimalField(
        max_digits=14,
        decimal_places=2,
        allow_null=True,
        help_text="The team's monthly budget (scope `team`).",
    )
    used_percent = serializers.IntegerField(allow_null=True, help_text="`total` as a percentage of `budget`.")
    left = serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True)
    forecast = SpendBudgetSerializer(
        allow_null=True, help_text="The running month only (scope `team`): forecast to the month's end."
    )
    by_user = SpendRowSerializer(many=True)
    by_gpu_type = SpendRowSerializer(many=True, help_text="Storage has its own row, `storage`.")
    by_workload = SpendRowSerializer(
        many=True, help_text="The workloads that cost most, then `storage` and `others` (the rest)."
    )

    def get_scope(self, statement: Any) -> str:
        return "team" if statement.whole_team else "own"

    def get_currency(self, statement: Any) -> str:
        return "USD"
