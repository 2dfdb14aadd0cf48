from django.contrib import admin

from portal.core.admin import ReadOnlyAdmin
from portal.sandboxes.models import Home


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
