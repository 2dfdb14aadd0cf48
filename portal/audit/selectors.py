from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Q, QuerySet

if TYPE_CHECKING:  # audit sits below accounts: it knows users and teams as foreign keys only
    from portal.accounts.models import User
from portal.audit.models import AuditEvent


def audit_events_visible_to(user: User) -> QuerySet[AuditEvent]:
    """Admins see every event; leads see their teams' events; others none."""
    events = AuditEvent.objects.select_related("actor", "team")
    if user.is_platform_admin:
        return events
    return events.filter(Q(team_id__in=_led_team_ids(user)))


def audit_log_allowed(user: User) -> bool:
    """The audit log is for platform admins and team leads."""
    return user.is_platform_admin or _led_team_ids(user).exists()


def _led_team_ids(user: User) -> QuerySet:
    return user.memberships.filter(role="lead").values("team_id")
