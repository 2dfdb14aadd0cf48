from __future__ import annotations

from functools import cache

from django.http import HttpRequest

from portal.accounts.models import Team
from portal.accounts.selectors import lead_teams as teams_led_by
from portal.approvals.selectors import pending_count_for, unread_count
from portal.workloads.live import badges_version


def navigation(request: HttpRequest) -> dict:
    """What the navigation bar shows on every page: pending approvals, unread notifications, and
    whether the user leads a team (a callable, so it is looked up only when the bar is drawn)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    @cache
    def lead_teams() -> list[Team]:  # one query, when the bar first asks
        return teams_led_by(user)

    pending, unread = pending_count_for(user), unread_count(user)
    return {
        "nav_pending_approvals": pending,
        "nav_unread": unread,
        "nav_live_version": badges_version(pending=pending, unread=unread),
        "nav_leads_a_team": lambda: bool(lead_teams()),
        "nav_lead_teams": lead_teams,
    }
