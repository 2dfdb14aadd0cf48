"""Sandbox requests: validation, quota, policy, placement, queue, extension and termination."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.utils import timezone

from portal.audit.models import AuditEvent
from portal.core.errors import Conflict, NotFound, QuotaExceeded, ValidationFailed
from portal.fleet.models import Allocation
from portal.sandboxes.services import sandbox_estimate, sandbox_request
from portal.workloads.models import Approval, Image, Workload, WorkloadKind, WorkloadState
from portal.workloads.selectors import queue_positions, workload_placement
from portal.workloads.services import workload_extend, workload_terminate

pytestmark = pytest.mark.django_db
S = WorkloadState


def whole(count: int = 1, hours: float = 1, name: str = "whole") -> dict:
    return {"team": "vision", "name": name, "gpu_type": "h100-80gb", "count": count, "ttl_hours": hours}


def test_slice_within_policy_is_approved_placed_and_running(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    sandbox.refresh_from_db()
    assert sandbox.state == S.RUNNING
    assert sandbox.access.startswith("https://")
    assert sandbox.node_name == "gpu-h100-b"
    placement = workload_placement(sandbox)
    assert placement["mig_profile"] == "1g.10gb" and placement["node"] == "gpu-h100-b"
    allocation = Allocation.objects.get(workload=sandbox)
    assert (allocation.share_numerator, allocation.share_denominator) == (1, 7)
    assert allocation.price_per_hour == Decimal("6.88")


def test_request_over_auto_approval_waits_for_lead_who_is_told(run_jobs, fleet, researcher, lead):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **whole(4, 48, "big")))
    assert sandbox.state == S.PENDING_APPROVAL
    approval = Approval.objects.get(workload=sandbox)
    assert "more than 1 whole GPU" in approval.why_needed and "longer than 24 hours" in approval.why_needed
    assert lead.notifications.count() == 1
    assert [m.to for m in mail.outbox] == [["bob@example.com"]]
    assert not Allocation.objects.filter(workload=sandbox).exists()


def test_the_lead_is_told_enough_to_decide_from_the_email(run_jobs, fleet, researcher, lead):
    """What, for how long and from when, the most it can cost (4 x $6.88 x 48 h), what it is
    for, and why it waits: a lead can decide from the e-mail's links without opening the portal."""
    start = (timezone.now() + timedelta(days=2)).replace(second=0, microsecond=0)
    # a line break in the purpose stays out of the message: it could pass for the e-mail's own lines
    body = {**whole(4, 48, "big"), "purpose": "Training a detector\n\non the full set", "start_at": start}
    run_jobs(lambda: sandbox_request(user=researcher, **body))

    (email,) = mail.outbox
    assert email.body.startswith(
        f"alice asks for 4x h100-80gb (big, team Vision) for 48 h from {start:%Y-%m-%d %H:%M} UTC, "
        "$1,320.96 at most. Needs a lead's approval: more than 1 whole GPU and longer than 24 hours. "
        "Purpose: “Training a detector on the full set”.\n\n"
    )
    assert lead.notifications.get().message == email.body.split("\n\n")[0]


def test_request_beyond_quota_is_refused_with_what_is_left(fleet, team, researcher):
    team.quota_gpus = Decimal(2)
    team.save()
    sandbox_request(user=researcher, **whole(1, 1, "one"))
    with pytest.raises(QuotaExceeded) as refused:
        sandbox_request(user=researcher, **whole(2, 1, "two"))
    assert refused.value.code == "quota_exceeded"
    assert "1 of 2 GPU equivalents left" in refused.value.message
    assert refused.value.fields["quota_left"] == "1.000"
    assert Workload.objects.count() == 1


def test_slices_count_their_compute_share_against_quota(fleet, team, researcher):
    team.quota_gpus = Decimal("0.3")  # two 1g slices (2/7 = 0.286) fit, a third (3/7 = 0.429) does not
    team.save()
    for number in range(2):
        sandbox_request(
            user=researcher,
            team="vision",
            name=f"s{number}",
            gpu_type="h100-80gb",
            mig_profile="1g.10gb",
            ttl_hours=1,
        )
    with pytest.raises(QuotaExceeded):
        sandbox_request(
            user=researcher,
            team="vision",
            name="s2",
            gpu_type="h100-80gb",
            mig_profile="1g.10gb",
            ttl_hours=1,
        )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"gpu_type": "tpu-v5"}, "gpu.type"),
        ({"mig_profile": "1g.5gb"}, "gpu.mig_profile"),
        ({"mig_profile": None, "count": 0}, "gpu.count"),
        ({"mig_profile": None, "count": 9}, "gpu.count"),
        ({"ttl_hours": 169}, "ttl_hours"),
        ({"ttl_hours": -1}, "ttl_hours"),
        ({"ttl_hours": "soon"}, "ttl_hours"),
        ({"ttl_hours": None, "expires_at": "past"}, "expires_at"),
        ({"team": "nlp"}, "team"),
        ({"name": "Not A DNS Name"}, "name"),
        ({"image": "tensorflow"}, "image"),
        ({"cpu": 0}, "cpu"),
    ],
)
def test_bad_request_names_the_field_and_creates_nothing(
    fleet, other_team, researcher, slice_request, changes, field
):
    fields = {**slice_request, **changes}
    if fields.get("expires_at") == "past":
        fields["expires_at"] = timezone.now() - timedelta(minutes=5)
    with pytest.raises(ValidationFailed) as refused:
        sandbox_request(user=researcher, **fields)
    assert field in refused.value.fields
    assert Workload.objects.count() == 0
    assert AuditEvent.objects.count() == 0


