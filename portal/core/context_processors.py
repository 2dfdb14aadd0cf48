from __future__ import annotations

from django.http import HttpRequest


def navigation(request: HttpRequest) -> dict:
    """What the navigation bar shows on every page: pending approvals and unread notifications."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    from portal.approvals.selectors import pending_count_for

    return {
        "nav_pending_approvals": pending_count_for(user),
        "nav_unread": user.notifications.filter(read_at__isnull=True).count(),
    }
