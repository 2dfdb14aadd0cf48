"""Sandbox API views: parse, call one service or selector, return."""

from __future__ import annotations

from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.api import idempotent_create
from portal.sandboxes.api_selectors import sandbox_detail_for
from portal.sandboxes.filters import SandboxFilter
from portal.sandboxes.models import Sandbox
from portal.sandboxes.selectors import queue_positions, sandboxes_visible_to, sandboxes_with_details
from portal.sandboxes.serializers import (
    EstimateSerializer,
    ExtendSerializer,
    SandboxRequestSerializer,
    SandboxSerializer,
    validated,
)
from portal.sandboxes.services import sandbox_estimate, sandbox_extend, sandbox_request, sandbox_terminate

IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Retry-safe create: the same key and body return the first result.",
)


def _detail(request: Request, sandbox_id: int, *, status_code: int = status.HTTP_200_OK) -> Response:
    sandbox = sandbox_detail_for(user=request.user, sandbox_id=sandbox_id)
    context = {"request": request, "queue_positions": queue_positions([sandbox])}
    return Response(SandboxSerializer(sandbox, context=context).data, status=status_code)


class SandboxListView(generics.ListAPIView):
    """Sandboxes you may see (researcher: own; lead: the team's; admin: all), newest first."""

    queryset = Sandbox.objects.none()
    serializer_class = SandboxSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = SandboxFilter

    def get_queryset(self) -> QuerySet[Sandbox]:
        return sandboxes_with_details(sandboxes_visible_to(self.request.user))

    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        context = {"request": request, "queue_positions": queue_positions(page)}
        return self.get_paginated_response(SandboxSerializer(page, many=True, context=context).data)

    @extend_schema(
        request=SandboxRequestSerializer,
        responses={201: SandboxSerializer},
        parameters=[IDEMPOTENCY_KEY],
        description="Request a sandbox: approved and placed at once within the team's policy, "
        "otherwise `pending_approval` until a lead decides.",
    )
    def post(self, request: Request) -> Response:
        def create() -> Response:
            fields = SandboxRequestSerializer(data=request.data).service_kwargs()
            sandbox = sandbox_request(user=request.user, **fields)
            return _detail(request, sandbox.pk, status_code=status.HTTP_201_CREATED)

        return idempotent_create(request, "sandboxes.create", create)


class SandboxEstimateView(generics.GenericAPIView):
    """What a request would cost and whether it would be approved and placed at once."""

    serializer_class = EstimateSerializer

    @extend_schema(request=SandboxRequestSerializer, responses={200: EstimateSerializer})
    def post(self, request: Request) -> Response:
        fields = SandboxRequestSerializer(data=request.data).service_kwargs()
        estimate = sandbox_estimate(user=request.user, **fields)
        return Response(EstimateSerializer(estimate).data)


class SandboxDetailView(generics.GenericAPIView):
    """One sandbox (404 when it is not one you may see)."""

    serializer_class = SandboxSerializer

    def get(self, request: Request, pk: int) -> Response:
        return _detail(request, pk)


class SandboxExtendView(generics.GenericAPIView):
    """Move the expiry by `hours`: at once within policy, otherwise through a lead's approval
    (the sandbox's `approval` is then the pending extension)."""

    serializer_class = SandboxSerializer

    @extend_schema(
        request=ExtendSerializer,
        responses={200: SandboxSerializer, 409: OpenApiResponse(description="The sandbox has ended.")},
    )
    def post(self, request: Request, pk: int) -> Response:
        hours = validated(ExtendSerializer(data=request.data))["hours"]
        sandbox_extend(user=request.user, sandbox_id=pk, hours=hours)
        return _detail(request, pk)


class SandboxTerminateView(generics.GenericAPIView):
    """End a sandbox now; billing stops at once."""

    serializer_class = SandboxSerializer

    @extend_schema(
        request=None,
        responses={200: SandboxSerializer, 409: OpenApiResponse(description="The sandbox has ended.")},
    )
    def post(self, request: Request, pk: int) -> Response:
        sandbox_terminate(user=request.user, sandbox_id=pk)
        return _detail(request, pk)
