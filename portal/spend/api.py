"""Spend API views: metered spend grouped by user, team, GPU type, day or workload (as JSON, or
downloaded as CSV or JSON), and a team's monthly statement."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from portal.core.api import CsvDownloadMixin, CsvRenderer
from portal.core.serializers import refuse_other_parameters
from portal.spend.exports import CSV_COLUMNS, FORMATS, spend_export, spend_report
from portal.spend.serializers import SpendQuerySerializer, SpendReportSerializer, TeamStatementSerializer
from portal.spend.statement import team_statement

FORMAT_PARAMETER = OpenApiParameter(
    "format",
    str,
    OpenApiParameter.QUERY,
    required=False,
    enum=list(FORMATS),
    description="`csv` or `json`: the same view as a streamed download (`Content-Disposition: "
    "attachment`, a file name naming the team, range and grouping). `Accept: text/csv` asks for CSV "
    "too. Without it, the JSON report.",
)
CSV_DESCRIPTION = (
    "The JSON report; with `format=json` the same document as a download. With `format=csv` (or "
    f"`Accept: text/csv`) CSV: one header line, `{','.join(CSV_COLUMNS)}`, then a line per row, largest "
    "first (days in order): decimal strings in USD to the cent, `cost` including `idle_cost`, and no "
    "total line (the rows add up to the JSON report's `total`)."
)
JSON_RESPONSE = OpenApiResponse(response=SpendReportSerializer, description=CSV_DESCRIPTION)
CSV_RESPONSE = OpenApiResponse(response=OpenApiTypes.STR, description=CSV_DESCRIPTION)


class SpendView(CsvDownloadMixin, generics.GenericAPIView):
    """Spend within [start, end): researchers see their own, leads their teams', admins all."""

    format_hint = f"One of {', '.join(FORMATS)}, or leave it out for the JSON report."
    serializer_class = SpendReportSerializer
    renderer_classes = [*api_settings.DEFAULT_RENDERER_CLASSES, CsvRenderer]

    @extend_schema(
        parameters=[SpendQuerySerializer, FORMAT_PARAMETER],
        responses={(200, "application/json"): JSON_RESPONSE, (200, "text/csv"): CSV_RESPONSE},
    )
    def get(self, request: Request):
        query = SpendQuerySerializer(data=request.query_params, context={"request": request})
        query.is_valid(raise_exception=True)
        params = query.validated_data
        arguments = {
            "user": request.user,
            "group_by": params["group_by"],
            "start": params["start"],
            "end": params["end"],
            "team": params.get("team"),
            "limit": params["limit"],
        }
        if request.accepted_renderer.format == "csv":
            return spend_export(fmt="csv", **arguments)
        if request.query_params.get("format") == "json":
            return spend_export(fmt="json", **arguments)
        return Response(SpendReportSerializer(spend_report(**arguments)).data)


class TeamStatementView(generics.GenericAPIView):
    """A team's monthly statement (UTC): leads and admins the whole team, members their own part."""

    serializer_class = TeamStatementSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "month",
                str,
                OpenApiParameter.QUERY,
                required=True,
                description="YYYY-MM (UTC); this month or an earlier one.",
            )
        ],
        responses={200: TeamStatementSerializer},
    )
    def get(self, request: Request, slug: str) -> Response:
        refuse_other_parameters(request.query_params, ("month",))
        statement = team_statement(user=request.user, slug=slug, month=request.query_params.get("month", ""))
        return Response(TeamStatementSerializer(statement).data)
