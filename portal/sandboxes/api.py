"""Sandbox API views: parse, call one service or selector, return. The list view and the detail
response serve the deployment API too."""

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
    WorkloadSerializer,
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


def workload_response(
    request: Request,
    workload: Sandbox,
    serializer_class: type[WorkloadSerializer],
    *,
    status_code: int = status.HTTP_200_OK,
) -> Response:
    """One sandbox or deployment as the API shows it, with its place in the queue."""
    context = {"request": request, "queue_positions": queue_positions([workload])}
    return Response(serializer_class(workload, context=context).data, status=status_code)


def _detail(request: Request, sandbox_id: int, *, status_code: int = status.HTTP_200_OK) -> Response:
    sandbox = sandbox_detail_for(user=request.user, sandbox_id=sandbox_id)
    return workload_response(request, sandbox, SandboxSerializer, status_code=status_code)


class WorkloadListView(generics.ListAPIView):
    """A filtered page of sandboxes or deployments; their queue places cost one query per page.
    A subclass names its `serializer_class` and `get_queryset`."""

    queryset = Sandbox.objects.none()
    filter_backends = [DjangoFilterBackend]
    filterset_class = SandboxFilter

    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        context = {"request": request, "queue_positions": queue_positions(page)}
        serializer = self.get_serializer_class()(page, many=True, context=context)
        return self.get_paginated_response(serializer.data)


class SandboxListView(WorkloadListView):
    """Sandboxes you may see (researcher: own; lead: the team's; admin: all), newest first."""

    serializer_class = SandboxSerializer

    def get_queryset(self) -> QuerySet[Sandbox]:
        return sandboxes_with_details(sandboxes_visible_to(self.request.user))

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
