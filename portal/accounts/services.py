"""Accounts: personal access tokens and notifications."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from portal.accounts.models import ApiToken, Notification, Team, User
from portal.accounts.selectors import is_lead
from portal.audit.services import audit_record
from portal.core.errors import Conflict, NotAllowed, NotFound, ValidationFailed

TOKEN_PREFIX = "gpp_"  # noqa: S105 - a public prefix, not a secret


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


SCOPE_RANK = {ApiToken.Scope.READ: 0, ApiToken.Scope.WORKLOADS: 1, ApiToken.Scope.ADMIN: 2}


def token_create(
    *,
    user: User,
    name: str,
    expires_days: int | None = None,
    scope: str = ApiToken.Scope.WORKLOADS,
    via: ApiToken | None = None,
) -> tuple[ApiToken, str]:
    """Create a token and return it with its secret, which is never stored and never shown again.
    Made with another token (`via`), it may have no wider scope and may not outlive it."""
    name = name.strip()
    now = timezone.now()
    if not name:
        raise ValidationFailed("Give the token a name.", fields={"name": ["This field is required."]})
    if expires_days is not None and not 1 <= expires_days <= 3650:
        raise ValidationFailed(
            "Expiry must be between 1 and 3650 days.", fields={"expires_days": ["Between 1 and 3650."]}
        )
    if scope not in SCOPE_RANK:
        message = f"One of {', '.join(SCOPE_RANK)}."
        raise ValidationFailed(f"scope: {message}", fields={"scope": [message]})
    expires_at = now + timedelta(days=expires_days) if expires_days else None
    if via is not None:
        if via.scope != ApiToken.Scope.ADMIN:
            raise NotAllowed("Only a token with the admin scope may create tokens.")
        if via.expires_at is not None and (expires_at is None or expires_at > via.expires_at):
            message = (
                f"At most until {via.expires_at:%Y-%m-%d %H:%M} UTC, when the token creating it expires."
            )
            raise ValidationFailed(
                f"A token may not outlive the token that creates it. {message}",
                fields={"expires_days": [message]},
            )
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name[:100],
        prefix=raw[: len(TOKEN_PREFIX) + 6],
        token_hash=hash_token(raw),
        expires_at=expires_at,
        scope=scope,
    )
    made_by = f", made with token {via.prefix}…" if via else ""
    audit_record(
        actor=user, action="token.create", obj=token, detail=f"token {token.prefix}… ({scope}){made_by}"
    )
    return token, raw


def token_revoke(*, user: User, token_id: int) -> ApiToken:
    token = ApiToken.objects.filter(pk=token_id, user=user).first()
    if token is None:
        raise NotFound("No such token.")
    if token.revoked_at is not None:
        raise Conflict("This token is already revoked.")
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    audit_record(actor=user, action="token.revoke", obj=token, detail=f"token {token.prefix}…")
    return token


def token_authenticate(*, raw: str, now: datetime | None = None) -> ApiToken | None:
    """The token (with its user) a raw secret stands for, if valid, unexpired and not revoked."""
    now = now or timezone.now()
    token = ApiToken.objects.select_related("user").filter(token_hash=hash_token(raw)).first()
    if token is None or token.revoked_at is not None or not token.user.is_active:
        return None
    if token.expires_at is not None and token.expires_at <= now:
        return None
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


def notify(*, user: User, message: str, link: str = "", email_subject: str | None = None) -> Notification:
    """Tell a user something in the portal, and by e-mail when a subject is given."""
    note = Notification.objects.create(user=user, message=message[:500], link=link)
    if email_subject and user.email:
        body = message + (f"\n\n{settings.PORTAL_BASE_URL}{link}" if link else "")
        transaction.on_commit(lambda: send_mail(email_subject, body, None, [user.email], fail_silently=True))
    return note


def notifications_mark_read(*, user: User) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).update(read_at=timezone.now())


HF_TOKEN_PREFIX = "hf_"  # noqa: S105 (the prefix of every Hugging Face token, not a secret)


@transaction.atomic
def team_hf_token_set(*, user: User, team_slug: str, token: str) -> Team:
    """Set (or, with "", clear) the team's Hugging Face token. Leads of the team and platform
    admins only; audited without the token. New model servers of the team get it as HF_TOKEN;
    running ones keep the one they started with until they are applied again."""
    team = Team.objects.select_for_update().filter(slug=team_slug).first()
    if team is None:
        raise NotFound(f"No team {team_slug}.")
    if not (user.is_platform_admin or is_lead(user=user, team=team)):
        raise NotAllowed(f"Only a lead of {team.slug} or a platform admin may set its Hugging Face token.")
    token = token.strip()
    if token and (not token.startswith(HF_TOKEN_PREFIX) or not 10 <= len(token) <= 200 or " " in token):
        message = f"A Hugging Face access token starts with {HF_TOKEN_PREFIX} and has no spaces."
        raise ValidationFailed(message, fields={"token": [message]})
    team.hf_token = token
    team.save(update_fields=["hf_token"])
    action, detail = (
        ("team.hf_token_set", f"ends in {token[-4:]}") if token else ("team.hf_token_cleared", "")
    )
    audit_record(actor=user, action=action, obj=team, detail=detail)
    return team
