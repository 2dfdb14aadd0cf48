"""Accounts API views: who am I, personal access tokens, SSH keys and notifications."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.accounts.models import ApiToken, Notification, NotificationSettings, SshKey, Team, WebhookDelivery
from portal.accounts.notifications import (
    notification_settings_of,
    notification_settings_update,
    notifications_mark_read,
)
from portal.accounts.selectors import (
    email_deliveries_of,
    notifications_of,
    tokens_of,
    webhook_deliveries_of,
)
from portal.accounts.serializers import (
    DeliveriesQuerySerializer,
    EmailDeliverySerializer,
    MarkedReadSerializer,
    MyDeliveriesSerializer,
    NotificationPreferencesSerializer,
    NotificationSerializer,
    SshKeyCreateSerializer,
    SshKeySerializer,
    TeamDeliveriesSerializer,
    TeamSettingsChangeSerializer,
    TeamSettingsSerializer,
    TokenCreatedSerializer,
    TokenCreateSerializer,
    TokenSerializer,
    WebhookDeliverySerializer,
)
from portal.accounts.services import token_create, token_revoke
from portal.accounts.ssh_keys import ssh_key_add, ssh_key_remove, ssh_keys_of
from portal.accounts.team_settings import team_settings_of, team_settings_set
from portal.accounts.webhooks import webhook_url_masked
from portal.core.errors import ValidationFailed
from portal.core.parsers import JSONParser
from portal.core.serializers import PAGING, refuse_other_parameters, validated


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Documents `Authorization: Bearer <token>` in the OpenAPI schema."""

    target_class = "portal.accounts.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Bearer")  # noqa: S106


class TokenListView(generics.ListAPIView):
    """Your personal access tokens, newest first; secrets are never shown again."""

    queryset = ApiToken.objects.none()
    serializer_class = TokenSerializer

    def get_queryset(self) -> QuerySet[ApiToken]:
        return tokens_of(self.request.user)

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenCreatedSerializer})
    def post(self, request: Request) -> Response:
        """Create a token. The response holds its secret, this once."""
        body = TokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token, raw = token_create(
            user=request.user,
            name=body.validated_data["name"],
            expires_days=body.validated_data.get("expires_days"),
            scope=body.validated_data["scope"],
            team=body.validated_data.get("team", ""),
            via=request.auth if isinstance(request.auth, ApiToken) else None,
        )
        data = TokenCreatedSerializer(token, context={"raw": raw}).data
        return Response(data, status=status.HTTP_201_CREATED)


class TokenRevokeView(generics.GenericAPIView):
    """Revoke one of your tokens; requests with it get 401 from now on."""

    serializer_class = TokenSerializer

    @extend_schema(request=None, responses={200: TokenSerializer})
    def post(self, request: Request, pk: int) -> Response:
        token = token_revoke(user=request.user, token_id=pk)
        return Response(TokenSerializer(token).data)


class SshKeyListView(generics.ListAPIView):
    """Your SSH public keys, newest first: every shell sandbox of yours lets them in."""

    queryset = SshKey.objects.none()
    serializer_class = SshKeySerializer

    def get_queryset(self) -> QuerySet[SshKey]:
        return ssh_keys_of(self.request.user)

    @extend_schema(request=SshKeyCreateSerializer, responses={201: SshKeySerializer})
    def post(self, request: Request) -> Response:
        """Add a key; your running shell sandboxes take it within a minute or two."""
        body = SshKeyCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        key = ssh_key_add(
            user=request.user,
            name=body.validated_data.get("name", ""),
            public_key=body.validated_data["public_key"],
        )
        return Response(SshKeySerializer(key).data, status=status.HTTP_201_CREATED)


class SshKeyDetailView(generics.GenericAPIView):
    """One of your SSH keys."""

    serializer_class = SshKeySerializer

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        """Remove it: your shell sandboxes stop letting it in within a minute or two."""
        ssh_key_remove(user=request.user, key_id=pk)
        return Response(status=status.HTTP_204_NO_CONTENT)


class NotificationListView(generics.ListAPIView):
    """Your notifications, paginated: newest first, or `?order=unread` for unread ones first."""

    queryset = Notification.objects.none()
    serializer_class = NotificationSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "order", str, enum=["newest", "unread"], description="newest (default) or unread"
            )
        ]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Notification]:
        refuse_other_parameters(self.request.query_params, ("order", *PAGING))
        order = self.request.query_params.get("order", "newest")
        if order not in ("newest", "unread"):
            raise ValidationFailed("order: newest or unread.", fields={"order": ["newest or unread."]})
        return notifications_of(self.request.user, order=order)


class NotificationReadView(generics.GenericAPIView):
    """Mark one of your notifications read."""

    serializer_class = MarkedReadSerializer

    @extend_schema(request=None, responses={200: MarkedReadSerializer})
    def post(self, request: Request, pk: int) -> Response:
        return Response({"marked": notifications_mark_read(user=request.user, notification_id=pk)})


