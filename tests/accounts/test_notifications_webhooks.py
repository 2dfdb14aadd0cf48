"""Webhooks: each user's and each team's, posted by a job to a local HTTP server on loopback, in
the generic, Slack or Teams shape; budget alerts to the team's once; failures kept and shown; URLs
the portal refuses."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock

import pytest
import time_machine
from celery.exceptions import Retry
from django.db import connection
from django.utils import timezone

from portal.accounts.action_links import action_link_make, action_token_read
from portal.accounts.deliveries import SENDING_HOLD, delivery_attempt_record, delivery_take
from portal.accounts.models import NotificationSettings, WebhookDelivery
from portal.accounts.notifications import deliveries_redrive, notify
from portal.accounts.webhooks import MAX_ATTEMPTS, webhook_deliver, webhook_url_check
from portal.core.errors import ValidationFailed
from portal.sandboxes.services import sandbox_request
from portal.spend.models import Budget
from portal.workloads.models import Approval
from portal.workloads.services import budgets_watch
from tests.rows import make_sandbox
from workers.tasks.notify import webhook_deliver as webhook_job

pytestmark = pytest.mark.django_db


class Receiver:
    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.status = 200
        self.delay = 0.0  # seconds before it answers, as a slow receiver
        self.reply_bytes = 0  # of the body it answers with (its Content-Length says them all)
        self.replied = 0  # bytes of it the portal took before it closed the connection
        self.done = threading.Event()


@pytest.fixture
def receiver(settings) -> Iterator[tuple[Receiver, str]]:
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = True  # the test server listens on loopback
    received = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the name http.server calls
            length = int(self.headers["Content-Length"])
            received.bodies.append(json.loads(self.rfile.read(length)))
            time.sleep(received.delay)
            self.send_response(received.status)
            if received.reply_bytes:
                self.send_header("Content-Length", str(received.reply_bytes))
            self.end_headers()
            try:
                while received.replied < received.reply_bytes:
                    received.replied += self.wfile.write(
                        b"x" * min(65536, received.reply_bytes - received.replied)
                    )
            except OSError:
                self.close_connection = True  # the portal hung up: as it should, having read enough
            received.done.set()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield received, f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


def test_a_users_webhook_gets_the_generic_body_from_a_job(
    run_jobs, fleet, researcher, slice_request, receiver
):
    received, url = receiver
    NotificationSettings.objects.create(user=researcher, webhook_url=url)
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    [body] = received.bodies
    assert body["event"] == "running"
    assert body["text"] == "Sandbox mig-small is running."
    assert body["link"].endswith(f"/sandboxes/{sandbox.number}/")
    assert body["workload"] == {"id": sandbox.number, "kind": "sandbox", "name": "mig-small"}
    assert body["team"] == "vision" and body["user"] == "alice" and body["time"]
    assert body["actions"] == {}
    delivery = WebhookDelivery.objects.get(user=researcher)
    assert delivery.state == WebhookDelivery.State.SENT and delivery.attempts == 1


def test_nothing_is_posted_inside_the_request(fleet, researcher, slice_request, receiver):
    received, url = receiver
    NotificationSettings.objects.create(user=researcher, webhook_url=url)
    notify(user=researcher, message="hello", kind="budget")  # no commit: no job yet
    assert received.bodies == []
    assert WebhookDelivery.objects.get().state == WebhookDelivery.State.PENDING


def test_a_leads_slack_message_has_the_signed_links_and_the_team_hook_has_none(
    run_jobs, fleet, team, researcher, lead, receiver
):
    received, url = receiver
    NotificationSettings.objects.create(user=lead, webhook_url=url, webhook_format="slack")
    team.webhook_url = url
    team.webhook_format = "teams"
    team.save()
    sandbox = run_jobs(
        lambda: sandbox_request(
            user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=4, ttl_hours=48
        )
    )
    approval = Approval.objects.get(workload=sandbox)
    slack = next(body for body in received.bodies if "text" in body and "@type" not in body)
    assert slack["text"].startswith(
        "alice asks for 4x h100-80gb (big, team Vision) for 48 h, $1,320.96 at most."
    )
    # the link signed when the message went (its timestamp is that second's, so read it back)
    link = re.search(r"<([^<>|]+)\|Approve>", slack["text"])[1]
    prefix = action_link_make(approval_id=approval.pk, lead_id=lead.pk, action="approve").rsplit(":", 2)[0]
    assert link.startswith(prefix)
    token = link.rstrip("/").rsplit("/", 1)[1]
    assert action_token_read(token=token, approval_id=approval.pk, lead_id=lead.pk) == "approve"
    teams = next(body for body in received.bodies if body.get("@type") == "MessageCard")
    assert [action["name"] for action in teams["potentialAction"]] == ["Open in the portal"]
    assert "/act/" not in json.dumps(teams)


BUDGET_NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
def spending_80(team, researcher, whole_gpus):
    """$8.00 spent this month ($4/h for 2 h, project llm-eval) of a $10 team budget told at 80 %."""
    team.monthly_budget = Decimal("10.00")
    team.budget_thresholds = [80]
    team.save()
    with time_machine.travel(BUDGET_NOW, tick=False):
        make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0], hours_ago=2, price=Decimal("4"),
                     project="llm-eval")  # fmt: skip
    return team


def test_what_people_wrote_is_no_markdown_or_link_in_a_teams_card(
    run_jobs, fleet, team, researcher, lead, receiver
):
    """A request's purpose is in the lead's message: in a Teams card, whose text is Markdown, a
    link written there must read as written, not be one beside the card's own Approve button."""
    received, url = receiver
    NotificationSettings.objects.create(user=lead, webhook_url=url, webhook_format="teams")
    purpose = "Approve [here](https://elsewhere.example/approve) *now*"
    run_jobs(
        lambda: sandbox_request(
            user=researcher,
            team="vision",
            name="big",
            gpu_type="h100-80gb",
            count=4,
            ttl_hours=48,
            purpose=purpose,
        )
    )
    (card,) = [body for body in received.bodies if body.get("@type") == "MessageCard"]
    assert r"Approve \[here\]\(https://elsewhere.example/approve\) \*now\*" in card["text"]
    assert "[here](" not in card["text"]
    assert [action["name"] for action in card["potentialAction"]] == [
        "Open in the portal",
        "Approve",
        "Reject",
    ]


