"""The sandbox gate: who may pass a sandbox's route, asked on every request to every sandbox.

The cluster's ingress asks the portal's check endpoint before each request reaches a sandbox
(ingress-nginx `auth-url`, a Gateway's ExternalAuth filter). The portal's own session cookie never
goes to sandbox hosts: it stays on the portal's host. A person signs in at the portal, which sends
them back to the sandbox with a one-time ticket (60 s, bound to them and to that host); the check
turns the ticket into a gate cookie of that sandbox host alone (no Domain attribute, so no other
sandbox and not the portal see it; HttpOnly; signed, holding the user, the host and how often the
user had signed out of the portal). Every check then re-reads who may pass (its owner and those
they share with, while members of its team; the sandbox running) through a cache of a few
seconds, so ending or unsharing a sandbox, or removing someone from its team, shuts its door
within that time, and a password change (the session hash in the cookie) or signing out of the
portal signs the person out of every sandbox.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

from cachetools import TTLCache, cached
from cachetools.keys import hashkey
from django.core import signing
from django.core.cache import caches
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from portal.accounts.models import Membership, User
from portal.accounts.selectors import is_platform_admin_id
from portal.core.errors import NotAllowed, NotFound
from portal.core.proxies import url_hostname
from portal.workloads.models import Image, Workload, WorkloadKind, WorkloadState

COOKIE = "gpu_portal_sandbox"
TICKET_PARAM = "portal_ticket"
TICKET_SECONDS = 60
COOKIE_SECONDS = 12 * 3600
FACTS_SECONDS = 5.0
_TICKET_SALT = "portal.sandboxes.gate.ticket"
_COOKIE_SALT = "portal.sandboxes.gate.cookie"


@dataclass(frozen=True)
class SandboxDoor:
    """What the gate needs to know of the sandbox behind a host."""

    workload_id: int
    owner_id: int
    allowed: frozenset[int]  # the owner and those they share with, while members of its team
    owner_left: bool  # its owner is no longer in its team (so not in `allowed`)
    state: str
    expires_at: datetime | None


@dataclass(frozen=True)
class Person:
    user_id: int
    username: str
    active: bool
    session_hash: str
    sign_outs: int

    @classmethod
    def of(cls, user: User) -> Person:
        return cls(user.pk, user.username, user.is_active, user.get_session_auth_hash()[:16], user.sign_outs)


@dataclass(frozen=True)
class GateDecision:
    """200 lets the request through as `username`; 401 sends the browser to sign in; 403 refuses.
    `cookie` is a gate cookie to set (a ticket was just redeemed), for `cookie_seconds`."""

    status: int
    reason: str
    username: str = ""
    cookie: str = ""
    cookie_seconds: int = 0


def gate_cache_clear() -> None:
    """Forget every cached fact (tests; an admin's change is seen within FACTS_SECONDS anyway)."""
    gate_door.cache_clear()
    _person.cache_clear()


def sandbox_host(workload: Workload) -> str:
    """The host a sandbox is reached at: `<namespace>.<its cluster's sandbox domain>`."""
    if not workload.namespace or workload.cluster is None:
        return ""
    return f"{workload.namespace}.{workload.cluster.sandbox_base_domain}"


def sandbox_app_url(workload: Workload) -> str:
    """Where "Open JupyterLab" / "Open VS Code" leads: the portal's sign-in step, which sends
    the person on to the sandbox's host with a ticket (to the portal's stand-in page on a
    simulated cluster). "" while the sandbox is not running or has no web app (ssh)."""
    if workload.state != WorkloadState.RUNNING or workload.image is None:
        return ""
    if workload.image.kind == Image.Kind.SHELL:
        return ""
    host = sandbox_host(workload)
    if not host:
        return ""
    simulated = workload.cluster is not None and workload.cluster.driver == "simulated"
    target = reverse("sandbox-simulated", args=[host]) if simulated else f"https://{host}/"
    return f"{reverse('sandbox-gate-signin')}?{urlencode({'rd': target})}"


def _split(url: str) -> SplitResult | None:
    """The URL's parts, or None for one that cannot be parsed (`https://[x/`)."""
    try:
        parts = urlsplit(url)
        parts.hostname  # noqa: B018 (an invalid host only shows when asked for)
    except ValueError:
        return None
    return parts


@cached(TTLCache(maxsize=10_000, ttl=FACTS_SECONDS), lock=threading.Lock())
def gate_door(host: str) -> SandboxDoor | None:
    namespace = host.split(".", 1)[0]
    workload = (
        Workload.objects.filter(namespace=namespace, kind=WorkloadKind.SANDBOX)
        .select_related("cluster")
        .only("id", "owner_id", "team_id", "state", "expires_at", "namespace", "cluster")
        .order_by("-pk")
        .first()
    )
    door = None
    if workload is not None and sandbox_host(workload) == host:
        # its owner and those it is shared with, each while a member of its team: one query
        inside = set(
            Membership.objects.filter(team_id=workload.team_id)
            .filter(Q(user_id=workload.owner_id) | Q(user__shared_workloads=workload))
            .values_list("user_id", flat=True)
        )
        # an owner out of the team has left it, unless an admin (as owner_left_team); asked only then
        left = workload.owner_id not in inside and not is_platform_admin_id(workload.owner_id)
        door = SandboxDoor(
            workload_id=workload.pk,
            owner_id=workload.owner_id,
            allowed=frozenset(inside if left else {*inside, workload.owner_id}),
            owner_left=left,
            state=workload.state,
            expires_at=workload.expires_at,
        )
    return door


_PEOPLE: TTLCache = TTLCache(maxsize=10_000, ttl=FACTS_SECONDS)
_PEOPLE_LOCK = threading.Lock()


def gate_forget_person(user_id: int) -> None:
    """Read the person again at their next check in this process (they signed out)."""
    with _PEOPLE_LOCK:
        _PEOPLE.pop(hashkey(user_id), None)


@cached(_PEOPLE, lock=_PEOPLE_LOCK)
def _person(user_id: int) -> Person | None:
    user = (
        User.objects.filter(pk=user_id).only("id", "username", "is_active", "password", "sign_outs").first()
    )
    return None if user is None else Person.of(user)


def _refusal(door: SandboxDoor | None, person: Person, now: datetime) -> str:
    """Why `person` may not pass `door` now, or "" when they may."""
    if door is None:
        return "There is no sandbox at this address."
    if person.user_id == door.owner_id and door.owner_left:
        return "You are no longer a member of this sandbox's team: you may still end it in the portal."
    if person.user_id not in door.allowed:
        return "This sandbox is not shared with you: ask its owner to share it."
    if door.state != WorkloadState.RUNNING:
        ended = door.state not in (
            WorkloadState.PENDING_APPROVAL,
            WorkloadState.QUEUED,
            WorkloadState.PROVISIONING,
        )
        return "This sandbox has ended." if ended else "This sandbox is not running yet."
    if door.expires_at is not None and door.expires_at <= now:
        return "This sandbox has expired."
    return ""


def _default_port(parts: SplitResult) -> bool:
    try:
        return parts.port in (None, 443)
    except ValueError:  # not a port number
        return False


def gate_ticket_issue(*, user: User, url: str) -> str:
    """A one-time ticket that lets `user` into the sandbox at `url`'s host: the sign-in step.
    Refused (NotFound, NotAllowed) unless the host is a sandbox they may enter now, so the
    sign-in redirect can never send anyone to a host that is not a sandbox."""
    parts = _split(url)
    # https on its default port only, as sandbox_app_url links it: the ticket is a credential
    host = url_hostname(url) if parts is not None and parts.scheme == "https" and _default_port(parts) else ""
    door = gate_door(host) if host else None
    if door is None:
        raise NotFound("There is no sandbox at this address.")
    person = Person.of(user)
    reason = _refusal(door, person, timezone.now())
    if reason:
        raise NotAllowed(reason)
    claim = {"u": user.pk, "h": host, "o": user.sign_outs, "n": secrets.token_urlsafe(12)}
    return signing.dumps(claim, salt=_TICKET_SALT)


def gate_decide(
    *, host: str, cookie: str = "", ticket: str = "", now: datetime | None = None
) -> GateDecision:
    """May the bearer of `cookie` (or of a fresh `ticket`) reach the sandbox at `host`?"""
    now = now or timezone.now()
    host = host.lower()
    door = gate_door(host)
    if ticket:
        try:
            claim = signing.loads(ticket, salt=_TICKET_SALT, max_age=TICKET_SECONDS)
        except signing.BadSignature:
            return GateDecision(401, "The sign-in link has expired or is not valid: sign in again.")
        person = _person(int(claim["u"]))
        if claim.get("h") != host or person is None or not person.active:
            return GateDecision(401, "The sign-in link is for another sandbox: sign in again.")
        # Its count was read fresh when it was issued; the person's here may be a few seconds
        # old, so only a count below theirs (a sign-out since) refuses it.
        sign_outs = int(claim.get("o", 0))
        if sign_outs < person.sign_outs:
            return GateDecision(401, "You signed out of the portal since: sign in again.")
        if not caches["shared"].add(f"gate-ticket:{claim['n']}", 1, TICKET_SECONDS + 5):
            return GateDecision(401, "The sign-in link was used already: sign in again.")
        reason = _refusal(door, person, now)
        if reason:
            return GateDecision(403, reason, person.username)
        value = signing.dumps(
            {"u": person.user_id, "h": host, "a": person.session_hash, "o": sign_outs},
            salt=_COOKIE_SALT,
        )
        seconds = COOKIE_SECONDS
        if door is not None and door.expires_at is not None:
            seconds = max(1, min(seconds, int((door.expires_at - now).total_seconds())))
        return GateDecision(200, "", person.username, cookie=value, cookie_seconds=seconds)
    if not cookie:
        return GateDecision(401, "Sign in to the portal to open this sandbox.")
    try:
        claim = signing.loads(cookie, salt=_COOKIE_SALT, max_age=COOKIE_SECONDS)
    except signing.BadSignature:
        return GateDecision(401, "Your sign-in to this sandbox has expired: sign in again.")
    person = _person(int(claim["u"]))
    if (
        claim.get("h") != host
        or person is None
        or not person.active
        or person.session_hash != claim.get("a")
        or int(claim.get("o", 0)) < person.sign_outs  # signed out since it was given
    ):
        return GateDecision(401, "Sign in to the portal again to open this sandbox.")
    reason = _refusal(door, person, now)
    return GateDecision(403, reason, person.username) if reason else GateDecision(200, "", person.username)


def with_ticket(url: str, ticket: str) -> str:
    """`url` (one a ticket was issued for, so it parses) with the ticket added to its query."""
    parts = urlsplit(url)
    query = [
        (key, value) for key, value in parse_qsl(parts.query, keep_blank_values=True) if key != TICKET_PARAM
    ]
    query.append((TICKET_PARAM, ticket))
    return urlunsplit(parts._replace(query=urlencode(query)))


def without_ticket(url: str) -> str:
    """`url` with any ticket taken out of its query (what the browser should keep)."""
    parts = _split(url)
    if parts is None:
        return url
    query = [
        (key, value) for key, value in parse_qsl(parts.query, keep_blank_values=True) if key != TICKET_PARAM
    ]
    return urlunsplit(parts._replace(query=urlencode(query)))


def ticket_in(url: str) -> str:
    """The ticket a URL carries, or ""."""
    parts = _split(url)
    for key, value in parse_qsl(parts.query if parts else "", keep_blank_values=True):
        if key == TICKET_PARAM:
            return value
    return ""
