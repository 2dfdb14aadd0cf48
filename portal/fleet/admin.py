from django.contrib import admin, messages

from portal.core.admin import ReadOnlyAdmin
from portal.fleet.models import (
    NODE_MIG_JOB_FIELDS,
    Allocation,
    Cluster,
    Gpu,
    GpuType,
    MigSlice,
    Node,
    PriceBookEntry,
    StorageHold,
    StoragePrice,
)
from portal.fleet.telemetry import gpu_health_clear


class PriceInline(admin.TabularInline):
    model = PriceBookEntry
    extra = 1


@admin.register(GpuType)
class GpuTypeAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "memory_gb", "mig_capable")
    inlines = [PriceInline]


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "driver", "mig_mode", "mig_change_policy", "last_discovery_at")


# What the node agents read: an admin clears health with GpuAdmin's action, which audits it.
GPU_AGENT_FIELDS = ("health", "health_detail", "mismatch", "correction", "corrected_at", "seen_at")


class GpuInline(admin.TabularInline):
    model = Gpu
    extra = 0
    readonly_fields = GPU_AGENT_FIELDS  # as on GpuAdmin: a node's save must not undo or fake them


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("name", "cluster", "gpu_type", "product", "unknown_product", "schedulable")
    list_filter = ("cluster", "gpu_type", "unknown_product", "schedulable")
    inlines = [GpuInline]
    # Written by the portal's services and the workers only; an admin's save must not undo them.
    readonly_fields = NODE_MIG_JOB_FIELDS


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = (
        "__str__",
        "uuid",
        "gpu_type",
        "mig_enabled",
        "health",
        "health_detail",
        "mismatch",
        "seen_at",
    )
    list_filter = ("health", "gpu_type", "mig_enabled")
    search_fields = ("uuid", "node__name")
    readonly_fields = GPU_AGENT_FIELDS
    actions = ["clear_health"]

    @admin.action(description="Clear lost / XID health: offer the GPUs to placement again")
    def clear_health(self, request, queryset) -> None:
        cleared = gpu_health_clear(user=request.user, gpu_ids=list(queryset.values_list("pk", flat=True)))
        self.message_user(request, f"{cleared} GPU(s) back in placement.", messages.SUCCESS)


@admin.register(MigSlice)
class MigSliceAdmin(admin.ModelAdmin):
    list_display = ("gpu", "profile", "start", "size", "state")


@admin.register(Allocation)
class AllocationAdmin(ReadOnlyAdmin):
    """Read-only: spend derives from these rows, so they are never edited by hand."""

    list_display = ("gpu", "mig_profile", "workload", "team", "user", "started_at", "ended_at", "released_at")
    list_filter = ("team", "gpu_type")


@admin.register(StoragePrice)
class StoragePriceAdmin(admin.ModelAdmin):
    """Price of persistent storage (home volumes) per GB-month; the newest effective entry applies."""

    list_display = ("price_per_gb_month", "effective_from", "note")


@admin.register(StorageHold)
class StorageHoldAdmin(ReadOnlyAdmin):
    """Read-only: storage spend derives from these rows."""

    list_display = ("what", "user", "team", "size_gb", "price_per_gb_month", "started_at", "ended_at")
    list_filter = ("team",)
