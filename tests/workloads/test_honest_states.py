"""What a workload's pages and API say in each state: a lifetime that counts from the start, cost
that stops at the expiry, times in words, withdrawing a request or an extension, and only the
actions that can succeed."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone

from portal.accounts.models import Notification
from portal.approvals.services import approval_decide
from portal.audit.models import AuditEvent
from portal.core.errors import Conflict
from portal.fleet.models import Allocation, Gpu
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Approval, Workload, WorkloadState
from portal.workloads.policy import quota_left
from portal.workloads.selectors import workload_allowed_actions, workload_cost_so_far
from portal.workloads.services import (
    workload_extend,
    workload_mark_running,
    workload_terminate,
    workload_withdraw,
)
from portal.workloads.templatetags.workload_time import ago_words, expiry_countdown, in_words
from tests.rows import HTMX, make_sandbox

pytestmark = pytest.mark.django_db
S = WorkloadState


def big_request(researcher, **lifetime):
    """Four whole H100s: over the team's auto-approval line, so it waits for a lead."""
    return sandbox_request(
        user=researcher,
        team="vision",
        name="big",
        gpu_type="h100-80gb",
        count=4,
        **(lifetime or {"ttl_hours": 48}),
    )


def test_a_lifetime_in_hours_counts_from_when_it_starts_running(fleet, researcher, lead):
    sandbox = big_request(researcher)
    assert sandbox.state == S.PENDING_APPROVAL
    assert sandbox.expires_at is None and sandbox.lifetime_hours == Decimal("48.00")

    approval = Approval.objects.get(workload=sandbox)
    approval_decide(
        user=lead, approval_id=approval.pk, approve=True, now=timezone.now() + timedelta(minutes=1)
    )
    sandbox.refresh_from_db()
    assert sandbox.state == S.PROVISIONING and sandbox.expires_at is None

    started = timezone.now() + timedelta(minutes=3)
    workload_mark_running(workload_id=sandbox.pk, access="https://box", now=started)
    sandbox.refresh_from_db()
    assert sandbox.started_at == started
    assert sandbox.expires_at == started + timedelta(hours=48)  # not 47 h 59 of running


def test_the_api_shows_no_expiry_until_it_runs_and_the_lifetime_asked_for(fleet, researcher, alice, big_body):
    answer = alice.post("/api/v1/sandboxes", big_body, format="json")
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["state"] == "pending_approval"
    assert body["expires_at"] is None and body["lifetime_hours"] == "48.00"
    assert body["allowed_actions"] == ["withdraw", "extend"]


def test_an_end_named_in_the_request_stays_where_it_was_put(fleet, researcher):
    end = timezone.now() + timedelta(hours=5)
    sandbox = big_request(researcher, expires_at=end)
    assert sandbox.expires_at == end


def test_extending_a_request_that_has_not_started_lengthens_its_lifetime(fleet, researcher, lead):
    sandbox = big_request(researcher)
    workload_extend(user=lead, workload_id=sandbox.pk, hours=Decimal(2), kind="sandbox")
    sandbox.refresh_from_db()
    assert sandbox.expires_at is None and sandbox.lifetime_hours == Decimal("50.00")


def test_the_estimate_says_the_lifetime_runs_from_the_start(researcher_client, fleet):
    page = researcher_client.get(
        reverse("sandbox-estimate"),
        {
            "team": "vision",
            "gpu_mode": "whole",
            "gpu_type": "h100-80gb",
            "count": 1,
            "ttl_hours": 48,
            "lifetime_mode": "hours",
        },
        HTTP_HX_REQUEST="true",  # the form's htmx refresh
    )
    assert page.status_code == 200
    assert "runs 48 h from when it starts" in page.content.decode()


# Cost at and after the expiry


def test_ending_a_sandbox_after_its_expiry_bills_nothing_past_it(fleet, team, researcher):
    gpu = Gpu.objects.filter(node=fleet["whole"]).first()
    expired = timezone.now() - timedelta(seconds=5)
    sandbox = make_sandbox(owner=researcher, team=team, gpu=gpu, hours_ago=1, expires_at=expired)
    before = workload_cost_so_far(sandbox)
    workload_terminate(user=researcher, workload_id=sandbox.pk, kind="sandbox")
    hold = Allocation.objects.get(workload=sandbox)
    assert hold.ended_at == expired
    sandbox = Workload.objects.get(pk=sandbox.pk)
    assert sandbox.ended_at == expired
    assert workload_cost_so_far(sandbox) == before == Decimal("6.87")  # 6.88/h for 59m55s


def test_a_sandbox_past_its_expiry_shows_ending_and_offers_nothing(
    researcher_client, fleet, team, researcher
):
    gpu = Gpu.objects.filter(node=fleet["whole"]).first()
    sandbox = make_sandbox(
        owner=researcher, team=team, gpu=gpu, hours_ago=1, expires_at=timezone.now() - timedelta(seconds=5)
    )
    assert workload_allowed_actions(sandbox) == []
    html = researcher_client.get(reverse("sandbox-detail", args=[sandbox.number])).content.decode()
    assert ">ending<" in html
    assert "sandbox-terminate" not in html and 'id="terminate-form"' not in html
    with pytest.raises(Conflict, match="no longer be extended"):
        workload_extend(user=researcher, workload_id=sandbox.pk, hours=Decimal(1), kind="sandbox")


