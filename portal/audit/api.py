"""Audit API view: who did what, newest first (JSON pages, or every matching event as CSV)."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from portal.audit.exports import CSV_COLUMNS, audit_export
from portal.audit.filters import AuditEventFilter
from portal.audit.models import AuditEvent
from portal.audit.selectors import audit_events_visible_to, audit_shown_ids
from portal.audit.serializers import AuditEventSerializer
from portal.core.api import CsvDownloadMixin, CsvRenderer

FORMAT_PARAMETER = OpenApiParameter(
    "format",
    str,
    OpenApiParameter.QUERY,
    required=False,
    enum=["csv"],
    description="`csv`: every event the filters match (not one page) as a streamed download "
    "(`Content-Disposition: attachment`). `Accept: text/csv` asks for it too. Without it, JSON pages.",
)
CSV_DESCRIPTION = (
    "JSON pages of events, newest first. With `format=csv` (or `Accept: text/csv`) CSV: one header "
    f"line, `{','.join(CSV_COLUMNS)}`, then a line per event, newest first; times in UTC; cells "
    "that a spreadsheet would read as a formula start with `'`."
)


class AuditEventListView(CsvDownloadMixin, generics.ListAPIView):
    """Audit events: admins see all, leads their teams' (others an empty list)."""

    queryset = AuditEvent.objects.none()
    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilter
    renderer_classes = [*api_settings.DEFAULT_RENDERER_CLASSES, CsvRenderer]

    def get_queryset(self) -> QuerySet[AuditEvent]:
        return audit_events_visible_to(self.request.user)

    @extend_schema(
        parameters=[FORMAT_PARAMETER],
        responses={
            (200, "application/json"): OpenApiResponse(
                response=AuditEventSerializer, description=CSV_DESCRIPTION
            ),
            (200, "text/csv"): OpenApiResponse(response=OpenApiTypes.STR, description=CSV_DESCRIPTION),
        },
    )
    def get(self, request: Request, *args, **kwargs) -> Response:
        if request.accepted_renderer.format == "csv":
            self.paginator.check_parameters(request)
            events = self.filter_queryset(self.get_queryset())
            return audit_export(user=request.user, events=events)
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        context = {**self.get_serializer_context(), "shown_ids": audit_shown_ids(page)}
        return self.get_paginated_response(self.get_serializer(page, many=True, context=context).data)
