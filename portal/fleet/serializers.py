"""Fleet API: GPU types with prices and free capacity, and every GPU with who holds what."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.fleet.models import Allocation, Gpu, MigSlice


class MigProfileSerializer(serializers.Serializer):
    name = serializers.CharField(source="shape.name")
    compute_slices = serializers.IntegerField(source="shape.compute_slices", help_text="Of 7.")
    memory_gb = serializers.IntegerField(source="shape.memory_gb")
    memory_slots = serializers.IntegerField(source="shape.size", help_text="Of 8.")
    max_per_gpu = serializers.IntegerField(source="shape.max_count")
    media = serializers.BooleanField(source="shape.media")
    gpu_equivalents = serializers.DecimalField(
        max_digits=6, decimal_places=3, help_text="Counted against quota and billed as this share."
    )
    price_per_hour = serializers.DecimalField(max_digits=12, decimal_places=2)


class CapacitySerializer(serializers.Serializer):
    gpus = serializers.IntegerField(help_text="GPUs of this type in the fleet.")
    free_gpus = serializers.IntegerField(help_text="Whole (non-MIG) GPUs free now.")
    mig_gpus = serializers.IntegerField(help_text="GPUs in MIG mode.")
    free_slices = serializers.DictField(
        child=serializers.IntegerField(), help_text="Profile -> GPUs that could take one more now."
    )


class GpuTypeSerializer(serializers.Serializer):
    slug = serializers.CharField(source="gpu_type.slug")
    name = serializers.CharField(source="gpu_type.name")
    memory_gb = serializers.IntegerField(source="gpu_type.memory_gb")
    mig_capable = serializers.BooleanField(source="gpu_type.mig_capable")
    price_per_hour = serializers.DecimalField(
        max_digits=12, decimal_places=2, help_text="USD per whole GPU-hour."
    )
    mig_profiles = MigProfileSerializer(source="profiles", many=True)
    capacity = CapacitySerializer()


class HolderSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="sandbox or deployment")
    id = serializers.IntegerField(help_text="Its number within its kind, as /api/v1/sandboxes/{id} takes it.")
    name = serializers.CharField()


def holder(holds: list[Allocation]) -> dict[str, Any] | None:
    """Who holds a GPU or slice, from its live allocations (prefetched as `live_holds`)."""
    for allocation in holds:
        if allocation.workload_id is not None:
            workload = allocation.workload
            return {"kind": workload.kind, "id": workload.number, "name": workload.name}
    return None


class MigSliceSerializer(serializers.ModelSerializer):
    holder = serializers.SerializerMethodField()

    class Meta:
        model = MigSlice
        fields = ["profile", "start", "size", "state", "holder"]
        read_only_fields = fields

    @extend_schema_field(HolderSerializer(allow_null=True))
    def get_holder(self, mig_slice: MigSlice) -> dict[str, Any] | None:
        return holder(mig_slice.live_holds)


class FleetGpuSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.name")
    cluster = serializers.CharField(source="node.cluster.name")
    type = serializers.CharField(source="gpu_type.slug")
    holder = serializers.SerializerMethodField(help_text="For a whole GPU; null for a MIG GPU.")
    mig_slices = MigSliceSerializer(many=True)
    mig_managed = serializers.BooleanField(
        source="node.mig_managed",
        help_text="False when the node's MIG layout was set outside the portal: requests use its free "
        "slices, but the portal re-partitions none of its GPUs until an admin takes the node over.",
    )
    mig_mode = serializers.CharField(
        source="node.cluster.effective_mig_mode",
        help_text="How the cluster cuts MIG slices: 'layouts' (a GPU is re-partitioned whole, only while "
        "it holds nothing; released slices stay cut) or 'dynamic' (slice by slice).",
    )

    class Meta:
        model = Gpu
        fields = [
            "id",
            "node",
            "cluster",
            "index",
            "uuid",
            "type",
            "mig_enabled",
            "mig_managed",
            "mig_mode",
            "holder",
            "mig_slices",
        ]
        read_only_fields = fields

    @extend_schema_field(HolderSerializer(allow_null=True))
    def get_holder(self, gpu: Gpu) -> dict[str, Any] | None:
        return holder([a for a in gpu.live_holds if not a.mig_profile])


class TelemetryBatchSerializer(serializers.Serializer):
    readings = serializers.ListField(
        child=serializers.DictField(),
        max_length=1000,
        help_text="Node readings as the node agent takes them.",
    )
    dropped = serializers.IntegerField(
        min_value=0, required=False, default=0, help_text="Readings the agent dropped."
    )


class TelemetryRecordedSerializer(serializers.Serializer):
    readings = serializers.IntegerField()
    devices = serializers.IntegerField()
    unknown_nodes = serializers.ListField(child=serializers.CharField())
    dropped = serializers.IntegerField()