def test_a_teams_budget_alert_is_posted_once_to_its_webhook(run_jobs, spending_80, lead, receiver):
    received, url = receiver
    spending_80.webhook_url = url
    spending_80.save()
    assert run_jobs(lambda: budgets_watch(now=BUDGET_NOW)).alerts == [("vision", 80)]
    [body] = received.bodies
    assert body["event"] == "budget"
    assert body["text"] == "Team Vision has spent $8.00 this month: 80 % of its $10.00 budget."
    assert body["link"].endswith("/spend/")
    assert body["workload"] is None and body["team"] == "vision" and body["user"] is None
    assert body["actions"] == {}
    assert run_jobs(lambda: budgets_watch(now=BUDGET_NOW)).alerts == []  # the same threshold and month
    assert len(received.bodies) == 1
    assert WebhookDelivery.objects.get().team == spending_80


def test_a_projects_budget_alert_goes_to_the_teams_webhook_and_a_users_does_not(
    run_jobs, spending_80, researcher, lead, receiver
):
    received, url = receiver
    spending_80.monthly_budget = Decimal("1000.00")  # the team's own is far from 80 %
    spending_80.webhook_url = url
    spending_80.save()
    Budget.objects.create(team=spending_80, kind="project", project="llm-eval", monthly_amount=Decimal("10"))
    Budget.objects.create(team=spending_80, kind="user", user=researcher, monthly_amount=Decimal("10"))
    watch = run_jobs(lambda: budgets_watch(now=BUDGET_NOW))
    assert sorted(watch.target_alerts) == [
        ("vision", "project", "llm-eval", 80),
        ("vision", "user", "alice", 80),
    ]
    [body] = received.bodies
    assert body["event"] == "budget" and "project llm-eval's spend this month is $8.00" in body["text"]
    run_jobs(lambda: budgets_watch(now=BUDGET_NOW))
    assert len(received.bodies) == 1


def test_no_budget_alert_is_posted_for_a_team_without_a_webhook(run_jobs, spending_80, lead, receiver):
    received, _ = receiver
    assert run_jobs(lambda: budgets_watch(now=BUDGET_NOW)).alerts == [("vision", 80)]
    assert received.bodies == [] and not WebhookDelivery.objects.exists()


def test_a_failing_hook_is_retried_then_recorded_and_shown(run_jobs, researcher, researcher_client, receiver):
    received, url = receiver
    received.status = 500
    NotificationSettings.objects.create(user=researcher, webhook_url=url)
    run_jobs(lambda: notify(user=researcher, message="hello", kind="budget"))
    delivery = WebhookDelivery.objects.get()
    assert delivery.state == WebhookDelivery.State.PENDING and delivery.attempts == 1
    assert "HTTP 500" in delivery.last_error
    for _ in range(MAX_ATTEMPTS - 1):
        with time_machine.travel(delivery.next_try_at):  # when its retry runs
            webhook_deliver(delivery_id=delivery.pk)
        delivery.refresh_from_db()
    assert delivery.state == WebhookDelivery.State.FAILED and delivery.attempts == MAX_ATTEMPTS
    assert len(received.bodies) == MAX_ATTEMPTS
    page = researcher_client.get("/notifications/").content.decode()
    assert "HTTP 500" in page and "Failed" in page


