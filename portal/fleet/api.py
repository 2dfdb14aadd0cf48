"""Fleet API views: the GPU type catalogue for everyone, every GPU for admins."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.serializers import validated
from portal.fleet.models import Gpu
from portal.fleet.selectors import fleet_gpus, gpu_type_catalog
from portal.fleet.serializers import (
    FleetGpuSerializer,
    GpuTypeSerializer,
    TelemetryBatchSerializer,
    TelemetryRecordedSerializer,
)
from portal.fleet.telemetry import telemetry_record


class IsPlatformAdmin(permissions.BasePermission):
    message = "Only platform admins may see the fleet."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(request.user and request.user.is_authenticated and request.user.is_platform_admin)


class GpuTypeListView(generics.ListAPIView):
    """GPU models: MIG profiles, price per GPU-hour and free capacity now."""

    serializer_class = GpuTypeSerializer
    filter_backends: list = []
    # api.md: "anyone" — what the fleet offers and costs is no secret inside the firm.
    permission_classes = [permissions.AllowAny]

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(gpu_type_catalog())
        return self.get_paginated_response(GpuTypeSerializer(page, many=True).data)


class FleetGpuListView(generics.ListAPIView):
    """Every GPU with its MIG layout and who holds what (platform admins only)."""

    queryset = Gpu.objects.none()
    serializer_class = FleetGpuSerializer
    permission_classes = [permissions.IsAuthenticated, IsPlatformAdmin]

    def get_queryset(self) -> QuerySet[Gpu]:
        return fleet_gpus()


class ReportsTelemetry(permissions.BasePermission):
    message = "Only a node agent's credential (permission fleet.report_telemetry) may report telemetry."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(
            request.user and request.user.is_authenticated and request.user.has_perm("fleet.report_telemetry")
        )


class TelemetryReadingsView(generics.GenericAPIView):
    """Where node agents post their readings: folded into per-minute rows and GPU health."""

    permission_classes = [ReportsTelemetry]
    serializer_class = TelemetryBatchSerializer

    @extend_schema(request=TelemetryBatchSerializer, responses={202: TelemetryRecordedSerializer})
    def post(self, request: Request) -> Response:
        batch = validated(TelemetryBatchSerializer(data=request.data))
        recorded = telemetry_record(readings=batch["readings"], dropped=batch.get("dropped", 0))
        return Response(TelemetryRecordedSerializer(recorded).data, status=202)
