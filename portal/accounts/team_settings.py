"""A team's settings its leads keep: the Hugging Face token its model servers download gated
models with, its webhook, and how long a request waits before its leads are reminded. The
*Team settings* page and `/api/v1/teams/{slug}/settings` both go through here."""

from __future__ import annotations

from django.db import transaction

from portal.accounts.models import Membership, Team, User
from portal.accounts.notifications import team_notifications_set
from portal.accounts.selectors import user_role
from portal.accounts.services import team_hf_token_set
from portal.core.errors import NotAllowed, NotFound, ValidationFailed


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
) -> Team:
    """Change what is given ("" clears the token or the webhook); what is left out stays. All of it
    or nothing: a refused value changes nothing. Audited as each part is."""
    team = team_settings_of(user=user, slug=slug)
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
    team.refresh_from_db()
    return team
