"""Accounts API: the signed-in user with quota and budget per team, and personal access tokens."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import serializers

from portal.accounts.models import (
    ApiToken,
    Notification,
    NotificationChannel,
    NotificationKind,
    SshKey,
    WebhookFormat,
)
from portal.accounts.services import token_expiry_help, token_max_days
from portal.core.serializers import QuerySerializer, StrictBooleanField, StrictCharField, StrictIntegerField


class TokenSerializer(serializers.ModelSerializer):
    """A token as listed: never its secret."""

    active = serializers.SerializerMethodField()
    team = serializers.SlugRelatedField(
        slug_field="slug",
        read_only=True,
        allow_null=True,
        help_text="A serving token's team, whose endpoints it calls; null for the other scopes.",
    )

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "prefix",
            "scope",
            "team",
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
        max_value=token_max_days(),
        help_text=token_expiry_help(),
    )
    scope = serializers.ChoiceField(
        choices=ApiToken.Scope.choices,
        default=ApiToken.Scope.WORKLOADS,
        help_text="read: reads only; workloads: all but tokens, SSH keys, kubeconfigs, sharing a sandbox "
        "with more people, notification preferences, team settings and the fleet; admin: "
        "all; serving: calls "
        "the endpoints of one team's deployments (`team`) and nothing of this API. A token making a "
        "token needs admin, and the new one may not outlive it.",
    )
    team = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=50,
        help_text="For scope serving, the slug of the team (one of yours) whose endpoints it calls.",
    )


class SshKeySerializer(serializers.ModelSerializer):
    """A public key its owner's shell sandboxes let in."""

    key_type = serializers.CharField(
        read_only=True, help_text="ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa, ..."
    )

    class Meta:
        model = SshKey
        fields = ["id", "name", "fingerprint", "key_type", "public_key", "created_at"]
        read_only_fields = fields


class SshKeyCreateSerializer(serializers.Serializer):
    public_key = StrictCharField(
        max_length=8000, help_text="One OpenSSH public key (the .pub file): type, base64, comment."
    )
    name = StrictCharField(
        max_length=100, required=False, allow_blank=True, help_text="Absent or empty: the key's comment."
    )


class NotificationSerializer(serializers.ModelSerializer):
    """A notification as the user sees it in the portal."""

    class Meta:
        model = Notification
        fields = ["id", "kind", "message", "link", "created_at", "read_at"]
        read_only_fields = fields


class NotificationPreferencesSerializer(serializers.Serializer):
    """Which kinds each channel leaves out, and the user's webhook."""

    muted = serializers.DictField(
        child=serializers.ListField(child=serializers.ChoiceField(choices=NotificationKind.choices)),
        required=False,
        allow_null=False,
        help_text='Per channel (portal, email, webhook), the kinds it leaves out: {"email": ["running"]}.',
    )
    webhook_url = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=500,
        help_text='https URL to post to; "" for none. Read with a token of scope read or workloads: '
        "only its scheme and host, then /….",
    )
    webhook_format = serializers.ChoiceField(choices=WebhookFormat.choices, required=False)
    kinds = serializers.SerializerMethodField(help_text="Every kind of notification, with its label.")
    channels = serializers.SerializerMethodField(help_text="Every channel, with its label.")

    def get_kinds(self, prefs: object) -> dict[str, str]:
        return dict(NotificationKind.choices)

    def get_channels(self, prefs: object) -> dict[str, str]:
        return dict(NotificationChannel.choices)


class MarkedReadSerializer(serializers.Serializer):
    marked = serializers.IntegerField(help_text="How many notifications were unread and are read now.")


