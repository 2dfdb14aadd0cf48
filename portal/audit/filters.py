from __future__ import annotations

import django_filters

from portal.audit.models import AuditEvent


class AuditEventFilter(django_filters.FilterSet):
    action = django_filters.CharFilter(lookup_expr="icontains")
    object_type = django_filters.CharFilter()
    object_id = django_filters.CharFilter()
    actor = django_filters.CharFilter(field_name="actor__username")
    team = django_filters.CharFilter(field_name="team__slug")
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields = ["action", "object_type", "object_id", "actor", "team", "since", "until"]
