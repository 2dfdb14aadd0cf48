"""Reads the account pages need: a user's notifications and tokens."""

from __future__ import annotations

from django.db.models import QuerySet

from portal.accounts.models import ApiToken, Notification, User

NOTIFICATIONS_SHOWN = 10


def recent_notifications(user: User, *, limit: int = NOTIFICATIONS_SHOWN) -> list[Notification]:
    """The newest notifications, unread and read, for the dashboard."""
    return list(Notification.objects.filter(user=user).order_by("-created_at", "-id")[:limit])


def tokens_of(user: User) -> QuerySet[ApiToken]:
    """The user's personal access tokens, newest first (revoked ones too)."""
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")
