"""Accounts API: the signed-in user with quota and budget per team, and personal access tokens."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.accounts.api_selectors import TeamStanding
from portal.accounts.models import ApiToken


class QuotaSerializer(serializers.Serializer):
    """GPU equivalents: a whole GPU is 1, a MIG slice its compute slices / 7."""

    total = serializers.DecimalField(max_digits=10, decimal_places=3, source="quota_total")
    used = serializers.DecimalField(max_digits=10, decimal_places=3, source="quota_used")
    left = serializers.DecimalField(max_digits=10, decimal_places=3, source="quota_left")


class BudgetSerializer(serializers.Serializer):
    """This calendar month (UTC), in USD."""

    currency = serializers.SerializerMethodField()
    monthly = serializers.DecimalField(max_digits=14, decimal_places=2, source="budget_monthly")
    spent = serializers.DecimalField(max_digits=14, decimal_places=2, source="budget_spent")
    left = serializers.DecimalField(max_digits=14, decimal_places=2, source="budget_left")

    def get_currency(self, standing: TeamStanding) -> str:
        return "USD"


class PolicySerializer(serializers.Serializer):
    max_lifetime_hours = serializers.DecimalField(max_digits=8, decimal_places=2)
    auto_approve_max_gpus = serializers.IntegerField()
    auto_approve_max_hours = serializers.DecimalField(max_digits=8, decimal_places=2)


class TeamStandingSerializer(serializers.Serializer):
    slug = serializers.CharField(source="team.slug")
    name = serializers.CharField(source="team.name")
    role = serializers.CharField()
    quota = serializers.SerializerMethodField()
    budget = serializers.SerializerMethodField()
    policy = PolicySerializer(source="team")

    @extend_schema_field(QuotaSerializer)
    def get_quota(self, standing: TeamStanding) -> dict[str, Any]:
        return QuotaSerializer(standing).data

    @extend_schema_field(BudgetSerializer)
    def get_budget(self, standing: TeamStanding) -> dict[str, Any]:
        return BudgetSerializer(standing).data


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()
    name = serializers.CharField(source="get_full_name")
    email = serializers.EmailField()
    is_platform_admin = serializers.BooleanField()
    teams = serializers.SerializerMethodField()

    @extend_schema_field(TeamStandingSerializer(many=True))
    def get_teams(self, user: Any) -> list[dict[str, Any]]:
        return TeamStandingSerializer(self.context["standings"], many=True).data


class TokenSerializer(serializers.ModelSerializer):
    """A token as listed: never its secret."""

    active = serializers.SerializerMethodField()

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "expires_at", "revoked_at", "last_used_at", "active"]
        read_only_fields = fields

    def get_active(self, token: ApiToken) -> bool:
        if token.revoked_at is not None:
            return False
        return token.expires_at is None or token.expires_at > timezone.now()


class TokenCreatedSerializer(TokenSerializer):
    token = serializers.SerializerMethodField(help_text="The secret. Shown this once; store it now.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]
        read_only_fields = fields

    def get_token(self, token: ApiToken) -> str:
        return self.context["raw"]


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    expires_days = serializers.IntegerField(
        required=False, allow_null=True, help_text="Days until it expires (1-3650); never when absent."
    )
