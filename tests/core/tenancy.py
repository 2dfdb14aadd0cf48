"""What the tenancy matrices share: the object routes of the URL configuration, one object of team
vision for each kind of route, and the three callers who must not learn that it exists."""

from __future__ import annotations

import re
from collections.abc import Iterator

from django.urls import URLPattern, URLResolver, get_resolver

from portal.accounts.action_links import action_token_make
from portal.accounts.models import ApiToken, Membership, Notification
from portal.accounts.services import token_create
from portal.accounts.ssh_keys import ssh_key_add
from portal.workloads.models import Approval, Preset, WorkloadKind
from tests.accounts.test_ssh_keys import ED25519
from tests.factories import MembershipFactory, UserFactory
from tests.rows import make_deployment, make_sandbox

# A route's object is named by its `pk`, `number` (a sandbox's or deployment's page) or `slug`
# (<int:pk>, <int:number>, <slug:slug>, <str:slug>); other parameters (a month, a file format, a
# host behind the sandbox gate) name no object.
PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>")
OBJECT_NAMES = {"pk", "number", "slug"}
EXAMPLES = {"month": "2026-03", "fmt": "csv", "kind": "user", "target": "alice"}
# What an object route's path begins with, and so which object of team vision to try.
OBJECT_KINDS = {
    "spend/statement": "team",
    "tokens": "token",
    "ssh-keys": "ssh_key",
    "sandboxes": "sandbox",
    "approvals": "approval",
    "deployments": "deployment",
    "teams": "team",
    "fleet": "node",
    "catalog": "catalog",
    "notifications": "notification",
    "presets": "preset",
}
ROLES = ("researcher_of_another_team", "lead_of_another_team", "anonymous")


def routes(patterns=None, prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    """Every route of the URL configuration with the pattern that serves it."""
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(entry, URLResolver):
            yield from routes(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry


def object_routes(*, api: bool) -> list[tuple[str, URLPattern]]:
    """The routes that name one object, of the API (`api/v1/`) or of the web pages."""
    found = {}
    for route, pattern in routes():
        if not OBJECT_NAMES & set(PARAMETER.findall(route)) or route.startswith("admin/"):
            continue
        if route.startswith("api/v1/") == api and not route.startswith(("api/schema", "api/docs")):
            found[route] = pattern
    return sorted(found.items())


def kind_of(route: str) -> str | None:
    path = route.removeprefix("api/v1/")
    begins = [prefix for prefix in OBJECT_KINDS if path == prefix or path.startswith(prefix + "/")]
    return OBJECT_KINDS[max(begins, key=len)] if begins else None


def url_for(route: str, value: object, objects: dict[str, object] | None = None) -> str:
    """The route with its object parameter filled in (and any other with an example, or with the
    signed approval link of `objects` for a `token`)."""
    examples = {**EXAMPLES, "token": str((objects or {}).get("action_token", "x"))}

    def fill(match: re.Match) -> str:
        name = match.group(1)
        return str(value) if name in OBJECT_NAMES else examples[name]

    return "/" + PARAMETER.sub(fill, route)


def team_objects(*, researcher, team, gpus, fleet) -> dict[str, object]:
    """One object of each kind, of team vision (a sandbox and a deployment of its researcher, an
    approval waiting for its lead, the researcher's token), as the value its route takes."""
    sandbox = make_sandbox(owner=researcher, team=team, gpu=gpus[0])
    deployment = make_deployment(owner=researcher, team=team, gpu=gpus[1])
    approval = Approval.objects.create(
        workload=sandbox, team=team, kind=Approval.Kind.CREATE, requested_by=researcher
    )
    token, _ = token_create(user=researcher, name="laptop", scope=ApiToken.Scope.WORKLOADS)
    ssh_key = ssh_key_add(user=researcher, name="laptop", public_key=ED25519)
    notification = Notification.objects.create(user=researcher, message="Sandbox box is running.")
    preset = Preset.objects.create(
        kind=WorkloadKind.SANDBOX, name="one slice", owner=researcher, created_by=researcher, body={}
    )
    return {
        "token": token.pk,
        "ssh_key": ssh_key.pk,
        "sandbox": sandbox.number,  # pages and API paths name them by their number within their kind
        "deployment": deployment.number,
        "approval": approval.pk,
        "team": team.slug,
        "node": fleet["whole"].pk,
        "catalog": deployment.serving.model.slug,
        "notification": notification.pk,
        "preset": preset.pk,
        # A signed approve link made out to the approval's requester: a valid link in the wrong hands.
        "action_token": action_token_make(approval_id=approval.pk, lead_id=researcher.pk, action="approve"),
    }


def lead_of(team):
    """A lead of `team` (the other team's lead: dave of nlp)."""
    user = UserFactory(username="dave")
    MembershipFactory(user=user, team=team, role=Membership.Role.LEAD)
    return user
