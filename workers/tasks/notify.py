"""Notification jobs: sending e-mails and posting webhook messages (each with a timeout, retried
with back-off), the reminders of approvals that wait and the warnings of API tokens that expire. Each calls one service and returns."""

from __future__ import annotations

from celery import shared_task

from portal.accounts.emails import email_deliver as send
from portal.accounts.notifications import deliveries_prune, deliveries_redrive
from portal.accounts.services import tokens_warn_expiring
from portal.accounts.webhooks import webhook_deliver as deliver
from portal.approvals.services import approvals_remind_waiting

# A send ends well inside the hold on its message (portal.accounts.deliveries.SENDING_HOLD): a
# receiver that trickles its answer cannot keep it past the hold and be sent to twice.
SEND_LIMITS = {"soft_time_limit": 60, "time_limit": 90}


@shared_task(
    name="notifications.webhook_deliver", bind=True, ignore_result=True, max_retries=5, **SEND_LIMITS
)
def webhook_deliver(self, delivery_id: int) -> None:
    """Post one webhook message; a failure short of the last attempt is tried again later."""
    retry_in = deliver(delivery_id=delivery_id)
    if retry_in is not None and not self.request.is_eager:
        raise self.retry(countdown=retry_in)


@shared_task(name="notifications.email_deliver", bind=True, ignore_result=True, max_retries=5, **SEND_LIMITS)
def email_deliver(self, delivery_id: int) -> None:
    """Send one e-mail; a failure short of the last attempt is tried again later."""
    retry_in = send(delivery_id=delivery_id)
    if retry_in is not None and not self.request.is_eager:
        raise self.retry(countdown=retry_in)


@shared_task(name="notifications.redrive", ignore_result=True)
def redrive() -> None:
    """Queue again the e-mails and webhook messages whose job was lost."""
    deliveries_redrive()


@shared_task(name="notifications.prune", ignore_result=True)
def prune() -> None:
    """Forget the e-mails and webhook messages sent or failed long ago."""
    deliveries_prune()


@shared_task(name="accounts.warn_expiring_tokens", ignore_result=True)
def warn_expiring_tokens() -> None:
    """Tell the users of tokens in use that expire within a week."""
    tokens_warn_expiring()


@shared_task(name="approvals.remind_waiting", ignore_result=True)
def remind_waiting() -> None:
    """Remind the leads of requests that have waited longer than their team allows."""
    approvals_remind_waiting()
