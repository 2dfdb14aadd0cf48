"""A workload state as people read it: "pending approval", not "pending_approval"."""

from __future__ import annotations

from django import template

from portal.workloads.models import WorkloadState

register = template.Library()
LABELS = {value: str(label).lower() for value, label in WorkloadState.choices}


@register.filter
def state_label(value: str | None) -> str:
    return LABELS.get(value or "", (value or "").replace("_", " "))
