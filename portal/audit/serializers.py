"""Audit API: events as they were recorded."""

from __future__ import annotations

from rest_framework import serializers

from portal.audit.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", allow_null=True, default=None)
    team = serializers.CharField(source="team.slug", allow_null=True, default=None)

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "created_at",
            "actor",
            "action",
            "object_type",
            "object_id",
            "object_repr",
            "team",
            "from_state",
            "to_state",
            "detail",
        ]
        read_only_fields = fields