# Times in words


def test_times_in_words_never_say_zero_minutes():
    now = timezone.now()
    assert in_words(now + timedelta(seconds=20)) == "in less than a minute"
    assert in_words(now - timedelta(seconds=1)) == "now"
    assert in_words(now + timedelta(hours=3, minutes=1)).startswith("in 3\xa0hours")
    assert ago_words(now - timedelta(seconds=10)) == "just now"
    assert ago_words(now - timedelta(minutes=5, seconds=3)) == "5\xa0minutes ago"
    for text in (in_words(now + timedelta(seconds=20)), ago_words(now - timedelta(seconds=10))):
        assert "0\xa0minutes" not in text and "0 minutes" not in text


def test_the_last_hour_is_a_countdown_the_browser_ticks():
    now = timezone.now()
    soon = expiry_countdown(now + timedelta(minutes=42, seconds=10, milliseconds=500))
    assert 'data-countdown-until="' in soon and 'data-countdown-done="ending"' in soon
    assert "in 42 min 10 s" in soon  # never "42:10", which reads as a time of day
    assert "in 1 min 01 s" in expiry_countdown(now + timedelta(minutes=1, seconds=1, milliseconds=500))
    assert "in 9 s" in expiry_countdown(now + timedelta(seconds=9, milliseconds=500))
    assert "data-countdown-until" not in expiry_countdown(now + timedelta(hours=2))
    assert "ending" in expiry_countdown(now - timedelta(seconds=3))
    rendered = Template("{% load workload_time %}{% expiry_countdown when %}").render(
        Context({"when": now + timedelta(minutes=5)})
    )
    assert "data-countdown-until" in rendered


def test_the_countdown_script_reads_its_data_attributes(settings):
    script = (settings.BASE_DIR / "static" / "js" / "portal.js").read_text()
    assert "data-countdown-until" in script and "data-countdown-done" in script


# Per state: the true fields and the actions that can succeed


def test_an_ended_sandbox_shows_when_it_ended_and_its_final_cost(researcher_client, fleet, team, researcher):
    gpu = Gpu.objects.filter(node=fleet["whole"]).first()
    sandbox = make_sandbox(owner=researcher, team=team, gpu=gpu, state=S.TERMINATED)
    Allocation.objects.filter(workload=sandbox).update(ended_at=timezone.now(), released_at=timezone.now())
    html = researcher_client.get(reverse("sandbox-detail", args=[sandbox.number])).content.decode()
    assert "Ended at" in html and "final" in html
    assert "Cost so far" not in html and "<dt>Expires</dt>" not in html
    assert "once it is running" not in html
    assert 'id="terminate-form"' not in html and "Extend" not in html


def test_a_rejected_request_never_ran_and_offers_nothing(researcher_client, fleet, team, researcher, h100):
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=h100, state=S.REJECTED, queued_at=None)
    html = researcher_client.get(reverse("sandbox-detail", args=[sandbox.number])).content.decode()
    assert "Rejected at" in html and "it never ran" in html and "nothing billed" in html
    assert "once it is running" not in html and "Cost so far" not in html
    assert workload_allowed_actions(sandbox) == []


def test_a_terminating_sandbox_offers_no_action(researcher_client, alice, fleet, team, researcher):
    gpu = Gpu.objects.filter(node=fleet["whole"]).first()
    sandbox = make_sandbox(owner=researcher, team=team, gpu=gpu, state=S.TERMINATING, ended_at=timezone.now())
    html = researcher_client.get(reverse("sandbox-detail", args=[sandbox.number])).content.decode()
    assert 'id="terminate-form"' not in html and 'id="withdraw-form"' not in html and "Extend" not in html
    assert "Ended at" in html and "Cost so far" not in html
    body = alice.get(f"/api/v1/sandboxes/{sandbox.number}").json()
    assert body["allowed_actions"] == []
    assert (
        alice.post(f"/api/v1/sandboxes/{sandbox.number}/extend", {"hours": 1}, format="json").status_code
        == 409
    )
    assert alice.post(f"/api/v1/sandboxes/{sandbox.number}/terminate").status_code == 409


def test_actions_follow_the_state(fleet, team, researcher, h100):
    gpu = Gpu.objects.filter(node=fleet["whole"]).first()
    running = make_sandbox(owner=researcher, team=team, gpu=gpu)
    assert workload_allowed_actions(running) == ["extend", "restart", "terminate"]
    queued = make_sandbox(owner=researcher, team=team, gpu_type=h100, state=S.QUEUED)
    assert workload_allowed_actions(queued) == ["withdraw", "extend"]


