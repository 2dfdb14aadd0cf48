"""Accounts: personal access tokens and notifications."""

from __future__ import annotations

import fnmatch
import hashlib
import re
import secrets
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from portal.accounts.models import ApiToken, GroupRule, Membership, NotificationKind, OidcIdentity, Team, User
from portal.accounts.notifications import notifications_mark_read, notify  # noqa: F401 (the callers' import)
from portal.accounts.selectors import is_lead
from portal.audit.services import audit_record
from portal.core.errors import Conflict, NotAllowed, NotFound, ValidationFailed

TOKEN_PREFIX = "gpp_"  # noqa: S105 - a public prefix, not a secret


def user_signed_out(*, user: User) -> None:
    """The user signed out of the portal (one browser): the sandboxes' gate cookies given to them
    before, in any browser, open nothing any more (`portal.sandboxes.gate`)."""
    User.objects.filter(pk=user.pk).update(sign_outs=F("sign_outs") + 1)


def token_max_days() -> int:
    """The longest lifetime a token may be given, in days (PORTAL_TOKEN_MAX_DAYS; 3650 where the
    portal sets no maximum, and then a token may also never expire)."""
    return settings.PORTAL_TOKEN_MAX_DAYS or 3650


def token_default_days() -> int | None:
    """The lifetime of a token asked for with no expiry, in days (at most the maximum); None
    where the portal sets no maximum: such a token never expires."""
    if not settings.PORTAL_TOKEN_MAX_DAYS:
        return None
    return min(settings.PORTAL_TOKEN_DEFAULT_DAYS, settings.PORTAL_TOKEN_MAX_DAYS)


def token_expiry_help() -> str:
    """What a token's expiry field accepts, and what an empty one gives."""
    default = token_default_days()
    if default is None:
        return "Between 1 and 3650 days; it never expires if left empty."
    return f"Between 1 and {settings.PORTAL_TOKEN_MAX_DAYS} days; {default} if left empty."


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def token_create(
    *,
    user: User,
    name: str,
    expires_days: int | None = None,
    scope: str = ApiToken.Scope.WORKLOADS,
    via: ApiToken | None = None,
    team: str = "",
) -> tuple[ApiToken, str]:
    """Create a token and return it with its secret, which is never stored and never shown again.
    With no `expires_days` it expires after PORTAL_TOKEN_DEFAULT_DAYS (never, where the portal
    sets no maximum). Made with another token (`via`), it may have no wider scope and may not
    outlive it: with no `expires_days`, it expires with it at the latest."""
    name = name.strip()
    now = timezone.now()
    if not name:
        raise ValidationFailed("Give the token a name.", fields={"name": ["This field is required."]})
    longest = token_max_days()
    if expires_days is not None and not 1 <= expires_days <= longest:
        raise ValidationFailed(
            f"Expiry must be between 1 and {longest} days.",
            fields={"expires_days": [f"Between 1 and {longest}."]},
        )
    if scope not in ApiToken.Scope.values:
        message = f"One of {', '.join(ApiToken.Scope.values)}."
        raise ValidationFailed(f"scope: {message}", fields={"scope": [message]})
    serving_team = _serving_team(user=user, scope=scope, slug=team.strip())
    chosen = expires_days is not None
    if not chosen:
        expires_days = token_default_days()
    expires_at = now + timedelta(days=expires_days) if expires_days else None
    if via is not None:
        if via.scope != ApiToken.Scope.ADMIN:
            raise NotAllowed("Only a token with the admin scope may create tokens.")
        if not chosen and via.expires_at is not None and (expires_at is None or expires_at > via.expires_at):
            expires_at = via.expires_at  # the default, cut to the token making it
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
        team=serving_team,
    )
    made_by = f", made with token {via.prefix}…" if via else ""
    of_team = f" for team {serving_team.slug}" if serving_team else ""
    audit_record(
        actor=user,
        action="token.create",
        obj=token,
        detail=f"token {token.prefix}… ({scope}{of_team}){made_by}",
    )
    return token, raw


