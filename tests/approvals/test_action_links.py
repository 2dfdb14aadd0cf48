"""A lead acts on a request from an e-mail or chat message: a signed one-time link opens a
confirmation page, and only its POST decides."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.conf import settings
from django.core import mail
from django.utils import timezone

from portal.accounts.action_links import action_token_make, action_token_read
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Approval
from tests.conftest import signed_in
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def big_request(fleet, researcher, lead, run_jobs):
    mail.outbox.clear()
    sandbox = run_jobs(
        lambda: sandbox_request(
            user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=4, ttl_hours=48
        )
    )
    return Approval.objects.get(workload=sandbox)


def _path(approval: Approval, user, action: str) -> str:
    token = action_token_make(approval_id=approval.pk, lead_id=user.pk, action=action)
    return f"/approvals/{approval.pk}/act/{token}/"


def test_the_approval_email_carries_the_leads_own_approve_and_reject_links(big_request, lead):
    """Each link reads back as this lead's action on this approval (its signature carries the
    second it was made, so the link is not compared with one made again here)."""
    [message] = [m for m in mail.outbox if m.to == [lead.email]]
    workload = big_request.workload
    assert message.subject == f"alice asks for sandbox {workload.name} (team Vision): your approval"
    links = dict(
        line.split(": ", 1)
        for line in message.body.splitlines()
        if line.startswith(("Approve: ", "Reject: "))
    )
    prefix = f"{settings.PORTAL_BASE_URL}/approvals/{big_request.pk}/act/"
    for label, action in (("Approve", "approve"), ("Reject", "reject")):
        assert links[label].startswith(prefix) and links[label].endswith("/")
        token = links[label].removeprefix(prefix).removesuffix("/")
        assert action_token_read(token=token, approval_id=big_request.pk, lead_id=lead.pk) == action


def test_a_link_opens_a_confirmation_and_only_the_post_decides(run_jobs, big_request, lead, lead_client):
    path = _path(big_request, lead, "approve")
    page = lead_client.get(path)
    assert page.status_code == 200
    assert b"Nothing is decided until you confirm" in page.content
    assert "<dt>Why a lead decides</dt><dd>More than 1 whole GPU" in page.content.decode()  # no lead-in
    assert Approval.objects.get(pk=big_request.pk).state == Approval.State.PENDING
    response = run_jobs(lambda: lead_client.post(path, {"comment": "fine"}))
    assert response.status_code == 302
    approval = Approval.objects.get(pk=big_request.pk)
    assert approval.state == Approval.State.APPROVED and approval.decided_by == lead


def test_the_post_needs_the_csrf_token(big_request, lead):
    client = signed_in(lead)
    client.handler.enforce_csrf_checks = True
    response = client.post(_path(big_request, lead, "approve"), {"comment": ""})
    assert response.status_code == 403
    assert Approval.objects.get(pk=big_request.pk).state == Approval.State.PENDING


def test_a_used_link_is_a_404(run_jobs, big_request, lead, lead_client):
    path = _path(big_request, lead, "reject")
    run_jobs(lambda: lead_client.post(path, {"comment": "too many"}))
    assert Approval.objects.get(pk=big_request.pk).state == Approval.State.REJECTED
    assert lead_client.get(path).status_code == 404
    assert lead_client.post(path, {"comment": "again"}).status_code == 404


def test_a_reject_link_without_a_reason_decides_nothing_and_stays_usable(big_request, lead, lead_client):
    path = _path(big_request, lead, "reject")
    assert lead_client.post(path, {"comment": ""}).status_code == 400
    assert Approval.objects.get(pk=big_request.pk).state == Approval.State.PENDING
    assert lead_client.get(path).status_code == 200


def test_an_expired_link_is_a_404(big_request, lead, lead_client):
    path = _path(big_request, lead, "approve")
    with time_machine.travel(timezone.now() + timedelta(days=3, minutes=1)):
        assert lead_client.get(path).status_code == 404


def test_a_tampered_link_is_a_404(big_request, lead, lead_client):
    token = action_token_make(approval_id=big_request.pk, lead_id=lead.pk, action="reject")
    value, stamp, signature = token.split(":")
    forged = f"{value.replace('reject', 'approve')}:{stamp}:{signature}"
    assert lead_client.get(f"/approvals/{big_request.pk}/act/{forged}/").status_code == 404
    other_approval = f"/approvals/{big_request.pk + 1}/act/{token}/"
    assert lead_client.get(other_approval).status_code == 404


def test_another_user_gets_a_404_even_another_lead(big_request, lead, team, researcher):
    path = _path(big_request, lead, "approve")
    other_lead = UserFactory(username="dana")
    MembershipFactory(user=other_lead, team=team, role="lead")
    assert signed_in(other_lead).get(path).status_code == 404
    assert signed_in(researcher).get(path).status_code == 404
    assert Approval.objects.get(pk=big_request.pk).state == Approval.State.PENDING


def test_signed_out_the_link_asks_to_sign_in(big_request, lead, client):
    response = client.get(_path(big_request, lead, "approve"))
    assert response.status_code == 302 and "/login/" in response["Location"]
