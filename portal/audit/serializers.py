"""Audit API: events as they were recorded, a sandbox or deployment named by its number (as its
page, the API and the audit filter name it)."""

from __future__ import annotations

from rest_framework import serializers

from portal.audit.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", allow_null=True, default=None)
    team = serializers.CharField(source="team.slug", allow_null=True, default=None)
    object_id = serializers.SerializerMethodField()

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

    def get_object_id(self, event: AuditEvent) -> str:
        """The id people know the object by: {(object_type, object_id): shown} in the context
        `shown_ids` (portal.audit.selectors.audit_shown_ids) for the page's events."""
        return self.context.get("shown_ids", {}).get((event.object_type, event.object_id), event.object_id)
