"""Accounts API views: who am I, and personal access tokens."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.accounts.models import ApiToken
from portal.accounts.selectors import tokens_of
from portal.accounts.serializers import (
    TokenCreatedSerializer,
    TokenCreateSerializer,
    TokenSerializer,
)
from portal.accounts.services import token_create, token_revoke


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
