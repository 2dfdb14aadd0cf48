"""A team's budget over the API: where it stands and will end this month, its alert thresholds
and its 100 % policy (leads and admins may change those)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from portal.accounts.models import Team
from portal.core.serializers import StrictCharField, StrictIntegerField, validated
from portal.spend.budgets import budget_forecast, team_budget_get, team_budget_set


class TeamBudgetSerializer(serializers.Serializer):
    team = StrictCharField(source="team.slug")
    budget = serializers.DecimalField(max_digits=14, decimal_places=2, help_text="This month's budget (USD).")
    spent = serializers.DecimalField(max_digits=14, decimal_places=2, help_text="Spent since the 1st (UTC).")
    used_percent = StrictIntegerField()
    hourly = serializers.DecimalField(
        max_digits=14, decimal_places=2, help_text="What live work costs an hour now."
    )
    forecast_month_end = serializers.DecimalField(
        source="month_end", max_digits=14, decimal_places=2,
        help_text="Spent, plus live work until its expiry and storage, to the month's end.",
    )  # fmt: skip
    runs_out_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When the budget runs out at this pace (the time of reading, if it is already spent).",
    )
    thresholds = serializers.ListField(child=StrictIntegerField(), help_text="Percentages leads are told at.")
    policy = serializers.ChoiceField(source="team.budget_policy", choices=Team.BudgetPolicy.choices)
    stop_grace_hours = StrictIntegerField(source="team.budget_stop_grace_hours")
    stop_at = serializers.DateTimeField(source="team.budget_stop_at", allow_null=True)


class TeamBudgetChangeSerializer(serializers.Serializer):
    thresholds = serializers.ListField(child=StrictIntegerField(min_value=1, max_value=200), max_length=10,
                                       required=False)  # fmt: skip
    policy = serializers.ChoiceField(choices=Team.BudgetPolicy.choices, required=False)
    stop_grace_hours = StrictIntegerField(min_value=1, max_value=720, required=False)


class TeamBudgetView(generics.GenericAPIView):
    """GET: the team's budget, spend, forecast and policy (members). PATCH: its thresholds,
    policy and stop grace (leads, admins)."""

    serializer_class = TeamBudgetSerializer

    def get(self, request: Request, slug: str) -> Response:
        team = team_budget_get(user=request.user, slug=slug)
        return Response(TeamBudgetSerializer(budget_forecast(team=team)).data)

    @extend_schema(request=TeamBudgetChangeSerializer, responses={200: TeamBudgetSerializer})
    def patch(self, request: Request, slug: str) -> Response:
        change = validated(TeamBudgetChangeSerializer(data=request.data))
        team = team_budget_set(
            user=request.user, slug=slug, thresholds=change.get("thresholds"), policy=change.get("policy"),
            stop_grace_hours=change.get("stop_grace_hours"),
        )  # fmt: skip
        return Response(TeamBudgetSerializer(budget_forecast(team=team)).data)
