"""One FilterSet per list, shared by the HTML pages and the API."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from portal.sandboxes.models import LIVE_STATES, Sandbox, SandboxState


class SandboxFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=SandboxState.choices)
    team = django_filters.CharFilter(field_name="team__slug")
    owner = django_filters.CharFilter(field_name="owner__username")
    gpu_type = django_filters.CharFilter(field_name="gpu_type__slug")
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name contains")
    live = django_filters.BooleanFilter(method="filter_live", label="Live only")

    class Meta:
        model = Sandbox
        fields = ["state", "team", "owner", "gpu_type", "q", "live"]

    def filter_live(self, queryset: QuerySet[Sandbox], name: str, value: bool | None) -> QuerySet[Sandbox]:
        if value is None:
            return queryset
        return queryset.filter(state__in=LIVE_STATES) if value else queryset.exclude(state__in=LIVE_STATES)
