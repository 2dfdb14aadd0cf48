"""Events about a team's settings and a workload's health are the team's: its leads read them in
the audit log, not only the platform admins (and older ones recorded without a team get it)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.utils import timezone

from portal.accounts.models import Membership
from portal.accounts.team_settings import team_settings_set
from portal.audit.models import AuditEvent
from portal.audit.selectors import audit_events_visible_to
from portal.sandboxes.services import sandbox_request
from portal.workloads.services.lifecycle import workload_observed_health
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def co_lead(team):
    user = UserFactory(username="dave")
    MembershipFactory(user=user, team=team, role=Membership.Role.LEAD)
    return user


def test_a_co_lead_reads_every_change_to_the_team_settings(lead, co_lead, team):
    team_settings_set(
        user=lead,
        slug=team.slug,
        hf_token="hf_abcdefgh1234",
        webhook_url="",
        webhook_format="slack",
        approval_reminder_hours=12,
        idle_reclaim_minutes=30,
    )
    seen = set(audit_events_visible_to(co_lead).values_list("action", flat=True))
    assert {"team.hf_token_set", "team.notifications_set", "team.idle_reclaim_set"} <= seen


def test_a_lead_reads_that_a_sandbox_of_the_team_degraded(run_jobs, fleet, researcher, lead, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    workload_observed_health(workload_id=sandbox.pk, problem="its pod restarted 3 times", now=timezone.now())
    (event,) = audit_events_visible_to(lead).filter(action="sandbox.degraded")
    assert event.team.slug == "vision" and event.detail == "its pod restarted 3 times"


def test_events_recorded_without_their_team_are_given_it(
    run_jobs, fleet, researcher, lead, slice_request, team
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    old = [
        AuditEvent.objects.create(action="team.hf_token_set", object_type="team", object_id=str(team.pk)),
        AuditEvent.objects.create(
            action="sandbox.degraded", object_type="sandbox", object_id=str(sandbox.pk)
        ),
        AuditEvent.objects.create(action="team.hf_token_set", object_type="team", object_id="999999"),  # gone
        AuditEvent.objects.create(action="ssh_key.add", object_type="sshkey", object_id=str(team.pk)),
    ]
    migration = importlib.import_module("portal.workloads.migrations.0018_audit_events_of_their_team")
    migration.of_their_team(apps, None)
    assert [AuditEvent.objects.get(pk=event.pk).team_id for event in old] == [team.pk, team.pk, None, None]
