from __future__ import annotations

from functools import cache

from django.http import HttpRequest

from portal.accounts.models import Team
from portal.accounts.selectors import lead_teams as teams_led_by
from portal.approvals.selectors import pending_count_for


def navigation(request: HttpRequest) -> dict:
    """What the navigation bar shows on every page: pending approvals, unread notifications, and
    whether the user leads a team (a callable, so it is looked up only when the bar is drawn)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    @cache
    def lead_teams() -> list[Team]:  # one query, when the bar first asks
        return teams_led_by(user)

    return {
        "nav_pending_approvals": pending_count_for(user),
        "nav_unread": user.notifications.filter(read_at__isnull=True).count(),
        "nav_leads_a_team": lambda: bool(lead_teams()),
        "nav_lead_teams": lead_teams,
    }
