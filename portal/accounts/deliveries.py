"""How an attempt to send a message went, for every channel a worker sends on (e-mail, webhooks)."""

from __future__ import annotations

from django.utils import timezone

from portal.accounts.models import Delivery


def delivery_attempt_record(*, delivery: Delivery, error: str = "", max_attempts: int) -> bool:
    """Keep how one attempt went: sent, or its error. Returns whether to try again (a failure
    short of `max_attempts`; the last one marks it failed)."""
    attempts = delivery.attempts + 1
    rows = type(delivery).objects.filter(pk=delivery.pk)
    if not error:
        rows.update(attempts=attempts, state=Delivery.State.SENT, sent_at=timezone.now(), last_error="")
        return False
    final = attempts >= max_attempts
    rows.update(
        attempts=attempts,
        last_error=error[:500],
        state=Delivery.State.FAILED if final else Delivery.State.PENDING,
    )
    return not final
