"""Deployment API views: parse, call one service or selector, return."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.api import IDEMPOTENCY_KEY
from portal.core.serializers import refuse_other_parameters, validated
from portal.deployments.idle import deployment_scale_back
from portal.deployments.selectors import deployment_get_for, deployments_visible_to, deployments_with_details
from portal.deployments.serializers import (
    DeploymentRequestSerializer,
    DeploymentSerializer,
    ScaleSerializer,
    ServingSerializer,
)
from portal.deployments.services import deployment_request, deployment_request_body, deployment_scale
from portal.deployments.serving_stats import deployment_serving_now, deployment_serving_series, not_reported
from portal.workloads.api import (
    ByNumber,
    WorkloadApi,
    WorkloadCostView,
    WorkloadDetailView,
    WorkloadExtendView,
    WorkloadExtensionWithdrawView,
    WorkloadHistoryView,
    WorkloadListView,
    WorkloadTerminateView,
    WorkloadUtilizationView,
    WorkloadWithdrawView,
    parse_step,
    parse_when,
)
from portal.workloads.models import Workload, WorkloadKind
from portal.workloads.serializers import ExtendSerializer
from portal.workloads.services import workload_keep, workload_scale_withdraw

NOT_A_REQUEST = OpenApiResponse(description="It is not a request waiting to start.")
NO_EXTENSION = OpenApiResponse(description="No extension waits for a lead.")
NO_SCALE = OpenApiResponse(description="No scale waits for a lead.")
ENDED = OpenApiResponse(description="The deployment has ended (or, for scale, is not placed yet).")


class _Deployment:
    kind = WorkloadKind.DEPLOYMENT
    serializer_class = DeploymentSerializer

    def get_workload(self, request: Request, pk: int) -> Workload:
        return deployment_get_for(user=request.user, deployment_id=pk)


class DeploymentRequestBodyView(ByNumber, generics.GenericAPIView):
    """Request again: this deployment's settings (any state) as a body `POST /api/v1/deployments`
    accepts, named `<name>-2`; change what you like and post it."""

    kind = WorkloadKind.DEPLOYMENT
    serializer_class = DeploymentRequestSerializer

    @extend_schema(responses={200: DeploymentRequestSerializer})
    def get(self, request: Request, pk: int) -> Response:
        return Response(deployment_request_body(user=request.user, deployment_id=pk))


class DeploymentListView(_Deployment, WorkloadListView):
    """Deployments you may see (researcher: own; lead: the team's; admin: all), newest first."""

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
        def create() -> Workload:
            fields = DeploymentRequestSerializer(data=request.data).service_kwargs()
            return deployment_request(user=request.user, **fields)

        return self.created(request, scope="deployments.create", create=create)


class DeploymentDetailView(_Deployment, WorkloadDetailView):
    """One deployment (404 when it is not one you may see)."""


class DeploymentScaleView(_Deployment, WorkloadApi):
    """Change the number of replicas. Down applies at once; up within the team's policy too,
    otherwise a lead decides (the deployment's `approval` is then the pending scale request)."""

    @extend_schema(request=ScaleSerializer, responses={200: DeploymentSerializer, 409: ENDED})
    def post(self, request: Request, pk: int) -> Response:
        replicas = validated(ScaleSerializer(data=request.data))["replicas"]
        deployment_scale(user=request.user, deployment_id=pk, replicas=replicas)
        return self.shown(request, pk)


@extend_schema_view(post=extend_schema(request=None, responses={200: DeploymentSerializer, 409: NO_SCALE}))
class DeploymentScaleWithdrawView(_Deployment, WorkloadApi):
    """Withdraw the scale that waits for a lead (the deployment's `approval`); its approval is
    closed and the replicas stay as they are. Scaling at once while one waits (down, up within
    policy, or to the replicas it has) withdraws it too, as idle reclaim scaling it to zero does."""

    def post(self, request: Request, pk: int) -> Response:
        workload_scale_withdraw(user=request.user, workload_id=pk)
        return self.shown(request, pk)


@extend_schema_view(post=extend_schema(request=None, responses={200: DeploymentSerializer, 409: ENDED}))
class DeploymentKeepView(_Deployment, WorkloadApi):
    """Keep a deployment warned for idleness: the warning goes and the idle clock starts again."""

    def post(self, request: Request, pk: int) -> Response:
        workload_keep(user=request.user, workload_id=pk, kind=WorkloadKind.DEPLOYMENT)
        return self.shown(request, pk)


@extend_schema_view(post=extend_schema(request=None, responses={200: DeploymentSerializer, 409: ENDED}))
class DeploymentScaleBackView(_Deployment, WorkloadApi):
    """Scale a deployment that idle reclaim scaled to zero back to the replicas it had (`idle_parked_replicas`),
    with the quota and approval checks of any scale-up."""

    def post(self, request: Request, pk: int) -> Response:
        deployment_scale_back(user=request.user, deployment_id=pk)
        return self.shown(request, pk)


@extend_schema_view(
    post=extend_schema(request=ExtendSerializer, responses={200: DeploymentSerializer, 409: ENDED})
)
class DeploymentExtendView(_Deployment, WorkloadExtendView):
    """Move the expiry by `hours`: at once within policy, otherwise through a lead's approval."""


@extend_schema_view(post=extend_schema(request=None, responses={200: DeploymentSerializer, 409: ENDED}))
class DeploymentTerminateView(_Deployment, WorkloadTerminateView):
    """End a deployment now: billing stops at once, the endpoint goes away."""


@extend_schema_view(
    post=extend_schema(request=None, responses={200: DeploymentSerializer, 409: NOT_A_REQUEST})
)
class DeploymentWithdrawView(_Deployment, WorkloadWithdrawView):
    """Withdraw a request that waits for approval or in the queue: it ends at once (as
    `terminated`); nothing was billed, its quota is free again and its approval is closed.
    409 once it is placed (terminate it instead) or ended."""


@extend_schema_view(
    post=extend_schema(request=None, responses={200: DeploymentSerializer, 409: NO_EXTENSION})
)
class DeploymentExtensionWithdrawView(_Deployment, WorkloadExtensionWithdrawView):
    """Withdraw the extension that waits for a lead; its approval is closed, the expiry stays."""


class DeploymentCostView(_Deployment, WorkloadCostView):
    """What the deployment (all its replicas) has cost, per hour (`step=3600`) or day (`step=86400`)."""


class DeploymentUtilizationView(_Deployment, WorkloadUtilizationView):
    """GPU utilization and memory of the devices the deployment's replicas held, per minute or
    hour, as the node agents reported them."""


class DeploymentServingView(_Deployment, WorkloadApi):
    """What the deployment's runtime served, from its metrics read every minute: generated tokens
    and requests per second, mean time to first token and latency, and the cost of a million
    generated tokens, over the last read and the last hour, and per minute or hour within [from, to)."""

    queryset = Workload.objects.none()  # for the schema's path parameter

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "from", OpenApiTypes.DATETIME, description="From (ISO 8601); a day before `to` by default."
            ),
            OpenApiParameter("to", OpenApiTypes.DATETIME, description="To (ISO 8601); now by default."),
            OpenApiParameter("step", OpenApiTypes.INT, enum=[60, 3600], description="Seconds per point."),
        ],
        responses={200: ServingSerializer},
    )
    def get(self, request: Request, pk: int) -> Response:
        refuse_other_parameters(request.query_params, ("from", "to", "step"))
        workload = self.get_workload(request, pk)
        now = timezone.now()
        end = parse_when(request.query_params.get("to"), "to") or now
        start = parse_when(request.query_params.get("from"), "from") or end - timedelta(days=1)
        step = parse_step(request.query_params.get("step"))
        points = deployment_serving_series(workload=workload, start=start, end=end, step=step)
        serving_now = deployment_serving_now(workload, now=now)
        serving = workload.serving
        body = {
            "runtime": serving.runtime.slug,
            "not_reported": not_reported(serving_now),
            "read_error": serving.metrics_error,
            "last_minute": serving_now.last_minute,
            "last_hour": serving_now.last_hour,
            "points": points,
        }
        return Response(ServingSerializer(body).data)


class DeploymentHistoryView(_Deployment, WorkloadHistoryView):
    pass