def test_expiry_less_than_a_minute_ahead_is_refused(fleet, researcher, slice_request):
    fields = {**slice_request, "ttl_hours": None, "expires_at": timezone.now() + timedelta(seconds=30)}
    with pytest.raises(ValidationFailed) as refused:
        sandbox_request(user=researcher, **fields)
    assert refused.value.fields["expires_at"] == ["Must be at least one minute from now."]


def test_duplicate_name_is_refused_among_live_sandboxes_only(run_jobs, fleet, researcher, slice_request):
    first = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    with pytest.raises(ValidationFailed) as refused:
        sandbox_request(user=researcher, **slice_request)
    assert "already have a live sandbox" in refused.value.fields["name"][0]
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=first.pk, kind=WorkloadKind.SANDBOX))
    again = sandbox_request(user=researcher, **slice_request)
    assert again.pk != first.pk


def test_request_that_does_not_fit_queues_with_reason_and_drains_when_capacity_frees(
    run_jobs, fleet, team, researcher
):
    team.auto_approve_max_gpus = 8
    team.save()
    full = run_jobs(lambda: sandbox_request(user=researcher, **whole(8, 1, "full")))
    waiting = run_jobs(lambda: sandbox_request(user=researcher, **whole(2, 1, "waiting")))
    later = run_jobs(lambda: sandbox_request(user=researcher, **whole(2, 1, "later")))
    waiting.refresh_from_db()
    assert waiting.state == S.QUEUED
    assert waiting.message.startswith("Waiting for capacity:")
    assert queue_positions([waiting, later]) == {waiting.pk: 1, later.pk: 2}

    run_jobs(lambda: workload_terminate(user=researcher, workload_id=full.pk, kind=WorkloadKind.SANDBOX))
    waiting.refresh_from_db()
    later.refresh_from_db()
    assert waiting.state == S.RUNNING
    assert later.state == S.RUNNING


def test_image_that_cannot_be_pulled_fails_releases_the_gpu_and_tells_the_owner(
    run_jobs, fleet, researcher, slice_request
):
    Image.objects.create(slug="broken", name="Broken", container_image="registry.example/does-not-exist:1")
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "image": "broken"}))
    sandbox.refresh_from_db()
    assert sandbox.state == S.FAILED
    assert "image pull failed" in sandbox.message
    assert Allocation.objects.get(workload=sandbox).released_at is not None
    assert "failed" in researcher.notifications.first().message


def test_estimate_reports_price_approval_and_capacity(fleet, researcher):
    estimate = sandbox_estimate(user=researcher, **whole(2, 3, "estimate"))
    assert estimate.hourly_cost == Decimal("13.76")
    assert estimate.total_cost == Decimal("41.28")
    assert estimate.auto_approved is False and "more than 1 whole GPU" in estimate.why_needed
    assert estimate.capacity_free_now is True
    assert estimate.quota_left == Decimal("16.000")
    assert Workload.objects.count() == 0


