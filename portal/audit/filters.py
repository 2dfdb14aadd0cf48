from __future__ import annotations

from datetime import UTC, datetime

import django_filters
from django.db.models import Q, QuerySet

from portal.audit.models import AuditEvent
from portal.audit.selectors import audit_object_id
from portal.audit.words import actions_worded


class AuditEventFilter(django_filters.FilterSet):
    """Text matches ignore case; `action` matches an action's code ("sandbox.extend") or the words
    the pages show for it ("Extended"); `team` a team's slug or its name."""

    action = django_filters.CharFilter(
        method="filter_action", help_text="Part of the action's code or of its words."
    )
    object_type = django_filters.CharFilter(
        method="filter_object_type", help_text="sandbox, deployment, team ..."
    )
    object_id = django_filters.CharFilter(
        method="filter_object_id",
        help_text="The object's id; for a sandbox or deployment (with object_type), its number.",
    )
    actor = django_filters.CharFilter(field_name="actor__username", lookup_expr="iexact")
    team = django_filters.CharFilter(method="filter_team", help_text="The team's slug or name.")
    since = django_filters.IsoDateTimeFilter(
        field_name="created_at", method="filter_since", help_text="Events at or after this time."
    )
    until = django_filters.IsoDateTimeFilter(
        field_name="created_at", method="filter_until", help_text="Events before this time."
    )

    class Meta:
        model = AuditEvent
        fields = ["action", "object_type", "object_id", "actor", "team", "since", "until"]

    def filter_object_id(self, queryset: QuerySet[AuditEvent], name: str, value: str) -> QuerySet[AuditEvent]:
        """Sandboxes and deployments are known by their number within their kind; events keep
        their internal id."""
        known = audit_object_id((self.data.get("object_type") or "").strip().lower(), value)
        return queryset.none() if known is None else queryset.filter(object_id=known)

    def filter_action(self, queryset: QuerySet[AuditEvent], name: str, value: str) -> QuerySet[AuditEvent]:
        return queryset.filter(Q(action__icontains=value) | Q(action__in=actions_worded(value)))

    def filter_object_type(
        self, queryset: QuerySet[AuditEvent], name: str, value: str
    ) -> QuerySet[AuditEvent]:
        return queryset.filter(object_type=value.strip().lower())  # types are lower case: the index serves

    def filter_team(self, queryset: QuerySet[AuditEvent], name: str, value: str) -> QuerySet[AuditEvent]:
        return queryset.filter(Q(team__slug__iexact=value) | Q(team__name__iexact=value))

    def filter_since(
        self, queryset: QuerySet[AuditEvent], name: str, value: datetime
    ) -> QuerySet[AuditEvent]:
        return _bounded(queryset, value, after=True)

    def filter_until(
        self, queryset: QuerySet[AuditEvent], name: str, value: datetime
    ) -> QuerySet[AuditEvent]:
        return _bounded(queryset, value, after=False)


def _bounded(queryset: QuerySet[AuditEvent], value: datetime, *, after: bool) -> QuerySet[AuditEvent]:
    """Events at or after `value` (`after`), or before it. A time so near year 1 or 9999 that it
    overflows in UTC simply matches nothing or all."""
    try:
        value = value.astimezone(UTC)
    except OverflowError:
        everything = value.year < 2 if after else value.year > 9998
        return queryset if everything else queryset.none()
    return queryset.filter(**{"created_at__gte" if after else "created_at__lt": value})