def test_the_team_settings_page_keeps_the_teams_hook_and_reminder(team, lead_client, receiver):
    _, url = receiver
    response = lead_client.post(
        "/teams/vision/settings/",
        {
            "section": "notifications",
            "webhook_url": url,
            "webhook_format": "slack",
            "approval_reminder_hours": "8",
        },
    )
    assert response.status_code == 302
    team.refresh_from_db()
    assert (team.webhook_url, team.webhook_format, team.approval_reminder_hours) == (url, "slack", 8)
    bad = lead_client.post(
        "/teams/vision/settings/",
        {
            "section": "notifications",
            "webhook_url": url,
            "webhook_format": "slack",
            "approval_reminder_hours": "-1",
        },
    )
    assert bad.status_code == 400 and "0 (never) to 720" in bad.content.decode()
    assert 'max="720" value="-1" aria-invalid="true" autofocus>' in bad.content.decode()  # at its field
    assert (
        'id="id_team_webhook_url" name="webhook_url" type="url" value="' + url + '" placeholder'
        in bad.content.decode()
    )
    team.refresh_from_db()
    assert team.approval_reminder_hours == 8
    typed = {"section": "notifications", "webhook_url": "ftp://x.example.com/h", "webhook_format": "generic"}
    refused = lead_client.post("/teams/vision/settings/", {**typed, "approval_reminder_hours": "6"})
    page = refused.content.decode()
    assert refused.status_code == 400 and 'value="ftp://x.example.com/h"' in page and 'value="6"' in page
    team.refresh_from_db()
    assert (team.webhook_url, team.approval_reminder_hours) == (url, 8)


def test_a_researcher_cannot_set_the_teams_hook(team, researcher_client):
    response = researcher_client.post(
        "/teams/vision/settings/",
        {
            "section": "notifications",
            "webhook_url": "",
            "webhook_format": "slack",
            "approval_reminder_hours": "1",
        },
    )
    assert response.status_code == 403


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/x",  # not https
        "https://127.0.0.1/hook",  # loopback
        "https://10.1.2.3/hook",  # private
        "https://169.254.169.254/latest/meta-data",  # link-local (cloud metadata)
        "https://[::1]/hook",
        "https://user:secret@hooks.example.com/x",
        "ftp://hooks.example.com/x",
    ],
)
def test_urls_the_portal_refuses_in_production(url, settings):
    settings.DEBUG = False
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(ValidationFailed):
        webhook_url_check(url)


def test_a_public_https_url_is_accepted(settings, monkeypatch):
    settings.PORTAL_WEBHOOK_ALLOW_PRIVATE = False
    monkeypatch.setattr(
        "portal.accounts.webhooks.socket.getaddrinfo",
        lambda *args, **kwargs: [(2, 1, 6, "", ("93.184.215.14", 443))],
    )
    assert (
        webhook_url_check("https://hooks.slack.com/services/T0/B0/x")
        == "https://hooks.slack.com/services/T0/B0/x"
    )


def _hook(user, url: str, *, made_ago: timedelta = timedelta()) -> WebhookDelivery:
    with time_machine.travel(timezone.now() - made_ago):
        return WebhookDelivery.objects.create(
            user=user, url=url, webhook_format="generic", kind="budget", body={"text": "hello"}
        )


@pytest.mark.django_db(transaction=True)
def test_two_jobs_for_one_message_at_once_post_it_once(researcher, receiver):
    """The redrive queued a message again while its first job waited in a slow queue, and both
    jobs run at the same moment against a slow receiver: one posts, the other finds it held."""
    received, url = receiver
    received.delay = 0.5
    hook = _hook(researcher, url, made_ago=timedelta(minutes=20))
    assert deliveries_redrive() == [("notifications.webhook_deliver", hook.pk)]
    results: list[int | None] = []
    start = threading.Barrier(2)

    def job() -> None:
        try:
            start.wait()
            results.append(webhook_deliver(delivery_id=hook.pk))
        finally:
            connection.close()

    jobs = [threading.Thread(target=job) for _ in range(2)]
    for thread in jobs:
        thread.start()
    for thread in jobs:
        thread.join()
    assert results == [None, None] and len(received.bodies) == 1
    hook.refresh_from_db()
    assert hook.state == WebhookDelivery.State.SENT and hook.attempts == 1 and hook.next_try_at is None


