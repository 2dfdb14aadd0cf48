from django.contrib import admin

from portal.sandboxes.models import Image, Sandbox


@admin.register(Image)
class ImageAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "container_image", "kind")


@admin.register(Sandbox)
class SandboxAdmin(admin.ModelAdmin):
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
