"""Accounts API: the signed-in user with quota and budget per team, and personal access tokens."""

from __future__ import annotations

from django.utils import timezone
from rest_framework import serializers

from portal.accounts.models import ApiToken
from portal.core.serializers import StrictCharField, StrictIntegerField


class TokenSerializer(serializers.ModelSerializer):
    """A token as listed: never its secret."""

    active = serializers.SerializerMethodField()

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "prefix",
            "scope",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "active",
        ]
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
    name = StrictCharField(max_length=100)
    expires_days = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=3650,
        help_text="Days until it expires (1-3650); never when absent.",
    )
    scope = serializers.ChoiceField(
        choices=ApiToken.Scope.choices,
        default=ApiToken.Scope.WORKLOADS,
        help_text="read: reads only; workloads: all but tokens; admin: all. A token making a token needs "
        "admin, and the new one may not outlive it.",
    )
