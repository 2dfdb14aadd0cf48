from __future__ import annotations

import django_filters

from portal.workloads.models import Approval


class ApprovalFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=Approval.State.choices)
    team = django_filters.CharFilter(field_name="team__slug")
    kind = django_filters.ChoiceFilter(choices=Approval.Kind.choices)

    class Meta:
        model = Approval
        fields = ["state", "team", "kind"]
