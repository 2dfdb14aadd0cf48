"""E-mails go out from a worker, never in the request: a slow or unreachable mail server holds up
nobody, the connection times out, a failure is tried again and then kept on the row, and the
notifications page shows how the latest e-mails went. The mail server here is a real SMTP client
talking to sockets on loopback: one that refuses, one that never answers."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import timedelta

import pytest
import time_machine
from django.core import mail
from django.utils import timezone

from portal.accounts.emails import MAX_ATTEMPTS, email_deliver
from portal.accounts.models import EmailDelivery, WebhookDelivery
from portal.accounts.notifications import deliveries_prune, deliveries_redrive, notify
from workers.celery import _schedule

pytestmark = pytest.mark.django_db


@pytest.fixture
def smtp(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_USE_TLS = False
    return settings


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never says a word, as a mail server that hangs does."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_email_is_sent_after_commit_by_a_job_and_recorded(run_jobs, researcher):
    researcher.email = "alice@example.com"
    researcher.save()
    notify(user=researcher, message="Sandbox x failed.", email_subject="Failed", kind="health")
    delivery = EmailDelivery.objects.get()
    assert delivery.state == EmailDelivery.State.PENDING and mail.outbox == []  # nothing sent in the request

    run_jobs(
        lambda: notify(user=researcher, message="Sandbox y ended.", email_subject="Ended", kind="expired")
    )
    sent = EmailDelivery.objects.get(subject="Ended")
    assert sent.state == EmailDelivery.State.SENT and sent.attempts == 1 and sent.sent_at is not None
    assert [(m.subject, m.to) for m in mail.outbox] == [("Ended", ["alice@example.com"])]


def test_a_refusing_mail_server_is_tried_again_then_recorded_and_shown(
    smtp, run_jobs, researcher, researcher_client
):
    smtp.EMAIL_PORT = _closed_port()
    researcher.email = "alice@example.com"
    researcher.save()
    run_jobs(lambda: notify(user=researcher, message="hello", email_subject="Hello", kind="budget"))
    delivery = EmailDelivery.objects.get()
    assert delivery.state == EmailDelivery.State.PENDING and delivery.attempts == 1
    assert "refused" in delivery.last_error.lower()
    assert email_deliver(delivery_id=delivery.pk) is None  # its retry is not due: nothing sent
    waiting = researcher_client.get("/notifications/").content.decode()
    assert "tried again" in waiting and "seconds from now" in waiting
    delivery.refresh_from_db()
    assert delivery.attempts == 1
    waits = []
    for _ in range(MAX_ATTEMPTS - 1):
        with time_machine.travel(delivery.next_try_at):  # when its retry runs
            waits.append(email_deliver(delivery_id=delivery.pk))
        delivery.refresh_from_db()
    assert waits == [60, 120, None]  # backing off; the last failure is final
    assert delivery.state == EmailDelivery.State.FAILED and delivery.attempts == MAX_ATTEMPTS
    assert delivery.next_try_at is None
    assert email_deliver(delivery_id=delivery.pk) is None  # a failed one is left alone

    page = researcher_client.get("/notifications/").content.decode()
    assert "Latest e-mails" in page and "Budget alerts" in page and "Failed" in page
    assert "tried again" not in page
    past = timezone.now() - timedelta(minutes=20)  # its retry's job was lost: nothing was tried then
    EmailDelivery.objects.filter(pk=delivery.pk).update(state=EmailDelivery.State.PENDING, next_try_at=past)
    assert "tried again" not in researcher_client.get("/notifications/").content.decode()
    EmailDelivery.objects.filter(pk=delivery.pk).update(held_until=timezone.now() + timedelta(minutes=5))
    assert "sending now" in researcher_client.get("/notifications/").content.decode()
    assert "<td>Hello</td>" in page  # its subject


def test_a_mail_server_that_never_answers_times_out(smtp, silent_server, researcher):
    smtp.EMAIL_PORT = silent_server
    smtp.EMAIL_TIMEOUT = 1
    researcher.email = "alice@example.com"
    researcher.save()
    notify(user=researcher, message="hello", email_subject="Hello", kind="budget")
    delivery = EmailDelivery.objects.get()
    assert email_deliver(delivery_id=delivery.pk) == 30  # to be tried again in 30 s
    delivery.refresh_from_db()
    assert delivery.state == EmailDelivery.State.PENDING and "timed out" in delivery.last_error


def test_no_address_no_email(run_jobs, researcher):
    researcher.email = ""
    researcher.save()
    run_jobs(lambda: notify(user=researcher, message="hello", email_subject="Hello", kind="budget"))
    assert not EmailDelivery.objects.exists()


def test_an_email_whose_job_was_lost_is_queued_again_by_the_beat(run_jobs, researcher):
    researcher.email = "alice@example.com"
    researcher.save()
    with time_machine.travel(timezone.now() - timedelta(minutes=20)):
        notify(user=researcher, message="lost", email_subject="Lost", kind="budget")  # its job never ran
    notify(user=researcher, message="fresh", email_subject="Fresh", kind="budget")  # its job is on its way
    lost, fresh = EmailDelivery.objects.get(subject="Lost"), EmailDelivery.objects.get(subject="Fresh")

    assert run_jobs(deliveries_redrive) == [("notifications.email_deliver", lost.pk)]
    lost.refresh_from_db()
    assert lost.state == EmailDelivery.State.SENT and [m.subject for m in mail.outbox] == ["Lost"]
    assert run_jobs(deliveries_redrive) == []  # sent: nothing left to queue
    assert EmailDelivery.objects.get(pk=fresh.pk).state == EmailDelivery.State.PENDING

    with time_machine.travel(timezone.now() - timedelta(minutes=20)):
        hook = WebhookDelivery.objects.create(
            user=researcher,
            url="https://hooks.example.com/x",
            webhook_format="generic",
            kind="budget",
            body={},
        )
    assert deliveries_redrive() == [("notifications.webhook_deliver", hook.pk)]  # webhook messages too

    entry = _schedule()["redrive-deliveries"]
    assert entry["task"] == "notifications.redrive" and entry["schedule"] >= 300  # longer than the tries


def test_records_of_messages_sent_or_failed_90_days_ago_are_forgotten(run_jobs, researcher):
    researcher.email = "alice@example.com"
    researcher.save()
    with time_machine.travel(timezone.now() - timedelta(days=91)):
        run_jobs(lambda: notify(user=researcher, message="old", email_subject="Old", kind="budget"))
        notify(user=researcher, message="stuck", email_subject="Stuck", kind="budget")  # still pending
        WebhookDelivery.objects.create(
            user=researcher, url="https://hooks.example.com/x", webhook_format="generic", kind="budget",
            body={}, state=WebhookDelivery.State.FAILED,
        )  # fmt: skip
    run_jobs(lambda: notify(user=researcher, message="new", email_subject="New", kind="budget"))

    assert deliveries_prune() == 2  # the old sent e-mail and the old failed webhook message
    assert sorted(EmailDelivery.objects.values_list("subject", flat=True)) == ["New", "Stuck"]
    assert not WebhookDelivery.objects.exists()
    assert _schedule()["prune-deliveries"]["task"] == "notifications.prune"
