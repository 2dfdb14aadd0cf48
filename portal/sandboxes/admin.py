from django.contrib import admin

from portal.core.admin import ReadOnlyAdmin
from portal.sandboxes.models import Dataset, Home


@admin.register(Home)
class HomeAdmin(ReadOnlyAdmin):
    """Read-only: homes change through their owners' page and API, and the workers."""

    list_display = (
        "user",
        "team",
        "cluster",
        "state",
        "size_gb",
        "provisioned_gb",
        "volume_name",
        "attached_to",
    )
    list_filter = ("state", "cluster")


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    """Team datasets: what kind of storage, where, and which teams may mount it."""

    list_display = ("slug", "name", "kind", "created_at")
    list_filter = ("kind", "teams")
    filter_horizontal = ("teams",)
    exclude = ("sandboxes",)
    fieldsets = (
        (None, {"fields": ("slug", "name", "description", "kind", "teams")}),
        ("NFS export", {"fields": ("nfs_server", "nfs_path")}),
        ("Bucket", {"fields": ("csi_driver", "bucket", "volume_attributes", "credentials_secret")}),
        ("Existing claim", {"fields": ("claim_namespace", "claim_name")}),
    )
