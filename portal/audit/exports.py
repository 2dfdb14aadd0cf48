"""The audit log as a CSV download, streamed: the header first, then each event as the database
hands it over (a server-side cursor in chunks), so a long log starts at once and is never held in
memory whole. Cells a spreadsheet would run as a formula (`=`, `+`, `-`, `@` ...) are written
defused, with a leading `'`.

CSV columns: created_at, actor, action, object_type, object_id, object_repr, team, from_state,
to_state, detail. `created_at` is ISO 8601 in UTC, times within a detail as the pages write them
("2026-12-01 13:00 UTC"); a blank actor is the portal itself. A sandbox or deployment is named by
its number, as its page, the API and the audit filter name it (blank once it is gone).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC
from itertools import islice
from typing import TYPE_CHECKING

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils import timezone

from portal.audit.models import AuditEvent
from portal.audit.selectors import audit_shown_ids
from portal.audit.words import detail_words
from portal.core.csv_lines import csv_lines

if TYPE_CHECKING:  # audit sits below accounts: it knows users as foreign keys only
    from portal.accounts.models import User

CSV_COLUMNS = (
    "created_at",
    "actor",
    "action",
    "object_type",
    "object_id",
    "object_repr",
    "team",
    "from_state",
    "to_state",
    "detail",
)
CHUNK_SIZE = 500


def audit_csv_lines(events: Iterable[AuditEvent]) -> Iterator[str]:
    """One header line, then a line per event (text cells defused against formulas)."""
    return csv_lines(CSV_COLUMNS, _rows(events))


def _rows(events: Iterable[AuditEvent]) -> Iterator[list[str]]:
    """The events' cells, a chunk at a time: the numbers of a chunk's workloads in one query."""
    events = iter(events)
    while chunk := list(islice(events, CHUNK_SIZE)):
        shown = audit_shown_ids(chunk)
        for event in chunk:
            yield [
                event.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
                event.actor.username if event.actor_id else "",
                event.action,
                event.object_type,
                shown.get((event.object_type, event.object_id), event.object_id),
                event.object_repr,
                event.team.slug if event.team_id else "",
                event.from_state,
                event.to_state,
                detail_words(event.detail),
            ]


def audit_export_filename(*, user: User) -> str:
    """audit_<whose>_<UTC time of the download>.csv: `all` for admins, else the lead's name."""
    whose = "all" if user.is_platform_admin else user.username
    return f"audit_{whose}_{timezone.now().astimezone(UTC):%Y-%m-%dT%H%M%SZ}.csv"


def audit_export(*, user: User, events: QuerySet[AuditEvent]) -> StreamingHttpResponse:
    """`events` (already narrowed to what the user may see and to the filters) as a CSV download."""
    rows = events.select_related("actor", "team").iterator(chunk_size=CHUNK_SIZE)
    response = StreamingHttpResponse(audit_csv_lines(rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{audit_export_filename(user=user)}"'
    response["Cache-Control"] = "private, no-store"
    return response
