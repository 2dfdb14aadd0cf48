"""Sandbox API: request bodies checked for shape and type (the rules live in the services), and the
sandbox as the API shows it, on the base every workload (deployments too) shares."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.approvals.models import Approval
from portal.sandboxes.models import Sandbox
from portal.sandboxes.selectors import (
    sandbox_cost_so_far,
    sandbox_hourly_cost,
    sandbox_latest_approval,
    sandbox_placement,
)

# Far beyond any team's maximum lifetime, yet small enough that the expiry stays a valid datetime.
MAX_HOURS = Decimal(1_000_000)


def flat_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """Nested serializer errors as dotted keys ("gpu.type"), as the services report them."""
    if isinstance(detail, dict):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            if not prefix:
                name = key
            elif key == "non_field_errors":
                name = prefix  # the nested object itself is wrong, e.g. "gpu": "h100"
            else:
                name = f"{prefix}.{key}"
            flat.update(flat_errors(value, name))
        return flat
    if isinstance(detail, list) and detail and not isinstance(detail[0], dict | list):
        return {prefix or "non_field_errors": [str(item) for item in detail]}
    if isinstance(detail, list):
        flat = {}
        for index, item in enumerate(detail):
            flat.update(flat_errors(item, f"{prefix}.{index}"))
        return flat
    return {prefix or "non_field_errors": [str(detail)]}


def validated(serializer: serializers.Serializer) -> dict[str, Any]:
    """The serializer's validated data, or a 400 whose field errors use dotted keys."""
    if not serializer.is_valid():
        raise serializers.ValidationError(flat_errors(serializer.errors))
    return serializer.validated_data


def money(max_digits: int = 14) -> serializers.DecimalField:
    """A USD amount rendered as a decimal string with cents."""
    return serializers.DecimalField(max_digits=max_digits, decimal_places=2, read_only=True)