class NotificationReadAllView(generics.GenericAPIView):
    """Mark all your notifications read."""

    serializer_class = MarkedReadSerializer

    @extend_schema(request=None, responses={200: MarkedReadSerializer})
    def post(self, request: Request) -> Response:
        return Response({"marked": notifications_mark_read(user=request.user)})


def webhook_url_shown(request: Request, url: str) -> str:
    """A webhook's address in full to the signed-in page's session and to admin-scoped tokens;
    to other tokens its scheme and host, so a leaked read token does not hand out the channel."""
    token = request.auth if isinstance(request.auth, ApiToken) else None
    return url if token is None or token.scope == ApiToken.Scope.ADMIN else webhook_url_masked(url)


class NotificationPreferencesView(generics.GenericAPIView):
    """Your notification preferences: the kinds each channel leaves out, and your webhook."""

    serializer_class = NotificationPreferencesSerializer
    parser_classes = [JSONParser]  # `muted` is a mapping of lists, which a form cannot say

    def _data(self, prefs: NotificationSettings) -> dict[str, Any]:
        data = {
            "muted": prefs.muted or {},
            "webhook_url": webhook_url_shown(self.request, prefs.webhook_url),
            "webhook_format": prefs.webhook_format,
        }
        return NotificationPreferencesSerializer(data).data | {"muted": data["muted"]}

    def get(self, request: Request) -> Response:
        return Response(self._data(notification_settings_of(request.user)))

    def put(self, request: Request) -> Response:
        """Change what is given; what is left out stays as it was."""
        body = NotificationPreferencesSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        prefs = notification_settings_update(
            user=request.user,
            muted=body.validated_data.get("muted"),
            webhook_url=body.validated_data.get("webhook_url"),
            webhook_format=body.validated_data.get("webhook_format"),
        )
        return Response(self._data(prefs))


class TeamSettingsView(generics.GenericAPIView):
    """A team's settings, for its leads and platform admins: GET them; PATCH what changes (with a
    token, the admin scope: a webhook or a Hugging Face token set with a leaked token would
    outlive it)."""

    serializer_class = TeamSettingsSerializer
    parser_classes = [JSONParser]

    def _data(self, team: Team) -> dict[str, Any]:
        data = TeamSettingsSerializer(team).data
        return data | {"webhook_url": webhook_url_shown(self.request, data["webhook_url"])}

    def get(self, request: Request, slug: str) -> Response:
        refuse_other_parameters(request.query_params, ())
        return Response(self._data(team_settings_of(user=request.user, slug=slug)))

    @extend_schema(request=TeamSettingsChangeSerializer, responses={200: TeamSettingsSerializer})
    def patch(self, request: Request, slug: str) -> Response:
        team_settings_of(user=request.user, slug=slug)  # whose team it is, before what the body says
        change = validated(TeamSettingsChangeSerializer(data=request.data))
        team = team_settings_set(user=request.user, slug=slug, **change)
        return Response(self._data(team))


DELIVERIES_SHOWN = 20


def _deliveries_limit(request: Request) -> int:
    return validated(DeliveriesQuerySerializer(data=request.query_params)).get("limit", DELIVERIES_SHOWN)


def _webhook_posts(request: Request, deliveries: list[WebhookDelivery]) -> list[dict[str, Any]]:
    return [
        row | {"url": webhook_url_shown(request, row["url"])}
        for row in WebhookDeliverySerializer(deliveries, many=True).data
    ]


class MyDeliveriesView(generics.GenericAPIView):
    """The latest e-mails sent to you and posts to your webhook, with how each went, as the
    Notifications page lists them (`limit` of each, default 20)."""

    serializer_class = MyDeliveriesSerializer

    @extend_schema(parameters=[DeliveriesQuerySerializer])
    def get(self, request: Request) -> Response:
        limit = _deliveries_limit(request)
        return Response(
            {
                "emails": EmailDeliverySerializer(
                    email_deliveries_of(request.user, limit=limit), many=True
                ).data,
                "webhooks": _webhook_posts(request, webhook_deliveries_of(user=request.user, limit=limit)),
            }
        )


class TeamDeliveriesView(generics.GenericAPIView):
    """The latest posts to a team's webhook, with how each went, as its Team settings page lists
    them: for its leads and platform admins (`limit`, default 20)."""

    serializer_class = TeamDeliveriesSerializer

    @extend_schema(parameters=[DeliveriesQuerySerializer])
    def get(self, request: Request, slug: str) -> Response:
        team = team_settings_of(user=request.user, slug=slug)  # whose team it is, before the query
        limit = _deliveries_limit(request)
        return Response({"webhooks": _webhook_posts(request, webhook_deliveries_of(team=team, limit=limit))})
