"""Moving a sandbox between states: one conditional UPDATE per move, audited.

A move names the states it may start from; when the row is no longer in one of them (another
process moved it first) it raises Conflict and changes nothing, so every caller is idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable

from portal.accounts.models import User
from portal.audit.services import audit_record
from portal.core.errors import Conflict
from portal.workloads.models import Workload


def move(
    sandbox: Workload,
    *,
    to: str,
    from_states: Iterable[str],
    actor: User | None,
    action: str,
    detail: str = "",
    **fields: object,
) -> None:
    from_states = list(from_states)
    previous = sandbox.state
    updated = Workload.objects.filter(pk=sandbox.pk, state__in=from_states).update(state=to, **fields)
    if not updated:
        current = Workload.objects.filter(pk=sandbox.pk).values_list("state", flat=True).first()
        raise Conflict(
            f"{sandbox.kind.capitalize()} {sandbox.name} is {current}; it cannot go to {to} from there."
        )
    sandbox.state = to
    for name, value in fields.items():
        setattr(sandbox, name, value)
    if sandbox.kind != "sandbox" and action.startswith("sandbox."):
        action = sandbox.kind + action.removeprefix("sandbox")
    audit_record(
        actor=actor,
        action=action,
        obj=sandbox,
        object_type=sandbox.kind,
        team=sandbox.team,
        from_state=previous,
        to_state=to,
        detail=detail,
    )
