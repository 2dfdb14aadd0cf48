from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from portal.workloads.models import Approval


class ApprovalFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=Approval.State.choices)
    team = django_filters.CharFilter(method="filter_team", help_text="The team's slug or name (any case).")
    kind = django_filters.ChoiceFilter(choices=Approval.Kind.choices)

    class Meta:
        model = Approval
        fields = ["state", "team", "kind"]

    def filter_team(self, queryset: QuerySet[Approval], name: str, value: str) -> QuerySet[Approval]:
        return queryset.filter(Q(team__slug__iexact=value) | Q(team__name__iexact=value))
