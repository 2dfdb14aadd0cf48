"""The endpoint gate: who may call a deployment's endpoint, asked before every request to it.

The cluster's ingress asks the portal's endpoint check before each request reaches a model server
(ingress-nginx `auth-url`, a Gateway's ExternalAuth filter), passing the client's headers on. A
client sends `Authorization: Bearer <token>`: a personal token of scope `serving` made for the
deployment's team, of a member of that team, while the deployment serves and before its expiry.
Nothing of the portal's API accepts a serving token and it opens one team's endpoints only, so
what a model server could learn from it (the ingress passes the header on) opens nothing its own
team could not call already. No browser sign-in: a refusal reaches the client as 401 or 403 with
the reason.

What the check reads (the deployment behind a host with its team's members, a token) is kept a
few seconds in each process, so ending the deployment, leaving the team or revoking the token
shuts the door within that time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from cachetools import TTLCache, cached
from django.utils import timezone

from portal.accounts.models import ApiToken, Membership
from portal.accounts.services import hash_token, token_authenticate
from portal.deployments.selectors import ENDPOINT_STATES
from portal.workloads.models import Workload, WorkloadKind, WorkloadState

ENDPOINT_HOST_PREFIX = "dep-"  # `dep-<team>-<name>-<id>.<domain>`, the id after the last dash
FACTS_SECONDS = 5.0
SERVING_TOKEN_HINT = "create a token of scope serving under API tokens"  # noqa: S105 (words, not a secret)


@dataclass(frozen=True)
class EndpointDoor:
    """What the gate needs to know of the deployment behind a host."""

    workload_id: int
    team_id: int
    team_name: str
    members: dict[int, datetime]  # user id -> when their membership of its team began
    state: str
    expires_at: datetime | None


@dataclass(frozen=True)
class Caller:
    """Who a valid token stands for, and what it may do."""

    username: str
    user_id: int
    scope: str
    team_id: int | None  # a serving token's team
    created_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True)
class EndpointDecision:
    """200 lets the request through as `username`; 401 asks for a token; 403 refuses."""

    status: int
    reason: str
    username: str = ""


def endpoint_gate_cache_clear() -> None:
    """Forget every cached fact (tests; a change is seen within FACTS_SECONDS anyway)."""
    endpoint_door.cache_clear()
    _caller.cache_clear()


@cached(TTLCache(maxsize=10_000, ttl=FACTS_SECONDS), lock=threading.Lock())
def endpoint_door(host: str) -> EndpointDoor | None:
    """The deployment whose endpoint is at `host`, or None."""
    label = host.split(".", 1)[0]
    number = label.rsplit("-", 1)[-1]
    door = None
    if label.startswith(ENDPOINT_HOST_PREFIX) and number.isascii() and number.isdigit():
        workload = (
            Workload.objects.filter(pk=int(number), kind=WorkloadKind.DEPLOYMENT)
            .select_related("team")
            .only("id", "access", "state", "expires_at", "team_id", "team__name")
            .first()
        )
        if workload is not None and (urlsplit(workload.access).hostname or "") == host:
            members = Membership.objects.filter(team_id=workload.team_id).values_list("user_id", "created_at")
            door = EndpointDoor(
                workload_id=workload.pk,
                team_id=workload.team_id,
                team_name=workload.team.name,
                members=dict(members),
                state=workload.state,
                expires_at=workload.expires_at,
            )
    return door


# kept by the token's hash: the secret itself is not held as a key
@cached(TTLCache(maxsize=10_000, ttl=FACTS_SECONDS), lock=threading.Lock(), key=hash_token)
def _caller(raw: str) -> Caller | None:
    token = token_authenticate(raw=raw)
    if token is None:
        return None
    return Caller(
        token.user.username, token.user_id, token.scope, token.team_id, token.created_at, token.expires_at
    )


def _refusal(door: EndpointDoor, now: datetime) -> str:
    """Why nobody may call `door` now, or "" while it serves."""
    if door.state not in ENDPOINT_STATES:
        waiting = door.state in (WorkloadState.PENDING_APPROVAL, WorkloadState.QUEUED)
        return "This deployment is not serving yet." if waiting else "This deployment has ended."
    if door.expires_at is not None and door.expires_at <= now:
        return "This deployment has expired."
    return ""


def endpoint_decide(*, host: str, authorization: str, now: datetime | None = None) -> EndpointDecision:
    """May the bearer of `authorization` (the request's Authorization header) call the
    deployment at `host`?"""
    now = now or timezone.now()
    door = endpoint_door(host.lower())
    if door is None:
        return EndpointDecision(403, "There is no deployment at this address.")
    parts = authorization.split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return EndpointDecision(
            401, f"Send 'Authorization: Bearer <token>' with a serving token ({SERVING_TOKEN_HINT})."
        )
    caller = _caller(parts[1])
    if caller is None or (caller.expires_at is not None and caller.expires_at <= now):
        return EndpointDecision(401, "The token is invalid, expired or revoked.")
    if caller.scope != ApiToken.Scope.SERVING:
        return EndpointDecision(
            403,
            f"Only a token of scope serving calls model endpoints, not one of scope {caller.scope}: "
            f"{SERVING_TOKEN_HINT}.",
            caller.username,
        )
    if caller.team_id is None:
        return EndpointDecision(
            403,
            f"This serving token names no team: make one for team {door.team_name} under API tokens.",
            caller.username,
        )
    if caller.team_id != door.team_id:
        return EndpointDecision(
            403,
            f"This token calls another team's endpoints; this deployment is team {door.team_name}'s.",
            caller.username,
        )
    joined = door.members.get(caller.user_id)
    if joined is None:
        return EndpointDecision(
            403, f"This deployment is team {door.team_name}'s, and you are not a member.", caller.username
        )
    if caller.created_at < joined:
        return EndpointDecision(
            403,
            f"This token was made before you (re)joined team {door.team_name}: make a new one.",
            caller.username,
        )
    reason = _refusal(door, now)
    return (
        EndpointDecision(403, reason, caller.username)
        if reason
        else EndpointDecision(200, "", caller.username)
    )
