from django.urls import path

from portal.audit import api

urlpatterns = [path("audit-events", api.AuditEventListView.as_view(), name="api-audit-events")]
