"""Audit events read in words on the pages (actions, times in details), and the CSV export names
sandboxes and deployments by the numbers people know them by."""

from __future__ import annotations

import csv
import io
from datetime import UTC, timedelta

import pytest
from django.utils import timezone

from portal.audit.services import audit_record
from portal.audit.words import action_words, detail_words
from portal.catalog.demo import catalog_seed
from portal.sandboxes.services.sandbox import sandbox_request
from portal.workloads.models import Workload, WorkloadState
from tests.rows import make_deployment, make_sandbox

pytestmark = pytest.mark.django_db


def test_actions_read_as_words_not_codes():
    assert action_words("deployment.scaled_running") == "Running at its new scale"
    assert action_words("deployment.scale_requested") == "Asked to scale"
    assert action_words("approval.approve") == "Request approved"
    assert action_words("sandbox.request") == "Requested"
    assert action_words("team.something_new") == "Team: something new"  # an unlisted action
    assert action_words("sandbox.something_new") == "Something new"


def test_iso_times_in_a_detail_read_as_the_portal_writes_times():
    assert detail_words("1x h100-80gb for 1 h, from 2026-12-01T13:00+00:00") == (
        "1x h100-80gb for 1 h, from 2026-12-01 13:00 UTC"
    )
    assert detail_words("at 2026-12-01T14:30:05.123+01:00.") == "at 2026-12-01 13:30 UTC."
    assert detail_words("+4 h") == "+4 h"


def test_the_sandbox_trail_says_actions_in_words(researcher_client, researcher, team, whole_gpus):
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])
    audit_record(
        actor=researcher,
        action="sandbox.request",
        obj=sandbox,
        team=team,
        to_state="queued",
        detail="1x h100-80gb for 1 h, from 2026-12-01T13:00+00:00",
    )
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert '<strong title="sandbox.request">Requested</strong>' in page
    assert "from 2026-12-01 13:00 UTC" in page
    assert "2026-12-01T13:00" not in page


def test_the_audit_page_says_actions_in_words_and_times_as_elsewhere(lead_client, researcher, team, h100):
    catalog_seed()
    deployment = make_deployment(owner=researcher, team=team, gpu_type=h100, state=WorkloadState.QUEUED)
    event = audit_record(
        actor=researcher,
        action="deployment.scale_requested",
        obj=deployment,
        team=team,
        detail="1 → 3 replicas",
    )
    page = lead_client.get("/audit/").content.decode()
    assert "Asked to scale" in page
    assert ">deployment.scale_requested<" not in page
    assert f">{event.created_at:%Y-%m-%d %H:%M}</time>" in page  # as times are written elsewhere


def test_a_scheduled_request_is_audited_with_a_readable_start_and_lifetime(
    fleet, researcher, slice_request, run_jobs
):
    start = (timezone.now() + timedelta(days=2)).astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    sandbox = run_jobs(
        lambda: sandbox_request(user=researcher, **{**slice_request, "ttl_hours": 0.5, "start_at": start})
    )
    from portal.audit.models import AuditEvent

    detail = AuditEvent.objects.get(action="sandbox.request", object_id=str(sandbox.pk)).detail
    assert detail.endswith(f"for 30 minutes, from {start:%Y-%m-%d %H:%M} UTC")


def test_the_csv_names_sandboxes_and_deployments_by_their_numbers(lead_client, researcher, team, h100):
    catalog_seed()
    make_deployment(owner=researcher, team=team, gpu_type=h100, state=WorkloadState.QUEUED)  # takes a pk
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=h100, state=WorkloadState.QUEUED)
    assert sandbox.pk != sandbox.number
    audit_record(
        actor=researcher,
        action="sandbox.request",
        obj=sandbox,
        team=team,
        detail="for 1 h, from 2026-12-01T13:00+00:00",
    )
    body = b"".join(lead_client.get("/audit/export.csv").streaming_content).decode()
    rows = [r for r in csv.DictReader(io.StringIO(body)) if r["object_type"] == "sandbox"]
    assert [r["object_id"] for r in rows] == [str(sandbox.number)]
    assert rows[0]["detail"] == "for 1 h, from 2026-12-01 13:00 UTC"
    # the number in the export is the one the audit filter takes
    filtered = lead_client.get(
        "/audit/export.csv", {"object_type": "sandbox", "object_id": rows[0]["object_id"]}
    )
    again = list(csv.DictReader(io.StringIO(b"".join(filtered.streaming_content).decode())))
    assert [r["object_repr"] for r in again] == [str(Workload.objects.get(pk=sandbox.pk))]


def test_a_gone_workload_has_no_number_in_the_csv(lead_client, researcher, team, h100):
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=h100, state=WorkloadState.QUEUED)
    audit_record(actor=researcher, action="sandbox.request", obj=sandbox, team=team)
    Workload.objects.filter(pk=sandbox.pk).delete()
    body = b"".join(lead_client.get("/audit/export.csv").streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert [r["object_id"] for r in rows] == [""]
