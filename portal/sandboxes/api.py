"""Sandbox API views: parse, call one service or selector, return."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.api import IDEMPOTENCY_KEY, idempotent_create
from portal.sandboxes.serializers import (
    EstimateSerializer,
    SandboxRequestSerializer,
    SandboxSerializer,
    validated,
)
from portal.sandboxes.services import sandbox_estimate, sandbox_request
from portal.workloads.api import WorkloadListView, workload_response
from portal.workloads.models import Workload, WorkloadKind
from portal.workloads.selectors import (
    workload_detail_for,
    workloads_visible_to,
    workloads_with_details,
)
from portal.workloads.serializers import ExtendSerializer
from portal.workloads.services import workload_extend, workload_terminate


def _detail(request: Request, workload_id: int, *, status_code: int = status.HTTP_200_OK) -> Response:
    sandbox = workload_detail_for(user=request.user, workload_id=workload_id, kind=WorkloadKind.SANDBOX)
    return workload_response(request, sandbox, SandboxSerializer, status_code=status_code)


class SandboxListView(WorkloadListView):
    """Sandboxes you may see (researcher: own; lead: the team's; admin: all), newest first."""

    serializer_class = SandboxSerializer

    def get_queryset(self) -> QuerySet[Workload]:
        return workloads_with_details(workloads_visible_to(self.request.user, kind=WorkloadKind.SANDBOX))

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
        workload_extend(user=request.user, workload_id=pk, hours=hours, kind=WorkloadKind.SANDBOX)
        return _detail(request, pk)


class SandboxTerminateView(generics.GenericAPIView):
    """End a sandbox now; billing stops at once."""

    serializer_class = SandboxSerializer

    @extend_schema(
        request=None,
        responses={200: SandboxSerializer, 409: OpenApiResponse(description="The sandbox has ended.")},
    )
    def post(self, request: Request, pk: int) -> Response:
        workload_terminate(user=request.user, workload_id=pk, kind=WorkloadKind.SANDBOX)
        return _detail(request, pk)
