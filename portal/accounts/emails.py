"""E-mails to users: recorded as a delivery and sent by a worker (`notifications.email_deliver`),
retried with back-off, with the mail server's answer kept on the row for the notifications page.
The SMTP connection times out after EMAIL_TIMEOUT seconds."""

from __future__ import annotations

from django.core.mail import EmailMessage

from portal.accounts.deliveries import delivery_send
from portal.accounts.models import EmailDelivery, User
from portal.core.jobs import enqueue

EMAIL_TASK = "notifications.email_deliver"
MAX_ATTEMPTS = 4


def email_send(*, user: User, subject: str, body: str, kind: str) -> EmailDelivery:
    """Record an e-mail to the user's address and send it from a job once the transaction commits."""
    delivery = EmailDelivery.objects.create(
        user=user, address=user.email, subject=subject, body=body, kind=kind
    )
    enqueue(EMAIL_TASK, delivery.pk)
    return delivery


def email_deliver(*, delivery_id: int) -> int | None:
    """Send one recorded e-mail, unless another job holds it. Returns the seconds until the next
    try (a failure short of MAX_ATTEMPTS), else None; each failure is kept on the row. smtplib's
    errors are OSErrors, as are refused and timed-out connections."""

    def send(delivery: EmailDelivery) -> None:
        EmailMessage(delivery.subject, delivery.body, None, [delivery.address]).send(fail_silently=False)

    return delivery_send(model=EmailDelivery, delivery_id=delivery_id, send=send, max_attempts=MAX_ATTEMPTS)
