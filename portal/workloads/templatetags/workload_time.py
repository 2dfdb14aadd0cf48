"""Times on workload pages in words that never say "0 minutes", and the last hour as a ticking
countdown (static/js/portal.js reads its data-* attributes)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.timesince import timesince, timeuntil

from portal.core import text

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


def min_s(left: timedelta) -> str:
    """ "59 min 05 s", "1 min 01 s", "42 s": minutes and seconds that cannot be read as a time of day
    (static/js/portal.js writes the same)."""
    seconds = max(0, int(left.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min {seconds % 60:02d} s"


@register.filter
def hours_words(value: Decimal | float | int | None) -> str:
    """A lifetime given in hours: "2 minutes", "30 minutes", "1 h", "1 h 30 min", "48 h"."""
    return text.hours_words(value)


@register.simple_tag
def expiry_countdown(value: datetime | None) -> str:
    """When it expires, in words; within the last hour a countdown ("in 1 min 01 s") that ticks in
    the browser and says "ending" at the deadline."""
    if value is None:
        return ""
    left = value - timezone.now()
    if left <= timedelta(0):
        return mark_safe('<span class="countdown ending">ending</span>')
    if left <= COUNTDOWN_WITHIN:
        return format_html(
            '<span class="countdown" data-countdown-until="{}" data-countdown-done="ending">in {}</span>',
            value.isoformat(),
            min_s(left),
        )
    return in_words(value)


@register.filter
def is_overdue(workload) -> bool:
    """Its time is up, and the sweep has not ended it yet."""
    from portal.workloads.selectors import workload_overdue

    return workload_overdue(workload)
