"""Deployment API views: parse, call one service or selector, return."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.api import IDEMPOTENCY_KEY, idempotent_create
from portal.core.serializers import validated
from portal.deployments.selectors import deployment_get_for, deployments_visible_to, deployments_with_details
from portal.deployments.serializers import DeploymentRequestSerializer, DeploymentSerializer, ScaleSerializer
from portal.deployments.services import deployment_request, deployment_scale
from portal.workloads.api import WorkloadListView, workload_response
from portal.workloads.models import Workload, WorkloadKind
from portal.workloads.serializers import ExtendSerializer
from portal.workloads.services import workload_extend, workload_terminate

ENDED = OpenApiResponse(description="The deployment has ended (or, for scale, is not placed yet).")


def _detail(request: Request, deployment_id: int, *, status_code: int = status.HTTP_200_OK) -> Response:
    workload = deployment_get_for(user=request.user, deployment_id=deployment_id)
    return workload_response(request, workload, DeploymentSerializer, status_code=status_code)


class DeploymentListView(WorkloadListView):
    """Deployments you may see (researcher: own; lead: the team's; admin: all), newest first."""

    serializer_class = DeploymentSerializer

    def get_queryset(self) -> QuerySet[Workload]:
        return deployments_with_details(deployments_visible_to(self.request.user))

    @extend_schema(
        request=DeploymentRequestSerializer,
        responses={201: DeploymentSerializer},
        parameters=[IDEMPOTENCY_KEY],
        description="Deploy a catalog model: sized for the dtype, context and concurrency asked, on the "
        "GPU asked or the cheapest that holds it; approved and placed at once within the team's policy, "
        "otherwise `pending_approval` until a lead decides.",
    )
    def post(self, request: Request) -> Response:
        def create() -> Response:
            fields = DeploymentRequestSerializer(data=request.data).service_kwargs()
            workload = deployment_request(user=request.user, **fields)
            return _detail(request, workload.pk, status_code=status.HTTP_201_CREATED)

        return idempotent_create(request, "deployments.create", create)


class DeploymentDetailView(generics.GenericAPIView):
    """One deployment (404 when it is not one you may see)."""

    serializer_class = DeploymentSerializer

    def get(self, request: Request, pk: int) -> Response:
        return _detail(request, pk)


class DeploymentScaleView(generics.GenericAPIView):
    """Change the number of replicas. Down applies at once; up within the team's policy too,
    otherwise a lead decides (the deployment's `approval` is then the pending scale request)."""

    serializer_class = DeploymentSerializer

    @extend_schema(request=ScaleSerializer, responses={200: DeploymentSerializer, 409: ENDED})
    def post(self, request: Request, pk: int) -> Response:
        replicas = validated(ScaleSerializer(data=request.data))["replicas"]
        deployment_scale(user=request.user, deployment_id=pk, replicas=replicas)
        return _detail(request, pk)


class DeploymentExtendView(generics.GenericAPIView):
    """Move the expiry by `hours`: at once within policy, otherwise through a lead's approval."""

    serializer_class = DeploymentSerializer

    @extend_schema(request=ExtendSerializer, responses={200: DeploymentSerializer, 409: ENDED})
    def post(self, request: Request, pk: int) -> Response:
        hours = validated(ExtendSerializer(data=request.data))["hours"]
        workload_extend(user=request.user, workload_id=pk, hours=hours, kind=WorkloadKind.DEPLOYMENT)
        return _detail(request, pk)


class DeploymentTerminateView(generics.GenericAPIView):
    """End a deployment now: billing stops at once, the endpoint goes away."""

    serializer_class = DeploymentSerializer

    @extend_schema(request=None, responses={200: DeploymentSerializer, 409: ENDED})
    def post(self, request: Request, pk: int) -> Response:
        workload_terminate(user=request.user, workload_id=pk, kind=WorkloadKind.DEPLOYMENT)
        return _detail(request, pk)
