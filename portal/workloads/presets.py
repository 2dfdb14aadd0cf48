"""Presets: saved request forms, a user's own or a team's (saved by one of its leads).

A preset's body is a request body as the API takes it. Each kind's app registers the check its
body must pass (`register_preset_check`): the same serializer and request rules as a real
request, run on save and again on use, so a preset gone stale (a GPU type or image retired, a
team left) gives a clear message rather than a bad form.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

from portal.accounts.models import Membership, Team, User
from portal.accounts.selectors import is_lead
from portal.audit.services import audit_record
from portal.core.errors import Conflict, NotAllowed, NotFound, ValidationFailed
from portal.workloads.models import Preset, WorkloadKind

PRESETS_PER_OWNER = 50
PresetCheck = Callable[[User, dict[str, Any]], dict[str, Any]]
_CHECKS: dict[str, PresetCheck] = {}


def register_preset_check(kind: str, check: PresetCheck) -> None:
    """How a body of `kind` is checked: it returns the body to keep, or raises ValidationFailed."""
    _CHECKS[kind] = check


def known_fields(fields: Any, body: dict[str, Any], *, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """What a preset keeps of a checked body: the request's own fields (`fields`, a serializer's),
    nested objects (the GPU) down to theirs, so nothing the request ignores is stored and handed to
    the team's members with the preset."""
    kept: dict[str, Any] = {}
    for key, field in fields.items():
        if key not in body or key in leave_out:
            continue
        value = body[key]
        nested = getattr(field, "fields", None)
        kept[key] = known_fields(nested, value) if nested is not None and isinstance(value, dict) else value
    return kept


def preset_check(*, user: User, kind: str, body: object) -> dict[str, Any]:
    """The body, checked as a request of `kind` by `user` (without the name, which a preset need not have)."""
    if kind not in WorkloadKind.values:
        raise ValidationFailed(
            f"Unknown kind {kind!r}; a preset is for a sandbox or a deployment.", fields={"kind": ["unknown"]}
        )
    if not isinstance(body, dict):
        raise ValidationFailed(
            "A preset's body is a request body (a JSON object).", fields={"body": ["not an object"]}
        )
    return _CHECKS[kind](user, body)


def _gpu_words(gpu: object) -> str:
    if not isinstance(gpu, dict) or not gpu.get("type"):
        return "the cheapest GPU that fits"
    if gpu.get("mig_profile"):
        return f"one {gpu['mig_profile']} slice of {gpu['type']}"
    count = gpu.get("count") or 1
    return f"{count} {gpu['type']} GPU{'s' if count != 1 else ''}"


def _until(value: object) -> str:
    moment = parse_datetime(value) if isinstance(value, str) else None
    if moment is None:
        return f"until {value}"
    moment = moment.astimezone(UTC) if moment.tzinfo else moment
    return f"until {moment:%b} {moment.day}, {moment:%Y %H:%M} UTC"


def preset_summary(body: dict[str, Any], team_names: dict[str, str] | None = None) -> list[str]:
    """What a preset fills in, in a few words each, for its row on the presets page (a body is a
    request body: the words follow the API's field names; a team by its name where given)."""
    team = body.get("team")
    words = [f"team {(team_names or {}).get(team, team)}"] if team else []
    if body.get("model"):
        words.append(f"model {body['model']}")
    words.append(_gpu_words(body.get("gpu")))
    if (body.get("replicas") or 1) != 1:
        words.append(f"{body['replicas']} replicas")
    if body.get("ttl_hours") not in (None, ""):
        words.append(f"{body['ttl_hours']} h")
    elif body.get("expires_at"):
        words.append(_until(body["expires_at"]))
    for key, label in (("image", "image"), ("project", "project"), ("dtype", "dtype")):
        if body.get(key):
            words.append(f"{label} {body[key]}")
    for key, unit in (("cpu", "CPUs"), ("memory_gb", "GB memory"), ("storage_gb", "GB scratch"),
                      ("context", "tokens context"), ("concurrency", "concurrent sequences")):  # fmt: skip
        if body.get(key):
            words.append(f"{body[key]} {unit}")
    if body.get("datasets"):
        words.append("datasets " + ", ".join(body["datasets"]))
    return words


