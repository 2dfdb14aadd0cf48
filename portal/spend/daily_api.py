"""Daily spend API: cost per UTC day split by user, GPU type or workload, GPU-hours and the running
total, and a team's budget and forecast for a month: the series the spend page's charts draw."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response

from portal.spend.daily import spend_daily
from portal.spend.daily_serializers import SpendDailyQuerySerializer, SpendDailySerializer


class SpendDailyView(generics.GenericAPIView):
    """Spend per day within [start, end): researchers see their own, leads their teams', admins all."""

    serializer_class = SpendDailySerializer

    @extend_schema(parameters=[SpendDailyQuerySerializer], responses={200: SpendDailySerializer})
    def get(self, request: Request) -> Response:
        query = SpendDailyQuerySerializer(data=request.query_params, context={"request": request})
        query.is_valid(raise_exception=True)
        params = query.validated_data
        series = spend_daily(
            user=request.user,
            split=params["split"],
            start=params["start"],
            end=params["end"],
            team=params.get("team"),
            top=params["top"],
        )
        return Response(SpendDailySerializer(series).data)
