"""Approvals API: decisions in, approvals out."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.approvals.selectors import ApprovalRow, approval_rows
from portal.core.serializers import StrictCharField, StrictIntegerField
from portal.workloads.models import Approval
from portal.workloads.serializers import GpuSerializer, gpu_summary


class ApproveSerializer(serializers.Serializer):
    comment = StrictCharField(required=False, allow_blank=True, max_length=1000, default="")


class RejectSerializer(serializers.Serializer):
    reason = StrictCharField(max_length=1000, help_text="Why; the requester sees it.")


class ApprovalSandboxSerializer(serializers.Serializer):
    id = StrictIntegerField(help_text="Its number within its kind, as /api/v1/sandboxes/{id} takes it.")
    kind = StrictCharField(help_text="sandbox or deployment.")
    replicas = StrictIntegerField(help_text="Replicas it has now (1 for a sandbox).")
    name = StrictCharField()
    owner = StrictCharField()
    state = StrictCharField()
    expires_at = serializers.DateTimeField(allow_null=True, help_text="Null until it starts running.")
    gpu = GpuSerializer()


class ApprovalSerializer(serializers.ModelSerializer):
    sandbox = serializers.SerializerMethodField()
    team = StrictCharField(source="team.slug")
    requested_by = StrictCharField(source="requested_by.username")
    decided_by = StrictCharField(source="decided_by.username", allow_null=True, default=None)
    summary = serializers.SerializerMethodField()
    purpose = StrictCharField(
        source="workload.purpose", help_text="What it is for, in the requester's words."
    )
    lifetime_hours = serializers.SerializerMethodField()
    estimated_cost = serializers.SerializerMethodField()
    can_decide = serializers.SerializerMethodField()

    class Meta:
        model = Approval
        fields = [
            "id",
            "kind",
            "state",
            "sandbox",
            "team",
            "requested_by",
            "why_needed",
            "extend_hours",
            "replicas",
            "summary",
            "purpose",
            "lifetime_hours",
            "estimated_cost",
            "can_decide",
            "decided_by",
            "comment",
            "created_at",
            "decided_at",
        ]
        read_only_fields = fields

    @extend_schema_field(ApprovalSandboxSerializer)
    def get_sandbox(self, approval: Approval) -> dict[str, Any]:
        sandbox = approval.workload
        return {
            "id": sandbox.number,
            "kind": sandbox.kind,
            "replicas": sandbox.replicas,
            "name": sandbox.name,
            "owner": sandbox.owner.username,
            "state": sandbox.state,
            "expires_at": serializers.DateTimeField().to_representation(sandbox.expires_at),
            "gpu": gpu_summary(sandbox),
        }

    def _row(self, approval: Approval) -> ApprovalRow:
        """The inbox's reading of it (hours, cost, whether the caller may decide): the list reads
        them for its page at once; one approval alone is read here."""
        rows = self.context.get("rows")
        if rows is not None and approval.pk in rows:
            return rows[approval.pk]
        return approval_rows([approval], user=self.context["request"].user)[0]

    @extend_schema_field(serializers.DecimalField(max_digits=12, decimal_places=2))
    def get_lifetime_hours(self, approval: Approval) -> str:
        """A new request's lifetime, an extension's added hours, or the hours a deployment has
        left while its scale waits."""
        return f"{self._row(approval).hours:.2f}"

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True))
    def get_estimated_cost(self, approval: Approval) -> str | None:
        """What those hours cost at today's prices (USD); for a scale waiting, what its added
        replicas cost for those hours; null for a decided scale."""
        cost = self._row(approval).estimated_cost
        return None if cost is None else f"{cost:.2f}"

    @extend_schema_field(serializers.BooleanField())
    def get_can_decide(self, approval: Approval) -> bool:
        """Whether you may approve or reject it now (a pending request of a team you lead, not
        your own; any, for an admin)."""
        return self._row(approval).can_decide

    @extend_schema_field(StrictCharField())
    def get_summary(self, approval: Approval) -> str:
        """What is asked, in words: "scale llama-chat to 3 replicas"."""
        return approval_summary(approval)


def approval_summary(approval: Approval) -> str:
    """ "deployment llama-chat: 1x h100-80gb", "extend box by 4 h", "scale llama-chat to 3 replicas"."""
    sandbox = approval.workload
    if approval.kind == Approval.Kind.SCALE:
        return f"scale {sandbox.name} to {approval.replicas} replicas"
    if approval.kind == Approval.Kind.EXTEND and approval.extend_hours is not None:
        return f"extend {sandbox.name} by {approval.extend_hours.normalize():f} h"
    return f"{sandbox.kind} {sandbox.name}: {sandbox.gpu_label}"
