from django.contrib import admin

from portal.workloads.models import Approval, Image, Workload


@admin.register(Image)
class ImageAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "container_image", "kind")


@admin.register(Workload)
class WorkloadAdmin(admin.ModelAdmin):
    """States change through the portal's services only, so the lifecycle fields are read-only."""

    list_display = ("name", "owner", "team", "gpu_type", "gpu_count", "mig_profile", "state", "expires_at")
    list_filter = ("state", "team", "gpu_type")
    search_fields = ("name", "owner__username")
    readonly_fields = (
        "state",
        "message",
        "created_at",
        "queued_at",
        "started_at",
        "ended_at",
        "cluster",
        "node_name",
        "placement_reason",
        "namespace",
        "access",
        "attempts",
        "next_attempt_at",
        "last_error",
        "ending_as",
    )


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    list_display = ("workload", "team", "kind", "state", "requested_by", "decided_by", "created_at")
    list_filter = ("state", "kind", "team")
    readonly_fields = [f.name for f in Approval._meta.fields]

    def has_add_permission(self, request):
        return False
