"""Row leases: one worker at a time acts on a row (a workload, a node's MIG layout), whether the
job came from a change's message or from the periodic re-drive. A worker that dies mid-step
leaves its lease to run out: PORTAL_LEASE_SECONDS after it was taken."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet


def lease_take(rows: QuerySet, field: str, *, now: datetime) -> datetime | None:
    """Lease the row(s) of `rows` through the datetime `field`; the lease's end, or None when
    another worker holds it (or there is no such row)."""
    free = Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__lte": now})
    until = now + timedelta(seconds=settings.PORTAL_LEASE_SECONDS)
    return until if rows.filter(free).update(**{field: until}) else None


def lease_give_back(rows: QuerySet, field: str, until: datetime) -> None:
    """End our own lease only: if the step outran it, another worker may hold the row now."""
    rows.filter(**{field: until}).update(**{field: None})
