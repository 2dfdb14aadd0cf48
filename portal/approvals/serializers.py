"""Approvals API: decisions in, approvals out."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.approvals.models import Approval
from portal.sandboxes.serializers import GpuSerializer, gpu_summary


class ApproveSerializer(serializers.Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, max_length=1000, default="")


class RejectSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=1000, help_text="Why; the requester sees it.")


class ApprovalSandboxSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    owner = serializers.CharField()
    state = serializers.CharField()
    expires_at = serializers.DateTimeField()
    gpu = GpuSerializer()


class ApprovalSerializer(serializers.ModelSerializer):
    sandbox = serializers.SerializerMethodField()
    team = serializers.CharField(source="team.slug")
    requested_by = serializers.CharField(source="requested_by.username")
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None)

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
            "decided_by",
            "comment",
            "created_at",
            "decided_at",
        ]
        read_only_fields = fields

    @extend_schema_field(ApprovalSandboxSerializer)
    def get_sandbox(self, approval: Approval) -> dict[str, Any]:
        sandbox = approval.sandbox
        return {
            "id": sandbox.pk,
            "name": sandbox.name,
            "owner": sandbox.owner.username,
            "state": sandbox.state,
            "expires_at": serializers.DateTimeField().to_representation(sandbox.expires_at),
            "gpu": gpu_summary(sandbox),
        }
