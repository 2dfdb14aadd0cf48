from __future__ import annotations

from django.db.models import Q, QuerySet

from portal.accounts.models import User
from portal.audit.models import AuditEvent


def audit_events_visible_to(user: User) -> QuerySet[AuditEvent]:
    """Admins see every event; leads see their teams' events; others none."""
    events = AuditEvent.objects.select_related("actor", "team")
    if user.is_platform_admin:
        return events
    lead_teams = user.memberships.filter(role="lead").values("team_id")
    return events.filter(Q(team_id__in=lead_teams))
