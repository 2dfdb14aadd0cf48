from django.contrib import admin

from portal.approvals.models import Approval


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    list_display = ("sandbox", "team", "kind", "state", "requested_by", "decided_by", "created_at")
    list_filter = ("state", "kind", "team")
    readonly_fields = [f.name for f in Approval._meta.fields]

    def has_add_permission(self, request):
        return False