def test_extension_within_policy_moves_expiry_at_once(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    before = Workload.objects.get(pk=sandbox.pk).expires_at
    workload_extend(user=researcher, workload_id=sandbox.pk, hours=2, kind=WorkloadKind.SANDBOX)
    assert Workload.objects.get(pk=sandbox.pk).expires_at == before + timedelta(hours=2)
    assert AuditEvent.objects.filter(action="sandbox.extend", object_id=str(sandbox.pk)).exists()


def test_extension_beyond_auto_approval_needs_a_lead_and_beyond_maximum_is_refused(
    run_jobs, fleet, researcher, lead, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    before = Workload.objects.get(pk=sandbox.pk).expires_at
    workload_extend(user=researcher, workload_id=sandbox.pk, hours=30, kind=WorkloadKind.SANDBOX)
    assert Workload.objects.get(pk=sandbox.pk).expires_at == before
    approval = Approval.objects.get(workload=sandbox, kind=Approval.Kind.EXTEND)
    assert approval.extend_hours == Decimal(30)
    # the lead is told what the 30 hours add: a 1g.10gb slice of an H100 at $6.88 / 7 an hour
    message = lead.notifications.get(kind="approval_request").message
    assert message.startswith(
        f"alice asks to extend {sandbox.name} (team Vision) by 30 h, $29.49 more at most. Needs a lead's approval: "
    )
    with pytest.raises(Conflict):
        workload_extend(user=researcher, workload_id=sandbox.pk, hours=30, kind=WorkloadKind.SANDBOX)
    with pytest.raises(ValidationFailed):
        workload_extend(user=researcher, workload_id=sandbox.pk, hours=200, kind=WorkloadKind.SANDBOX)


def test_lead_extends_a_members_sandbox_beyond_auto_approval_directly(
    run_jobs, fleet, researcher, lead, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    before = Workload.objects.get(pk=sandbox.pk).expires_at
    workload_extend(user=lead, workload_id=sandbox.pk, hours=30, kind=WorkloadKind.SANDBOX)
    assert Workload.objects.get(pk=sandbox.pk).expires_at == before + timedelta(hours=30)


@pytest.mark.parametrize(
    "hours, message",
    [(0, "Extend by a number of hours above zero."), (-2, "Extend by a number of hours above zero."),
     ("0.001", "Extend by at least one minute (0.0167 hours)."),
     (99999, "Extend by at most 10,000 hours at a time.")],
)  # fmt: skip
def test_an_extension_out_of_bounds_says_which_bound(
    run_jobs, fleet, researcher, slice_request, hours, message
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    with pytest.raises(ValidationFailed) as refused:
        workload_extend(user=researcher, workload_id=sandbox.pk, hours=hours, kind=WorkloadKind.SANDBOX)
    assert refused.value.message == message


def test_ended_sandbox_cannot_be_extended_or_ended_again(run_jobs, fleet, researcher, slice_request):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=sandbox.pk, kind=WorkloadKind.SANDBOX))
    assert Workload.objects.get(pk=sandbox.pk).state == S.TERMINATED
    with pytest.raises(Conflict):
        workload_extend(user=researcher, workload_id=sandbox.pk, hours=1, kind=WorkloadKind.SANDBOX)
    with pytest.raises(Conflict):
        workload_terminate(user=researcher, workload_id=sandbox.pk, kind=WorkloadKind.SANDBOX)


def test_other_users_cannot_see_or_touch_a_sandbox(
    run_jobs, fleet, researcher, other_researcher, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    with pytest.raises(NotFound):
        workload_terminate(user=other_researcher, workload_id=sandbox.pk, kind=WorkloadKind.SANDBOX)
    with pytest.raises(NotFound):
        workload_extend(user=other_researcher, workload_id=sandbox.pk, hours=1, kind=WorkloadKind.SANDBOX)


def test_terminate_stops_billing_at_once_and_frees_the_gpu_after_teardown(
    run_jobs, fleet, researcher, lead, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    run_jobs(lambda: workload_terminate(user=lead, workload_id=sandbox.pk, kind=WorkloadKind.SANDBOX))
    sandbox.refresh_from_db()
    allocation = Allocation.objects.get(workload=sandbox)
    assert sandbox.state == S.TERMINATED
    assert allocation.ended_at == sandbox.ended_at
    assert allocation.released_at is not None
    actions = list(
        AuditEvent.objects.filter(object_id=str(sandbox.pk), object_type="sandbox").values_list(
            "action", flat=True
        )
    )
    assert {
        "sandbox.request",
        "sandbox.placed",
        "sandbox.running",
        "sandbox.terminating",
        "sandbox.terminated",
    } <= set(actions)


def test_a_request_that_could_never_be_placed_is_refused_with_the_reason(researcher, team, fleet):
    from portal.core.errors import ValidationFailed
    from portal.fleet.models import Gpu, GpuType
    from portal.sandboxes.services import sandbox_request
    from portal.workloads.models import Workload
    from tests.factories import GpuTypeFactory

    h200 = GpuTypeFactory(slug="h200-141gb", name="NVIDIA H200 141GB", memory_gb=141)
    node = fleet["whole"]
    Gpu.objects.create(node=node, index=9, gpu_type=h200, mig_enabled=False, uuid="GPU-h200-whole")
    with pytest.raises(ValidationFailed) as refused:
        sandbox_request(
            user=researcher, team="vision", name="never", gpu_type="h200-141gb", mig_profile="1g.18gb"
        )
    assert "No cluster has a MIG-enabled h200-141gb GPU" in refused.value.message
    assert "a slice of h100-80gb" in refused.value.message
    Gpu.objects.filter(gpu_type=h200).update(mig_enabled=True)
    with pytest.raises(ValidationFailed) as refused:
        sandbox_request(user=researcher, team="vision", name="never", gpu_type="h200-141gb", count=1)
    assert "No cluster has a whole (non-MIG) h200-141gb GPU" in refused.value.fields["gpu.count"][0]
    assert not Workload.objects.exists() and GpuType.objects.filter(slug="h200-141gb").exists()