def test_a_message_waiting_for_its_retry_is_neither_queued_again_nor_sent_by_a_second_job(
    researcher, receiver
):
    """A message made 20 minutes ago (its first job waited in a slow queue) fails now: its retry is
    due in 30 s. The redrive leaves it alone, and a second job already queued for it sends nothing,
    so one chain of retries goes on, not two."""
    received, url = receiver
    received.status = 500
    hook = _hook(researcher, url, made_ago=timedelta(minutes=20))
    assert webhook_deliver(delivery_id=hook.pk) == 30
    assert deliveries_redrive() == []
    assert webhook_deliver(delivery_id=hook.pk) is None and len(received.bodies) == 1
    hook.refresh_from_db()
    assert hook.attempts == 1

    with time_machine.travel(hook.next_try_at):  # the retry's job
        assert webhook_deliver(delivery_id=hook.pk) == 60
    assert len(received.bodies) == 2

    hook.refresh_from_db()
    later = hook.next_try_at + timedelta(minutes=16)  # that retry's job was lost
    assert deliveries_redrive(now=later) == [("notifications.webhook_deliver", hook.pk)]
    received.status = 200
    with time_machine.travel(later):
        assert webhook_deliver(delivery_id=hook.pk) is None
    hook.refresh_from_db()
    assert hook.state == WebhookDelivery.State.SENT and hook.attempts == 3 and len(received.bodies) == 3


def test_a_message_held_by_a_worker_that_died_mid_send_is_queued_again_later(researcher, receiver):
    received, url = receiver
    hook = _hook(researcher, url)
    WebhookDelivery.objects.filter(pk=hook.pk).update(held_until=timezone.now() + timedelta(minutes=5))
    assert webhook_deliver(delivery_id=hook.pk) is None and received.bodies == []  # held
    assert deliveries_redrive(now=timezone.now() + timedelta(minutes=19)) == []
    later = timezone.now() + timedelta(minutes=21)  # the hold ran out 15 minutes ago
    assert deliveries_redrive(now=later) == [("notifications.webhook_deliver", hook.pk)]
    with time_machine.travel(later):
        assert webhook_deliver(delivery_id=hook.pk) is None
    assert len(received.bodies) == 1


def test_the_job_retries_after_the_wait_the_attempt_sets_and_ends_inside_the_hold(researcher, receiver):
    received, url = receiver
    received.status = 503
    hook = _hook(researcher, url)
    WebhookDelivery.objects.filter(pk=hook.pk).update(attempts=2)  # its third attempt
    with mock.patch.object(webhook_job, "retry", side_effect=Retry) as retry, pytest.raises(Retry):
        webhook_job(hook.pk)  # as a worker runs it, not eagerly
    retry.assert_called_once_with(countdown=120)
    hook.refresh_from_db()
    assert hook.attempts == 3 and hook.held_until is None
    assert hook.next_try_at == pytest.approx(
        timezone.now() + timedelta(seconds=120), abs=timedelta(seconds=5)
    )
    assert webhook_job.time_limit < SENDING_HOLD.total_seconds()  # a trickling receiver is cut off first


def test_a_huge_reply_is_not_read_past_its_start(researcher, receiver):
    received, url = receiver
    received.status, received.reply_bytes = 500, 256 * 1024 * 1024
    hook = _hook(researcher, url)
    assert webhook_deliver(delivery_id=hook.pk) == 30
    hook.refresh_from_db()
    assert hook.last_error == "HTTP 500: " + "x" * 200
    assert received.done.wait(10)
    assert received.replied < 64 * 1024 * 1024  # the connection closed early; what arrived was not kept


def test_a_surprise_while_sending_is_kept_on_the_row_and_tried_again(
    researcher, receiver, monkeypatch, caplog
):
    _, url = receiver
    hook = _hook(researcher, url)

    def broken(*args, **kwargs):
        raise ValueError("Invalid header value")

    monkeypatch.setattr("portal.accounts.webhooks.httpx.Client.stream", broken)
    assert webhook_deliver(delivery_id=hook.pk) == 30
    hook.refresh_from_db()
    assert hook.state == WebhookDelivery.State.PENDING and hook.attempts == 1
    assert hook.last_error == "ValueError: Invalid header value" and "sending failed" in caplog.text


def test_a_job_whose_hold_ran_out_and_was_taken_over_records_nothing(researcher, receiver):
    _, url = receiver
    hook = _hook(researcher, url)
    slow = delivery_take(model=WebhookDelivery, delivery_id=hook.pk)
    later = timezone.now() + SENDING_HOLD + timedelta(seconds=1)
    other = delivery_take(model=WebhookDelivery, delivery_id=hook.pk, now=later)
    assert slow is not None and other is not None

    assert delivery_attempt_record(delivery=slow, error="timed out", max_attempts=4) is None
    hook.refresh_from_db()
    assert hook.attempts == 0 and hook.last_error == ""  # the slow job's word counts for nothing
    delivery_attempt_record(delivery=other, max_attempts=4)
    hook.refresh_from_db()
    assert hook.state == WebhookDelivery.State.SENT and hook.attempts == 1
