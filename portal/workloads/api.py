"""API pieces every kind of workload shares (the list view, one workload with its queue place), and
/me."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.audit.models import AuditEvent
from portal.audit.words import action_words, detail_words
from portal.core.api import StrictFilterBackend, idempotent_create
from portal.core.errors import ValidationFailed
from portal.core.lists import PagedListView
from portal.core.serializers import refuse_other_parameters, validated
from portal.fleet.telemetry import workload_utilization
from portal.spend.workload_cost import workload_cost_series
from portal.workloads.filters import WorkloadFilter
from portal.workloads.models import Workload
from portal.workloads.queue_wait import estimated_waits
from portal.workloads.selectors import (
    queue_positions,
    user_standing,
    workload_audit_trail,
    workload_detail_for,
    workload_id_for,
)
from portal.workloads.serializers import ExtendSerializer, MeSerializer, WorkloadSerializer
from portal.workloads.services import (
    workload_extend,
    workload_extension_withdraw,
    workload_terminate,
    workload_withdraw,
)


def workload_response(
    request: Request,
    workload: Workload,
    serializer_class: type[WorkloadSerializer],
    *,
    status_code: int = status.HTTP_200_OK,
) -> Response:
    """One sandbox or deployment as the API shows it, with its place in the queue."""
    context = {
        "request": request,
        "queue_positions": queue_positions([workload]),
        "queue_waits": estimated_waits([workload]),
    }
    return Response(serializer_class(workload, context=context).data, status=status_code)


class ByNumber:
    """An API view of one sandbox or deployment, whose path names it by its number within its
    kind (`/api/v1/sandboxes/{id}`: sandbox 12 is `12`, whatever deployments there are). Once the
    caller is authenticated and allowed, the `pk` its handlers get is the workload's primary key,
    as the services take it; a number the caller may not see is a 404. A subclass names its `kind`."""

    kind: str

    def initial(self, request: Request, *args: object, **kwargs: object) -> None:
        super().initial(request, *args, **kwargs)
        # The handler is called with self.kwargs (DRF passes that very dict on).
        if "pk" in self.kwargs:
            self.kwargs["pk"] = workload_id_for(user=request.user, kind=self.kind, number=self.kwargs["pk"])


class WorkloadApi(ByNumber, generics.GenericAPIView):
    """What a kind's API views share: a subclass names its `kind` and `serializer_class`, and
    answers with one workload as the API shows it through `shown`."""

    kind: str

    def get_workload(self, request: Request, pk: int) -> Workload:
        """One workload of the kind that the caller may see, with what it shows; else NotFound."""
        return workload_detail_for(user=request.user, workload_id=pk, kind=self.kind)

    def shown(self, request: Request, pk: int, *, status_code: int = status.HTTP_200_OK) -> Response:
        return workload_response(
            request, self.get_workload(request, pk), self.serializer_class, status_code=status_code
        )

    def created(self, request: Request, *, scope: str, create: Callable[[], Workload]) -> Response:
        """Run `create` once per Idempotency-Key and answer 201 with what it made."""
        return idempotent_create(
            request, scope, lambda: self.shown(request, create().pk, status_code=status.HTTP_201_CREATED)
        )


class WorkloadDetailView(WorkloadApi):
    def get(self, request: Request, pk: int) -> Response:
        return self.shown(request, pk)


class WorkloadExtendView(WorkloadApi):
    def post(self, request: Request, pk: int) -> Response:
        hours = validated(ExtendSerializer(data=request.data))["hours"]
        workload_extend(user=request.user, workload_id=pk, hours=hours, kind=self.kind)
        return self.shown(request, pk)


class WorkloadTerminateView(WorkloadApi):
    def post(self, request: Request, pk: int) -> Response:
        workload_terminate(user=request.user, workload_id=pk, kind=self.kind)
        return self.shown(request, pk)


class WorkloadWithdrawView(WorkloadApi):
    def post(self, request: Request, pk: int) -> Response:
        workload_withdraw(user=request.user, workload_id=pk, kind=self.kind)
        return self.shown(request, pk)


class WorkloadExtensionWithdrawView(WorkloadApi):
    def post(self, request: Request, pk: int) -> Response:
        workload_extension_withdraw(user=request.user, workload_id=pk, kind=self.kind)
        return self.shown(request, pk)


class WorkloadListView(WorkloadApi, generics.ListAPIView):
    """A filtered page of sandboxes or deployments; their queue places cost one query per page.
    A subclass names its `kind`, `serializer_class` and `get_queryset`."""

    queryset = Workload.objects.none()
    filter_backends = [StrictFilterBackend]
    filterset_class = WorkloadFilter

    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        context = {
            "request": request,
            "queue_positions": queue_positions(page),
            "queue_waits": estimated_waits(page),
        }
        serializer = self.get_serializer_class()(page, many=True, context=context)
        return self.get_paginated_response(serializer.data)


class MeView(generics.GenericAPIView):
    """The signed-in user, their teams with the role in each, quota and budget left."""

    serializer_class = MeSerializer

    def get(self, request: Request) -> Response:
        context = {"standings": user_standing(request.user)}
        return Response(MeSerializer(request.user, context=context).data)


class UtilizationPointSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    utilization = serializers.FloatField(
        allow_null=True, help_text="Mean percent; null where no reading had one."
    )
    memory_used_mb = serializers.IntegerField()
    memory_total_mb = serializers.IntegerField()


def parse_when(raw: str | None, name: str) -> datetime | None:
    """A series' `from` or `to`: an ISO 8601 time (UTC when it names no zone), or None."""
    if not raw:
        return None
    moment = parse_datetime(raw)
    if moment is None:
        raise ValidationFailed(f"`{name}` is an ISO 8601 time.", fields={name: ["an ISO 8601 time"]})
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_step(raw: str | None) -> int:
    """A series' `step` in seconds (60 by default); which steps a series offers is its own rule."""
    try:
        return int(raw or 60)
    except ValueError:
        raise ValidationFailed("`step` is 60 or 3600 seconds.", fields={"step": ["60 or 3600"]}) from None


