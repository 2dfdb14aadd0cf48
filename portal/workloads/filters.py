"""One FilterSet per list, shared by the HTML pages and the API."""

from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from portal.workloads.models import LIVE_STATES, Workload, WorkloadState
from portal.workloads.selectors import workload_text_match


class WorkloadFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=WorkloadState.choices, method="filter_state")
    team = django_filters.CharFilter(field_name="team__slug")
    owner = django_filters.CharFilter(field_name="owner__username")
    gpu_type = django_filters.CharFilter(field_name="gpu_type__slug")
    project = django_filters.CharFilter(field_name="project", label="Project")
    q = django_filters.CharFilter(method="filter_q", label="Name, project or number")
    live = django_filters.BooleanFilter(method="filter_live", label="Live only")

    class Meta:
        model = Workload
        fields = ["state", "team", "owner", "gpu_type", "project", "q", "live"]

    def filter_state(self, queryset: QuerySet[Workload], name: str, value: list[str]) -> QuerySet[Workload]:
        """By the state shown: a running deployment being rescaled is running, not provisioning."""
        if not value:
            return queryset
        scaling = Q(state=WorkloadState.PROVISIONING, scaling_from__isnull=False)
        shown = Q(state__in=value) & ~scaling
        if WorkloadState.RUNNING in value:
            shown |= scaling
        return queryset.filter(shown)

    def filter_q(self, queryset: QuerySet[Workload], name: str, value: str) -> QuerySet[Workload]:
        """Each word in its name or project, or its number (`42`, `#42`), as global search finds them."""
        return queryset.filter(workload_text_match(value)) if value.strip() else queryset

    def filter_live(self, queryset: QuerySet[Workload], name: str, value: bool | None) -> QuerySet[Workload]:
        if value is None:
            return queryset
        return queryset.filter(state__in=LIVE_STATES) if value else queryset.exclude(state__in=LIVE_STATES)