class HoursField(serializers.DecimalField):
    """A number of hours: int, float or numeric string; fractions allowed."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_value", MAX_HOURS)
        super().__init__(max_digits=None, decimal_places=None, **kwargs)


class GpuRequestSerializer(serializers.Serializer):
    """`{"type", "count"}` for whole GPUs or `{"type", "mig_profile"}` for one MIG slice."""

    type = serializers.CharField(max_length=50, help_text="GPU type slug, e.g. h100-80gb.")
    count = serializers.IntegerField(
        required=False, allow_null=True, help_text="Whole GPUs (default 1). Leave out for a MIG slice."
    )
    mig_profile = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=30,
        help_text="A MIG profile of the type, e.g. 1g.10gb, for one slice.",
    )


class SandboxRequestSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=63, allow_blank=True)
    team = serializers.CharField(max_length=50, help_text="Team slug.")
    gpu = GpuRequestSerializer()
    ttl_hours = HoursField(
        required=False, allow_null=True, help_text="Lifetime in hours (fractions allowed)."
    )
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Or: when it ends, at least a minute ahead."
    )
    image = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=50, help_text="Image slug."
    )
    cpu = serializers.IntegerField(required=False, allow_null=True)
    memory_gb = serializers.IntegerField(required=False, allow_null=True)
    storage_gb = serializers.IntegerField(required=False, allow_null=True)
    purpose = serializers.CharField(required=False, allow_blank=True, max_length=300, default="")

    def service_kwargs(self) -> dict[str, Any]:
        """The validated body as keyword arguments of `sandbox_request` / `sandbox_estimate`."""
        data = validated(self)
        gpu = data["gpu"]
        return {
            "team": data["team"],
            "name": data["name"],
            "gpu_type": gpu["type"],
            "count": gpu.get("count"),
            "mig_profile": gpu.get("mig_profile") or "",
            "ttl_hours": data.get("ttl_hours"),
            "expires_at": data.get("expires_at"),
            "image": data.get("image") or None,
            "cpu": data.get("cpu"),
            "memory_gb": data.get("memory_gb"),
            "storage_gb": data.get("storage_gb"),
            "purpose": data.get("purpose") or "",
        }


class ExtendSerializer(serializers.Serializer):
    hours = HoursField(help_text="Hours to add to the expiry.")


class GpuSerializer(serializers.Serializer):
    type = serializers.CharField()
    count = serializers.IntegerField()
    mig_profile = serializers.CharField(allow_null=True)
    label = serializers.CharField()


class ApprovalBriefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    state = serializers.CharField()
    decided_by = serializers.CharField(allow_null=True)
    comment = serializers.CharField()


class PlacementSerializer(serializers.Serializer):
    """Whole GPUs: `node` and `gpus` (indexes). A slice: `node`, `gpu`, `mig_profile`, `start`."""

    node = serializers.CharField()
    gpus = serializers.ListField(child=serializers.IntegerField(), required=False)
    gpu = serializers.IntegerField(required=False)
    mig_profile = serializers.CharField(required=False)
    start = serializers.IntegerField(required=False, allow_null=True)


def gpu_summary(sandbox: Sandbox) -> dict[str, Any]:
    return {
        "type": sandbox.gpu_type.slug,
        "count": sandbox.gpu_count,
        "mig_profile": sandbox.mig_profile or None,
        "label": sandbox.gpu_label,
    }


def approval_brief(approval: Approval) -> dict[str, Any]:
    return {
        "id": approval.pk,
        "kind": approval.kind,
        "state": approval.state,
        "decided_by": approval.decided_by.username if approval.decided_by else None,
        "comment": approval.comment,
    }


# Fields every workload shows, in this order, between its kind's own: where it stands (state, times,
# approval, placement, access), then what it costs with its notes (message, purpose, why placed).
WORKLOAD_STATUS_FIELDS = [
    "state",
    "expires_at",
    "created_at",
    "started_at",
    "ended_at",
    "approval",
    "placement",
    "access",
]
WORKLOAD_COST_FIELDS = [
    "cost_so_far",
    "hourly_cost",
    "message",
    "queue_position",
    "purpose",
    "placement_reason",
]


class WorkloadSerializer(serializers.ModelSerializer):
    """What a sandbox and a deployment show alike: who, which GPU, the latest approval, access,
    cost and queue place. A subclass declares its Meta and `get_placement`."""

    team = serializers.CharField(source="team.slug", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    gpu = serializers.SerializerMethodField()
    approval = serializers.SerializerMethodField()
    placement = serializers.SerializerMethodField()
    access = serializers.SerializerMethodField()
    cost_so_far = serializers.SerializerMethodField()
    hourly_cost = serializers.SerializerMethodField()
    queue_position = serializers.SerializerMethodField()

    @extend_schema_field(GpuSerializer)
    def get_gpu(self, workload: Sandbox) -> dict[str, Any]:
        return gpu_summary(workload)

    @extend_schema_field(ApprovalBriefSerializer(allow_null=True))
    def get_approval(self, workload: Sandbox) -> dict[str, Any] | None:
        approval = sandbox_latest_approval(workload)
        return None if approval is None else approval_brief(approval)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_access(self, workload: Sandbox) -> str | None:
        return workload.access or None

    @extend_schema_field(money())
    def get_cost_so_far(self, workload: Sandbox) -> str:
        return str(sandbox_cost_so_far(workload))

    @extend_schema_field(money())
    def get_hourly_cost(self, workload: Sandbox) -> str:
        return str(sandbox_hourly_cost(workload))

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_queue_position(self, workload: Sandbox) -> int | None:
        return self.context.get("queue_positions", {}).get(workload.pk)


class SandboxSerializer(WorkloadSerializer):
    """A sandbox as the API shows it. Expects the prefetches of `sandboxes_with_details` and an
    optional `queue_positions` dict in the context."""

    image = serializers.CharField(source="image.slug", read_only=True)

    class Meta:
        model = Sandbox
        fields = [
            "id",
            "name",
            "team",
            "owner",
            "image",
            "gpu",
            *WORKLOAD_STATUS_FIELDS,
            *WORKLOAD_COST_FIELDS,
            "cpu",
            "memory_gb",
            "storage_gb",
        ]
        read_only_fields = fields

    @extend_schema_field(PlacementSerializer(allow_null=True))
    def get_placement(self, sandbox: Sandbox) -> dict[str, Any] | None:
        return sandbox_placement(sandbox)


class EstimateSerializer(serializers.Serializer):
    hourly_cost = money()
    total_cost = money()
    gpu_equivalents = serializers.DecimalField(max_digits=10, decimal_places=3)
    quota_left = serializers.DecimalField(max_digits=10, decimal_places=3)
    fits_quota = serializers.BooleanField()
    auto_approved = serializers.BooleanField()
    why_needed = serializers.CharField()
    capacity_free_now = serializers.BooleanField()
