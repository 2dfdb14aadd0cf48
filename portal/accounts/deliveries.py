"""How a worker takes and sends a message on any channel (e-mail, webhooks): one send at a time
per message, with how each attempt went kept on its row.

Taking a message sets `held_until` SENDING_HOLD ahead, so a second job for the same message
(queued again by the redrive while the first waited in a slow queue, or delivered twice by the
broker) finds it held and does nothing. A failed attempt sets `next_try_at` to its retry's time,
and no job sends it before then. An attempt is recorded only by the job that holds the message:
one whose hold ran out and was taken by another records nothing. The jobs' time limits
(workers/tasks/notify.py) end a send well inside the hold."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from django.db.models import Q
from django.utils import timezone

from portal.accounts.models import Delivery

# Longer than the jobs' time limits: a hold outlives its send only when the worker died
# mid-send, and then the redrive queues the message again.
SENDING_HOLD = timedelta(minutes=5)
# A retry's job may run a little before the time kept on its row (clocks of two hosts).
EARLY = timedelta(seconds=5)
RETRY_BASE_SECONDS = 30  # 30 s, 60 s, 120 s ...

D = TypeVar("D", bound=Delivery)
log = logging.getLogger(__name__)


class DeliveryRefused(Exception):
    """A message that no retry would send (a webhook URL the portal no longer posts to)."""


def delivery_send(
    *,
    model: type[D],
    delivery_id: int,
    send: Callable[[D], None],
    max_attempts: int,
    expected: tuple[type[Exception], ...] = (OSError,),
) -> int | None:
    """Take the message and send it with `send`, recording how it went. Returns the seconds until
    the next try, else None. `expected` errors (a refused or timed-out connection) are kept on the
    row as they are; any other error is kept and logged with its traceback, so no message is left
    pending and untried by a surprise."""
    delivery = delivery_take(model=model, delivery_id=delivery_id)
    if delivery is None:
        return None
    try:
        send(delivery)
    except DeliveryRefused as refused:
        return delivery_attempt_record(delivery=delivery, error=str(refused), max_attempts=0)
    except expected as error:
        error_text = str(error) or type(error).__name__
        return delivery_attempt_record(delivery=delivery, error=error_text, max_attempts=max_attempts)
    except Exception as error:
        log.exception("%s %s: sending failed", model.__name__, delivery.pk)
        error_text = f"{type(error).__name__}: {error}"
        return delivery_attempt_record(delivery=delivery, error=error_text, max_attempts=max_attempts)
    return delivery_attempt_record(delivery=delivery, max_attempts=max_attempts)


def delivery_take(*, model: type[D], delivery_id: int, now: datetime | None = None) -> D | None:
    """Take a pending message for one send, or None when it is sent, failed, being sent by
    another job, or waiting for its retry."""
    now = now or timezone.now()
    free = Q(held_until__isnull=True) | Q(held_until__lte=now)
    due = Q(next_try_at__isnull=True) | Q(next_try_at__lte=now + EARLY)
    rows = model.objects.filter(free, due, pk=delivery_id, state=Delivery.State.PENDING)
    if not rows.update(held_until=now + SENDING_HOLD):
        return None
    return model.objects.get(pk=delivery_id)


def delivery_attempt_record(*, delivery: Delivery, error: str = "", max_attempts: int) -> int | None:
    """Keep how one attempt went: sent, or its error. Returns the seconds until the next try (a
    failure short of `max_attempts`), else None (sent, the last failure, or no longer this job's
    to record)."""
    attempts = delivery.attempts + 1
    mine = type(delivery).objects.filter(
        pk=delivery.pk, state=Delivery.State.PENDING, held_until=delivery.held_until
    )
    now = timezone.now()
    if not error:
        mine.update(
            attempts=attempts,
            state=Delivery.State.SENT,
            sent_at=now,
            last_error="",
            held_until=None,
            next_try_at=None,
        )
        return None
    if attempts >= max_attempts:
        mine.update(
            attempts=attempts,
            last_error=error[:500],
            state=Delivery.State.FAILED,
            held_until=None,
            next_try_at=None,
        )
        return None
    retry_in = RETRY_BASE_SECONDS * 2 ** (attempts - 1)
    changed = mine.update(
        attempts=attempts,
        last_error=error[:500],
        held_until=None,
        next_try_at=now + timedelta(seconds=retry_in),
    )
    return retry_in if changed else None
