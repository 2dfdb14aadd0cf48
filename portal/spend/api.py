"""Spend API view: metered spend grouped by user, team, GPU type, day or workload."""

from __future__ import annotations

from decimal import Decimal

from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response

from portal.spend.selectors import spend_grouped
from portal.spend.serializers import SpendQuerySerializer, SpendReportSerializer


class SpendView(generics.GenericAPIView):
    """Spend within [start, end): researchers see their own, leads their teams', admins all."""

    serializer_class = SpendReportSerializer

    @extend_schema(parameters=[SpendQuerySerializer], responses={200: SpendReportSerializer})
    def get(self, request: Request) -> Response:
        query = SpendQuerySerializer(data=request.query_params, context={"request": request})
        query.is_valid(raise_exception=True)
        params = query.validated_data
        rows = spend_grouped(
            user=request.user,
            group_by=params["group_by"],
            start=params["start"],
            end=params["end"],
            team=params.get("team"),
            limit=params["limit"],
        )
        report = {
            "group_by": params["group_by"],
            "start": params["start"],
            "end": params["end"],
            "team": params["team"].slug if params.get("team") else None,
            "currency": "USD",
            "total": sum((row.cost for row in rows), Decimal(0)),
            "gpu_hours": sum((row.gpu_hours for row in rows), Decimal(0)),
            "rows": rows,
        }
        return Response(SpendReportSerializer(report).data)
