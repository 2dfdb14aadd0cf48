"""How a worker takes and sends a message on any channel (e-mail, webhooks): one send at a time
per message, with how each attempt went kept on its row.

A message's `next_try_at` says when a worker may next take it. Taking it sets `next_try_at` to
SENDING_HOLD ahead, so a second job for the same message (queued again by the redrive while the
first waited in a slow queue, or delivered twice by the broker) finds it held and does nothing. A
failed attempt sets it to the retry's time, so only that retry sends it again."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TypeVar

from django.db.models import Q
from django.utils import timezone

from portal.accounts.models import Delivery

# Longer than any one send (SMTP and webhook timeouts are seconds): a hold outlives its send only
# when the worker died mid-send, and then the redrive queues the message again.
SENDING_HOLD = timedelta(minutes=5)
# A retry's job may run a little before the time kept on its row (clocks of two hosts).
EARLY = timedelta(seconds=5)
RETRY_BASE_SECONDS = 30  # 30 s, 60 s, 120 s ...

D = TypeVar("D", bound=Delivery)


def delivery_take(*, model: type[D], delivery_id: int, now: datetime | None = None) -> D | None:
    """Take a pending message for one send, or None when it is sent, failed, being sent by
    another job, or waiting for its retry."""
    now = now or timezone.now()
    free = Q(next_try_at__isnull=True) | Q(next_try_at__lte=now + EARLY)
    rows = model.objects.filter(pk=delivery_id, state=Delivery.State.PENDING).filter(free)
    if not rows.update(next_try_at=now + SENDING_HOLD):
        return None
    return model.objects.get(pk=delivery_id)


def delivery_attempt_record(*, delivery: Delivery, error: str = "", max_attempts: int) -> int | None:
    """Keep how one attempt went: sent, or its error. Returns the seconds until the next try (a
    failure short of `max_attempts`), else None (sent, or the last failure: marked failed)."""
    attempts = delivery.attempts + 1
    rows = type(delivery).objects.filter(pk=delivery.pk)
    now = timezone.now()
    if not error:
        rows.update(
            attempts=attempts, state=Delivery.State.SENT, sent_at=now, last_error="", next_try_at=None
        )
        return None
    if attempts >= max_attempts:
        rows.update(attempts=attempts, last_error=error[:500], state=Delivery.State.FAILED, next_try_at=None)
        return None
    retry_in = RETRY_BASE_SECONDS * 2 ** (attempts - 1)
    rows.update(attempts=attempts, last_error=error[:500], next_try_at=now + timedelta(seconds=retry_in))
    return retry_in
