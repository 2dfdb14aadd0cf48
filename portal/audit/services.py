"""Writing audit events. Every state change and decision goes through `audit_record`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from portal.audit.models import AuditEvent

if TYPE_CHECKING:  # audit sits below accounts: it knows users and teams as foreign keys only
    from portal.accounts.models import Team, User


def audit_record(
    *,
    actor: User | None,
    action: str,
    obj: Any,
    object_type: str | None = None,
    team: Team | None = None,
    from_state: str = "",
    to_state: str = "",
    detail: str = "",
) -> AuditEvent:
    """Record who did what to `obj`. Its type is `object_type`, else the object's own `audit_type`
    (a workload is filed under its kind, "sandbox" or "deployment"), else its model name."""
    return AuditEvent.objects.create(
        actor=actor if actor is not None and actor.pk else None,
        action=action,
        object_type=object_type or getattr(obj, "audit_type", None) or obj._meta.model_name,
        object_id=str(obj.pk),
        object_repr=str(obj)[:200],
        team=team,
        from_state=from_state,
        to_state=to_state,
        detail=detail[:1000],
    )