class TeamSettingsSerializer(serializers.Serializer):
    """A team's settings as its leads see them: never the Hugging Face token itself."""

    team = StrictCharField(source="slug")
    hf_token_set = serializers.SerializerMethodField(help_text="Whether the team has a Hugging Face token.")
    hf_token_ends_in = serializers.SerializerMethodField(help_text="Its last 4 characters, or null.")
    webhook_url = StrictCharField(
        help_text='Where the team\'s events are posted; "" for none. Read with a token of scope read or '
        "workloads: only its scheme and host, then /…."
    )
    webhook_format = serializers.ChoiceField(choices=WebhookFormat.choices)
    approval_reminder_hours = StrictIntegerField(
        help_text="Hours a request waits before its leads are reminded; 0: never."
    )
    idle_reclaim_minutes = StrictIntegerField(
        help_text="Minutes of idle GPUs before the owner is warned; 0: off."
    )
    idle_threshold_percent = StrictIntegerField(help_text="GPU utilization under this counts as idle.")
    idle_grace_minutes = StrictIntegerField(
        help_text="From the warning to the end (a sandbox) or to zero replicas."
    )

    def get_hf_token_set(self, team: Any) -> bool:
        return bool(team.hf_token)

    def get_hf_token_ends_in(self, team: Any) -> str | None:
        return team.hf_token[-4:] if team.hf_token else None


class TeamSettingsChangeSerializer(serializers.Serializer):
    """What a lead changes; what is left out stays."""

    hf_token = StrictCharField(
        required=False, allow_blank=True, max_length=200, write_only=True,
        help_text='A Hugging Face access token (hf_...) new model servers of the team get as HF_TOKEN; "" removes it.',
    )  # fmt: skip
    webhook_url = StrictCharField(
        required=False, allow_blank=True, max_length=500, help_text='https URL to post to; "" for none.'
    )
    webhook_format = serializers.ChoiceField(choices=WebhookFormat.choices, required=False)
    approval_reminder_hours = StrictIntegerField(required=False, min_value=0, max_value=720)
    idle_reclaim_minutes = StrictIntegerField(
        required=False, min_value=0, max_value=10080, help_text="0 (off) or 10 to 10080."
    )
    idle_threshold_percent = StrictIntegerField(required=False, min_value=1, max_value=100)
    idle_grace_minutes = StrictIntegerField(required=False, min_value=5, max_value=1440)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A key that is no setting (`token` for `hf_token`, say) is refused, not left unsaid."""
        unknown = sorted(set(getattr(self, "initial_data", {}) or {}) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {key: [f"Not a team setting; one of {', '.join(self.fields)}."] for key in unknown}
            )
        return attrs


class DeliveriesQuerySerializer(QuerySerializer):
    limit = StrictIntegerField(
        required=False, min_value=1, max_value=100, help_text="How many of each, 1-100 (default 20)."
    )


class DeliverySerializer(serializers.Serializer):
    """One message a worker sent, or is sending, and how it went."""

    kind = StrictCharField(help_text="The kind of notification it carries.")
    state = StrictCharField(help_text="pending, sent or failed")
    attempts = StrictIntegerField()
    last_error = StrictCharField(help_text='Why the last attempt failed; "" when none did.')
    created_at = serializers.DateTimeField()
    sent_at = serializers.DateTimeField(allow_null=True)
    sending = StrictBooleanField(help_text="A worker is sending it now.")
    retry_at = serializers.DateTimeField(
        allow_null=True, help_text="After a failed attempt: when it is tried again."
    )


class EmailDeliverySerializer(DeliverySerializer):
    address = StrictCharField()
    subject = StrictCharField()


class WebhookDeliverySerializer(DeliverySerializer):
    url = StrictCharField(
        help_text="Where it was posted (to a token of scope read or workloads: scheme and host)."
    )
    webhook_format = StrictCharField()


class MyDeliveriesSerializer(serializers.Serializer):
    emails = EmailDeliverySerializer(many=True, help_text="The latest e-mails to you, newest first.")
    webhooks = WebhookDeliverySerializer(
        many=True, help_text="The latest posts to your webhook, newest first."
    )


class TeamDeliveriesSerializer(serializers.Serializer):
    webhooks = WebhookDeliverySerializer(
        many=True, help_text="The latest posts to the team's webhook, newest first."
    )
