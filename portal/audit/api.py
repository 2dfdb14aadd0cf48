"""Audit API view: who did what, newest first."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import generics

from portal.audit.filters import AuditEventFilter
from portal.audit.models import AuditEvent
from portal.audit.selectors import audit_events_visible_to
from portal.audit.serializers import AuditEventSerializer


class AuditEventListView(generics.ListAPIView):
    """Audit events: admins see all, leads their teams' (others an empty list)."""

    queryset = AuditEvent.objects.none()
    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilter

    def get_queryset(self) -> QuerySet[AuditEvent]:
        return audit_events_visible_to(self.request.user)