def presets_visible_to(user: User) -> QuerySet[Preset]:
    """The user's own presets and those of their teams."""
    team_ids = Membership.objects.filter(user=user).values("team_id")
    return Preset.objects.select_related("team", "created_by").filter(Q(owner=user) | Q(team_id__in=team_ids))


def presets_for(*, user: User, kind: str) -> list[Preset]:
    return list(presets_visible_to(user).filter(kind=kind))


def preset_get_for(*, user: User, preset_id: int, kind: str | None = None) -> Preset:
    """A preset the user may see (of `kind`, when given); else NotFound, for others' alike."""
    presets = presets_visible_to(user)
    if kind is not None:
        presets = presets.filter(kind=kind)
    preset = presets.filter(pk=preset_id).first()
    if preset is None:
        raise NotFound(f"No preset #{preset_id} of yours or your teams'.")
    return preset


def preset_body_for_use(*, user: User, preset: Preset) -> dict[str, Any]:
    """The preset's body checked again now: a stale value is a ValidationFailed naming the preset."""
    try:
        return preset_check(user=user, kind=preset.kind, body=preset.body)
    except ValidationFailed as error:
        raise ValidationFailed(
            f"Preset {preset.name} no longer fits: {error.message} Save it again with today's choices.",
            fields=error.fields,
        ) from None


@transaction.atomic
def preset_save(
    *, user: User, kind: str, name: str, body: object, team: str | None = None, replace: bool = True
) -> Preset:
    """Save a preset: personal, or team-wide when `team` is given (its leads only). Its body is
    checked as a request; a name already used by the same owner is replaced, unless not to
    `replace` (the page asks first: Conflict)."""
    name = (name or "").strip()
    if not name or len(name) > 60:
        raise ValidationFailed("Name the preset (1-60 characters).", fields={"name": ["1-60 characters"]})
    owner_team = None
    if team:
        owner_team = Team.objects.filter(slug=team).first()
        if owner_team is None or not (user.is_platform_admin or is_lead(user=user, team=owner_team)):
            raise NotAllowed(f"Only a lead of team {team} saves presets for the whole team.")
    checked = preset_check(user=user, kind=kind, body=body)
    checked.pop("name", None)  # each request names itself
    scope = {"team": owner_team} if owner_team else {"owner": user}
    existing = Preset.objects.filter(kind=kind, name=name, **scope).first()
    if existing is not None and not replace:
        raise Conflict(
            f"A preset called {name} exists already: tick “Replace it” to save these settings over it, "
            "or choose another name."
        )
    if existing is None and Preset.objects.filter(kind=kind, **scope).count() >= PRESETS_PER_OWNER:
        raise ValidationFailed(f"At most {PRESETS_PER_OWNER} {kind} presets each; delete one first.")
    try:
        preset, _ = Preset.objects.update_or_create(
            kind=kind, name=name, **scope, defaults={"body": checked, "created_by": user}
        )
    except IntegrityError:
        raise ValidationFailed(f"A preset called {name!r} was just saved; try again.") from None
    audit_record(
        actor=user,
        action="preset.save",
        obj=preset,
        team=owner_team,
        detail=f"{kind} preset {name} ({preset.scope})",
    )
    return preset


@transaction.atomic
def preset_delete(*, user: User, preset_id: int) -> None:
    """Delete a preset: one's own, or a team's by one of its leads (others 404 or 403)."""
    preset = preset_get_for(user=user, preset_id=preset_id)
    if preset.team_id and not (user.is_platform_admin or is_lead(user=user, team=preset.team)):
        raise NotAllowed(f"Only a lead of team {preset.team.slug} deletes its presets.")
    audit_record(
        actor=user,
        action="preset.delete",
        obj=preset,
        team=preset.team,
        detail=f"{preset.kind} preset {preset.name}",
    )
    preset.delete()
