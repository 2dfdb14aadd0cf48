from __future__ import annotations

from datetime import UTC, datetime

import django_filters
from django.db.models import QuerySet

from portal.audit.models import AuditEvent
from portal.audit.selectors import audit_object_id


class AuditEventFilter(django_filters.FilterSet):
    action = django_filters.CharFilter(lookup_expr="icontains")
    object_type = django_filters.CharFilter()
    object_id = django_filters.CharFilter(
        method="filter_object_id",
        help_text="The object's id; for a sandbox or deployment (with object_type), its number.",
    )
    actor = django_filters.CharFilter(field_name="actor__username")
    team = django_filters.CharFilter(field_name="team__slug")
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte", method="filter_time")
    until = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt", method="filter_time")

    class Meta:
        model = AuditEvent
        fields = ["action", "object_type", "object_id", "actor", "team", "since", "until"]

    def filter_object_id(self, queryset: QuerySet[AuditEvent], name: str, value: str) -> QuerySet[AuditEvent]:
        """Sandboxes and deployments are known by their number within their kind; events keep
        their internal id."""
        known = audit_object_id(self.data.get("object_type") or "", value)
        return queryset.none() if known is None else queryset.filter(object_id=known)

    def filter_time(self, queryset: QuerySet[AuditEvent], name: str, value: datetime) -> QuerySet[AuditEvent]:
        """A time so near year 1 or 9999 that it overflows in UTC simply matches nothing or all."""
        lookup = "created_at__gte" if name == "since" else "created_at__lt"
        try:
            value = value.astimezone(UTC)
        except OverflowError:
            return (
                queryset
                if (value.year < 2 and name == "since") or (value.year > 9998 and name == "until")
                else queryset.none()
            )
        return queryset.filter(**{lookup: value})
