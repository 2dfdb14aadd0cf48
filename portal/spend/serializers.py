"""Spend API: the report's query parameters and the report."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from portal.accounts.models import Team
from portal.spend.forms import FIRST_DAY, LAST_DAY
from portal.spend.selectors import GROUPS, WORKLOAD_LIMIT


def month_start(now: datetime) -> datetime:
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def within_report_range(value: datetime) -> datetime:
    """A report's start or end, in the years a report may cover (as the spend page's)."""
    if not FIRST_DAY <= value.date() <= LAST_DAY:
        raise serializers.ValidationError(f"Must be between {FIRST_DAY} and {LAST_DAY}.")
    return value


class SpendQuerySerializer(serializers.Serializer):
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
        if team is None:
            raise serializers.ValidationError(f"You are not a member of a team called {slug!r}.")
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
        help_text="Username, team slug, GPU type slug, ISO date or workload id (`storage`, `others`)."
    )
    label = serializers.CharField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=2)
    gpu_hours = serializers.DecimalField(max_digits=14, decimal_places=2)
    idle_cost = serializers.DecimalField(
        max_digits=14, decimal_places=2, help_text="The part of `cost` paid for GPU minutes read idle."
    )


class SpendReportSerializer(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=GROUPS)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    team = serializers.CharField(allow_null=True)
    currency = serializers.CharField()
    total = serializers.DecimalField(max_digits=14, decimal_places=2, help_text="The sum of the rows.")
    gpu_hours = serializers.DecimalField(max_digits=14, decimal_places=2)
    rows = SpendRowSerializer(many=True)
