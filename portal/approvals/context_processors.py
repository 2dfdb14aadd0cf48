from __future__ import annotations

from django.http import HttpRequest

from portal.accounts.selectors import lead_team_ids
from portal.approvals.selectors import pending_count_for


def navigation(request: HttpRequest) -> dict:
    """What the navigation bar shows on every page: pending approvals, unread notifications, and
    whether the user leads a team (a callable, so it is looked up only when the bar is drawn)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "nav_pending_approvals": pending_count_for(user),
        "nav_unread": user.notifications.filter(read_at__isnull=True).count(),
        "nav_leads_a_team": lambda: bool(lead_team_ids(user)),
    }
