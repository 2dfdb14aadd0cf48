"""Times on workload pages in words that never say "0 minutes", and the last hour as a ticking
countdown (static/js/portal.js reads its data-* attributes)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.timesince import timesince, timeuntil

register = template.Library()

COUNTDOWN_WITHIN = timedelta(hours=1)


@register.filter
def in_words(value: datetime | None) -> str:
    """ "in 3 hours, 5 minutes", "in less than a minute", or "now" once it has come."""
    if value is None:
        return ""
    left = value - timezone.now()
    if left <= timedelta(0):
        return "now"
    if left < timedelta(minutes=1):
        return "in less than a minute"
    return f"in {timeuntil(value)}"


@register.filter
def ago_words(value: datetime | None) -> str:
    """ "3 hours ago", or "just now" within the last minute."""
    if value is None:
        return ""
    if timezone.now() - value < timedelta(minutes=1):
        return "just now"
    return f"{timesince(value)} ago"


def mm_ss(left: timedelta) -> str:
    seconds = max(0, int(left.total_seconds()))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


@register.simple_tag
def expiry_countdown(value: datetime | None) -> str:
    """When it expires, in words; within the last hour a countdown (mm:ss) that ticks in the
    browser and says "ending" at the deadline."""
    if value is None:
        return ""
    left = value - timezone.now()
    if left <= timedelta(0):
        return mark_safe('<span class="countdown ending">ending</span>')
    if left <= COUNTDOWN_WITHIN:
        return format_html(
            '<span class="countdown" data-countdown-until="{}" data-countdown-done="ending">in {}</span>',
            value.isoformat(),
            mm_ss(left),
        )
    return in_words(value)


@register.filter
def is_overdue(workload) -> bool:
    """Its time is up, and the sweep has not ended it yet."""
    from portal.workloads.selectors import workload_overdue

    return workload_overdue(workload)