class WorkloadUtilizationView(WorkloadApi):
    """GPU utilization and memory of the devices a sandbox or deployment held, per minute or hour,
    as the node agents reported them. A subclass names its `kind`."""

    queryset = Workload.objects.none()  # for the schema's path parameter

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "from", OpenApiTypes.DATETIME, description="From (ISO 8601); a day before `to` by default."
            ),
            OpenApiParameter("to", OpenApiTypes.DATETIME, description="To (ISO 8601); now by default."),
            OpenApiParameter("step", OpenApiTypes.INT, enum=[60, 3600], description="Seconds per point."),
        ],
        responses={200: UtilizationPointSerializer(many=True)},
    )
    def get(self, request: Request, pk: int) -> Response:
        refuse_other_parameters(request.query_params, ("from", "to", "step"))
        workload = self.get_workload(request, pk)
        end = parse_when(request.query_params.get("to"), "to") or timezone.now()
        start = parse_when(request.query_params.get("from"), "from") or end - timedelta(days=1)
        step = parse_step(request.query_params.get("step"))
        points = workload_utilization(workload=workload, start=start, end=end, step=step)
        return Response(UtilizationPointSerializer(points, many=True).data)


class CostPointSerializer(serializers.Serializer):
    at = serializers.DateTimeField(help_text="The interval's start.")
    cost = serializers.DecimalField(max_digits=14, decimal_places=2, help_text="Within the interval (USD).")
    total = serializers.DecimalField(
        max_digits=14, decimal_places=2, help_text="Since it began, to the interval's end."
    )


class WorkloadCostView(WorkloadApi):
    """What a sandbox or deployment has cost, per hour or day of its life, and in total so far.
    A subclass names its `kind`."""

    queryset = Workload.objects.none()  # for the schema's path parameter

    @extend_schema(
        parameters=[
            OpenApiParameter("step", OpenApiTypes.INT, enum=[3600, 86400], description="Seconds per point.")
        ],
        responses={200: CostPointSerializer(many=True)},
    )
    def get(self, request: Request, pk: int) -> Response:
        refuse_other_parameters(request.query_params, ("step",))
        workload = self.get_workload(request, pk)
        raw = request.query_params.get("step") or "3600"
        if not raw.isdigit():
            raise ValidationFailed(
                "`step` is 3600 (hours) or 86400 (days).", fields={"step": ["3600 or 86400"]}
            )
        points = workload_cost_series(workload=workload, step=int(raw))
        return Response(CostPointSerializer(points, many=True).data)


class HistoryEventSerializer(serializers.Serializer):
    """One event of a workload's life or of its approvals, as its page's audit trail shows it."""

    at = serializers.DateTimeField(source="created_at")
    actor = serializers.CharField(
        source="actor.username", allow_null=True, default=None, help_text="null: the portal."
    )
    action = serializers.CharField(help_text="The audit action code, as /api/v1/audit-events names it.")
    words = serializers.SerializerMethodField(help_text="The action in words, as the page says it.")
    from_state = serializers.CharField()
    to_state = serializers.CharField()
    detail = serializers.SerializerMethodField()

    def get_words(self, event: AuditEvent) -> str:
        return action_words(event.action)

    def get_detail(self, event: AuditEvent) -> str:
        return detail_words(event.detail)


class WorkloadHistoryView(WorkloadApi, PagedListView):
    """A sandbox's or deployment's audit trail, oldest first: its request, decisions, placement,
    starts, extensions, scales, health and end, for whoever may see it (its owner included). A
    subclass names its `kind`."""

    queryset = Workload.objects.none()  # for the schema's path parameter
    serializer_class = HistoryEventSerializer

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return HistoryEventSerializer  # not the kind's (the subclass names its kind first)

    def get_queryset(self) -> QuerySet[AuditEvent]:
        return workload_audit_trail(self.get_workload(self.request, self.kwargs["pk"]))
