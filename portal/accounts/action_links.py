"""Signed one-time links that let a lead act on an approval from an e-mail or a chat message.

A link names one approval, one lead and one action (approve or reject), is signed with the
portal's secret (`TimestampSigner`), expires after ACTION_LINK_MAX_AGE, and works once: the
digest of a used token is kept (`ActionLinkUse`). It only opens a confirmation page in the
portal, signed in as that lead; the decision is the POST from that page.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from portal.accounts.models import ActionLinkUse
from portal.core.errors import NotFound

ACTION_LINK_MAX_AGE = timedelta(days=3)
ACTIONS = ("approve", "reject")
_SALT = "portal.approvals.action-link"


def _signer() -> signing.TimestampSigner:
    return signing.TimestampSigner(salt=_SALT)


def action_token_make(*, approval_id: int, lead_id: int, action: str) -> str:
    if action not in ACTIONS:
        raise ValueError(action)
    return _signer().sign(f"{approval_id}.{lead_id}.{action}")


def action_link_make(*, approval_id: int, lead_id: int, action: str) -> str:
    """The absolute URL of a lead's one-time link to `action` an approval."""
    token = action_token_make(approval_id=approval_id, lead_id=lead_id, action=action)
    path = reverse("approval-act", kwargs={"pk": approval_id, "token": token})
    return f"{settings.PORTAL_BASE_URL}{path}"


def action_links_for(*, approval_id: int, lead_id: int) -> dict[str, str]:
    return {
        action: action_link_make(approval_id=approval_id, lead_id=lead_id, action=action)
        for action in ACTIONS
    }


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def action_token_read(*, token: str, approval_id: int, lead_id: int) -> str:
    """The action a valid, unexpired, unused token of this approval and lead stands for; NotFound
    otherwise (the same answer whatever is wrong, so a link reveals nothing)."""
    try:
        value = _signer().unsign(token, max_age=ACTION_LINK_MAX_AGE)
    except signing.BadSignature:  # tampered or expired (SignatureExpired is a BadSignature)
        raise NotFound("This link is not valid (expired, already used, or not yours).") from None
    parts = value.split(".")
    if (
        len(parts) != 3
        or parts[0] != str(approval_id)
        or parts[1] != str(lead_id)
        or parts[2] not in ACTIONS
        or ActionLinkUse.objects.filter(digest=_digest(token)).exists()
    ):
        raise NotFound("This link is not valid (expired, already used, or not yours).")
    return parts[2]


def action_token_use(*, token: str) -> None:
    """Mark a token used; NotFound when it already was (two tabs confirming at once)."""
    try:
        with transaction.atomic():
            ActionLinkUse.objects.create(digest=_digest(token), used_at=timezone.now())
    except IntegrityError:
        raise NotFound("This link was already used.") from None