def _serving_team(*, user: User, scope: str, slug: str) -> Team | None:
    """The team a serving token calls the endpoints of (one its user is a member of); refused
    for a serving token without one, and for any other scope with one."""
    if scope != ApiToken.Scope.SERVING:
        if slug:
            message = "Only a token of scope serving names a team."
            raise ValidationFailed(message, fields={"team": [message]})
        return None
    membership = Membership.objects.select_related("team").filter(user=user, team__slug=slug).first()
    if not slug or membership is None:
        message = "A serving token calls one team's endpoints: name one of your teams."
        raise ValidationFailed(message, fields={"team": [message]})
    return membership.team


TOKEN_WARNING_DAYS = 7  # a token in use expiring within this many days: its user is told
TOKEN_IN_USE_DAYS = 30  # in use: used within this many days


def tokens_warn_expiring(*, now: datetime | None = None) -> int:
    """Tell the users of tokens still in use that expire within TOKEN_WARNING_DAYS, once each
    (in the portal and by e-mail, as expiry warnings), so that a CI job or a node agent does not
    stop with a 401 one morning. How many were told."""
    now = now or timezone.now()
    due = ApiToken.objects.select_related("user").filter(
        revoked_at__isnull=True,
        expiry_warned_at__isnull=True,
        expires_at__gt=now,
        expires_at__lte=now + timedelta(days=TOKEN_WARNING_DAYS),
        last_used_at__gte=now - timedelta(days=TOKEN_IN_USE_DAYS),
        user__is_active=True,
    )
    told = 0
    for token in due:
        if not ApiToken.objects.filter(pk=token.pk, expiry_warned_at__isnull=True).update(
            expiry_warned_at=now
        ):
            continue  # another worker told them
        when = f"{token.expires_at:%Y-%m-%d %H:%M} UTC"
        notify(
            user=token.user,
            kind=NotificationKind.EXPIRY_WARNING,
            message=(
                f"Your API token {token.name} ({token.prefix}…) expires on {when} and is still in use: "
                "make a new one under API tokens and put it where this one is."
            ),
            link=reverse("tokens"),
            email_subject=f"API token {token.name} expires on {when}",
        )
        told += 1
    return told


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
        message = (
            f"A Hugging Face access token starts with {HF_TOKEN_PREFIX}, has no spaces and is 10 to 200 "
            f"characters long (this one has {len(token)}): copy the whole token from your Hugging Face settings."
        )
        raise ValidationFailed(message, fields={"token": [message]})
    team.hf_token = token
    team.save(update_fields=["hf_token"])
    action, detail = (
        ("team.hf_token_set", f"ends in {token[-4:]}") if token else ("team.hf_token_cleared", "")
    )
    audit_record(actor=user, action=action, obj=team, team=team, detail=detail)
    return team


# --- Single sign-on -----------------------------------------------------------------------------

USERNAME_ALLOWED = re.compile(r"[^\w.@+-]")


