"""Daily spend API: the query (as the spend report's, with a split instead of a grouping) and the
series the spend page's charts draw."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from rest_framework import serializers

from portal.spend.daily import MAX_DAYS, SPLITS, TOP, TOP_MAX
from portal.spend.serializers import SpendQuerySerializer

MONEY = {"max_digits": 14, "decimal_places": 2}


class SpendDailyQuerySerializer(SpendQuerySerializer):
    """`split` (default user), `start` (default the first of this month, UTC), `end` (default
    now), `team` (a slug: only that team's spend), `top` (how many groups to name)."""

    group_by = None
    limit = None
    split = serializers.ChoiceField(choices=SPLITS, default="user")
    top = serializers.IntegerField(
        min_value=1,
        max_value=TOP_MAX,
        default=TOP,
        help_text="The groups that cost most over the range, this many; the rest share one, `others`.",
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        data = super().validate(data)
        if data["end"] - data["start"] > timedelta(days=MAX_DAYS):
            raise serializers.ValidationError({"end": [f"At most {MAX_DAYS} days after start."]})
        return data


class DailyGroupSerializer(serializers.Serializer):
    key = serializers.CharField(
        help_text="Username, GPU type slug or workload id; `storage` (persistent homes) or `others`."
    )
    label = serializers.CharField()
    cost = serializers.DecimalField(**MONEY, help_text="Over the whole range.")
    gpu_hours = serializers.DecimalField(**MONEY)


class SpendDaySerializer(serializers.Serializer):
    day = serializers.DateField(help_text="A UTC day.")
    cost = serializers.DecimalField(**MONEY)
    gpu_hours = serializers.DecimalField(**MONEY)
    cumulative = serializers.DecimalField(**MONEY, help_text="From the range's start to the day's end.")
    by_group = serializers.ListField(
        child=serializers.DecimalField(**MONEY),
        help_text="The day's cost of each of `groups`, in their order.",
    )


class ForecastSerializer(serializers.Serializer):
    spent = serializers.DecimalField(**MONEY, help_text="The team's spend since the 1st (UTC).")
    hourly = serializers.DecimalField(**MONEY, help_text="What live work costs an hour now.")
    month_end = serializers.DecimalField(
        **MONEY, help_text="Spent, plus live work until its expiry and storage, to the month's end."
    )
    runs_out_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When the budget runs out at this pace (the time of reading, if it is already spent).",
    )


class MonthBudgetSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.slug")
    month = serializers.DateField(help_text="The month's first day.")
    budget = serializers.DecimalField(**MONEY)
    thresholds = serializers.ListField(
        child=serializers.IntegerField(), help_text="Percentages leads are told at."
    )
    forecast = ForecastSerializer(allow_null=True, help_text="The month under way only.")


class SpendDailySerializer(serializers.Serializer):
    split = serializers.ChoiceField(choices=SPLITS)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    team = serializers.CharField(source="team.slug", allow_null=True, default=None)
    currency = serializers.CharField(default="USD")
    groups = DailyGroupSerializer(many=True)
    days = SpendDaySerializer(many=True)
    total = serializers.DecimalField(**MONEY)
    gpu_hours = serializers.DecimalField(**MONEY)
    budget = MonthBudgetSerializer(
        allow_null=True,
        help_text="When the range is one month of one team (from the 1st, 00:00 UTC) and the caller "
        "sees the team's whole spend (its leads, admins); else null.",
    )
