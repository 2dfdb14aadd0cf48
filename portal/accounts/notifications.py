"""Notifications: in the portal, by e-mail and to webhooks, each kind as the user prefers.

Every notice has a kind (`NotificationKind`); a user can leave a kind out of any channel. A
user's webhook and a team's webhook get the message through a job (`notifications.webhook_deliver`)
after commit, never in the request; so does an e-mail (`notifications.email_deliver`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.accounts.emails import EMAIL_TASK, email_send
from portal.accounts.models import (
    NOT_EMAILED,
    EmailDelivery,
    Notification,
    NotificationChannel,
    NotificationKind,
    NotificationSettings,
    Team,
    User,
    WebhookDelivery,
    WebhookFormat,
)
from portal.accounts.selectors import is_lead
from portal.accounts.webhooks import webhook_body, webhook_url_check
from portal.audit.services import audit_record
from portal.core.errors import NotAllowed, NotFound, ValidationFailed
from portal.core.jobs import enqueue

WEBHOOK_TASK = "notifications.webhook_deliver"
# A delivery still pending this long after it was made, or after its retry was due, lost its job
# (the broker was down when it was queued, or a worker died mid-send or between two tries).
STALLED_AFTER = timedelta(minutes=15)
# How long the record of a sent or failed e-mail or webhook message is kept (the pages show the latest).
DELIVERIES_KEPT = timedelta(days=90)
KINDS = [kind.value for kind in NotificationKind]
CHANNELS = [channel.value for channel in NotificationChannel]


REMINDER_MAX_HOURS = 720  # how long a request may wait before its leads are reminded (0: never)


def absolute(link: str) -> str:
    return f"{settings.PORTAL_BASE_URL}{link}" if link.startswith("/") else link


def notification_settings_of(user: User) -> NotificationSettings:
    """The user's preferences (unsaved defaults when they never set any)."""
    found = NotificationSettings.objects.filter(user=user).first()
    return found or NotificationSettings(user=user)


def is_muted(prefs: NotificationSettings, *, kind: str, channel: str) -> bool:
    return kind in (prefs.muted or {}).get(channel, [])


def notification_kinds_for(user: User, *, leads_a_team: bool) -> list[tuple[str, str]]:
    """(kind, label) of the notifications that can reach `user`: fleet alerts go to platform
    admins only, approval requests and reminders to leads (and admins)."""
    hidden = set()
    if not user.is_platform_admin:
        hidden.add(NotificationKind.FLEET)
        if not leads_a_team:
            hidden |= {NotificationKind.APPROVAL_REQUEST, NotificationKind.APPROVAL_REMINDER}
    return [(kind, label) for kind, label in NotificationKind.choices if kind not in hidden]


def _event(
    *,
    kind: str,
    text: str,
    link: str,
    user: User | None,
    team: Team | None,
    workload: Any,
    actions: Mapping[str, str],
) -> dict:
    """What happened, in the terms of the documented generic webhook body (docs/notifications.md)."""
    return {
        "event": kind,
        "text": text,
        "link": absolute(link) if link else "",
        "workload": {"id": workload.number, "kind": workload.kind, "name": workload.name}
        if workload
        else None,
        "team": (team.slug if team else None) or (workload.team.slug if workload is not None else None),
        "user": user.username if user else None,
        "time": timezone.now().isoformat(),
        "actions": dict(actions),
    }


def webhook_post(
    *, url: str, webhook_format: str, event: dict, user: User | None = None, team: Team | None = None
) -> WebhookDelivery:
    """Record a message for a webhook and post it from a job once the transaction commits."""
    delivery = WebhookDelivery.objects.create(
        user=user,
        team=team,
        url=url,
        webhook_format=webhook_format,
        kind=event["event"],
        body=webhook_body(webhook_format=webhook_format, event=event),
    )
    enqueue(WEBHOOK_TASK, delivery.pk)
    return delivery


