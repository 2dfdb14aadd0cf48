from __future__ import annotations

from functools import cache

from django.http import HttpRequest

from portal.accounts.models import Membership, Team
from portal.approvals.selectors import pending_count_for


def lead_team_ids_query(user):
    return Membership.objects.filter(user=user, role=Membership.Role.LEAD).values("team_id")


def navigation(request: HttpRequest) -> dict:
    """What the navigation bar shows on every page: pending approvals, unread notifications, and
    whether the user leads a team (a callable, so it is looked up only when the bar is drawn)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    @cache
    def lead_teams() -> list[Team]:  # one query, when the bar first asks
        return list(Team.objects.filter(pk__in=lead_team_ids_query(user)).only("slug", "name"))

    return {
        "nav_pending_approvals": pending_count_for(user),
        "nav_unread": user.notifications.filter(read_at__isnull=True).count(),
        "nav_leads_a_team": lambda: bool(lead_teams()),
        "nav_lead_teams": lead_teams,
    }
