from django.contrib import admin

from portal.audit.models import AuditEvent
from portal.core.admin import ReadOnlyAdmin


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "actor", "action", "object_type", "object_id", "from_state", "to_state")
    list_filter = ("action", "object_type", "team")
    search_fields = ("object_repr", "detail")
