"""Moving a workload between states: one conditional UPDATE per move, audited.

A move names the states it may start from; when the row is no longer in one of them (another
process moved it first) it raises Conflict and changes nothing, so every caller is idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.utils import timezone

from portal.accounts.models import User
from portal.audit.services import audit_record
from portal.core.errors import Conflict
from portal.workloads.models import Workload, WorkloadState


def move(
    *,
    workload: Workload,
    to: str,
    from_states: Iterable[str],
    actor: User | None,
    event: str,
    detail: str = "",
    **fields: object,
) -> None:
    """Move `workload` to `to` if it is still in one of `from_states`, writing `fields` (columns of
    the row) with it, and audit the move as `<kind>.<event>` ("sandbox.running",
    "deployment.scaled"); Conflict when another process moved it first."""
    from_states = list(from_states)
    previous = workload.state
    if to == WorkloadState.PROVISIONING:
        fields.setdefault("provisioning_since", timezone.now())
    updated = Workload.objects.filter(pk=workload.pk, state__in=from_states).update(state=to, **fields)
    if not updated:
        current = Workload.objects.filter(pk=workload.pk).values_list("state", flat=True).first()
        raise Conflict(
            f"{workload.kind.capitalize()} {workload.name} is {current}; it cannot go to {to} from there."
        )
    workload.state = to
    for name, value in fields.items():
        setattr(workload, name, value)
    audit_record(
        actor=actor,
        action=f"{workload.kind}.{event}",
        obj=workload,
        team=workload.team,
        from_state=previous,
        to_state=to,
        detail=detail,
    )


def try_move(
    *, workload: Workload, to: str, from_states: Iterable[str], event: str, **fields: object
) -> bool:
    """`move` by the workers (no actor): False, and nothing changed, when another process moved
    the row first, which for a reconcile step means there is nothing left to do."""
    try:
        move(workload=workload, to=to, from_states=from_states, actor=None, event=event, **fields)
    except Conflict:
        return False
    return True
