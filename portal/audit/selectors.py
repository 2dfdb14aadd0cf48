from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from django.db.models import Q, QuerySet

if TYPE_CHECKING:  # audit sits below accounts: it knows users and teams as foreign keys only
    from portal.accounts.models import User
from portal.audit.models import AuditEvent


def audit_events_visible_to(user: User) -> QuerySet[AuditEvent]:
    """Admins see every event; leads see their teams' events; others none."""
    events = AuditEvent.objects.select_related("actor", "team")
    if user.is_platform_admin:
        return events
    return events.filter(Q(team_id__in=_led_team_ids(user)))


def audit_log_allowed(user: User) -> bool:
    """The audit log is for platform admins and team leads."""
    return user.is_platform_admin or _led_team_ids(user).exists()


def _led_team_ids(user: User) -> QuerySet:
    return user.memberships.filter(role="lead").values("team_id")


# How an object type's pages are found from the object ids events name: {object_id: url} for a
# list of ids. The apps above audit register theirs (portal.workloads: sandboxes and deployments,
# whose pages go by their number within their kind, not by the id events keep).
ObjectLinker = Callable[[list[str]], dict[str, str]]
_OBJECT_LINKERS: dict[str, ObjectLinker] = {}


def register_object_linker(object_type: str, linker: ObjectLinker) -> None:
    _OBJECT_LINKERS[object_type] = linker


# How the id people know an object by (a sandbox's number) becomes the id events keep; None: no
# such object. Registered by the apps above audit, like the linkers.
ObjectIdResolver = Callable[[str], str | None]
_OBJECT_IDS: dict[str, ObjectIdResolver] = {}


def register_object_id_resolver(object_type: str, resolver: ObjectIdResolver) -> None:
    _OBJECT_IDS[object_type] = resolver


def audit_object_id(object_type: str, shown: str) -> str | None:
    """The object id events keep for the object of `object_type` people call `shown`."""
    resolver = _OBJECT_IDS.get(object_type)
    return shown if resolver is None else resolver(shown)


# How the ids events keep become the ids people know the objects by ({object_id: shown id} for a
# list of ids; a sandbox's number). Registered by the apps above audit, like the linkers.
ObjectNumberer = Callable[[list[str]], dict[str, str]]
_OBJECT_NUMBERS: dict[str, ObjectNumberer] = {}


def register_object_numberer(object_type: str, numberer: ObjectNumberer) -> None:
    _OBJECT_NUMBERS[object_type] = numberer


def audit_shown_ids(events: Iterable[AuditEvent]) -> dict[tuple[str, str], str]:
    """{(object_type, object_id): the id people know the object by} for the events' objects of the
    types that have one (a sandbox's or deployment's number; "" when the object is gone); one
    query per such object type. Other objects are known by the id events keep."""
    ids: dict[str, set[str]] = {}
    for event in events:
        if event.object_type in _OBJECT_NUMBERS:
            ids.setdefault(event.object_type, set()).add(event.object_id)
    shown: dict[tuple[str, str], str] = {}
    for object_type, found in ids.items():
        numbers = _OBJECT_NUMBERS[object_type](sorted(found))
        shown.update({(object_type, object_id): numbers.get(object_id, "") for object_id in found})
    return shown


def audit_object_urls(events: Iterable[AuditEvent]) -> list[AuditEvent]:
    """The events, each with `object_url`: the page of the object it is about, or "" (an object
    type without pages, or an object gone); one query per object type."""
    events = list(events)
    ids: dict[str, list[str]] = {}
    for event in events:
        if event.object_type in _OBJECT_LINKERS:
            ids.setdefault(event.object_type, []).append(event.object_id)
    urls = {object_type: _OBJECT_LINKERS[object_type](found) for object_type, found in ids.items()}
    for event in events:
        event.object_url = urls.get(event.object_type, {}).get(event.object_id, "")
    return events