def notify(
    *,
    user: User,
    message: str,
    link: str = "",
    email_subject: str | None = None,
    kind: str = NotificationKind.OTHER,
    workload: Any = None,
    team: Team | None = None,
    actions: Mapping[str, str] | None = None,
) -> Notification | None:
    """Tell a user something: in the portal, by e-mail when a subject is given, and to their
    webhook, each unless they left this kind out of that channel. `actions` (label: absolute URL,
    such as signed approve and reject links) go into the e-mail and the webhook message only."""
    prefs = notification_settings_of(user)
    actions = actions or {}
    note = None
    if not is_muted(prefs, kind=kind, channel=NotificationChannel.PORTAL):
        note = Notification.objects.create(user=user, kind=kind, message=message[:500], link=link)
    emailed = email_subject and kind not in NOT_EMAILED  # as the preferences promise
    if emailed and user.email and not is_muted(prefs, kind=kind, channel=NotificationChannel.EMAIL):
        body = message + (f"\n\n{absolute(link)}" if link else "")
        for label, url in actions.items():
            body += f"\n\n{label.capitalize()}: {url}"
        email_send(user=user, subject=email_subject, body=body, kind=kind)
    if prefs.webhook_url and not is_muted(prefs, kind=kind, channel=NotificationChannel.WEBHOOK):
        event = _event(
            kind=kind, text=message, link=link, user=user, team=team, workload=workload, actions=actions
        )
        webhook_post(url=prefs.webhook_url, webhook_format=prefs.webhook_format, event=event, user=user)
    return note


def team_webhook_notify(
    *, team: Team, kind: str, message: str, link: str = "", workload: Any = None
) -> WebhookDelivery | None:
    """Post a team's event (a request waiting, a reminder, a budget alert) to its webhook, once
    for the team: the message links to the portal, never to a lead's signed action links."""
    if not team.webhook_url:
        return None
    event = _event(kind=kind, text=message, link=link, user=None, team=team, workload=workload, actions={})
    return webhook_post(url=team.webhook_url, webhook_format=team.webhook_format, event=event, team=team)


def notifications_mark_read(
    *, user: User, notification_id: int | None = None, now: datetime | None = None
) -> int:
    """Mark one of the user's notifications read, or (without an id) all of them."""
    unread = Notification.objects.filter(user=user, read_at__isnull=True)
    if notification_id is not None:
        if not Notification.objects.filter(user=user, pk=notification_id).exists():
            raise NotFound("No such notification.")
        unread = unread.filter(pk=notification_id)
    return unread.update(read_at=now or timezone.now())


def notifications_seen(*, user: User, link: str, now: datetime | None = None) -> int:
    """Mark read the user's unread notices that point at `link`, the page they have just opened:
    opening what a notice is about reads it."""
    return Notification.objects.filter(user=user, link=link, read_at__isnull=True).update(
        read_at=now or timezone.now()
    )


def notifications_mark_read_by_link(*, links: Iterable[str], now: datetime | None = None) -> int:
    """Mark read, for everyone, the unread notices pointing at these links (a request decided or
    withdrawn leaves nothing for the other deciders to do)."""
    return Notification.objects.filter(link__in=list(links), read_at__isnull=True).update(
        read_at=now or timezone.now()
    )


def notification_settings_update(
    *,
    user: User,
    muted: Mapping[str, Iterable[str]] | None = None,
    webhook_url: str | None = None,
    webhook_format: str | None = None,
) -> NotificationSettings:
    """Change a user's preferences; whatever is not given stays. Unknown kinds or channels, and a
    webhook URL the portal would not post to, are refused with nothing changed."""
    prefs = notification_settings_of(user)
    if muted is not None:
        if not isinstance(muted, Mapping):
            raise ValidationFailed("muted: an object of channel: [kinds].", fields={"muted": ["An object."]})
        clean: dict[str, list[str]] = {}
        for channel, kinds in muted.items():
            if channel not in CHANNELS:
                message = f"Unknown channel {channel}; one of {', '.join(CHANNELS)}."
                raise ValidationFailed(message, fields={"muted": [message]})
            kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
            unknown = [kind for kind in kinds if kind not in KINDS]
            if unknown:
                message = f"Unknown kind {unknown[0]}; one of {', '.join(KINDS)}."
                raise ValidationFailed(message, fields={"muted": [message]})
            clean[channel] = sorted(set(kinds))
        prefs.muted = clean
    if webhook_format is not None:
        if webhook_format not in WebhookFormat.values:
            message = f"One of {', '.join(WebhookFormat.values)}."
            raise ValidationFailed(f"webhook_format: {message}", fields={"webhook_format": [message]})
        prefs.webhook_format = webhook_format
    if webhook_url is not None:
        prefs.webhook_url = webhook_url_check(webhook_url.strip(), field="webhook_url")
    prefs.save()
    return prefs


