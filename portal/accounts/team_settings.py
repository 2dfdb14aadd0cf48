"""A team's settings its leads keep: the Hugging Face token its model servers download gated
models with, its webhook, how long a request waits before its leads are reminded, and idle
reclaim (when idle GPUs are warned of and taken back). The *Team settings* page and
`/api/v1/teams/{slug}/settings` both go through here."""

from __future__ import annotations

from django.db import transaction

from portal.accounts.models import Membership, Team, User
from portal.accounts.notifications import team_notifications_set
from portal.accounts.selectors import user_role
from portal.accounts.services import team_hf_token_set
from portal.audit.services import audit_record
from portal.core.errors import NotAllowed, NotFound, ValidationFailed
from portal.core.text import sentence


def team_settings_of(*, user: User, slug: str) -> Team:
    """The team, for one of its leads or a platform admin. To anyone else outside the team it
    does not exist (NotFound); to its other members it is NotAllowed."""
    team = Team.objects.filter(slug=slug).first()
    role = user_role(user=user, team=team) if team is not None else None
    if team is None or (role is None and not user.is_platform_admin):
        raise NotFound(f"No team {slug}.")
    if not (user.is_platform_admin or role == Membership.Role.LEAD):
        raise NotAllowed("Team settings are for the team's leads and platform admins.")
    return team


@transaction.atomic
def team_settings_set(
    *,
    user: User,
    slug: str,
    hf_token: str | None = None,
    webhook_url: str | None = None,
    webhook_format: str | None = None,
    approval_reminder_hours: int | str | None = None,
    idle_reclaim_minutes: int | str | None = None,
    idle_threshold_percent: int | str | None = None,
    idle_grace_minutes: int | str | None = None,
) -> Team:
    """Change what is given ("" clears the token or the webhook); what is left out stays. All of it
    or nothing: a refused value changes nothing. Audited as each part is. Numbers may come as a
    form's text."""
    team = team_settings_of(user=user, slug=slug)
    team = Team.objects.select_for_update().get(pk=team.pk)  # what is left out is kept as it is now
    if hf_token is not None:
        try:
            team_hf_token_set(user=user, team_slug=team.slug, token=hf_token)
        except ValidationFailed as refused:  # named as the API's field is
            raise ValidationFailed(refused.message, fields={"hf_token": [refused.message]}) from refused
    if (webhook_url, webhook_format, approval_reminder_hours) != (None, None, None):
        team_notifications_set(
            user=user,
            team_slug=team.slug,
            webhook_url=team.webhook_url if webhook_url is None else webhook_url,
            webhook_format=webhook_format or team.webhook_format,
            approval_reminder_hours=(
                team.approval_reminder_hours if approval_reminder_hours is None else approval_reminder_hours
            ),
        )
    idle = {
        "idle_reclaim_minutes": idle_reclaim_minutes,
        "idle_threshold_percent": idle_threshold_percent,
        "idle_grace_minutes": idle_grace_minutes,
    }
    _idle_reclaim_set(user=user, team=team, given=idle)
    team.refresh_from_db()
    return team


IDLE_BOUNDS = {  # field: (smallest, largest, what it means)
    "idle_reclaim_minutes": (
        0,
        10080,
        "minutes of idle GPUs before the warning: 0 (off) or 10 to 10080 (a week)",
    ),
    "idle_threshold_percent": (1, 100, "percent GPU utilization under which it counts as idle: 1 to 100"),
    "idle_grace_minutes": (5, 1440, "minutes from the warning to the end: 5 to 1440 (a day)"),
}


def _idle_reclaim_set(*, user: User, team: Team, given: dict[str, int | str | None]) -> None:
    """Idle reclaim's parts that are given (not None), each within IDLE_BOUNDS; audited if any
    changes."""
    changes: dict[str, int] = {}
    for name, value in given.items():
        if value is None:
            continue
        smallest, largest, meaning = IDLE_BOUNDS[name]
        number = _whole(value)
        if (
            number is None
            or not smallest <= number <= largest
            or (name == "idle_reclaim_minutes" and 0 < number < 10)
        ):
            raise ValidationFailed(f"Idle reclaim: {meaning}.", fields={name: [f"{sentence(meaning)}."]})
        if number != getattr(team, name):  # saved as it was: nothing to change or audit
            changes[name] = number
    if not changes:
        return
    Team.objects.filter(pk=team.pk).update(**changes)
    team.refresh_from_db()
    detail = (
        f"warned after {team.idle_reclaim_minutes} min under {team.idle_threshold_percent} % utilization, "
        f"ended {team.idle_grace_minutes} min later"
        if team.idle_reclaim_minutes
        else "off"
    )
    audit_record(actor=user, action="team.idle_reclaim_set", obj=team, team=team, detail=detail)


def _whole(value: int | str) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    return int(text) if text.isascii() and text.isdigit() else None