def test_a_page_refresh_swaps_the_actions_only_when_they_changed(researcher_client, fleet, team, researcher):
    gpu = Gpu.objects.filter(node=fleet["whole"]).first()
    sandbox = make_sandbox(owner=researcher, team=team, gpu=gpu)
    url = reverse("sandbox-detail", args=[sandbox.number])
    same = researcher_client.get(url, {"actions": "extend,restart,terminate"}, **HTMX).content.decode()
    assert 'id="sandbox-actions"' not in same
    Workload.objects.filter(pk=sandbox.pk).update(state=S.TERMINATING, ended_at=timezone.now())
    changed = researcher_client.get(url, {"actions": "extend,restart,terminate"}, **HTMX).content.decode()
    assert 'id="sandbox-actions"' in changed and "hidden" in changed.split('id="sandbox-actions"')[1][:80]


# Withdrawing


def test_withdrawing_a_pending_request_frees_quota_and_closes_the_leads_item(fleet, team, researcher, lead):
    free = quota_left(team=team)
    sandbox = big_request(researcher)
    assert quota_left(team=team) < free
    approval = Approval.objects.get(workload=sandbox)
    notice = Notification.objects.get(user=lead)
    assert notice.read_at is None and notice.link.endswith(f"#approval-{approval.pk}")

    workload_withdraw(user=researcher, workload_id=sandbox.pk, kind="sandbox")
    sandbox.refresh_from_db()
    approval.refresh_from_db()
    notice.refresh_from_db()
    assert sandbox.state == S.TERMINATED and "Withdrawn" in sandbox.message
    assert approval.state == Approval.State.CANCELLED
    assert notice.read_at is not None
    assert quota_left(team=team) == free
    assert AuditEvent.objects.filter(action="sandbox.withdrawn", object_id=str(sandbox.pk)).exists()
    assert AuditEvent.objects.filter(action="approval.withdrawn", object_id=str(approval.pk)).exists()
    assert not Allocation.objects.filter(workload=sandbox).exists()  # nothing was ever billed


def test_a_placed_workload_cannot_be_withdrawn(fleet, team, researcher):
    gpu = Gpu.objects.filter(node=fleet["whole"]).first()
    sandbox = make_sandbox(owner=researcher, team=team, gpu=gpu)
    with pytest.raises(Conflict, match="Terminate it instead"):
        workload_withdraw(user=researcher, workload_id=sandbox.pk, kind="sandbox")


def test_withdraw_on_the_web_says_nothing_was_billed(researcher_client, fleet, researcher):
    sandbox = big_request(researcher)
    html = researcher_client.get(reverse("sandbox-detail", args=[sandbox.number])).content.decode()
    assert 'id="withdraw-form"' in html and 'id="terminate-form"' not in html
    confirm = html.split('id="withdraw-form"')[1].split(">")[0]
    assert "billing stops" not in confirm and "nothing has been billed" in confirm
    answer = researcher_client.post(reverse("sandbox-withdraw", args=[sandbox.number]), follow=True)
    assert "Request withdrawn" in answer.content.decode()
    sandbox.refresh_from_db()
    assert sandbox.state == S.TERMINATED


def test_withdraw_in_the_api(fleet, researcher, alice, big_body):
    created = alice.post("/api/v1/sandboxes", big_body, format="json").json()
    answer = alice.post(f"/api/v1/sandboxes/{created['id']}/withdraw")
    assert answer.status_code == 200, answer.content
    assert answer.json()["state"] == "terminated" and answer.json()["allowed_actions"] == []
    again = alice.post(f"/api/v1/sandboxes/{created['id']}/withdraw")
    assert again.status_code == 409


def test_a_pending_extension_can_be_withdrawn(fleet, team, researcher, lead, alice):
    gpu = Gpu.objects.filter(node=fleet["whole"]).first()
    sandbox = make_sandbox(
        owner=researcher, team=team, gpu=gpu, expires_at=timezone.now() + timedelta(hours=2), ttl_hours=4
    )
    workload_extend(
        user=researcher, workload_id=sandbox.pk, hours=Decimal(30), kind="sandbox"
    )  # 34 h: past the 24 h line
    approval = Approval.objects.get(workload=sandbox, kind=Approval.Kind.EXTEND)
    sandbox.refresh_from_db()
    assert workload_allowed_actions(sandbox) == ["withdraw_extension", "restart", "terminate"]
    expires = sandbox.expires_at

    answer = alice.post(f"/api/v1/sandboxes/{sandbox.number}/extension/withdraw")
    assert answer.status_code == 200, answer.content
    approval.refresh_from_db()
    sandbox.refresh_from_db()
    assert approval.state == Approval.State.CANCELLED and sandbox.expires_at == expires
    assert not Notification.objects.filter(user=lead, read_at__isnull=True).exists()
    assert AuditEvent.objects.filter(action="sandbox.extend_withdrawn").exists()
    assert alice.post(f"/api/v1/sandboxes/{sandbox.number}/extension/withdraw").status_code == 409
