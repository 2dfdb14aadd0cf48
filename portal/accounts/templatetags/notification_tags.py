"""Template helpers for the notifications panel."""

from __future__ import annotations

from collections.abc import Sequence

from django import template

register = template.Library()


@register.filter
def unread_beyond(shown: Sequence, unread_total: int | None) -> int:
    """How many unread notifications the panel leaves out: all unread ones less those it shows."""
    shown_unread = sum(1 for note in shown if note.read_at is None)
    return max(0, (unread_total or 0) - shown_unread)
