"""A team's user and project budgets over the API: the list, and one per target (a username or a
project label) to read, set (PUT) or remove (DELETE). Members read; leads and admins write;
anyone else finds no such team (404)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.serializers import StrictCharField, StrictIntegerField, validated
from portal.spend.budgets import Forecast
from portal.spend.models import Budget
from portal.spend.target_budgets import (
    team_target_budget_delete,
    team_target_budget_get,
    team_target_budget_set,
    team_target_budgets,
)

MONEY = {"max_digits": 14, "decimal_places": 2}


class TargetBudgetSerializer(serializers.Serializer):
    """Where one user's or project's budget stands this month (USD, UTC month)."""

    kind = serializers.ChoiceField(choices=Budget.Kind.choices)
    target = StrictCharField(help_text="The username, or the project label.")
    monthly_amount = serializers.DecimalField(source="budget", **MONEY, help_text="This month's budget.")
    spent = serializers.DecimalField(**MONEY, help_text="Spent since the 1st (UTC).")
    used_percent = StrictIntegerField()
    hourly = serializers.DecimalField(**MONEY, help_text="What its live work costs an hour now.")
    forecast_month_end = serializers.DecimalField(
        source="month_end",
        **MONEY,
        help_text="Spent, plus live work until its expiry (and a user's storage).",
    )
    runs_out_at = serializers.DateTimeField(allow_null=True, help_text="When it runs out at this pace.")
    thresholds = serializers.ListField(child=StrictIntegerField(), help_text="The team's alert percentages.")
    policy = serializers.CharField(source="team.budget_policy", help_text="The team's 100 % policy.")


class TargetBudgetListSerializer(serializers.Serializer):
    team = StrictCharField()
    budgets = TargetBudgetSerializer(many=True)


class TargetBudgetChangeSerializer(serializers.Serializer):
    monthly_amount = serializers.DecimalField(max_digits=12, decimal_places=2, min_value=0)


def _one(forecast: Forecast) -> dict:
    return TargetBudgetSerializer(forecast).data


TARGET_PARAMS = [
    OpenApiParameter("kind", str, OpenApiParameter.PATH, enum=Budget.Kind.values),
    OpenApiParameter("target", str, OpenApiParameter.PATH, description="A username, or a project label."),
]


class TargetBudgetListView(generics.GenericAPIView):
    """The team's user and project budgets, with spend, forecast and the day each runs out."""

    serializer_class = TargetBudgetListSerializer

    @extend_schema(operation_id="teams_budgets_list")
    def get(self, request: Request, slug: str) -> Response:
        team, found = team_target_budgets(user=request.user, slug=slug)
        return Response({"team": team.slug, "budgets": [_one(forecast) for _, forecast in found]})


class TargetBudgetView(generics.GenericAPIView):
    """GET: one user's or project's budget (members). PUT: set its monthly amount (leads,
    admins; created if none). DELETE: remove it (leads, admins)."""

    serializer_class = TargetBudgetSerializer

    @extend_schema(parameters=TARGET_PARAMS)
    def get(self, request: Request, slug: str, kind: str, target: str) -> Response:
        _, forecast = team_target_budget_get(user=request.user, slug=slug, kind=kind, target=target)
        return Response(_one(forecast))

    @extend_schema(
        parameters=TARGET_PARAMS,
        request=TargetBudgetChangeSerializer,
        responses={200: TargetBudgetSerializer},
    )
    def put(self, request: Request, slug: str, kind: str, target: str) -> Response:
        change = validated(TargetBudgetChangeSerializer(data=request.data))
        team_target_budget_set(
            user=request.user, slug=slug, kind=kind, target=target, monthly_amount=change["monthly_amount"]
        )
        _, forecast = team_target_budget_get(user=request.user, slug=slug, kind=kind, target=target)
        return Response(_one(forecast))

    @extend_schema(parameters=TARGET_PARAMS, responses={204: None})
    def delete(self, request: Request, slug: str, kind: str, target: str) -> Response:
        team_target_budget_delete(user=request.user, slug=slug, kind=kind, target=target)
        return Response(status=status.HTTP_204_NO_CONTENT)
