"""Live pages by cheap polling: each live region polls with the version of what it shows, and an
unchanged version is answered `204 No Content` before anything is read or rendered.

Why polling and not server-sent events: production serves the portal with gunicorn sync
workers, where an event stream holds a worker for as long as the page is open (200 open pages,
200 workers), and the embedded server is Django's threaded runserver. A poll is one short
request: when nothing changed it costs one or two indexed queries (the newest audit event of
the user's teams, or the two badge counts) and no rendering, and htmx swaps nothing on a 204.

A version is the newest audit event id where the page's rows live (every request, decision and
state move writes one, with its team) plus the current minute, so costs so far and "5 minutes
ago" refresh once a minute even when nothing happens. The region sends it back in the
`X-Live-Version` header (`hx-headers` on the polled element).
"""

from __future__ import annotations

from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from portal.accounts.models import Membership, User
from portal.audit.models import AuditEvent
from portal.workloads.selectors import workloads_visible_to

LIVE_HEADER = "X-Live-Version"


def _minute() -> int:
    return int(timezone.now().timestamp() // 60)


def events_version(user: User, *, team_id: int | None = None) -> str:
    """The version of what `user` sees of their teams (all teams for a platform admin, or only
    `team_id`): the newest audit event there and the current minute. One query."""
    events = AuditEvent.objects.all()
    if team_id is not None:
        events = events.filter(team_id=team_id)
    elif not user.is_platform_admin:
        events = events.filter(team_id__in=Membership.objects.filter(user=user).values("team_id"))
    newest = events.aggregate(newest=Max("id"))["newest"] or 0
    return f"{newest}.{_minute()}"


def badges_version(*, pending: int, unread: int) -> str:
    """The nav badges' version: the counts they show."""
    return f"{pending}.{unread}"


def unchanged(request: HttpRequest, version: str) -> bool:
    """Whether the poll already shows `version` (only htmx polls send it)."""
    return request.headers.get(LIVE_HEADER) == version


def nothing_changed() -> HttpResponse:
    """The answer to a poll whose page is up to date: htmx swaps nothing on a 204."""
    return HttpResponse(status=204)


def workload_version(user: User, *, number: int, kind: str) -> str:
    """The version of a sandbox or deployment page (which its URL names by its number): the
    newest audit event of its team (its state moves, approvals and extensions among them), and
    the minute. Two queries."""
    teams = workloads_visible_to(user, kind=kind).filter(number=number).values("team_id")
    newest = AuditEvent.objects.filter(team_id__in=teams).aggregate(newest=Max("id"))["newest"] or 0
    return f"{newest}.{_minute()}"
