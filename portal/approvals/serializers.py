"""Approvals API: decisions in, approvals out."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

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