def claim_groups(value: Any) -> list[str]:
    """The group claim as a sorted list of strings (a provider may send one string or a list)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        return []
    return sorted({str(group) for group in value if isinstance(group, str | int) and str(group)})


def _free_username(claims: Mapping[str, Any]) -> str:
    """A username from the claims (preferred_username, else the e-mail's local part), made unique."""
    email = str(claims.get("email") or "")
    wanted = str(claims.get("preferred_username") or email.split("@")[0] or "")
    base = (
        USERNAME_ALLOWED.sub("", wanted)[:140]
        or "sso-" + hashlib.sha256(str(claims["sub"]).encode()).hexdigest()[:12]
    )
    username, suffix = base, 1
    while User.objects.filter(username__iexact=username).exists():
        suffix += 1
        username = f"{base}-{suffix}"
    return username


def _sso_user_for(*, claims: Mapping[str, Any]) -> tuple[User, str]:
    """The user a first sign-in belongs to: an active local account with the same e-mail when the
    provider says it verified that e-mail (and the account has no identity yet), else a new user
    without a usable password."""
    email = str(claims.get("email") or "")
    if email and claims.get("email_verified") is True:
        matches = list(
            User.objects.filter(email__iexact=email, is_active=True, oidc_identity__isnull=True)[:2]
        )
        if len(matches) == 1:
            return matches[0], "linked by verified e-mail"
    user = User(username=_free_username(claims), email=email)
    user.set_unusable_password()
    user.save()
    return user, "created"


def _profile_update(user: User, claims: Mapping[str, Any]) -> None:
    """The provider owns the name and e-mail of its users: copy what it sends."""
    changed = []
    for field, claim in (("email", "email"), ("first_name", "given_name"), ("last_name", "family_name")):
        value = claims.get(claim)
        if isinstance(value, str) and value and getattr(user, field) != value[:150]:
            setattr(user, field, value[:150])
            changed.append(field)
    if changed:
        user.save(update_fields=changed)


def _group_rules_apply(*, user: User, identity: OidcIdentity, groups: list[str]) -> None:
    """Make the memberships granted by rules (and platform admin) what the rules say for `groups`:
    grant, change or take away only what a rule granted; a membership set by hand is left alone."""
    matched = [
        rule
        for rule in GroupRule.objects.select_related("team")
        if any(fnmatch.fnmatchcase(group, rule.group) for group in groups)
    ]
    wanted: dict[int, tuple[Team, str]] = {}
    for rule in matched:
        if rule.role == GroupRule.Role.ADMIN or rule.team is None:
            continue
        if wanted.get(rule.team_id, (None, ""))[1] != Membership.Role.LEAD:
            wanted[rule.team_id] = (rule.team, rule.role)
    existing = {
        m.team_id: m for m in Membership.objects.select_for_update().filter(user=user).select_related("team")
    }
    for team_id, (team, role) in wanted.items():
        membership = existing.get(team_id)
        if membership is None:
            membership = Membership.objects.create(
                user=user, team=team, role=role, source=Membership.Source.SSO
            )
            audit_record(actor=user, action="membership.sso_grant", obj=membership, team=team, to_state=role)
        elif membership.source == Membership.Source.SSO and membership.role != role:
            from_role, membership.role = membership.role, role
            membership.save(update_fields=["role"])
            audit_record(
                actor=user,
                action="membership.sso_role",
                obj=membership,
                team=team,
                from_state=from_role,
                to_state=role,
            )
    for team_id, membership in existing.items():
        if membership.source == Membership.Source.SSO and team_id not in wanted:
            audit_record(
                actor=user,
                action="membership.sso_revoke",
                obj=membership,
                team=membership.team,
                from_state=membership.role,
                detail="no group rule grants it any more",
            )
            membership.delete()
    wants_admin = any(rule.role == GroupRule.Role.ADMIN for rule in matched)
    if wants_admin and not user.is_staff:
        user.is_staff, identity.admin_by_rule = True, True
        user.save(update_fields=["is_staff"])
        audit_record(actor=user, action="user.sso_admin_grant", obj=user, to_state="admin")
    elif not wants_admin and identity.admin_by_rule:
        user.is_staff, identity.admin_by_rule = False, False
        user.save(update_fields=["is_staff"])
        audit_record(actor=user, action="user.sso_admin_revoke", obj=user, from_state="admin")


@transaction.atomic
def sso_sign_in(*, issuer: str, claims: Mapping[str, Any], groups_claim: str) -> User:
    """The user the identity provider vouched for (found by issuer and subject, made at the first
    sign-in), with name, e-mail, team memberships and platform admin brought up to date from the
    claims and the group rules. A deactivated user is refused."""
    subject = str(claims.get("sub") or "")
    if not subject:
        raise ValidationFailed("The identity provider sent no subject (sub).")
    groups = claim_groups(claims.get(groups_claim))
    identity = (
        OidcIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    if identity is None:
        user, how = _sso_user_for(claims=claims)
        identity = OidcIdentity.objects.create(user=user, issuer=issuer, subject=subject)
        audit_record(
            actor=user, action="user.sso_link", obj=user, detail=f"{how}: subject {subject} at {issuer}"
        )
    user = identity.user
    if not user.is_active:
        raise NotAllowed(f"The portal account {user.username} is deactivated: ask a platform admin.")
    _profile_update(user, claims)
    _group_rules_apply(user=user, identity=identity, groups=groups)
    identity.groups = groups
    identity.last_sign_in_at = timezone.now()
    identity.save(update_fields=["groups", "last_sign_in_at", "admin_by_rule"])
    audit_record(
        actor=user, action="user.sso_sign_in", obj=user, detail=f"groups: {', '.join(groups) or 'none'}"
    )
    return user