@transaction.atomic
def team_notifications_set(
    *, user: User, team_slug: str, webhook_url: str, webhook_format: str, approval_reminder_hours: int | str
) -> Team:
    """Set a team's webhook and how long a request waits before its leads are reminded. Leads of
    the team and platform admins only; audited."""
    team = Team.objects.select_for_update().filter(slug=team_slug).first()
    if team is None:
        raise NotFound(f"No team {team_slug}.")
    if not (user.is_platform_admin or is_lead(user=user, team=team)):
        raise NotAllowed(f"Only a lead of {team.slug} or a platform admin may change its notifications.")
    try:
        hours = int(approval_reminder_hours)
    except (TypeError, ValueError):
        hours = -1
    if not 0 <= hours <= REMINDER_MAX_HOURS:
        message = f"A whole number of hours from 0 (never) to {REMINDER_MAX_HOURS}."
        raise ValidationFailed(f"Reminder: {message}", fields={"approval_reminder_hours": [message]})
    if webhook_format not in WebhookFormat.values:
        message = f"One of {', '.join(WebhookFormat.values)}."
        raise ValidationFailed(f"webhook_format: {message}", fields={"webhook_format": [message]})
    url = webhook_url.strip()
    # checked when it changes (a post checks it again anyway): an unchanged one whose host does not
    # resolve this minute must not refuse a change of the reminder hours
    before = (team.webhook_url, team.webhook_format, team.approval_reminder_hours)
    team.webhook_url = url if url == team.webhook_url else webhook_url_check(url)
    team.webhook_format = webhook_format
    team.approval_reminder_hours = hours
    if (team.webhook_url, team.webhook_format, team.approval_reminder_hours) == before:
        return team  # saved as it was: nothing to change or audit
    team.save(update_fields=["webhook_url", "webhook_format", "approval_reminder_hours"])
    detail = f"webhook {'set' if team.webhook_url else 'none'} ({webhook_format}), reminders after {hours} h"
    audit_record(actor=user, action="team.notifications_set", obj=team, team=team, detail=detail)
    return team


def deliveries_redrive(*, now: datetime | None = None) -> list[tuple[str, int]]:
    """Queue again the e-mails and webhook messages whose job was lost (still pending long after
    they were made or their retry was due), so none waits forever. A job queued twice sends once:
    see portal.accounts.deliveries. Returns the (task, id) pairs queued."""
    before = (now or timezone.now()) - STALLED_AFTER
    lost = (Q(next_try_at__isnull=True, created_at__lt=before) | Q(next_try_at__lt=before)) & (
        Q(held_until__isnull=True) | Q(held_until__lt=before)
    )
    queued = []
    for task, model in ((EMAIL_TASK, EmailDelivery), (WEBHOOK_TASK, WebhookDelivery)):
        stalled = model.objects.filter(lost, state=model.State.PENDING)
        for pk in stalled.order_by("pk").values_list("pk", flat=True)[:500]:
            enqueue(task, pk)
            queued.append((task, pk))
    return queued


def deliveries_prune(*, now: datetime | None = None) -> int:
    """Delete the records of e-mails and webhook messages sent or failed more than DELIVERIES_KEPT
    ago; pending ones stay. Returns how many went."""
    before = (now or timezone.now()) - DELIVERIES_KEPT
    gone = 0
    for model in (EmailDelivery, WebhookDelivery):
        done = model.objects.filter(created_at__lt=before).exclude(state=model.State.PENDING)
        gone += done.delete()[0]
    return gone
